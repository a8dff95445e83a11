//! Probes sent from inside one node's namespace, in-process: a ping, a TTL-limited trace (what
//! `traceroute -I` does), a DNS query and an HTTP GET. A health check of a lab observes the
//! network the way a user on that node would, without a child process and without anything
//! being sent from the root namespace: every socket here is opened by a thread that entered the
//! node's namespace ([`crate::netns::in_netns`]), and the kernel routes its packets there.
//!
//! Each probe is blocking and bounded by its `timeout`; the async wrappers run it on tokio's
//! blocking pool. A raw ICMP socket sees every ICMP packet of its namespace, so each probe uses
//! a fresh identifier and matches replies on it: probes from one node may run concurrently.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use nix::sys::socket::{SockaddrLike, SockaddrStorage};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::netns::{self, NetnsError};

/// What a TTL-limited trace saw: `hops[i]` answered for TTL `i + 1` (None: no answer), up to
/// the destination's own answer when `reached`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Trace {
    pub hops: Vec<Option<IpAddr>>,
    pub reached: bool,
}

/// Runs `f` in `ns` on a blocking thread.
async fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> Result<T, NetnsError> {
    let ns = ns.to_string();
    tokio::task::spawn_blocking(move || netns::in_netns(&ns, f)).await.map_err(|e| NetnsError::Io {
        path: netns::ns_path("probe"),
        source: io::Error::other(e.to_string()),
    })?
}

/// Whether `dst` answers an ICMP echo from `ns` within `timeout` (resent every 50 ms).
pub async fn ping(ns: &str, dst: IpAddr, timeout: Duration) -> Result<bool, NetnsError> {
    in_ns(ns, move || ping_blocking(dst, timeout).unwrap_or(false)).await
}

/// A trace from `ns` to `dst`, TTL 1 to `max_hops`, all probes sent at once and the silent ones
/// resent every 50 ms until `timeout` or until every hop up to the destination has answered.
pub async fn trace(ns: &str, dst: IpAddr, max_hops: u8, timeout: Duration) -> Result<Trace, NetnsError> {
    in_ns(ns, move || trace_blocking(dst, max_hops, timeout).unwrap_or_default()).await
}

/// The A (or, for an IPv6 `want`, AAAA) addresses `server:port` answers for `name`, asked over
/// UDP from `ns`. `Err` says why there is no answer (timeout, refused, a DNS error code).
pub async fn dns(
    ns: &str,
    server: SocketAddr,
    name: &str,
    aaaa: bool,
    timeout: Duration,
) -> Result<Result<Vec<IpAddr>, String>, NetnsError> {
    let name = name.to_string();
    in_ns(ns, move || dns_blocking(server, &name, aaaa, timeout)).await
}

/// The status code of `GET /` on `addr` from `ns` (HTTP/1.0), or why there is none.
pub async fn http_get(
    ns: &str,
    addr: SocketAddr,
    timeout: Duration,
) -> Result<Result<u16, String>, NetnsError> {
    in_ns(ns, move || http_blocking(addr, timeout)).await
}

fn icmp_socket(v6: bool) -> io::Result<Socket> {
    if v6 {
        Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::ICMPV6))
    } else {
        crate::pingmesh::open_socket()
    }
}

/// An echo request; for ICMPv6 the kernel fills the checksum in.
fn echo(v6: bool, id: u16, seq: u16) -> Vec<u8> {
    let mut packet = crate::pingmesh::echo_request(id, seq);
    if v6 {
        packet[0] = 128;
        packet[2] = 0;
        packet[3] = 0;
    }
    packet
}

/// What came back for one of our probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Reply { seq: u16 },
    TimeExceeded { seq: u16 },
}

/// Reads an ICMP(v6) packet (IPv4: with its IP header) for identifier `id`.
fn parse_answer(v6: bool, packet: &[u8], id: u16) -> Option<Answer> {
    let icmp = if v6 { packet } else { packet.get(usize::from(*packet.first()? & 0x0f) * 4..)? };
    let (reply, exceeded) = if v6 { (129, 3) } else { (0, 11) };
    let kind = *icmp.first()?;
    let id_seq = |h: &[u8]| -> Option<(u16, u16)> {
        Some((u16::from_be_bytes([*h.get(4)?, *h.get(5)?]), u16::from_be_bytes([*h.get(6)?, *h.get(7)?])))
    };
    if kind == reply {
        let (got, seq) = id_seq(icmp)?;
        return (got == id).then_some(Answer::Reply { seq });
    }
    if kind == exceeded {
        // The error quotes our packet: its IP header, then the first bytes of our echo.
        let quoted = icmp.get(8..)?;
        let inner =
            if v6 { quoted.get(40..)? } else { quoted.get(usize::from(*quoted.first()? & 0x0f) * 4..)? };
        let (got, seq) = id_seq(inner)?;
        return (got == id).then_some(Answer::TimeExceeded { seq });
    }
    None
}

fn recv(socket: &Socket, buf: &mut [u8]) -> io::Result<(usize, Option<IpAddr>)> {
    let (n, from) = nix::sys::socket::recvfrom::<SockaddrStorage>(socket.as_raw_fd(), buf)
        .map_err(|e| io::Error::from_raw_os_error(e as i32))?;
    let from = from.and_then(|a| match a.family() {
        Some(nix::sys::socket::AddressFamily::Inet) => a.as_sockaddr_in().map(|s| IpAddr::V4(s.ip())),
        Some(nix::sys::socket::AddressFamily::Inet6) => a.as_sockaddr_in6().map(|s| IpAddr::V6(s.ip())),
        _ => None,
    });
    Ok((n, from))
}

fn send_to(socket: &Socket, packet: &[u8], dst: IpAddr) -> io::Result<()> {
    socket.send_to(packet, &SockAddr::from(SocketAddr::new(dst, 0)))?;
    Ok(())
}

fn ping_blocking(dst: IpAddr, timeout: Duration) -> io::Result<bool> {
    let v6 = dst.is_ipv6();
    let socket = icmp_socket(v6)?;
    let id: u16 = rand::random();
    let start = Instant::now();
    let mut next_send = Duration::ZERO;
    let mut seq = 0u16;
    let mut buf = [0u8; 2048];
    let is_reply = |packet: &[u8], from: Option<IpAddr>| {
        matches!(parse_answer(v6, packet, id), Some(Answer::Reply { .. })) && from == Some(dst)
    };
    while start.elapsed() < timeout {
        if start.elapsed() >= next_send {
            // A send error (no route yet) is a ping that is lost; the next one may pass.
            let _ = send_to(&socket, &echo(v6, id, seq), dst);
            seq = seq.wrapping_add(1);
            next_send += Duration::from_millis(50);
        }
        let wait = next_send.min(timeout).saturating_sub(start.elapsed()).max(Duration::from_millis(1));
        socket.set_read_timeout(Some(wait))?;
        match recv(&socket, &mut buf) {
            Ok((n, from)) => {
                if is_reply(&buf[..n], from) {
                    return Ok(true);
                }
            }
            Err(e) if is_wait(&e) => {}
            Err(e) => return Err(e),
        }
    }
    let mut answered = false;
    drain(&socket, &mut buf, |packet, from| answered |= is_reply(packet, from))?;
    Ok(answered)
}

fn is_wait(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted)
}

/// Hands `each` every packet already queued on `socket`, without waiting: a probe whose thread
/// ran late on a loaded machine (its timeout passed while it waited for a core) still counts
/// the answers the kernel received for it meanwhile, rather than failing a check that answered.
fn drain(socket: &Socket, buf: &mut [u8], mut each: impl FnMut(&[u8], Option<IpAddr>)) -> io::Result<()> {
    socket.set_nonblocking(true)?;
    loop {
        match recv(socket, buf) {
            Ok((n, from)) => each(&buf[..n], from),
            Err(e) if is_wait(&e) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

fn trace_blocking(dst: IpAddr, max_hops: u8, timeout: Duration) -> io::Result<Trace> {
    let v6 = dst.is_ipv6();
    let socket = icmp_socket(v6)?;
    let id: u16 = rand::random();
    let max = usize::from(max_hops.max(1));
    let mut hops: Vec<Option<IpAddr>> = vec![None; max];
    // The smallest TTL the destination answered at: the path's length.
    let mut reached: Option<usize> = None;
    let start = Instant::now();
    let mut next_send = Duration::ZERO;
    let mut buf = [0u8; 2048];
    let done = |hops: &[Option<IpAddr>], reached: Option<usize>| {
        reached.is_some_and(|r| hops[..r - 1].iter().all(Option::is_some))
    };
    let take =
        |packet: &[u8], from: Option<IpAddr>, hops: &mut [Option<IpAddr>], reached: &mut Option<usize>| {
            match parse_answer(v6, packet, id) {
                Some(Answer::Reply { seq }) if from == Some(dst) => {
                    let ttl = usize::from(seq);
                    if (1..=max).contains(&ttl) {
                        *reached = Some(reached.map_or(ttl, |r| r.min(ttl)));
                    }
                }
                Some(Answer::TimeExceeded { seq }) => {
                    let ttl = usize::from(seq);
                    if (1..=max).contains(&ttl) {
                        hops[ttl - 1] = from;
                    }
                }
                _ => {}
            }
        };
    while start.elapsed() < timeout && !done(&hops, reached) {
        if start.elapsed() >= next_send {
            let limit = reached.unwrap_or(max);
            for ttl in 1..=limit {
                if hops[ttl - 1].is_some() && ttl < limit {
                    continue;
                }
                if v6 {
                    socket.set_unicast_hops_v6(ttl as u32)?;
                } else {
                    socket.set_ttl_v4(ttl as u32)?;
                }
                let _ = send_to(&socket, &echo(v6, id, ttl as u16), dst);
            }
            next_send += Duration::from_millis(50);
        }
        let wait = next_send.min(timeout).saturating_sub(start.elapsed()).max(Duration::from_millis(1));
        socket.set_read_timeout(Some(wait))?;
        match recv(&socket, &mut buf) {
            Ok((n, from)) => take(&buf[..n], from, &mut hops, &mut reached),
            Err(e) if is_wait(&e) => {}
            Err(e) => return Err(e),
        }
    }
    if !done(&hops, reached) {
        drain(&socket, &mut buf, |packet, from| take(packet, from, &mut hops, &mut reached))?;
    }
    match reached {
        Some(r) => {
            hops.truncate(r);
            hops[r - 1] = Some(dst);
            Ok(Trace { hops, reached: true })
        }
        None => {
            // Trailing silence says nothing: cut it.
            while hops.last().is_some_and(Option::is_none) {
                hops.pop();
            }
            Ok(Trace { hops, reached: false })
        }
    }
}

/// A DNS query for `name` (RFC 1035 §4.1), recursion desired.
fn dns_query(id: u16, name: &str, aaaa: bool) -> Result<Vec<u8>, String> {
    let mut q = Vec::with_capacity(32 + name.len());
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(format!("`{name}` is not a domain name"));
        }
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&(if aaaa { 28u16 } else { 1 }).to_be_bytes());
    q.extend_from_slice(&1u16.to_be_bytes());
    Ok(q)
}

/// Skips a (possibly compressed) name at `at`; returns the offset after it.
fn skip_name(msg: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let len = *msg.get(at)?;
        match len {
            0 => return Some(at + 1),
            l if l & 0xc0 == 0xc0 => return Some(at + 2),
            l => at += 1 + usize::from(l),
        }
    }
}

/// The addresses of a DNS response to query `id`, or the reason there are none.
fn dns_answers(msg: &[u8], id: u16, aaaa: bool) -> Option<Result<Vec<IpAddr>, String>> {
    let u16_at = |i: usize| -> Option<u16> { Some(u16::from_be_bytes([*msg.get(i)?, *msg.get(i + 1)?])) };
    if u16_at(0)? != id || msg.get(2)? & 0x80 == 0 {
        return None;
    }
    let rcode = msg.get(3)? & 0x0f;
    if rcode != 0 {
        let name = match rcode {
            1 => "FORMERR",
            2 => "SERVFAIL",
            3 => "NXDOMAIN",
            4 => "NOTIMP",
            5 => "REFUSED",
            _ => "error",
        };
        return Some(Err(format!("the server answered {name} ({rcode})")));
    }
    let (questions, answers) = (u16_at(4)?, u16_at(6)?);
    let mut at = 12;
    for _ in 0..questions {
        at = skip_name(msg, at)? + 4;
    }
    let mut out = Vec::new();
    for _ in 0..answers {
        at = skip_name(msg, at)?;
        let (kind, len) = (u16_at(at)?, usize::from(u16_at(at + 8)?));
        let data = msg.get(at + 10..at + 10 + len)?;
        match (kind, aaaa) {
            (1, false) if len == 4 => out.push(IpAddr::V4(Ipv4Addr::new(data[0], data[1], data[2], data[3]))),
            (28, true) if len == 16 => {
                let mut b = [0u8; 16];
                b.copy_from_slice(data);
                out.push(IpAddr::V6(Ipv6Addr::from(b)));
            }
            _ => {}
        }
        at += 10 + len;
    }
    Some(Ok(out))
}

fn dns_blocking(
    server: SocketAddr,
    name: &str,
    aaaa: bool,
    timeout: Duration,
) -> Result<Vec<IpAddr>, String> {
    let bind: SocketAddr =
        if server.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" }.parse().map_err(|_| "bind")?;
    let socket = UdpSocket::bind(bind).map_err(|e| format!("UDP socket: {e}"))?;
    let id: u16 = rand::random();
    let query = dns_query(id, name, aaaa)?;
    let start = Instant::now();
    let mut next_send = Duration::ZERO;
    let mut buf = [0u8; 1500];
    let mut last_error = String::from("no answer");
    while start.elapsed() < timeout {
        if start.elapsed() >= next_send {
            if let Err(e) = socket.send_to(&query, server) {
                last_error = format!("sending: {e}");
            }
            next_send += Duration::from_millis(200);
        }
        let wait = next_send.min(timeout).saturating_sub(start.elapsed()).max(Duration::from_millis(1));
        socket.set_read_timeout(Some(wait)).map_err(|e| e.to_string())?;
        match socket.recv_from(&mut buf) {
            Ok((n, from)) if from == server => {
                if let Some(answer) = dns_answers(&buf[..n], id, aaaa) {
                    return answer;
                }
            }
            Ok(_) => {}
            Err(e) if is_wait(&e) => {}
            // ICMP port unreachable of an earlier query: nothing listens (yet).
            Err(e) => last_error = e.to_string(),
        }
    }
    Err(format!("{last_error} within {timeout:?}"))
}

fn http_blocking(addr: SocketAddr, timeout: Duration) -> Result<u16, String> {
    let start = Instant::now();
    let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect: {e}"))?;
    let left = timeout.saturating_sub(start.elapsed()).max(Duration::from_millis(1));
    stream.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
    stream.set_write_timeout(Some(left)).map_err(|e| e.to_string())?;
    let host = match addr.ip() {
        IpAddr::V4(a) => a.to_string(),
        IpAddr::V6(a) => format!("[{a}]"),
    };
    stream
        .write_all(format!("GET / HTTP/1.0\r\nHost: {host}\r\nUser-Agent: netdojo-probe\r\n\r\n").as_bytes())
        .map_err(|e| format!("sending the request: {e}"))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 512];
    while !head.contains(&b'\n') && head.len() < 4096 {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("reading the answer: {e}")),
        }
    }
    let line = String::from_utf8_lossy(&head);
    let status = line.lines().next().unwrap_or_default();
    status
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .filter(|_| status.starts_with("HTTP/"))
        .ok_or_else(|| format!("not an HTTP answer: {:?}", status.chars().take(60).collect::<String>()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_exceeded_quotes_are_matched_on_the_probe_id() {
        // IPv4: outer header, ICMP 11, unused, quoted header, quoted echo (id 0x1234, seq 3).
        let mut packet = vec![0x45u8; 20];
        packet.extend_from_slice(&[11, 0, 0, 0, 0, 0, 0, 0]);
        let mut quoted = vec![0x45u8; 20];
        quoted.extend_from_slice(&echo(false, 0x1234, 3)[..8]);
        packet.extend_from_slice(&quoted);
        assert_eq!(parse_answer(false, &packet, 0x1234), Some(Answer::TimeExceeded { seq: 3 }));
        assert_eq!(parse_answer(false, &packet, 0x9999), None, "another probe's");
        // IPv6: no outer header; type 3, a 40-byte quoted header.
        let mut v6 = vec![3u8, 0, 0, 0, 0, 0, 0, 0];
        v6.extend_from_slice(&[0x60; 40]);
        v6.extend_from_slice(&echo(true, 7, 2)[..8]);
        assert_eq!(parse_answer(true, &v6, 7), Some(Answer::TimeExceeded { seq: 2 }));
        let reply = [129u8, 0, 0, 0, 0, 7, 0, 5];
        assert_eq!(parse_answer(true, &reply, 7), Some(Answer::Reply { seq: 5 }));
    }

    /// A probe's thread that ran past its timeout still reads what was queued for it, and does
    /// not wait for more (a datagram socket pair: no packet leaves the process).
    #[test]
    fn a_late_probe_still_reads_the_answers_queued_for_it_without_waiting() {
        let (ours, peer) = Socket::pair(Domain::UNIX, Type::DGRAM, None).expect("socket pair");
        peer.send(b"first").expect("sent");
        peer.send(b"second").expect("sent");
        let mut buf = [0u8; 64];
        let mut seen = Vec::new();
        drain(&ours, &mut buf, |packet, _| seen.push(packet.to_vec())).expect("drained");
        assert_eq!(seen, vec![b"first".to_vec(), b"second".to_vec()]);
        // Nothing more queued: it returns at once, with nothing, rather than block.
        seen.clear();
        drain(&ours, &mut buf, |packet, _| seen.push(packet.to_vec())).expect("drained");
        assert!(seen.is_empty());
    }

    #[test]
    fn dns_answers_follow_compressed_names() {
        let query = dns_query(0xbeef, "www.campus.lab", false).expect("a name");
        let mut msg = query.clone();
        msg[2] = 0x81;
        msg[3] = 0x80;
        msg[7] = 1;
        // Answer: pointer to the question's name, A, IN, TTL, 4 bytes.
        msg.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 10, 5, 5, 10]);
        assert_eq!(dns_answers(&msg, 0xbeef, false), Some(Ok(vec!["10.5.5.10".parse().expect("ip")])));
        assert_eq!(dns_answers(&msg, 0xbeee, false), None, "another query's answer");
        msg[3] = 0x83;
        let err = dns_answers(&msg, 0xbeef, false).expect("a response").expect_err("NXDOMAIN");
        assert!(err.contains("NXDOMAIN"), "{err}");
        assert!(dns_query(1, "a..b", false).is_err());
    }
}
