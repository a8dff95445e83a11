//! The emulator on real namespaces: build, readiness, pingmesh, teardown, sweep.

use crate::common;

use std::time::Instant;

use netdojo_linux::network::Network;
use netdojo_linux::pingmesh::Options;
use netdojo_linux::routing::layout::Layout;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_routing_topology_is_fully_reachable_and_leaves_nothing_behind() {
    if !common::root_or_skip("network build") {
        return;
    }
    let layout = Layout::new(4, 4);
    let t = Instant::now();
    let (mut net, times) = Network::build(layout.topology()).await.expect("build");
    let built = t.elapsed();
    let prefix = net.prefix().to_string();
    assert_eq!(common::namespaces_with(&prefix).len(), 21, "1 router + 4 switches + 16 hosts");
    let t = Instant::now();
    let mesh = net.pingmesh(&Options::default()).await;
    eprintln!("build {built:?} ({times:?}), mesh {:?}", t.elapsed());
    assert_eq!(mesh.nodes.len(), 17);
    assert!(mesh.full(), "{}", mesh.render());
    assert!(mesh.render().ends_with("*** Results: 0% dropped (272/272 received)\n"));
    net.teardown();
    assert!(common::namespaces_with(&prefix).is_empty());
}
