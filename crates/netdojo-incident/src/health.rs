//! Running a lab's health checks on the live network, every one from inside the lab: pings,
//! traces, DNS queries and HTTP requests are sent from the checking node's namespace
//! (netdojo-linux's [`probe`]), and protocol state is read from the router's own daemons
//! (a `show ... json` on their vty sockets, what vtysh would send). Nothing is sent from the
//! root namespace.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use netdojo_linux::network::Network;
use netdojo_linux::probe;
use netdojo_linux::topology::Cidr;

use crate::lab::{Check, Lab};

/// How long one probe waits before its check counts as failing. Probes answer in well under a
/// millisecond in a healthy lab; the wait only bounds a failing check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Patience {
    pub probe: Duration,
}

impl Patience {
    /// For a verdict: long enough that a loaded machine does not fail a healthy check.
    pub const VERDICT: Patience = Patience { probe: Duration::from_millis(1000) };
    /// For polling until a state is reached: a failing round costs little, the next round
    /// retries.
    pub const POLL: Patience = Patience { probe: Duration::from_millis(150) };
    /// For a check that failed when last looked at, in a wait that follows it: whether it still
    /// fails. A check that heals answers within a millisecond here (the probe reads a reply the
    /// kernel queued while its thread waited to run, see netdojo-linux's `probe`), so a third of
    /// a round's patience tells a healed check from a broken one; what it could miss, a healed
    /// check whose answer took longer, is seen by the wait's next round.
    pub const STILL: Patience = Patience { probe: Duration::from_millis(50) };

    /// This patience for a check in a round that follows a look in which it `failed`:
    /// [`STILL`](Self::STILL)'s, where that is the shorter.
    pub fn after(self, failed: bool) -> Patience {
        if failed && Self::STILL.probe < self.probe { Self::STILL } else { self }
    }
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    /// [`Check::name`].
    pub name: String,
    pub passed: bool,
    /// What was seen, for people: the hops of a trace, the state of a session...
    pub detail: String,
    /// Failing in a state its protocol leaves by itself within a retransmit interval: an OSPF
    /// adjacency exchanging its database (ExStart, Exchange, Loading). See
    /// [`crate::env::EXCHANGE_GRACE`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub settling: bool,
}

/// Every check of a lab, once, in the lab's order.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Health {
    pub results: Vec<CheckResult>,
}

impl Health {
    pub fn all_passed(&self) -> bool {
        self.results.iter().all(|r| r.passed)
    }

    /// The names of the failing checks.
    pub fn failing(&self) -> Vec<&str> {
        self.results.iter().filter(|r| !r.passed).map(|r| r.name.as_str()).collect()
    }

    /// The names of the failing checks, as a set (what a wait compares and looks at again).
    pub fn failing_set(&self) -> BTreeSet<String> {
        self.results.iter().filter(|r| !r.passed).map(|r| r.name.clone()).collect()
    }

    /// The names of the passing checks.
    pub fn passing(&self) -> Vec<&str> {
        self.results.iter().filter(|r| r.passed).map(|r| r.name.as_str()).collect()
    }

    /// Whether the check named `name` passed (`None`: no such check).
    pub fn passed(&self, name: &str) -> Option<bool> {
        self.results.iter().find(|r| r.name == name).map(|r| r.passed)
    }

    /// One line per failing check with its detail.
    pub fn describe_failing(&self) -> String {
        self.results
            .iter()
            .filter(|r| !r.passed)
            .map(|r| format!("{} ({})", r.name, r.detail))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Which node owns which address: a trace's hops are named by it. Built from the topology's
/// interface addresses, the `ip address`/`ipv6 address` lines of the routers' configurations and
/// the `addr add` commands of the lab's `linux` lines.
#[derive(Debug, Clone, Default)]
pub struct AddressBook {
    owner: BTreeMap<IpAddr, String>,
    first: BTreeMap<String, IpAddr>,
}

impl AddressBook {
    pub fn of(lab: &Lab) -> Self {
        let mut book = Self::default();
        for (name, node) in lab.topology.nodes.iter() {
            for addr in node.interfaces.values() {
                if let Some(c) = Cidr::parse(addr) {
                    book.add(name, IpAddr::V4(c.addr));
                }
            }
        }
        for (name, node) in lab.topology.nodes.iter() {
            for line in node.config.as_deref().unwrap_or_default().lines() {
                let line = line.trim();
                let rest = line.strip_prefix("ip address ").or_else(|| line.strip_prefix("ipv6 address "));
                if let Some(addr) = rest.and_then(|r| r.split('/').next()).and_then(|a| a.trim().parse().ok())
                {
                    book.add(name, addr);
                }
            }
        }
        for (name, lines) in &lab.linux {
            for line in lines {
                let words: Vec<&str> = line.split_whitespace().collect();
                if let Some(i) = words.windows(2).position(|w| w[0] == "add" && w[1].contains('/'))
                    && words[..i].iter().any(|w| w.starts_with("addr"))
                    && let Some(addr) = words[i + 1].split('/').next().and_then(|a| a.parse().ok())
                {
                    book.add(name, addr);
                }
            }
        }
        book
    }

    fn add(&mut self, node: &str, addr: IpAddr) {
        self.owner.entry(addr).or_insert_with(|| node.to_string());
        if addr.is_ipv4() {
            self.first.entry(node.to_string()).or_insert(addr);
        }
    }

    /// The node that owns `addr`.
    pub fn owner(&self, addr: IpAddr) -> Option<&str> {
        self.owner.get(&addr).map(String::as_str)
    }

    /// An address or a node's name (its first IPv4 address).
    pub fn resolve(&self, target: &str) -> Option<IpAddr> {
        target.parse().ok().or_else(|| self.first.get(target).copied())
    }
}

/// Runs every check of `lab` once, concurrently.
pub async fn run_all(network: &Network, lab: &Lab, book: &AddressBook, patience: Patience) -> Health {
    run_all_after(network, lab, book, patience, &BTreeSet::new()).await
}

/// [`run_all`], for a round that follows a look at the lab in which the checks of `failing`
/// failed: their probes wait [`Patience::STILL`], every other probe `patience`. In a lab that
/// stays broken (a partial repair, a prepared lab handed over) the failing checks are most of a
/// round's time, and a check that newly fails still has a round's full patience.
pub async fn run_all_after(
    network: &Network,
    lab: &Lab,
    book: &AddressBook,
    patience: Patience,
    failing: &BTreeSet<String>,
) -> Health {
    // A probe through a neighbour entry of an address that was deleted or moved still passes
    // until the kernel fails the entry, 23-53 s later: judged on it, a change would show its
    // effect (or a fault its symptom) only in the middle of a later step, and that step would
    // be blamed (docs/incident.md, "A removed address and the neighbours' caches").
    if let Err(e) = network.forget_stale_neighbours().await {
        tracing::warn!(lab = %lab.name, error = %e, "stale neighbour entries not forgotten");
    }
    let runs = lab.checks.iter().map(|c| run(network, book, c, patience.after(failing.contains(&c.name()))));
    Health { results: futures::future::join_all(runs).await }
}

/// `health` (a round taken with [`Patience::POLL`]) with each failing check that sends packets
/// run again with [`Patience::VERDICT`]: what a wait that ends unmet returns. A probe that
/// waits 150 ms fails on a loaded machine now and then although the lab is healthy (a probe's
/// thread not scheduled in time), and a wait that ends on such a round would judge a healthy
/// lab broken: a step unsafe, or a repair not done. The checks that read a router's state
/// answer the same whatever the patience, and are kept as they are.
pub async fn confirm(network: &Network, lab: &Lab, book: &AddressBook, health: Health) -> Health {
    confirm_after(network, lab, book, health, &BTreeSet::new()).await
}

/// [`confirm`], where the checks of `failing_throughout` failed before the wait began and in
/// every round of it: those are looked at once more with [`Patience::POLL`], not a verdict's
/// patience. A healthy check misses one round's window now and then, never every round of a
/// wait (a step that changed nothing visible waits out `settle` in some twenty rounds), and a
/// verdict's second for each such check was most of the wait's cost past `settle`.
pub async fn confirm_after(
    network: &Network,
    lab: &Lab,
    book: &AddressBook,
    mut health: Health,
    failing_throughout: &BTreeSet<String>,
) -> Health {
    let again: Vec<_> =
        lab.checks.iter().filter(|c| !reads_state(c) && health.passed(&c.name()) == Some(false)).collect();
    if again.is_empty() {
        return health;
    }
    let rerun = futures::future::join_all(again.into_iter().map(|c| {
        let patience =
            if failing_throughout.contains(&c.name()) { Patience::POLL } else { Patience::VERDICT };
        run(network, book, c, patience)
    }))
    .await;
    for result in rerun {
        if let Some(r) = health.results.iter_mut().find(|r| r.name == result.name) {
            *r = result;
        }
    }
    health
}

/// Runs the checks that read a router's own state (adjacencies, sessions, routes: answers on
/// its daemons' vty sockets, microseconds each) and none of those that send packets; `None`
/// when the lab has none. While one of these fails the lab has not converged, and a round of
/// probes, each waiting out its patience for a reply that cannot come, would only slow the
/// next look.
pub async fn run_state(network: &Network, lab: &Lab, book: &AddressBook) -> Option<Health> {
    let runs: Vec<_> =
        lab.checks.iter().filter(|c| reads_state(c)).map(|c| run(network, book, c, Patience::POLL)).collect();
    if runs.is_empty() {
        return None;
    }
    Some(Health { results: futures::future::join_all(runs).await })
}

/// A check that reads a router's own state (an adjacency, a session, a route) rather than
/// sending packets.
fn reads_state(check: &Check) -> bool {
    matches!(check, Check::Ospf { .. } | Check::Ospf6 { .. } | Check::Bgp { .. } | Check::Route { .. })
}

/// Runs one check.
pub async fn run(network: &Network, book: &AddressBook, check: &Check, patience: Patience) -> CheckResult {
    let seen = match evaluate(network, book, check, patience).await {
        Ok(seen) => seen,
        Err(why) => (false, why).into(),
    };
    CheckResult { name: check.name(), passed: seen.passed, detail: seen.detail, settling: seen.settling }
}

/// What one check saw.
struct Seen {
    passed: bool,
    detail: String,
    settling: bool,
}

impl From<(bool, String)> for Seen {
    fn from((passed, detail): (bool, String)) -> Self {
        Seen { passed, detail, settling: false }
    }
}

/// The OSPF neighbour states (FRR's `nbrState` or `state`, `Full/DR`, `ExStart/-`...) through
/// which an adjacency exchanges its database: it leaves them by itself, into Full, unless a
/// packet of the exchange is lost, which is sent again after the retransmit interval.
const EXCHANGING: [&str; 3] = ["ExStart", "Exchange", "Loading"];

/// An adjacency check from the states of the neighbour's entries (one per interface it is seen
/// on): passed when one is Full, settling when none is and one is exchanging its database.
fn adjacency(states: Vec<String>) -> Seen {
    let passed = states.iter().any(|s| s.starts_with("Full"));
    let settling = !passed && states.iter().any(|s| EXCHANGING.iter().any(|e| s.starts_with(e)));
    let detail = if states.is_empty() { "no such neighbour".into() } else { states.join(", ") };
    Seen { passed, detail, settling }
}

fn ns_of<'a>(network: &'a Network, node: &str) -> Result<&'a str, String> {
    network.ns_name(node).ok_or_else(|| format!("no node {node}"))
}

fn resolve(book: &AddressBook, target: &str) -> Result<IpAddr, String> {
    book.resolve(target).ok_or_else(|| format!("`{target}` is neither an address nor a node with one"))
}

/// A `show` answered by one of a router's daemons, parsed.
async fn show_json(network: &Network, device: &str, daemon: &str, command: &str) -> Result<Value, String> {
    let frr = network.frr(device).ok_or_else(|| format!("{device} is not an FRR router"))?;
    let text = frr.show(daemon, command).await.map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| format!("`{command}` on {device}: not JSON ({e})"))
}

async fn evaluate(
    network: &Network,
    book: &AddressBook,
    check: &Check,
    patience: Patience,
) -> Result<Seen, String> {
    match check {
        Check::Reach { from, to } => {
            let dst = resolve(book, to)?;
            let ok =
                probe::ping(ns_of(network, from)?, dst, patience.probe).await.map_err(|e| e.to_string())?;
            Ok((ok, if ok { format!("{dst} answers") } else { format!("no echo reply from {dst}") }).into())
        }
        Check::Path { from, to, via } => {
            let dst = resolve(book, to)?;
            let trace = probe::trace(ns_of(network, from)?, dst, 16, patience.probe)
                .await
                .map_err(|e| e.to_string())?;
            let names: Vec<Option<&str>> = trace.hops.iter().map(|h| h.and_then(|a| book.owner(a))).collect();
            let shown: Vec<String> = trace
                .hops
                .iter()
                .zip(&names)
                .map(|(h, n)| match (h, n) {
                    (Some(a), Some(n)) => format!("{n}({a})"),
                    (Some(a), None) => a.to_string(),
                    (None, _) => "*".into(),
                })
                .collect();
            let mut want = via.iter().peekable();
            for name in names.iter().flatten() {
                if want.peek().is_some_and(|w| w.as_str() == *name) {
                    want.next();
                }
            }
            let in_order = want.peek().is_none();
            let detail = format!(
                "{}{}",
                shown.join(" "),
                if trace.reached { "" } else { " (destination not reached)" }
            );
            Ok((trace.reached && in_order, detail).into())
        }
        Check::Ospf { device, neighbor } => {
            let v = show_json(network, device, "ospfd", "show ip ospf neighbor json").await?;
            let states: Vec<String> = v["neighbors"][neighbor.as_str()]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|n| n["nbrState"].as_str().or_else(|| n["state"].as_str()))
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            Ok(adjacency(states))
        }
        Check::Ospf6 { device, neighbor } => {
            let v = show_json(network, device, "ospf6d", "show ipv6 ospf6 neighbor json").await?;
            let states: Vec<String> = v["neighbors"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter(|n| n["neighborId"].as_str() == Some(neighbor.as_str()))
                        .filter_map(|n| n["state"].as_str())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            Ok(adjacency(states))
        }
        Check::Bgp { device, neighbor } => {
            // The one neighbour, not all of them: a state round reads every session check's
            // router every few tens of milliseconds while a lab converges.
            let v =
                show_json(network, device, "bgpd", &format!("show bgp neighbors {neighbor} json")).await?;
            let peer = &v[neighbor.as_str()];
            if peer.is_null() {
                return Ok((false, "no such neighbour configured".into()).into());
            }
            let state = peer["bgpState"].as_str().unwrap_or("unknown");
            let mut detail = state.to_string();
            if let Some(why) = peer["lastResetDueTo"].as_str().filter(|_| state != "Established") {
                detail.push_str(&format!(" (last reset: {why})"));
            }
            Ok((state == "Established", detail).into())
        }
        Check::Route { device, prefix, protocol, nexthop } => {
            let family = if prefix.contains(':') { "ipv6" } else { "ip" };
            let v =
                show_json(network, device, "zebra", &format!("show {family} route {prefix} json")).await?;
            let entries = v[prefix.as_str()].as_array().cloned().unwrap_or_default();
            let Some(best) = entries.iter().find(|e| e["selected"].as_bool() == Some(true)) else {
                return Ok((
                    false,
                    if entries.is_empty() { "no route".into() } else { "no selected route".into() },
                )
                    .into());
            };
            let proto = best["protocol"].as_str().unwrap_or("?");
            let hops: Vec<&str> = best["nexthops"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|h| h["ip"].as_str().or_else(|| h["interfaceName"].as_str()))
                        .collect()
                })
                .unwrap_or_default();
            let detail = format!("{proto} via {}", if hops.is_empty() { "-".into() } else { hops.join(",") });
            let proto_ok = protocol.as_deref().is_none_or(|p| p == proto);
            let hop_ok = nexthop.as_deref().is_none_or(|n| hops.contains(&n));
            Ok((proto_ok && hop_ok, detail).into())
        }
        Check::Dns { from, server, name, address } => {
            let server_ip = resolve(book, server)?;
            let want: IpAddr = address.parse().map_err(|_| format!("`{address}` is not an address"))?;
            let answer = probe::dns(
                ns_of(network, from)?,
                SocketAddr::new(server_ip, 53),
                name,
                want.is_ipv6(),
                patience.probe,
            )
            .await
            .map_err(|e| e.to_string())?;
            match answer {
                Ok(addrs) => {
                    let shown: Vec<String> = addrs.iter().map(IpAddr::to_string).collect();
                    let detail = if shown.is_empty() { "no address".into() } else { shown.join(", ") };
                    Ok((addrs.contains(&want), detail).into())
                }
                Err(why) => Ok((false, why).into()),
            }
        }
        Check::Http { from, address, port } => {
            let ip = resolve(book, address)?;
            let answer = probe::http_get(ns_of(network, from)?, SocketAddr::new(ip, *port), patience.probe)
                .await
                .map_err(|e| e.to_string())?;
            match answer {
                Ok(code) => Ok((code == 200, format!("HTTP {code}")).into()),
                Err(why) => Ok((false, why).into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_that_failed_is_looked_at_again_with_still_s_patience_never_a_longer_one() {
        assert_eq!(Patience::POLL.after(true), Patience::STILL);
        assert_eq!(Patience::VERDICT.after(true), Patience::STILL);
        assert_eq!(Patience::POLL.after(false), Patience::POLL);
        let brief = Patience { probe: Duration::from_millis(20) };
        assert_eq!(brief.after(true), brief, "a shorter patience is kept");
    }

    const LAB: &str = r#"
name: book
ipv6: true
topology:
  nodes:
    r1:
      kind: frr
      interfaces: { eth1: 10.0.12.1/30, eth2: 10.1.1.1/24 }
      config: |
        interface lo
         ip address 10.255.0.1/32
         ipv6 address 2001:db8::1/128
        exit
    r2: { kind: frr, interfaces: { eth1: 10.0.12.2/30 } }
    h1: { kind: host, interfaces: { eth0: 10.1.1.10/24 }, routes: [ { dst: default, via: 10.1.1.1 } ] }
  links:
    - endpoints: ["r1:eth1", "r2:eth1"]
    - endpoints: ["r1:eth2", "h1:eth0"]
linux:
  h1: ["ip -6 addr add 2001:db8:1::10/64 dev eth0", "ip -6 route add default via 2001:db8:1::1"]
checks:
  - { check: reach, from: h1, to: r2 }
"#;

    #[test]
    fn the_address_book_names_every_address_of_the_lab() {
        let lab = Lab::from_str_named(LAB, "book.yml").expect("a lab");
        let book = AddressBook::of(&lab);
        let owner = |a: &str| book.owner(a.parse().expect("an address")).map(str::to_string);
        assert_eq!(owner("10.0.12.2").as_deref(), Some("r2"), "a topology interface");
        assert_eq!(owner("10.255.0.1").as_deref(), Some("r1"), "an `ip address` of the configuration");
        assert_eq!(owner("2001:db8::1").as_deref(), Some("r1"), "an `ipv6 address` of the configuration");
        assert_eq!(owner("2001:db8:1::10").as_deref(), Some("h1"), "an `addr add` of a linux line");
        assert_eq!(owner("2001:db8:1::1"), None, "a route's gateway is nobody's address");
        assert_eq!(book.resolve("r2"), Some("10.0.12.2".parse().expect("ip")), "a node: its first address");
        assert_eq!(book.resolve("10.9.9.9"), Some("10.9.9.9".parse().expect("ip")));
        assert_eq!(book.resolve("nobody"), None);
    }

    #[test]
    fn an_adjacency_exchanging_its_database_is_settling_and_no_other_state_is() {
        let seen = |states: &[&str]| {
            let s = adjacency(states.iter().map(|s| s.to_string()).collect());
            (s.passed, s.settling, s.detail)
        };
        assert_eq!(seen(&["Full/-"]), (true, false, "Full/-".into()));
        assert_eq!(seen(&["Full/DR", "ExStart/DROther"]), (true, false, "Full/DR, ExStart/DROther".into()));
        for exchanging in ["ExStart/-", "Exchange/DR", "Loading/Backup"] {
            assert_eq!(seen(&[exchanging]), (false, true, exchanging.into()), "{exchanging}");
        }
        // States the protocol does not leave by itself without a hello from the neighbour.
        for waiting in ["Init/-", "2-Way/DROther", "Down/-", "Attempt/-"] {
            assert_eq!(seen(&[waiting]), (false, false, waiting.into()), "{waiting}");
        }
        assert_eq!(seen(&[]), (false, false, "no such neighbour".into()));
    }

    #[test]
    fn health_names_what_fails() {
        let r = |name: &str, passed: bool| CheckResult {
            name: name.into(),
            passed,
            detail: "seen".into(),
            settling: false,
        };
        let h = Health { results: vec![r("a", true), r("b", false)] };
        assert!(!h.all_passed());
        assert_eq!(h.failing(), ["b"]);
        assert_eq!(h.passing(), ["a"]);
        assert_eq!((h.passed("a"), h.passed("b"), h.passed("c")), (Some(true), Some(false), None));
        assert_eq!(h.describe_failing(), "b (seen)");
    }
}
