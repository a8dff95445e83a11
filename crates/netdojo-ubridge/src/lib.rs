//! netdojo-ubridge: the ubridge hypervisor protocol with UDP-to-UDP bridges.
//!
//! GNS3 starts `ubridge -H HOST:PORT` for every node that has a link and drives it over TCP
//! with one text command a line (`bridge create NAME`, `bridge add_nio_udp NAME LPORT RHOST
//! RPORT`, `bridge start NAME`...). Each answer is zero or more `1xx text` lines closed by
//! `100-text` on success, or a single `2xx-message` line on error (gns3server's
//! `compute/ubridge/ubridge_hypervisor.py` reads exactly that).
//!
//! The real ubridge is in no package registry; this one implements what GNS3 needs to link
//! nodes that speak UDP (VPCS, QEMU, dynamips): a bridge joins two UDP NIOs and copies every
//! datagram received on one to the other's peer. Ethernet, TAP, capture and packet-filter
//! NIOs are refused with a clear error. For network safety a NIO's peer must be a loopback
//! address and its socket is bound to 127.0.0.1: nothing reaches a real interface.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::{Mutex, Notify};
use tokio::task::JoinHandle;

/// The version reported to GNS3, which requires at least 0.9.14 on Linux.
pub const VERSION: &str = "0.9.18";

/// The largest datagram copied (a jumbo Ethernet frame fits).
const MAX_DATAGRAM: usize = 65_535;

/// One UDP endpoint of a bridge: the local port to listen on, and the peer to send to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpNio {
    pub lport: u16,
    pub remote: SocketAddr,
}

#[derive(Debug, Default)]
struct Bridge {
    nios: Vec<UdpNio>,
    /// The two copy loops while the bridge runs.
    tasks: Vec<JoinHandle<()>>,
}

impl Bridge {
    fn stop(&mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
    }
    fn running(&self) -> bool {
        !self.tasks.is_empty()
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a command asks the connection to do after it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    Continue,
    /// `hypervisor close`: end this connection.
    Close,
    /// `hypervisor stop`: end the process.
    Stop,
}

/// An error answer (`2xx-message`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}-{message}")]
pub struct Refusal {
    pub code: u16,
    pub message: String,
}

fn refuse(code: u16, message: impl Into<String>) -> Refusal {
    Refusal { code, message: message.into() }
}

/// The hypervisor's state: its bridges, shared by every connection.
#[derive(Debug, Default)]
pub struct Hypervisor {
    bridges: Mutex<BTreeMap<String, Bridge>>,
    stop: Notify,
}

/// Splits a command line into words; double quotes group words (`"/tmp/a b.pcap"`).
pub fn split_words(line: &str) -> Result<Vec<String>, Refusal> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                in_word = true;
            }
            c if c.is_whitespace() && !quoted => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if quoted {
        return Err(refuse(200, "unbalanced double quote"));
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

impl Hypervisor {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Resolves when a client sent `hypervisor stop`.
    pub async fn stopped(&self) {
        self.stop.notified().await;
    }

    /// Runs one command line and returns the answer's lines (without `\r\n`).
    pub async fn handle(&self, line: &str) -> (Vec<String>, After) {
        match self.dispatch(line).await {
            Ok((mut lines, after)) => {
                let last = lines.pop().unwrap_or_else(|| "OK".into());
                let mut out: Vec<String> = lines.into_iter().map(|l| format!("101 {l}")).collect();
                out.push(format!("100-{last}"));
                (out, after)
            }
            Err(r) => (vec![r.to_string()], After::Continue),
        }
    }

    async fn dispatch(&self, line: &str) -> Result<(Vec<String>, After), Refusal> {
        let words = split_words(line)?;
        let w: Vec<&str> = words.iter().map(String::as_str).collect();
        let ok = |after| Ok((vec![], after));
        match w.as_slice() {
            ["hypervisor", "version"] => Ok((vec![VERSION.into()], After::Continue)),
            ["hypervisor", "close"] => ok(After::Close),
            ["hypervisor", "stop"] => {
                self.bridges.lock().await.clear();
                self.stop.notify_waiters();
                ok(After::Stop)
            }
            ["hypervisor", "reset"] => {
                self.bridges.lock().await.clear();
                ok(After::Continue)
            }
            ["hypervisor", "working_dir", _dir] => ok(After::Continue),
            ["bridge", "list"] => {
                let bridges = self.bridges.lock().await;
                let lines = bridges
                    .iter()
                    .map(|(name, b)| format!("{name} (NIOs = {})", b.nios.len()))
                    .chain(std::iter::once("OK".into()))
                    .collect();
                Ok((lines, After::Continue))
            }
            ["bridge", "create", name] => {
                let mut bridges = self.bridges.lock().await;
                if bridges.contains_key(*name) {
                    return Err(refuse(201, format!("bridge '{name}' already exists")));
                }
                bridges.insert(name.to_string(), Bridge::default());
                ok(After::Continue)
            }
            ["bridge", "delete", name] => {
                self.bridges
                    .lock()
                    .await
                    .remove(*name)
                    .ok_or_else(|| refuse(202, format!("bridge '{name}' doesn't exist")))?;
                ok(After::Continue)
            }
            ["bridge", "rename", old, new] => {
                let mut bridges = self.bridges.lock().await;
                if bridges.contains_key(*new) {
                    return Err(refuse(201, format!("bridge '{new}' already exists")));
                }
                let b = bridges
                    .remove(*old)
                    .ok_or_else(|| refuse(202, format!("bridge '{old}' doesn't exist")))?;
                bridges.insert(new.to_string(), b);
                ok(After::Continue)
            }
            ["bridge", "add_nio_udp", name, lport, rhost, rport] => {
                let nio = parse_nio(lport, rhost, rport).await?;
                let mut bridges = self.bridges.lock().await;
                let b = bridges
                    .get_mut(*name)
                    .ok_or_else(|| refuse(202, format!("bridge '{name}' doesn't exist")))?;
                if b.nios.len() >= 2 {
                    return Err(refuse(203, format!("bridge '{name}' already has 2 NIOs")));
                }
                if b.running() {
                    return Err(refuse(204, format!("bridge '{name}' is running")));
                }
                b.nios.push(nio);
                ok(After::Continue)
            }
            ["bridge", "remove_nio_udp", name, lport, rhost, rport] => {
                let nio = parse_nio(lport, rhost, rport).await?;
                let mut bridges = self.bridges.lock().await;
                let b = bridges
                    .get_mut(*name)
                    .ok_or_else(|| refuse(202, format!("bridge '{name}' doesn't exist")))?;
                let before = b.nios.len();
                b.nios.retain(|n| *n != nio);
                if b.nios.len() == before {
                    return Err(refuse(205, format!("bridge '{name}' has no such NIO")));
                }
                b.stop();
                ok(After::Continue)
            }
            ["bridge", "start", name] => {
                let mut bridges = self.bridges.lock().await;
                let b = bridges
                    .get_mut(*name)
                    .ok_or_else(|| refuse(202, format!("bridge '{name}' doesn't exist")))?;
                if b.running() {
                    return Err(refuse(204, format!("bridge '{name}' is already running")));
                }
                let [a, z] = b.nios.as_slice() else {
                    return Err(refuse(206, format!("bridge '{name}' must have 2 NIOs to be started")));
                };
                b.tasks = start_bridge(name, *a, *z).await?;
                ok(After::Continue)
            }
            ["bridge", "stop", name] => {
                let mut bridges = self.bridges.lock().await;
                let b = bridges
                    .get_mut(*name)
                    .ok_or_else(|| refuse(202, format!("bridge '{name}' doesn't exist")))?;
                b.stop();
                ok(After::Continue)
            }
            // No filter is ever installed, so resetting them is a no-op that succeeds.
            ["bridge", "reset_packet_filters", name] => {
                if !self.bridges.lock().await.contains_key(*name) {
                    return Err(refuse(202, format!("bridge '{name}' doesn't exist")));
                }
                ok(After::Continue)
            }
            ["bridge", cmd @ ("add_packet_filter" | "start_capture" | "stop_capture"), ..] => Err(refuse(
                207,
                format!("`bridge {cmd}` is not supported by netdojo-ubridge (UDP-to-UDP bridges only)"),
            )),
            [
                "bridge",
                cmd @ ("add_nio_ethernet" | "add_nio_linux_raw" | "add_nio_tap" | "add_nio_fusion_vmnet"),
                ..,
            ] => Err(refuse(
                207,
                format!(
                    "`bridge {cmd}` is not supported by netdojo-ubridge: it links nodes over loopback UDP only, never to a real interface"
                ),
            )),
            [] => Err(refuse(200, "empty command")),
            _ => Err(refuse(200, format!("unknown command or wrong arguments: `{}`", line.trim()))),
        }
    }
}

async fn parse_nio(lport: &str, rhost: &str, rport: &str) -> Result<UdpNio, Refusal> {
    let port = |p: &str, what: &str| {
        p.parse::<u16>().map_err(|_| refuse(200, format!("{what} `{p}` is not a UDP port")))
    };
    let lport = port(lport, "local port")?;
    let rport = port(rport, "remote port")?;
    let ip: IpAddr = match rhost.parse() {
        Ok(ip) => ip,
        Err(_) => tokio::net::lookup_host((rhost, rport))
            .await
            .ok()
            .and_then(|mut a| a.find(|a| a.is_ipv4()))
            .map(|a| a.ip())
            .ok_or_else(|| refuse(200, format!("cannot resolve host `{rhost}`")))?,
    };
    if !ip.is_loopback() || !ip.is_ipv4() {
        return Err(refuse(
            208,
            format!(
                "remote host `{rhost}` is not an IPv4 loopback address: netdojo-ubridge bridges loopback UDP only"
            ),
        ));
    }
    Ok(UdpNio { lport, remote: SocketAddr::new(ip, rport) })
}

async fn bind(nio: UdpNio) -> Result<Arc<UdpSocket>, Refusal> {
    let sock = UdpSocket::bind((Ipv4Addr::LOCALHOST, nio.lport))
        .await
        .map_err(|e| refuse(209, format!("cannot bind UDP port {}: {e}", nio.lport)))?;
    sock.connect(nio.remote)
        .await
        .map_err(|e| refuse(209, format!("cannot connect UDP socket to {}: {e}", nio.remote)))?;
    Ok(Arc::new(sock))
}

/// Binds both NIOs and starts one copy loop per direction.
async fn start_bridge(name: &str, a: UdpNio, z: UdpNio) -> Result<Vec<JoinHandle<()>>, Refusal> {
    let sa = bind(a).await?;
    let sz = bind(z).await?;
    tracing::info!(bridge = name, "bridging UDP {} <-> {}", a.lport, z.lport);
    Ok(vec![tokio::spawn(copy(sa.clone(), sz.clone())), tokio::spawn(copy(sz, sa))])
}

async fn copy(from: Arc<UdpSocket>, to: Arc<UdpSocket>) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        match from.recv(&mut buf).await {
            // A send can fail while the peer is not listening yet (ICMP port unreachable comes
            // back as an error on the next call): the frame is dropped, as on a wire.
            Ok(n) => {
                let _ = to.send(&buf[..n]).await;
            }
            Err(e) => {
                tracing::debug!("UDP receive: {e}");
                tokio::task::yield_now().await;
            }
        }
    }
}

/// Serves the protocol on `listener` until a client sends `hypervisor stop`.
pub async fn serve(listener: TcpListener, hypervisor: Arc<Hypervisor>) -> std::io::Result<()> {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = accepted?;
                tracing::info!("client {peer}");
                let hv = hypervisor.clone();
                tokio::spawn(async move {
                    if let Err(e) = session(stream, hv).await {
                        tracing::warn!("client {peer}: {e}");
                    }
                });
            }
            () = hypervisor.stopped() => return Ok(()),
        }
    }
}

async fn session(stream: TcpStream, hv: Arc<Hypervisor>) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        tracing::debug!("<- {line}");
        let (answer, after) = hv.handle(&line).await;
        for l in &answer {
            write.write_all(format!("{l}\r\n").as_bytes()).await?;
        }
        write.flush().await?;
        match after {
            After::Continue => {}
            After::Close | After::Stop => return Ok(()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_quoted_paths_whole() {
        assert_eq!(
            split_words(r#"bridge start_capture b "/tmp/a b.pcap""#).expect("balanced"),
            vec!["bridge", "start_capture", "b", "/tmp/a b.pcap"]
        );
        assert!(split_words(r#"bridge "x"#).is_err());
    }

    #[tokio::test]
    async fn answers_in_the_format_gns3_reads() {
        let hv = Hypervisor::new();
        assert_eq!(hv.handle("hypervisor version").await.0, vec!["100-0.9.18"]);
        assert_eq!(hv.handle("bridge create b1").await.0, vec!["100-OK"]);
        assert_eq!(hv.handle("bridge create b1").await.0, vec!["201-bridge 'b1' already exists"]);
        assert_eq!(
            hv.handle("bridge start b1").await.0,
            vec!["206-bridge 'b1' must have 2 NIOs to be started"]
        );
        assert_eq!(hv.handle("bridge list").await.0, vec!["101 b1 (NIOs = 0)", "100-OK"]);
        let refused = hv.handle("bridge add_nio_udp b1 10000 192.0.2.1 10001").await.0;
        assert!(refused[0].starts_with("208-"), "{refused:?}");
        assert!(hv.handle("bridge add_nio_linux_raw b1 eth0").await.0[0].starts_with("207-"));
        assert!(hv.handle("frobnicate").await.0[0].starts_with("200-"));
        assert_eq!(hv.handle("bridge delete b1").await.0, vec!["100-OK"]);
        assert_eq!(hv.handle("bridge delete b1").await.0, vec!["202-bridge 'b1' doesn't exist"]);
        assert_eq!(hv.handle("hypervisor close").await, (vec!["100-OK".to_string()], After::Close));
    }
}
