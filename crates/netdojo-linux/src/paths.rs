//! Where things live on the host: FRR's binaries and state, netdojo's run directories, the
//! namespace handles. Below every other module, so that `netns`, `frr`, `sysctl` and
//! `preflight` can all name a path without importing each other.

use std::path::{Path, PathBuf};

/// Where FRR's binaries live on Debian.
pub const FRR_BIN: &str = "/usr/lib/frr";
/// netdojo's run directories for FRR instances, one per router namespace.
pub const RUN_DIR: &str = "/run/netdojo/frr";
/// Where FRR puts each pathspace's sockets.
pub const FRR_STATE: &str = "/var/run/frr";
/// Where named network namespaces are mounted, as iproute2 does.
pub const NETNS_DIR: &str = "/run/netns";

/// Path of a namespace's handle.
pub fn ns_path(name: &str) -> PathBuf {
    Path::new(NETNS_DIR).join(name)
}
