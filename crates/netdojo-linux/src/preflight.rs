//! What this machine must offer before netdojo can build a network on it, asked in one place:
//! the environments refuse early with these reasons, and the tests skip (or fail, under CI)
//! with them.

use std::path::Path;

use crate::paths::FRR_BIN;

/// Something a network of netdojo needs from the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Root (CAP_SYS_ADMIN and CAP_NET_ADMIN): namespaces, veth pairs, bind mounts.
    Root,
    /// FRRouting's daemons, for `frr` routers.
    Frr,
}

impl Need {
    /// Whether this machine has it.
    pub fn met(self) -> bool {
        match self {
            Need::Root => nix::unistd::geteuid().is_root(),
            Need::Frr => Path::new(FRR_BIN).join("zebra").exists(),
        }
    }

    /// Why it is needed and how to get it, for a message.
    pub fn reason(self) -> &'static str {
        match self {
            Need::Root => "needs root: it builds network namespaces",
            Need::Frr => "needs FRRouting, which is not installed (apt-get install frr)",
        }
    }
}

/// The first of `needs` this machine does not meet.
pub fn unmet(needs: &[Need]) -> Option<Need> {
    needs.iter().copied().find(|n| !n.met())
}

/// The tests' policy: true when `what` can run. Otherwise it prints why it is skipped, except
/// under CI (`CI` set), where a missing privilege or package is a broken CI machine: it panics.
pub fn ready_or_skip(what: &str, needs: &[Need]) -> bool {
    let Some(need) = unmet(needs) else { return true };
    assert!(std::env::var_os("CI").is_none(), "{what}: {}, and CI must provide it", need.reason());
    eprintln!("skipping {what}: {}", need.reason());
    false
}
