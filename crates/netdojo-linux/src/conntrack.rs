//! Flushing a namespace's connection-tracking table, as `conntrack -F` does, in-process.
//!
//! Stateful firewall rules accept `ct state established` before anything else, so a flow the
//! old rules admitted stays admitted after a rule change until its entry expires (30 s for
//! UDP). A probe that happens to reuse the source port of an earlier, admitted probe would
//! then report a connection the new rules deny. Whoever replaces rules and then judges them by
//! fresh connections flushes the table in between.

use std::os::fd::AsRawFd as _;

use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto, socket,
};

use crate::netns::{NetnsError, in_netns};

/// nfnetlink: ctnetlink subsystem (NFNL_SUBSYS_CTNETLINK = 1), message IPCTNL_MSG_CT_DELETE (2).
const CT_DELETE: u16 = (1 << 8) | 2;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLMSG_ERROR: u16 = 0x2;

/// Deletes every conntrack entry of namespace `ns` (all address families).
pub fn flush(ns: &str) -> Result<(), NetnsError> {
    let name = ns.to_string();
    in_netns(ns, move || flush_here().map_err(|(what, source)| NetnsError::Sys { name, what, source }))?
}

/// The delete request with no tuple: the kernel reads it as "flush". The header is
/// `nlmsghdr` (length, type, flags, sequence, port) then `nfgenmsg` (family AF_UNSPEC,
/// version 0, resource id 0).
fn request() -> [u8; 20] {
    let mut msg = [0u8; 20];
    msg[0..4].copy_from_slice(&20u32.to_ne_bytes());
    msg[4..6].copy_from_slice(&CT_DELETE.to_ne_bytes());
    msg[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    msg[8..12].copy_from_slice(&1u32.to_ne_bytes());
    // msg[12..16]: port 0 (the kernel fills it); msg[16..20]: nfgenmsg, all zero.
    msg
}

/// Reads the kernel's acknowledgement: an `NLMSG_ERROR` whose error is 0 on success, or a
/// negative errno.
fn ack_errno(reply: &[u8]) -> Option<i32> {
    let kind = u16::from_ne_bytes(reply.get(4..6)?.try_into().ok()?);
    if kind != NLMSG_ERROR {
        return None;
    }
    Some(i32::from_ne_bytes(reply.get(16..20)?.try_into().ok()?))
}

fn flush_here() -> Result<(), (&'static str, nix::Error)> {
    let fd =
        socket(AddressFamily::Netlink, SockType::Raw, SockFlag::SOCK_CLOEXEC, SockProtocol::NetlinkNetFilter)
            .map_err(|e| ("conntrack socket", e))?;
    sendto(fd.as_raw_fd(), &request(), &NetlinkAddr::new(0, 0), MsgFlags::empty())
        .map_err(|e| ("conntrack flush", e))?;
    let mut buf = [0u8; 256];
    let n = recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty()).map_err(|e| ("conntrack flush reply", e))?;
    match ack_errno(&buf[..n]) {
        Some(0) => Ok(()),
        Some(errno) => Err(("conntrack flush", nix::Error::from_raw(-errno))),
        None => Err(("conntrack flush reply", nix::Error::EPROTO)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_is_a_ctnetlink_delete_with_no_tuple_and_asks_for_an_ack() {
        let msg = request();
        assert_eq!(&msg[0..4], &20u32.to_ne_bytes());
        assert_eq!(&msg[4..6], &0x0102u16.to_ne_bytes());
        assert_eq!(&msg[6..8], &0x5u16.to_ne_bytes());
        assert_eq!(&msg[16..20], &[0, 0, 0, 0]);
    }

    #[test]
    fn acks_are_read_as_errno_and_other_messages_are_not_acks() {
        let mut ack = [0u8; 36];
        ack[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        assert_eq!(ack_errno(&ack), Some(0));
        ack[16..20].copy_from_slice(&(-1i32).to_ne_bytes());
        assert_eq!(ack_errno(&ack), Some(-1));
        ack[4..6].copy_from_slice(&3u16.to_ne_bytes());
        assert_eq!(ack_errno(&ack), None);
        assert_eq!(ack_errno(&ack[..3]), None);
    }
}
