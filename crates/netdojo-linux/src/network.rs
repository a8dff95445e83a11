//! A [`Topology`] brought to life: one namespace per node, veth pairs for links, Linux bridges
//! for switches, addresses, routes and sysctls, all set with netlink messages from this
//! process (rtnetlink), then a readiness wait on link state.
//!
//! Each veth pair is created from one end's namespace with its peer placed straight into the
//! other's (`IFLA_NET_NS_FD` in the peer's message), so no interface ever exists in the root
//! namespace, even for a moment.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use futures::future::try_join_all;
use rtnetlink::packet_route::address::AddressAttribute;
use rtnetlink::packet_route::link::{
    BridgeStpState, InfoData, InfoKind, InfoVeth, LinkAttribute, LinkFlags, State,
};
use rtnetlink::packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourState};
use rtnetlink::{Handle, LinkBridge, LinkMessageBuilder, LinkUnspec, LinkVeth, RouteMessageBuilder};

use crate::frr::Frr;
use crate::netns::{self, Episode};
use crate::pingmesh::{self, Matrix, Pinger};
use crate::pool::{PoolHandle, Warm};
use crate::topology::{Cidr, NodeKind, Topology};

// Defined below this module and `pool`, which both fail with it.
pub use crate::error::NetworkError;

fn build_err(what: impl Into<String>) -> impl FnOnce(rtnetlink::Error) -> NetworkError {
    let what = what.into();
    move |e| NetworkError::Build { what, message: e.to_string() }
}

/// The loopback's index in every namespace (the kernel registers it first).
const LOOPBACK_INDEX: u32 = 1;
/// A bridge node's own device.
const BRIDGE_INDEX: u32 = 2;
/// Interface indexes of veths start here, above those of loopbacks and bridges.
const FIRST_VETH_INDEX: u32 = 100;

/// One node's namespace and the sockets we hold in it.
#[derive(Debug)]
struct NodeNs {
    ns: String,
    rtnl: Handle,
    pinger: Option<Arc<Pinger>>,
}

/// A live network. Dropping it deletes every namespace it made.
#[derive(Debug)]
pub struct Network {
    topology: Topology,
    nodes: HashMap<String, NodeNs>,
    mesh: Vec<(String, Ipv4Addr)>,
    connections: Vec<tokio::task::JoinHandle<()>>,
    /// The FRR instances of `frr` nodes, stopped before the namespaces go.
    frr: HashMap<String, Frr>,
    /// The `frr` nodes served by a warm pool, given back to it at teardown.
    pooled: HashMap<String, Warm>,
    pool: Option<PoolHandle>,
    // Declared last: dropped after the connections are aborted.
    episode: Episode,
}

/// How long each phase took.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BuildTimes {
    pub namespaces: Duration,
    pub links: Duration,
    pub ready: Duration,
    /// Starting FRR on `frr` routers (zero without them).
    pub frr: Duration,
    /// What one router took of that, on average: started and configured (fresh), or renamed
    /// and configured (from a warm pool). The routers start all at once, so `frr` is about the
    /// slowest of them.
    pub frr_per_router: Duration,
}

impl Network {
    /// Builds `topology` in a new episode and waits until every link is up.
    pub async fn build(topology: Topology) -> Result<(Self, BuildTimes), NetworkError> {
        Self::build_with(topology, None).await
    }

    /// [`build`](Self::build), with the `frr` nodes that match the pool's routers taken from
    /// `pool` (warm: namespace made, the pool's daemons running, configuration empty; a node's
    /// other daemons are started as it is taken) instead of started.
    pub async fn build_with(
        topology: Topology,
        pool: Option<&PoolHandle>,
    ) -> Result<(Self, BuildTimes), NetworkError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| NetworkError::NoRuntime)?;
        let mut times = BuildTimes::default();
        let start = Instant::now();
        let mut episode = Episode::new()?;
        let mut nodes = HashMap::new();
        let mut connections = Vec::new();
        let mesh = topology.mesh_targets();
        // A node with sysctls of its own is served too: they are written as it is taken, before
        // any of its links exists (as a fresh namespace gets them), and the pool's reset writes
        // every sysctl back to the router's fresh value (or discards the router) when it returns.
        let served = |node: &crate::topology::Node| {
            pool.is_some_and(|p| {
                node.kind == NodeKind::Frr
                    && p.spec().daemons.iter().all(|d| node.daemons.contains(d))
                    && p.spec().sysctls.keys().all(|k| node.sysctls.contains_key(k))
            })
        };
        let (pooled_names, wants): (Vec<String>, Vec<Vec<String>>) = topology
            .nodes()
            .filter(|(_, n)| served(n))
            .map(|(name, n)| (name.to_string(), n.daemons.clone()))
            .unzip();
        let mut pooled = HashMap::new();
        if let Some(pool) = pool.filter(|_| !pooled_names.is_empty()) {
            let warm = pool.take(&wants).await?;
            for (name, w) in pooled_names.iter().zip(warm) {
                pooled.insert(name.clone(), w);
            }
        }
        let mut inits = Vec::new();
        for (name, node) in topology.nodes() {
            if served(node) {
                continue;
            }
            let kind = node.kind;
            let sysctls = node.sysctls.clone();
            let in_mesh = mesh.iter().any(|(n, _)| n == name);
            let rt = runtime.clone();
            inits.push((name.to_string(), move || -> Result<_, String> {
                let _guard = rt.enter();
                let (conn, handle, _) =
                    rtnetlink::new_connection().map_err(|e| format!("netlink socket: {e}"))?;
                // Before any interface exists, so that `conf.default.*` reaches every one.
                for (key, value) in &sysctls {
                    netns::write_sysctl(key, value).map_err(|e| format!("sysctl {key}={value}: {e}"))?;
                }
                if matches!(kind, NodeKind::Router | NodeKind::Frr) {
                    netns::write_sysctl("net.ipv4.ip_forward", "1")
                        .map_err(|e| format!("net.ipv4.ip_forward: {e}"))?;
                }
                let socket = if in_mesh {
                    Some(pingmesh::open_socket().map_err(|e| format!("ICMP socket: {e}"))?)
                } else {
                    None
                };
                Ok((conn, handle, socket))
            }));
        }
        let names: Vec<String> = inits.iter().map(|(n, _)| n.clone()).collect();
        for (node_name, (ns, made)) in names.into_iter().zip(episode.create_all(inits)?) {
            let (conn, rtnl, socket) =
                made.map_err(|message| NetworkError::Build { what: node_name.clone(), message })?;
            connections.push(tokio::spawn(conn));
            let pinger = socket.map(|s| Arc::new(Pinger::new(s)));
            nodes.insert(node_name, NodeNs { ns, rtnl, pinger });
        }
        // The pooled routers' namespaces: a netlink socket (and an ICMP one) opened in each.
        let spec_sysctls = pool.map(|p| &p.spec().sysctls);
        for (node_name, warm) in &pooled {
            let in_mesh = mesh.iter().any(|(n, _)| n == node_name);
            let rt = runtime.clone();
            let own: Vec<(String, String)> = topology
                .node(node_name)
                .map(|n| {
                    n.sysctls
                        .iter()
                        .filter(|(k, v)| spec_sysctls.and_then(|s| s.get(*k)) != Some(*v))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
                .unwrap_or_default();
            let made = netns::in_netns(warm.ns(), move || -> Result<_, String> {
                let _guard = rt.enter();
                for (key, value) in &own {
                    netns::write_sysctl(key, value).map_err(|e| format!("sysctl {key}={value}: {e}"))?;
                }
                let (conn, handle, _) =
                    rtnetlink::new_connection().map_err(|e| format!("netlink socket: {e}"))?;
                let socket = if in_mesh {
                    Some(pingmesh::open_socket().map_err(|e| format!("ICMP socket: {e}"))?)
                } else {
                    None
                };
                Ok((conn, handle, socket))
            });
            let made = made
                .map_err(NetworkError::from)
                .and_then(|m| m.map_err(|message| NetworkError::Build { what: node_name.clone(), message }));
            let (conn, rtnl, socket) = match made {
                Ok(m) => m,
                Err(e) => {
                    if let Some(pool) = pool {
                        for (_, w) in pooled {
                            pool.give_back(w);
                        }
                    }
                    return Err(e);
                }
            };
            connections.push(tokio::spawn(conn));
            let pinger = socket.map(|s| Arc::new(Pinger::new(s)));
            nodes.insert(node_name.clone(), NodeNs { ns: warm.ns().to_string(), rtnl, pinger });
        }
        times.namespaces = start.elapsed();
        let mut network = Self {
            topology,
            nodes,
            mesh,
            connections,
            frr: HashMap::new(),
            pooled,
            pool: pool.cloned(),
            episode,
        };
        let t = Instant::now();
        network.configure().await?;
        times.links = t.elapsed();
        let t = Instant::now();
        network.wait_ready(Duration::from_secs(5)).await?;
        times.ready = t.elapsed();
        let t = Instant::now();
        times.frr_per_router = network.start_frr().await?;
        times.frr = t.elapsed();
        Ok((network, times))
    }

    /// Starts FRR on every `frr` node, all at once, and applies their startup configuration;
    /// returns the mean time one router took.
    async fn start_frr(&mut self) -> Result<Duration, NetworkError> {
        let mut each = Vec::new();
        let adopted = self.pooled.iter_mut().map(|(name, warm)| {
            let node = self.topology.node(name);
            let startup = node.and_then(|n| n.config.clone());
            let daemons = node.map(|n| n.daemons.clone()).unwrap_or_default();
            async move {
                let t = Instant::now();
                warm.adopt(name, &daemons, startup.as_deref()).await.map(|()| t.elapsed())
            }
        });
        for result in futures::future::join_all(adopted).await {
            each.push(result?);
        }
        let mut starts = Vec::new();
        for (name, node) in self.topology.nodes() {
            if node.kind != NodeKind::Frr || self.pooled.contains_key(name) {
                continue;
            }
            let ns = self.node(name)?.ns.clone();
            let name = name.to_string();
            let node = node.clone();
            starts.push(async move {
                let t = Instant::now();
                let frr = Frr::start(&name, &ns, &name, &node.daemons, node.config.as_deref()).await?;
                Ok::<_, NetworkError>((name, frr, t.elapsed()))
            });
        }
        // Collect every result, so an instance that started is kept (and stopped on drop)
        // even when another failed.
        let mut first_error = None;
        for result in futures::future::join_all(starts).await {
            match result {
                Ok((name, frr, took)) => {
                    self.frr.insert(name, frr);
                    each.push(took);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(each.iter().sum::<Duration>() / (each.len().max(1) as u32)),
        }
    }

    /// The FRR instance of an `frr` node.
    pub fn frr(&self, node: &str) -> Option<&Frr> {
        self.frr.get(node).or_else(|| self.pooled.get(node).map(Warm::frr))
    }

    /// Whether `node` is a router from a warm pool.
    pub fn is_pooled(&self, node: &str) -> bool {
        self.pooled.contains_key(node)
    }

    fn node(&self, name: &str) -> Result<&NodeNs, NetworkError> {
        self.nodes
            .get(name)
            .ok_or_else(|| NetworkError::Build { what: name.into(), message: "no such node".into() })
    }

    async fn configure(&self) -> Result<(), NetworkError> {
        // Every interface gets an index chosen here, so no namespace's links need listing
        // afterwards (a dump per namespace, and every message of it parsed, costs more than
        // the requests themselves).
        let mut index: HashMap<(&str, &str), u32> = HashMap::new();
        for (name, node) in self.topology.nodes() {
            if node.kind == NodeKind::Bridge {
                index.insert((name, name), BRIDGE_INDEX);
            }
        }
        // Each veth is created from its bridge's side when it has one, already a port of the
        // bridge and up: two requests fewer per link, each of which would take the kernel's
        // routing lock that a previous network's teardown is still holding.
        let mut ends = Vec::new();
        // The ends still to bring up (and, on a bridge, to enslave) from their own namespace:
        // all but those a bridge creates.
        let mut to_raise: HashMap<&str, Vec<(&str, u32)>> = HashMap::new();
        for (i, link) in self.topology.topology.links.iter().enumerate() {
            let [a, b] = &link.endpoints;
            let a = a.split_once(':').unwrap_or((a, ""));
            let b = b.split_once(':').unwrap_or((b, ""));
            let is_bridge = |n: &str| self.topology.node(n).is_some_and(|n| n.kind == NodeKind::Bridge);
            let (local, peer) = if !is_bridge(a.0) && is_bridge(b.0) { (b, a) } else { (a, b) };
            // Distinct interface indexes for the two ends. The kernel handles a link event at
            // once only for a device whose peer's index differs from its own; with equal indexes
            // (both ends the 2nd device of their namespace, say) the event waits for the
            // rate-limited link watcher, up to a second, and so would readiness.
            let first = FIRST_VETH_INDEX + 2 * i as u32;
            index.insert(local, first);
            index.insert(peer, first + 1);
            if !is_bridge(local.0) {
                to_raise.entry(local.0).or_default().push((local.1, first));
            }
            to_raise.entry(peer.0).or_default().push((peer.1, first + 1));
            ends.push((local, peer, link.mtu, is_bridge(local.0)));
        }
        let idx = |node: &str, iface: &str| {
            index.get(&(node, iface)).copied().ok_or_else(|| NetworkError::Build {
                what: format!("{node}:{iface}"),
                message: "no such interface in the topology".into(),
            })
        };

        // Loopbacks and bridges first: links attach to bridges.
        let mut first = Vec::new();
        for (name, node) in self.topology.nodes() {
            let ns = self.node(name)?;
            let rtnl = ns.rtnl.clone();
            let name = name.to_string();
            let kind = node.kind;
            first.push(async move {
                rtnl.link()
                    .set(LinkUnspec::new_with_index(LOOPBACK_INDEX).up().build())
                    .execute()
                    .await
                    .map_err(build_err(format!("{name}: lo up")))?;
                if kind == NodeKind::Bridge {
                    let bridge = LinkBridge::new(&name)
                        .index(BRIDGE_INDEX)
                        .forward_delay(0)
                        .stp_state(BridgeStpState::Disabled)
                        .up()
                        .build();
                    rtnl.link().add(bridge).execute().await.map_err(build_err(format!("{name}: bridge")))?;
                }
                Ok::<_, NetworkError>(())
            });
        }
        try_join_all(first).await?;

        let mut links = Vec::new();
        for ((local_node, local_if), (peer_node, peer_if), mtu, bridged) in ends {
            let local_ns = self.node(local_node)?;
            let peer_ns = self.node(peer_node)?;
            let peer_fd = File::open(netns::ns_path(&peer_ns.ns)).map_err(|e| NetworkError::Build {
                what: format!("{peer_node}:{peer_if}"),
                message: e.to_string(),
            })?;
            let rtnl = local_ns.rtnl.clone();
            let what = format!("link {local_node}:{local_if} <-> {peer_node}:{peer_if}");
            let index = idx(local_node, local_if)?;
            // One queue each way, asked for outright: left to the kernel, veth sizes its queues
            // for every possible CPU and then cuts them to one, and each cut waits for an RCU
            // grace period.
            let mut peer = LinkMessageBuilder::<LinkUnspec>::new()
                .name(peer_if.to_string())
                .index(index + 1)
                .append_extra_attribute(LinkAttribute::NumTxQueues(1))
                .append_extra_attribute(LinkAttribute::NumRxQueues(1));
            if let Some(mtu) = mtu {
                peer = peer.mtu(mtu);
            }
            // The peer is brought up later, from its own namespace: the kernel refuses
            // (ENOTCONN) to bring a peer up while creating it in another namespace.
            let peer = peer.setns_by_fd(peer_fd.as_raw_fd()).build();
            let mut msg = LinkMessageBuilder::<LinkVeth>::new_with_info_kind(InfoKind::Veth)
                .name(local_if.to_string())
                .index(index)
                .append_extra_attribute(LinkAttribute::NumTxQueues(1))
                .append_extra_attribute(LinkAttribute::NumRxQueues(1));
            if let Some(mtu) = mtu {
                msg = msg.mtu(mtu);
            }
            if bridged {
                msg = msg.controller(BRIDGE_INDEX).up();
            }
            let msg = msg.set_info_data(InfoData::Veth(InfoVeth::Peer(peer))).build();
            links.push(async move {
                let result = rtnl.link().add(msg).execute().await.map_err(build_err(what));
                drop(peer_fd);
                result
            });
        }
        try_join_all(links).await?;

        // Per node: the ports not made by their bridge, addresses, routes.
        let mut per_node = Vec::new();
        for (name, node) in self.topology.nodes() {
            let ns = self.node(name)?;
            let rtnl = ns.rtnl.clone();
            let ports: Vec<(String, u32)> = to_raise
                .get(name)
                .map(|ends| ends.iter().map(|(iface, index)| (iface.to_string(), *index)).collect())
                .unwrap_or_default();
            let mut addresses = Vec::new();
            for (iface, addr) in &node.interfaces {
                let cidr = Cidr::parse(addr).ok_or_else(|| NetworkError::Build {
                    what: format!("{name}:{iface}"),
                    message: format!("bad address {addr}"),
                })?;
                addresses.push((idx(name, iface)?, cidr, format!("{name}:{iface} address {addr}")));
            }
            let mut routes = Vec::new();
            for route in &node.routes {
                let mut msg = RouteMessageBuilder::<Ipv4Addr>::new();
                if route.dst != "default" {
                    let dst = Cidr::parse(&route.dst).ok_or_else(|| NetworkError::Build {
                        what: format!("{name}: route"),
                        message: format!("bad dst {}", route.dst),
                    })?;
                    msg = msg.destination_prefix(dst.addr, dst.len);
                }
                if let Some(via) = route.via {
                    msg = msg.gateway(via);
                }
                if let Some(dev) = &route.dev {
                    msg = msg.output_interface(idx(name, dev)?);
                }
                if let Some(metric) = route.metric {
                    msg = msg.priority(metric);
                }
                routes.push((msg.build(), format!("{name}: route {}", route.dst)));
            }
            let name = name.to_string();
            let bridge = node.kind == NodeKind::Bridge;
            per_node.push(async move {
                for (port, index) in &ports {
                    let mut msg = LinkUnspec::new_with_index(*index).up();
                    if bridge {
                        msg = msg.controller(BRIDGE_INDEX);
                    }
                    rtnl.link()
                        .set(msg.build())
                        .execute()
                        .await
                        .map_err(build_err(format!("{name}:{port} up")))?;
                }
                for (index, cidr, what) in addresses {
                    let mut add = rtnl.address().add(index, IpAddr::V4(cidr.addr), cidr.len);
                    // rtnetlink derives a broadcast address from the prefix; on a /31 that is
                    // the peer's address (RFC 3021 links have none), as `ip addr add` knows.
                    if cidr.len == 31 {
                        add.message_mut().attributes.retain(|a| !matches!(a, AddressAttribute::Broadcast(_)));
                    }
                    add.execute().await.map_err(build_err(what))?;
                }
                for (msg, what) in routes {
                    rtnl.route().add(msg).execute().await.map_err(build_err(what))?;
                }
                Ok::<_, NetworkError>(())
            });
        }
        try_join_all(per_node).await?;
        Ok(())
    }

    /// Waits until every interface of every node (bridges included) is operationally up.
    /// Right after creation, ports report NO-CARRIER and drop packets until the kernel's link
    /// watcher has run; pinging before that would show a broken network.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), NetworkError> {
        let start = Instant::now();
        loop {
            let down = self.unsettled(true).await?;
            if down.is_empty() {
                return Ok(());
            }
            if start.elapsed() >= timeout {
                return Err(NetworkError::NotReady { waited: start.elapsed(), down: down.join(", ") });
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits (up to `timeout`) until the kernel has caught up with the latest link changes:
    /// every interface that is up and has carrier is operationally up. An interface someone
    /// brought up starts forwarding only once the kernel's link watcher has processed it,
    /// which under load (many links changing at once) can take up to a second; a pingmesh
    /// taken before would report a repair as a failure. Interfaces left down are fine.
    /// Returns the interfaces still pending at the timeout (empty when settled).
    pub async fn settle(&self, timeout: Duration) -> Result<Vec<String>, NetworkError> {
        let start = Instant::now();
        loop {
            let pending = self.unsettled(false).await?;
            if pending.is_empty() || start.elapsed() >= timeout {
                return Ok(pending);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Interfaces not yet operationally up: all of them (`strict`, at build time) or only
    /// those that are administratively up with carrier.
    async fn unsettled(&self, strict: bool) -> Result<Vec<String>, NetworkError> {
        // Every node's links are listed at once: one dump per namespace, on its own socket.
        let dumps = self.topology.nodes().map(|(name, _)| async move {
            let ns = self.node(name)?;
            let mut down = Vec::new();
            let mut links = ns.rtnl.link().get().execute();
            while let Some(msg) = links.try_next().await.map_err(build_err(format!("{name}: list links")))? {
                let mut ifname = String::new();
                let mut state = State::Unknown;
                let mut carrier = false;
                for attr in &msg.attributes {
                    match attr {
                        LinkAttribute::IfName(n) => ifname = n.clone(),
                        LinkAttribute::OperState(s) => state = *s,
                        LinkAttribute::Carrier(c) => carrier = *c != 0,
                        _ => {}
                    }
                }
                // A bridge device's operstate stays UNKNOWN until the kernel's rate-limited
                // link watcher gets to it (up to 1 s), but it forwards as soon as it has
                // carrier, which it gets when its first port is forwarding. Its ports are
                // veths, whose events are handled at once and which must be UP.
                let bridge_forwarding = ifname == *name && state == State::Unknown && carrier;
                let admin_up = msg.header.flags.contains(LinkFlags::Up);
                let expected = strict || (admin_up && carrier);
                if ifname != "lo" && expected && state != State::Up && !bridge_forwarding {
                    down.push(format!("{name}:{ifname} ({state:?})"));
                }
            }
            Ok::<_, NetworkError>(down)
        });
        Ok(try_join_all(dumps).await?.concat())
    }

    /// Deletes, on every node, the neighbour entries (ARP and NDP) that no interface of the
    /// network answers to any more: an address with a link-layer address that no interface
    /// holding that address has. Returns how many went.
    ///
    /// After an address is deleted or moved, the neighbours keep the old entry until Linux's
    /// neighbour state machine fails it, 23-53 s later with the default timers, and until then
    /// still reach through it (a gateway's MAC address is all a host needs to send through it).
    /// A user who reports a fault "since this morning" met the network after its caches caught
    /// up; this catches them up at once, so that a change is judged by what it does, not by
    /// when a cache times out. Entries of an address that is still held where they point,
    /// incomplete ones and permanent ones are left alone.
    pub async fn forget_stale_neighbours(&self) -> Result<usize, NetworkError> {
        let held = self.topology.nodes().map(|(name, _)| async move {
            let ns = self.node(name)?;
            let mut macs = HashMap::new();
            let mut links = ns.rtnl.link().get().execute();
            while let Some(msg) = links.try_next().await.map_err(build_err(format!("{name}: list links")))? {
                for attr in msg.attributes {
                    if let LinkAttribute::Address(mac) = attr {
                        macs.insert(msg.header.index, mac);
                    }
                }
            }
            let mut pairs = Vec::new();
            let mut addresses = ns.rtnl.address().get().execute();
            while let Some(msg) =
                addresses.try_next().await.map_err(build_err(format!("{name}: list addresses")))?
            {
                // IFA_LOCAL is the interface's own address; IFA_ADDRESS is the peer's on a
                // point-to-point IPv4 interface, and the only one IPv6 sends.
                let local = msg.attributes.iter().find_map(|a| match a {
                    AddressAttribute::Local(ip) => Some(*ip),
                    _ => None,
                });
                let address = local.or_else(|| {
                    msg.attributes.iter().find_map(|a| match a {
                        AddressAttribute::Address(ip) => Some(*ip),
                        _ => None,
                    })
                });
                if let (Some(ip), Some(mac)) = (address, macs.get(&msg.header.index)) {
                    pairs.push((ip, mac.clone()));
                }
            }
            Ok::<_, NetworkError>(pairs)
        });
        let held: HashSet<(IpAddr, Vec<u8>)> = try_join_all(held).await?.into_iter().flatten().collect();
        let held = &held;
        let forgets = self.topology.nodes().map(|(name, _)| async move {
            let ns = self.node(name)?;
            let mut stale = Vec::new();
            let mut entries = ns.rtnl.neighbours().get().execute();
            while let Some(msg) =
                entries.try_next().await.map_err(build_err(format!("{name}: list neighbours")))?
            {
                if matches!(msg.header.state, NeighbourState::Noarp | NeighbourState::Permanent) {
                    continue;
                }
                let mut ip = None;
                let mut mac = None;
                for attr in &msg.attributes {
                    match attr {
                        NeighbourAttribute::Destination(NeighbourAddress::Inet(a)) => {
                            ip = Some(IpAddr::V4(*a))
                        }
                        NeighbourAttribute::Destination(NeighbourAddress::Inet6(a)) => {
                            ip = Some(IpAddr::V6(*a))
                        }
                        NeighbourAttribute::LinkLocalAddress(m) => mac = Some(m.clone()),
                        _ => {}
                    }
                }
                if let (Some(ip), Some(mac)) = (ip, mac)
                    && !held.contains(&(ip, mac))
                {
                    stale.push((ip, msg));
                }
            }
            let n = stale.len();
            for (ip, msg) in stale {
                match ns.rtnl.neighbours().del(msg).execute().await {
                    Ok(()) => tracing::debug!(node = name, %ip, "stale neighbour entry forgotten"),
                    // Gone already: the kernel's own timers got there first.
                    Err(rtnetlink::Error::NetlinkError(e))
                        if e.raw_code() == -(nix::Error::ENOENT as i32) => {}
                    Err(e) => return Err(build_err(format!("{name}: forget neighbour {ip}"))(e)),
                }
            }
            Ok::<_, NetworkError>(n)
        });
        Ok(try_join_all(forgets).await?.into_iter().sum())
    }

    /// Runs one pingmesh over the hosts and routers.
    pub async fn pingmesh(&self, options: &pingmesh::Options) -> Matrix {
        let pingers: Vec<Arc<Pinger>> = self
            .mesh
            .iter()
            .filter_map(|(n, _)| self.nodes.get(n).and_then(|ns| ns.pinger.clone()))
            .collect();
        pingmesh::run(&self.mesh, &pingers, options).await
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The namespace of `node`, for [`crate::exec::run`].
    pub fn ns_name(&self, node: &str) -> Option<&str> {
        self.nodes.get(node).map(|n| n.ns.as_str())
    }

    /// The episode prefix shared by every namespace of this network.
    pub fn prefix(&self) -> &str {
        self.episode.prefix()
    }

    /// Deletes every namespace now (also done on drop).
    pub fn teardown(&mut self) {
        for (_, mut frr) in self.frr.drain() {
            frr.stop();
        }
        for c in self.connections.drain(..) {
            c.abort();
        }
        // Pooled routers go back for their reset (their links are deleted there, which also
        // removes the peers in this episode's namespaces).
        for (name, warm) in self.pooled.drain() {
            self.nodes.remove(&name);
            match &self.pool {
                Some(pool) => pool.give_back(warm),
                None => drop(warm),
            }
        }
        self.episode.teardown();
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        self.teardown();
    }
}
