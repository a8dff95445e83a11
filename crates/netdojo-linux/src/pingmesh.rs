//! The pingmesh: every host pings every other host, all at once, from inside their own
//! namespaces, and the result is shown the way Mininet's `pingall` prints it.
//!
//! Pings are real ICMP echo requests sent from a raw socket opened inside each node's
//! namespace (the kernel routes them exactly as it routes `ping`'s), in-process: a full mesh
//! of 17 nodes costs no child process. Each node sends one echo to every other, resends to the
//! silent ones, and gives up at the deadline, like `ping -c1 -W1`.

use std::io::{self, Read};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// Who reached whom. `reach[i][j]`: node `i` got an echo reply from node `j`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Matrix {
    pub nodes: Vec<String>,
    pub reach: Vec<Vec<bool>>,
}

impl Matrix {
    /// Pairs tried: every ordered pair of distinct nodes.
    pub fn sent(&self) -> usize {
        let n = self.nodes.len();
        n * n.saturating_sub(1)
    }

    pub fn received(&self) -> usize {
        self.pairs().filter(|&(_, _, ok)| ok).count()
    }

    pub fn full(&self) -> bool {
        self.received() == self.sent()
    }

    /// Every ordered pair `(from, to, reached)`.
    pub fn pairs(&self) -> impl Iterator<Item = (usize, usize, bool)> + '_ {
        let n = self.nodes.len();
        (0..n).flat_map(move |i| (0..n).filter(move |&j| j != i).map(move |j| (i, j, self.reach[i][j])))
    }

    /// The pairs reachable in `before` and not in `self`, by name: what a step broke.
    /// Nodes are matched by name, so two matrices of the same network compare pair by pair.
    pub fn newly_broken(&self, before: &Matrix) -> Vec<(String, String)> {
        let index = |name: &str| self.nodes.iter().position(|n| n == name);
        before
            .pairs()
            .filter(|&(_, _, ok)| ok)
            .filter_map(|(i, j, _)| {
                let (a, b) = (&before.nodes[i], &before.nodes[j]);
                let still = match (index(a), index(b)) {
                    (Some(x), Some(y)) => self.reach[x][y],
                    _ => false,
                };
                (!still).then(|| (a.clone(), b.clone()))
            })
            .collect()
    }

    /// Mininet's `pingAll()` output, line for line (including its trailing spaces).
    pub fn render(&self) -> String {
        let mut out = String::from("*** Ping: testing ping reachability\n");
        for (i, node) in self.nodes.iter().enumerate() {
            out.push_str(&format!("{node} -> "));
            for (j, dest) in self.nodes.iter().enumerate() {
                if i != j {
                    out.push_str(if self.reach[i][j] { dest } else { "X" });
                    out.push(' ');
                }
            }
            out.push('\n');
        }
        let sent = self.sent();
        let received = self.received();
        // Mininet prints the loss with %i, which truncates.
        let loss = (100 * (sent - received)).checked_div(sent).unwrap_or(0);
        out.push_str(&format!("*** Results: {loss}% dropped ({received}/{sent} received)\n"));
        out
    }
}

/// How long to try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// After this, a silent pair counts as unreachable (Mininet's `ping -W1` waits 1 s).
    pub deadline: Duration,
    /// When to resend to targets that have not answered yet, from the start.
    pub resend: Vec<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            deadline: Duration::from_millis(500),
            resend: vec![Duration::from_millis(100), Duration::from_millis(250)],
        }
    }
}

/// A raw ICMP socket that belongs to one node's namespace.
#[derive(Debug)]
pub struct Pinger {
    socket: Socket,
}

/// Opens a raw ICMP socket in the namespace of the calling thread (call it from
/// [`crate::netns::Episode::create_with`] or [`crate::netns::in_netns`]).
pub fn open_socket() -> io::Result<Socket> {
    Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4))
}

impl Pinger {
    pub fn new(socket: Socket) -> Self {
        Self { socket }
    }

    /// Throws away what arrived since the last mesh (late replies, others' echo requests).
    fn drain(&self) -> io::Result<()> {
        let mut buf = [0u8; 2048];
        self.socket.set_nonblocking(true)?;
        while (&self.socket).read(&mut buf).is_ok() {}
        self.socket.set_nonblocking(false)
    }

    fn send(&self, dst: Ipv4Addr, id: u16, seq: u16) -> io::Result<()> {
        let packet = echo_request(id, seq);
        self.socket.send_to(&packet, &SockAddr::from(SocketAddrV4::new(dst, 0)))?;
        Ok(())
    }

    /// Pings every target but `me`; returns which answered. Blocking: run it on a blocking
    /// thread (a raw socket has no safe tokio wrapper).
    fn sweep(&self, me: usize, targets: &[Ipv4Addr], id: u16, options: &Options) -> Vec<bool> {
        let mut reached = vec![false; targets.len()];
        if me < reached.len() {
            reached[me] = true;
        }
        if self.drain().is_err() {
            return vec![false; targets.len()];
        }
        let start = Instant::now();
        let send_missing = |reached: &[bool]| {
            for (j, target) in targets.iter().enumerate() {
                if !reached[j] {
                    // A send error (no route, address gone) is an unreachable target, which
                    // is what the mesh reports anyway.
                    let _ = self.send(*target, id, j as u16);
                }
            }
        };
        send_missing(&reached);
        let mut resends = options.resend.iter().copied().filter(|t| *t < options.deadline).peekable();
        let mut buf = [0u8; 2048];
        while reached.iter().any(|r| !r) {
            let now = start.elapsed();
            if now >= options.deadline {
                break;
            }
            if resends.next_if(|t| *t <= now).is_some() {
                send_missing(&reached);
                continue;
            }
            let wake = resends.peek().copied().unwrap_or(options.deadline).min(options.deadline);
            let wait = wake.saturating_sub(now).max(Duration::from_millis(1));
            if self.socket.set_read_timeout(Some(wait)).is_err() {
                break;
            }
            match (&self.socket).read(&mut buf) {
                Ok(n) => {
                    if let Some((reply_id, seq)) = parse_echo_reply(&buf[..n])
                        && reply_id == id
                        && let Some(slot) = reached.get_mut(usize::from(seq))
                    {
                        *slot = true;
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                    ) => {}
                Err(_) => break,
            }
        }
        if me < reached.len() {
            reached[me] = false;
        }
        reached
    }
}

/// Runs one full mesh: `nodes[i]` pings from `pingers[i]` to the address of every other node.
pub async fn run(nodes: &[(String, Ipv4Addr)], pingers: &[Arc<Pinger>], options: &Options) -> Matrix {
    let targets: Vec<Ipv4Addr> = nodes.iter().map(|(_, a)| *a).collect();
    let targets = Arc::new(targets);
    // A fresh identifier per mesh and node, so a late reply to an earlier mesh never counts.
    let base: u16 = rand::random();
    let mut tasks = Vec::new();
    for (i, pinger) in pingers.iter().enumerate() {
        let pinger = pinger.clone();
        let targets = targets.clone();
        let options = options.clone();
        let id = base.wrapping_add(i as u16);
        tasks.push(tokio::task::spawn_blocking(move || pinger.sweep(i, &targets, id, &options)));
    }
    let mut reach = Vec::with_capacity(tasks.len());
    for task in tasks {
        reach.push(task.await.unwrap_or_else(|_| vec![false; targets.len()]));
    }
    Matrix { nodes: nodes.iter().map(|(n, _)| n.clone()).collect(), reach }
}

/// An ICMP echo request with a 56-byte payload, the size `ping` sends (84-byte IP packet).
pub(crate) fn echo_request(id: u16, seq: u16) -> Vec<u8> {
    let mut packet = vec![0u8; 8 + 56];
    packet[0] = 8;
    packet[4..6].copy_from_slice(&id.to_be_bytes());
    packet[6..8].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in packet[8..].iter_mut().enumerate() {
        *b = i as u8;
    }
    let sum = checksum(&packet);
    packet[2..4].copy_from_slice(&sum.to_be_bytes());
    packet
}

/// The Internet checksum (RFC 1071).
fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 =
        data.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// `(id, seq)` of an echo reply in a raw IPv4 packet.
fn parse_echo_reply(packet: &[u8]) -> Option<(u16, u16)> {
    let ihl = usize::from(*packet.first()? & 0x0f) * 4;
    let icmp = packet.get(ihl..)?;
    if *icmp.first()? != 0 || icmp.len() < 8 {
        return None;
    }
    Some((u16::from_be_bytes([icmp[4], icmp[5]]), u16::from_be_bytes([icmp[6], icmp[7]])))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(nodes: &[&str], unreachable: &[(usize, usize)]) -> Matrix {
        let n = nodes.len();
        let mut reach = vec![vec![true; n]; n];
        for (i, row) in reach.iter_mut().enumerate() {
            row[i] = false;
        }
        for &(i, j) in unreachable {
            reach[i][j] = false;
        }
        Matrix { nodes: nodes.iter().map(|s| s.to_string()).collect(), reach }
    }

    #[test]
    fn renders_like_mininet_pingall() {
        let nodes = ["h1", "h2", "h3", "h4", "h5", "h6", "r0"];
        // Every host reaches only r0, and r0 reaches all but h3, as in the seed's example.
        let mut cut = Vec::new();
        for i in 0..6 {
            for j in 0..6 {
                if i != j {
                    cut.push((i, j));
                }
            }
        }
        cut.push((6, 2));
        let m = matrix(&nodes, &cut);
        assert_eq!(m.received(), 11);
        insta::assert_snapshot!(m.render(), @r"
        *** Ping: testing ping reachability
        h1 -> X X X X X r0 
        h2 -> X X X X X r0 
        h3 -> X X X X X r0 
        h4 -> X X X X X r0 
        h5 -> X X X X X r0 
        h6 -> X X X X X r0 
        r0 -> h1 h2 X h4 h5 h6 
        *** Results: 73% dropped (11/42 received)
        ");
    }

    #[test]
    fn newly_broken_compares_pair_by_pair_not_by_count() {
        let before = matrix(&["a", "b", "c"], &[(0, 1)]);
        // Same number received, but a different pair: a->b fixed, b->c broken.
        let after = matrix(&["a", "b", "c"], &[(1, 2)]);
        assert_eq!(before.received(), after.received());
        assert_eq!(after.newly_broken(&before), vec![("b".to_string(), "c".to_string())]);
        assert!(before.newly_broken(&before).is_empty());
    }

    #[test]
    fn echo_packets_round_trip() {
        let req = echo_request(0x1234, 7);
        assert_eq!(checksum(&req), 0, "a packet with its checksum sums to zero");
        let mut reply = vec![0x45u8; 20];
        reply.extend_from_slice(&req);
        reply[20] = 0;
        assert_eq!(parse_echo_reply(&reply), Some((0x1234, 7)));
        reply[20] = 8;
        assert_eq!(parse_echo_reply(&reply), None, "requests are not replies");
        assert_eq!(parse_echo_reply(&[0x45]), None);
    }
}
