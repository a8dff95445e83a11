//! Shared by the integration tests: the root check and namespace listing.
#![allow(dead_code)]

/// True when the test can run. Without root it skips with a printed reason, unless `CI` is
/// set: CI runs as root, so a missing privilege there is a failure, not a skip.
pub fn root_or_skip(what: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "{what}: needs root, and CI must run these tests as root");
    eprintln!("skipping {what}: needs root (network namespaces)");
    false
}

/// The namespaces in /run/netns whose name starts with `prefix-`.
pub fn namespaces_with(prefix: &str) -> Vec<String> {
    netdojo_linux::netns::list_with_prefix(prefix)
}
