//! Shared by the tests: the root check and namespace listing.

use netdojo_linux::preflight::{self, Need};

/// True when the test can run: root, or a printed skip (a failure under CI).
pub fn root_or_skip(what: &str) -> bool {
    preflight::ready_or_skip(what, &[Need::Root])
}

/// True when the test can run: root and FRRouting, or a printed skip (a failure under CI).
pub fn frr_or_skip(what: &str) -> bool {
    preflight::ready_or_skip(what, &[Need::Root, Need::Frr])
}

/// The namespaces in /run/netns whose name starts with `prefix-`.
pub fn namespaces_with(prefix: &str) -> Vec<String> {
    netdojo_linux::netns::list_with_prefix(prefix)
}
