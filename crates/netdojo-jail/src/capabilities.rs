//! The privilege layer: the capability bounding set cut to what a profile needs. The jailed
//! program runs as root, so at `exec` it gets exactly the bounding set; without
//! `CAP_SYS_ADMIN` it cannot remount, enter namespaces or undo any other layer.

use caps::{CapSet, Capability, CapsHashSet};

use crate::{Profile, SetupError};

/// What each profile keeps.
pub fn kept(profile: Profile) -> CapsHashSet {
    use Capability::*;
    let list: &[Capability] = match profile {
        // Links, addresses, routes, rules, qdiscs, nftables, the node's own sysctls; raw
        // sockets for the tools that open them (arp, ethtool's ioctls use NET_ADMIN).
        Profile::Agent => &[CAP_NET_ADMIN, CAP_NET_RAW],
        // vtysh reaches the daemons' sockets (owned by frr:frrvty) and starts ping/traceroute.
        Profile::Vtysh => &[CAP_DAC_OVERRIDE, CAP_NET_RAW],
        // What FRR's own privilege code asks for (zebra: NET_ADMIN, SYS_ADMIN, NET_RAW; bgpd:
        // NET_BIND_SERVICE ...), and SETUID/SETGID to become user frr while keeping them.
        // Code that computes over a graph needs no privilege at all.
        Profile::Code => &[],
        Profile::Daemon => &[
            CAP_NET_ADMIN,
            CAP_NET_RAW,
            CAP_NET_BIND_SERVICE,
            CAP_SYS_ADMIN,
            CAP_SETUID,
            CAP_SETGID,
            CAP_DAC_OVERRIDE,
            CAP_CHOWN,
            CAP_FOWNER,
        ],
    };
    list.iter().copied().collect()
}

pub fn drop_to(profile: Profile) -> Result<(), SetupError> {
    let keep = kept(profile);
    let err = |what: &str| {
        let what = format!("capabilities: {what}");
        move |e: caps::errors::CapsError| SetupError::new(what, std::io::Error::other(e.to_string()))
    };
    for cap in caps::all() {
        if !keep.contains(&cap) {
            // A capability this kernel does not know is not in the bounding set to begin with.
            if caps::has_cap(None, CapSet::Bounding, cap).unwrap_or(false) {
                caps::drop(None, CapSet::Bounding, cap).map_err(err("bounding set"))?;
            }
        }
    }
    caps::clear(None, CapSet::Ambient).map_err(err("ambient"))?;
    caps::set(None, CapSet::Inheritable, &CapsHashSet::new()).map_err(err("inheritable"))?;
    caps::set(None, CapSet::Effective, &keep).map_err(err("effective"))?;
    caps::set(None, CapSet::Permitted, &keep).map_err(err("permitted"))
}
