//! The hypervisor over TCP as GNS3 drives it, with real UDP traffic through a bridge.

use std::time::Duration;

use netdojo_ubridge::{Hypervisor, serve};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

async fn send(stream: &mut BufReader<TcpStream>, command: &str) -> Vec<String> {
    stream.get_mut().write_all(format!("{command}\n").as_bytes()).await.expect("write");
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        stream.read_line(&mut line).await.expect("read");
        assert!(line.ends_with("\r\n"), "{line:?}");
        let line = line.trim_end().to_string();
        let last = line.starts_with("100-") || line.chars().next().is_some_and(|c| c == '2');
        lines.push(line);
        if last {
            return lines;
        }
    }
}

async fn free_udp() -> (UdpSocket, u16) {
    let s = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
    let port = s.local_addr().expect("addr").port();
    (s, port)
}

async fn free_port() -> u16 {
    free_udp().await.1
}

#[tokio::test]
async fn a_bridge_carries_datagrams_both_ways_until_it_is_deleted() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(serve(listener, Hypervisor::new()));
    let mut gns3 = BufReader::new(TcpStream::connect(addr).await.expect("connect"));
    assert_eq!(send(&mut gns3, "hypervisor version").await, vec!["100-0.9.18"]);

    // Two "nodes", each with its own UDP socket; the bridge listens on one port per node.
    let (node_a, a_port) = free_udp().await;
    let (node_b, b_port) = free_udp().await;
    let (bridge_a, bridge_b) = (free_port().await, free_port().await);
    assert_eq!(send(&mut gns3, "bridge create link1").await, vec!["100-OK"]);
    assert_eq!(
        send(&mut gns3, &format!("bridge add_nio_udp link1 {bridge_a} 127.0.0.1 {a_port}")).await,
        vec!["100-OK"]
    );
    assert_eq!(
        send(&mut gns3, &format!("bridge add_nio_udp link1 {bridge_b} localhost {b_port}")).await,
        vec!["100-OK"]
    );
    assert_eq!(send(&mut gns3, "bridge start link1").await, vec!["100-OK"]);
    assert_eq!(send(&mut gns3, "bridge reset_packet_filters link1").await, vec!["100-OK"]);
    assert!(
        send(&mut gns3, "bridge add_packet_filter link1 f0 frequency_drop 5").await[0].starts_with("207-")
    );

    let mut buf = [0u8; 2048];
    let frame = [0x42u8; 1500];
    node_a.send_to(&frame, ("127.0.0.1", bridge_a)).await.expect("send");
    let n = tokio::time::timeout(Duration::from_secs(2), node_b.recv(&mut buf))
        .await
        .expect("a->b")
        .expect("recv");
    assert_eq!(&buf[..n], &frame[..]);
    node_b.send_to(b"reply", ("127.0.0.1", bridge_b)).await.expect("send");
    let n = tokio::time::timeout(Duration::from_secs(2), node_a.recv(&mut buf))
        .await
        .expect("b->a")
        .expect("recv");
    assert_eq!(&buf[..n], b"reply");

    assert_eq!(send(&mut gns3, "bridge list").await, vec!["101 link1 (NIOs = 2)", "100-OK"]);
    assert_eq!(send(&mut gns3, "bridge delete link1").await, vec!["100-OK"]);
    node_a.send_to(b"lost", ("127.0.0.1", bridge_a)).await.expect("send");
    assert!(
        tokio::time::timeout(Duration::from_millis(300), node_b.recv(&mut buf)).await.is_err(),
        "a deleted bridge forwards nothing"
    );
    // The ports are free again once the bridge is gone.
    UdpSocket::bind(("127.0.0.1", bridge_a)).await.expect("port released");

    assert_eq!(send(&mut gns3, "hypervisor stop").await, vec!["100-OK"]);
    tokio::time::timeout(Duration::from_secs(2), server).await.expect("stops").expect("join").expect("serve");
}

#[test]
fn the_binary_reports_a_version_gns3_accepts() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ubridge")).arg("-v").output().expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    // gns3server: re.search(r"ubridge version ([0-9a-z\.]+)", output), >= 0.9.14.
    assert!(text.starts_with("ubridge version 0.9.18 "), "{text}");
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_ubridge"))
        .args(["-H", "0.0.0.0:1"])
        .output()
        .expect("run");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("loopback address only"));
}
