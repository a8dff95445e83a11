//! The §C.1 topology: one router `r0`, 2-4 subnets (one switch each), 2-4 hosts per subnet.
//!
//! Names follow Mininet's, so what the agent sees reads like the seed's examples: router
//! interface `r0-eth{i}` faces subnet `i` (1-based), switch `s{i}`, hosts `h1`, `h2`... numbered
//! across subnets, each with one interface `h{n}-eth0`. Subnet `i` is `192.168.{i}.0/24`; the
//! router is `.1`, the hosts `.100`, `.101`...

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::topology::indexmap_lite::OrderedMap;
use crate::topology::{Body, IPV4_ONLY, Link, Node, NodeKind, Route, Topology};

/// The router's name.
pub const ROUTER: &str = "r0";

/// One subnet: its switch, the router interface facing it, its hosts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subnet {
    /// 1-based index: subnet `i` is `192.168.i.0/24`.
    pub index: u8,
    pub switch: String,
    pub router_if: String,
    pub hosts: Vec<String>,
}

impl Subnet {
    pub fn network(&self) -> Ipv4Addr {
        Ipv4Addr::new(192, 168, self.index, 0)
    }
    /// `192.168.i.0/24`
    pub fn cidr(&self) -> String {
        format!("{}/24", self.network())
    }
    /// The router's address in this subnet, `192.168.i.1`.
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::new(192, 168, self.index, 1)
    }
    /// The address of the `j`th host (0-based) of this subnet, `192.168.i.(100+j)`.
    pub fn host_addr(&self, j: usize) -> Ipv4Addr {
        Ipv4Addr::new(192, 168, self.index, 100 + j as u8)
    }
}

/// The whole §C.1 layout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    pub subnets: Vec<Subnet>,
}

impl Layout {
    /// `subnets` subnets (2-4) of `hosts_per_subnet` hosts (2-4).
    pub fn new(subnets: u8, hosts_per_subnet: u8) -> Self {
        let mut next_host = 1;
        let subnets = (1..=subnets)
            .map(|i| {
                let hosts = (0..hosts_per_subnet)
                    .map(|_| {
                        let name = format!("h{next_host}");
                        next_host += 1;
                        name
                    })
                    .collect();
                Subnet { index: i, switch: format!("s{i}"), router_if: format!("{ROUTER}-eth{i}"), hosts }
            })
            .collect();
        Self { subnets }
    }

    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.subnets.iter().flat_map(|s| s.hosts.iter().map(String::as_str))
    }
}

impl Layout {
    /// The layout as a topology: `r0` (router), one bridge per subnet, hosts with a default
    /// route via the router. Switch ports are `s{i}-eth1` (to the router), `s{i}-eth2`... (hosts).
    pub fn topology(&self) -> Topology {
        let mut nodes = Vec::new();
        let mut links = Vec::new();
        let router_ifs =
            self.subnets.iter().map(|s| (s.router_if.clone(), format!("{}/24", s.gateway()))).collect();
        // No ICMP redirects from the router: with a wrong route pointing at a host of the same
        // subnet, a redirect would make the hosts cache that path, and the network would stay
        // broken for minutes after the router itself is repaired.
        let sysctls =
            [("net.ipv4.conf.all.send_redirects", "0"), ("net.ipv4.conf.default.send_redirects", "0")]
                .into_iter()
                .chain(IPV4_ONLY) // the application is IPv4 (§C)
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        nodes.push((
            ROUTER.to_string(),
            Node {
                kind: NodeKind::Router,
                interfaces: router_ifs,
                routes: vec![],
                sysctls,
                daemons: vec![],
                config: None,
            },
        ));
        for subnet in &self.subnets {
            nodes.push((
                subnet.switch.clone(),
                Node {
                    kind: NodeKind::Bridge,
                    interfaces: Default::default(),
                    routes: vec![],
                    sysctls: Node::ipv4_only_sysctls(),
                    daemons: vec![],
                    config: None,
                },
            ));
            links.push(Link {
                endpoints: [
                    format!("{ROUTER}:{}", subnet.router_if),
                    format!("{}:{}-eth1", subnet.switch, subnet.switch),
                ],
                mtu: None,
            });
        }
        for subnet in &self.subnets {
            for (j, host) in subnet.hosts.iter().enumerate() {
                let iface = format!("{host}-eth0");
                let interfaces =
                    [(iface.clone(), format!("{}/24", subnet.host_addr(j)))].into_iter().collect();
                let routes = vec![Route {
                    dst: "default".into(),
                    via: Some(subnet.gateway()),
                    dev: None,
                    metric: None,
                }];
                nodes.push((
                    host.clone(),
                    Node {
                        kind: NodeKind::Host,
                        interfaces,
                        routes,
                        sysctls: Node::ipv4_only_sysctls(),
                        daemons: vec![],
                        config: None,
                    },
                ));
                links.push(Link {
                    endpoints: [
                        format!("{host}:{iface}"),
                        format!("{}:{}-eth{}", subnet.switch, subnet.switch, j + 2),
                    ],
                    mtu: None,
                });
            }
        }
        // Mininet lists the hosts first and the router last in pingall (the seed's example);
        // node order is mesh order.
        nodes.rotate_left(1 + self.subnets.len());
        Topology { name: "routing".into(), topology: Body { nodes: OrderedMap(nodes), links } }
    }
}
