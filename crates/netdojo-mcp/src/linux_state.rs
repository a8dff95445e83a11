//! The kernel state of a Linux node that a client's commands can change, read as a
//! [`Snapshot`], and put back ([`restore`]) for rollbacks and confirmed commits.
//!
//! A restore is judged by what it did, not by what it tried: after putting each part back it
//! reads the node again and compares every part with the snapshot; any difference is
//! -32085 naming the parts. So a change that cannot be undone here (a link that was deleted,
//! a qdisc kind other than tbf, an nftables table of the node's own that was edited) is
//! reported, never passed off as rolled back.
//!
//! Every command, reads and restores alike, runs through netdojo-linux's agent sandbox in the
//! node's namespace.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use netdojo_linux::exec::{self, Policy};
use serde_json::Value;

use crate::error::NetError;

/// Reads of the whole state may be long (`sysctl -a`): more room than a client's command.
const READ_CAP: usize = 4 * 1024 * 1024;

/// Sysctls the kernel changes on its own: not state a client set.
const DYNAMIC_SYSCTLS: &[&str] =
    &["net.netfilter.nf_conntrack_count", "net.ipv4.tcp_mem", "net.ipv4.udp_mem"];

/// One node's state: each part in a form that compares equal when the state is the same.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// name -> (admin up, mtu).
    pub links: BTreeMap<String, (bool, u64)>,
    /// `ip addr add` arguments: `A/P [brd B] dev X`.
    pub addrs: BTreeSet<String>,
    /// `ip route` arguments of every IPv4 route of every table (kernel ones included).
    pub routes: BTreeSet<String>,
    /// `ip rule` arguments.
    pub rules: BTreeSet<String>,
    /// Permanent neighbours: `ip neigh` arguments.
    pub neigh: BTreeSet<String>,
    /// Every net.* sysctl but the kernel's own counters.
    pub sysctl: BTreeMap<String, String>,
    /// iptables-save without comments and counters.
    pub iptables: String,
    /// nft list ruleset without counters.
    pub nft: String,
    /// device -> its qdiscs (kind, parent, options; no handles), each as JSON text.
    pub qdiscs: BTreeMap<String, Vec<String>>,
}

impl Snapshot {
    /// The parts where `self` and `other` differ.
    pub fn differences(&self, other: &Snapshot) -> Vec<&'static str> {
        let mut parts = Vec::new();
        let mut check = |name, same: bool| {
            if !same {
                parts.push(name);
            }
        };
        check("links", self.links == other.links);
        check("addresses", self.addrs == other.addrs);
        check("routes", self.routes == other.routes);
        check("rules", self.rules == other.rules);
        check("neighbours", self.neigh == other.neigh);
        check("sysctls", self.sysctl == other.sysctl);
        check("iptables", self.iptables == other.iptables);
        check("nftables", self.nft == other.nft);
        check("qdiscs", self.qdiscs == other.qdiscs);
        parts
    }
}

/// Runs the sandbox's command `line` in `ns`; its output when it exits 0.
async fn read(ns: &str, line: &str, timeout: Duration) -> Result<String, NetError> {
    read_status(ns, line, timeout, true).await
}

async fn read_status(
    ns: &str,
    line: &str,
    timeout: Duration,
    must_succeed: bool,
) -> Result<String, NetError> {
    let command = exec::parse(line).map_err(|r| NetError::Internal(format!("`{line}`: {r}")))?;
    let out = exec::run(ns, &command, &Policy { timeout, output_cap: READ_CAP })
        .await
        .map_err(|e| NetError::Internal(e.to_string()))?;
    if out.timed_out {
        return Err(NetError::Timeout(format!("`{line}` did not finish within {timeout:?}")));
    }
    if (must_succeed && out.status != Some(0)) || out.truncated {
        return Err(NetError::Internal(format!("`{line}`: {}", out.text.trim())));
    }
    Ok(out.text)
}

async fn read_json(ns: &str, line: &str, timeout: Duration) -> Result<Vec<Value>, NetError> {
    let text = read(ns, line, timeout).await?;
    serde_json::from_str(text.trim())
        .map_err(|e| NetError::Internal(format!("`{line}` did not print JSON: {e}")))
}

fn s(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// `ip route` arguments of a route of `ip -j route show table all`. Keys it does not know
/// (multipath `nexthops`, `expires`...) are kept verbatim, so such a route still compares but
/// restoring it fails.
fn route_args(r: &Value) -> String {
    let mut args = Vec::new();
    if let Some(t) = s(r, "type").filter(|t| t != "unicast") {
        args.push(t);
    }
    args.push(s(r, "dst").unwrap_or_default());
    for (key, word) in [
        ("gateway", "via"),
        ("dev", "dev"),
        ("table", "table"),
        ("protocol", "proto"),
        ("scope", "scope"),
        ("prefsrc", "src"),
        ("metric", "metric"),
    ] {
        if let Some(v) = s(r, key) {
            if key == "table" && v == "main" {
                continue;
            }
            args.push(word.into());
            args.push(v);
        }
    }
    if let Some(flags) = r.get("flags").and_then(Value::as_array) {
        for f in flags.iter().filter_map(Value::as_str) {
            // `linkdown` is the state of the device, not of the route.
            if f != "linkdown" {
                args.push(f.into());
            }
        }
    }
    let known = ["type", "dst", "gateway", "dev", "table", "protocol", "scope", "prefsrc", "metric", "flags"];
    if let Some(o) = r.as_object() {
        for (k, v) in o.iter().filter(|(k, _)| !known.contains(&k.as_str())) {
            args.push(format!("?{k}={v}"));
        }
    }
    args.join(" ")
}

fn rule_args(r: &Value) -> String {
    let mut args = vec!["priority".to_string(), s(r, "priority").unwrap_or_default()];
    let prefix = |addr: &str, len: &str| match (s(r, addr), s(r, len)) {
        (Some(a), Some(l)) => Some(format!("{a}/{l}")),
        (Some(a), None) => Some(a),
        _ => None,
    };
    if let Some(src) = prefix("src", "srclen") {
        args.extend(["from".into(), src]);
    }
    if let Some(dst) = prefix("dst", "dstlen") {
        args.extend(["to".into(), dst]);
    }
    for (key, word) in [("iif", "iif"), ("oif", "oif"), ("fwmark", "fwmark"), ("table", "table")] {
        if let Some(v) = s(r, key) {
            args.extend([word.into(), v]);
        }
    }
    let known = ["priority", "src", "srclen", "dst", "dstlen", "iif", "oif", "fwmark", "table"];
    if let Some(o) = r.as_object() {
        for (k, v) in o.iter().filter(|(k, _)| !known.contains(&k.as_str())) {
            args.push(format!("?{k}={v}"));
        }
    }
    args.join(" ")
}

/// iptables-save without its dated comments and packet counters.
fn normalize_iptables(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| match l.strip_prefix(':') {
            Some(chain) => {
                let words: Vec<&str> = chain.split_whitespace().take(2).collect();
                format!(":{}", words.join(" "))
            }
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// nft's listing without the counters traffic moves.
fn normalize_nft(text: &str) -> String {
    let counter = regex::Regex::new(r"counter packets \d+ bytes \d+").expect("a valid regex");
    counter.replace_all(text.trim(), "counter").into_owned()
}

/// Reads the state of the node in `ns`.
pub async fn snapshot(ns: &str, timeout: Duration) -> Result<Snapshot, NetError> {
    let mut snap = Snapshot::default();
    for link in read_json(ns, "ip -j link show", timeout).await? {
        let Some(name) = s(&link, "ifname") else { continue };
        let up = link["flags"].as_array().is_some_and(|f| f.iter().any(|x| x == "UP"));
        snap.links.insert(name, (up, link["mtu"].as_u64().unwrap_or_default()));
    }
    for iface in read_json(ns, "ip -j -4 addr show", timeout).await? {
        let Some(dev) = s(&iface, "ifname") else { continue };
        for a in iface["addr_info"].as_array().into_iter().flatten() {
            let mut args =
                format!("{}/{}", s(a, "local").unwrap_or_default(), s(a, "prefixlen").unwrap_or_default());
            if let Some(brd) = s(a, "broadcast") {
                args.push_str(&format!(" brd {brd}"));
            }
            snap.addrs.insert(format!("{args} dev {dev}"));
        }
    }
    snap.routes =
        read_json(ns, "ip -j -4 route show table all", timeout).await?.iter().map(route_args).collect();
    snap.rules = read_json(ns, "ip -j -4 rule show", timeout).await?.iter().map(rule_args).collect();
    for n in read_json(ns, "ip -j -4 neigh show nud permanent", timeout).await? {
        if let (Some(dst), Some(dev)) = (s(&n, "dst"), s(&n, "dev")) {
            let lladdr = s(&n, "lladdr").map(|l| format!(" lladdr {l}")).unwrap_or_default();
            snap.neigh.insert(format!("{dst}{lladdr} dev {dev}"));
        }
    }
    // `sysctl -a` exits non-zero when some key cannot be read; the rest is still printed.
    for line in read_status(ns, "sysctl -a", timeout, false).await?.lines() {
        if let Some((key, value)) = line.split_once(" = ")
            && key.starts_with("net.")
            && !DYNAMIC_SYSCTLS.contains(&key)
        {
            snap.sysctl.insert(key.to_string(), value.to_string());
        }
    }
    if snap.sysctl.is_empty() {
        return Err(NetError::Internal("`sysctl -a` read no net.* key".into()));
    }
    snap.iptables = normalize_iptables(&read(ns, "iptables-save", timeout).await?);
    snap.nft = normalize_nft(&read(ns, "nft list ruleset", timeout).await?);
    for mut q in read_json(ns, "tc -j qdisc show", timeout).await? {
        let Some(dev) = s(&q, "dev") else { continue };
        if let Some(o) = q.as_object_mut() {
            o.remove("handle");
            o.remove("refcnt");
            o.remove("dev");
        }
        snap.qdiscs.entry(dev).or_default().push(q.to_string());
    }
    Ok(snap)
}

/// Whether what `line` changes is all in a [`Snapshot`], so that a rollback can put it back
/// (and the comparison after it would see what it could not): `Err` names what is outside
/// (ethtool settings, bridge fdb and VLANs, tc filters and classes, link addresses, masters
/// and flags other than up/down/mtu, ...). Read-only commands change nothing.
pub fn covered(line: &str) -> Result<(), String> {
    let command = exec::parse(line).map_err(|r| r.to_string())?;
    if exec::read_only(&command).is_ok() {
        return Ok(());
    }
    let program = command.program().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let words: Vec<&str> =
        command.args().iter().map(String::as_str).filter(|a| !a.starts_with('-')).collect();
    let outside = |what: &str| Err(format!("`{line}` changes {what}, which a rollback cannot put back"));
    match program.as_str() {
        "iptables" | "ip6tables" | "nft" | "sysctl" | "route" | "arp" => Ok(()),
        "ip" => match words.first().copied() {
            Some(
                "a" | "addr" | "address" | "r" | "ro" | "route" | "ru" | "rule" | "n" | "neigh" | "neighbor"
                | "neighbour",
            ) => Ok(()),
            Some("l" | "link") => {
                let action = words.get(1).copied().unwrap_or_default();
                let set_ok = words.iter().skip(2).all(|w| {
                    matches!(*w, "dev" | "up" | "down" | "mtu")
                        || w.chars().all(|c| c.is_ascii_digit())
                        || !w.is_empty() && !LINK_ATTRIBUTES.contains(w)
                });
                match action {
                    "set" | "s" if set_ok => Ok(()),
                    // A new link is deleted by a rollback; a deleted one cannot come back (the
                    // comparison after the restore says so).
                    "add" | "a" | "del" | "delete" | "d" => Ok(()),
                    _ => outside("link attributes other than up/down/mtu"),
                }
            }
            _ => outside("iproute2 objects other than addresses, routes, rules, neighbours and links"),
        },
        "tc" => match words.first().copied() {
            Some("qdisc" | "q") => Ok(()),
            _ => outside("tc classes and filters"),
        },
        "ifconfig" => {
            if words.iter().any(|w| IFCONFIG_ATTRIBUTES.contains(w)) {
                outside("interface attributes other than addresses, up/down and mtu")
            } else {
                Ok(())
            }
        }
        "ethtool" => outside("device settings (ethtool)"),
        "bridge" => outside("bridge fdb, VLAN and port settings"),
        "ss" => outside("sockets (ss -K closes them)"),
        other => outside(&format!("what `{other}` sets")),
    }
}

/// `ip link set` attributes a snapshot does not hold.
const LINK_ATTRIBUTES: &[&str] = &[
    "address",
    "broadcast",
    "brd",
    "peer",
    "master",
    "nomaster",
    "vrf",
    "arp",
    "multicast",
    "allmulticast",
    "promisc",
    "trailers",
    "txqueuelen",
    "txqlen",
    "name",
    "alias",
    "qdisc",
    "netns",
    "link-netns",
    "vf",
    "xdp",
    "xdpgeneric",
    "xdpdrv",
    "xdpoffload",
    "group",
    "protodown",
    "type",
    "addrgenmode",
    "dynamic",
    "carrier",
    "gso_max_size",
    "gso_max_segs",
    "gro_max_size",
    "mtu_min",
    "state",
];

/// ifconfig words a snapshot does not hold.
const IFCONFIG_ATTRIBUTES: &[&str] = &[
    "hw",
    "promisc",
    "-promisc",
    "arp",
    "-arp",
    "allmulti",
    "-allmulti",
    "txqueuelen",
    "multicast",
    "pointopoint",
    "-pointopoint",
    "dstaddr",
    "tunnel",
    "name",
    "metric",
    "mem_start",
    "io_addr",
    "irq",
    "media",
];

/// Runs one restoring command through the sandbox; a refusal or a failure is -32085.
async fn run(ns: &str, line: &str, timeout: Duration, log: &mut Vec<String>) -> Result<(), NetError> {
    let command = exec::parse(line).map_err(|r| NetError::RollbackFailed(format!("`{line}`: {r}")))?;
    let out = exec::run(ns, &command, &Policy { timeout, output_cap: 64 * 1024 })
        .await
        .map_err(|e| NetError::Internal(e.to_string()))?;
    if out.status != Some(0) {
        return Err(NetError::RollbackFailed(format!("`{line}` failed: {}", out.text.trim())));
    }
    log.push(line.to_string());
    Ok(())
}

/// Whether a word must be quoted for the sandbox's parser (values like `32768\t60999`).
fn quoted(word: &str) -> String {
    if word.chars().any(|c| c.is_whitespace()) { format!("'{word}'") } else { word.to_string() }
}

/// Puts the node in `ns` back to `want`, part by part, then reads it again: a part that is not
/// as wanted is -32085 naming it. Returns the commands it ran.
pub async fn restore(ns: &str, want: &Snapshot, timeout: Duration) -> Result<Vec<String>, NetError> {
    let mut log = Vec::new();
    let have = snapshot(ns, timeout).await?;
    // Links: new ones go (they did not exist), the rest get their MTU and admin state back.
    for name in have.links.keys().filter(|n| !want.links.contains_key(*n)) {
        run(ns, &format!("ip link del dev {name}"), timeout, &mut log).await?;
    }
    for (name, (up, mtu)) in &want.links {
        let Some((now_up, now_mtu)) = have.links.get(name) else { continue };
        if now_mtu != mtu {
            run(ns, &format!("ip link set dev {name} mtu {mtu}"), timeout, &mut log).await?;
        }
        if now_up != up {
            let state = if *up { "up" } else { "down" };
            run(ns, &format!("ip link set dev {name} {state}"), timeout, &mut log).await?;
        }
    }
    // Sysctls before addresses and routes: forwarding, then `all`, then the rest (a write of
    // `ip_forward` or `conf.all.*` changes the per-interface keys).
    let mut keys: Vec<&String> =
        want.sysctl.keys().filter(|k| have.sysctl.get(*k) != want.sysctl.get(*k)).collect();
    keys.sort_by_key(|k| (!k.ends_with("ip_forward"), !k.contains(".conf.all."), (*k).clone()));
    for key in keys {
        let now = snapshot_sysctl(ns, key, timeout).await?;
        if now.as_deref() != want.sysctl.get(key).map(String::as_str) {
            let line = format!("sysctl -w {}", quoted(&format!("{key}={}", want.sysctl[key])));
            run(ns, &line, timeout, &mut log).await?;
        }
    }
    let have = snapshot(ns, timeout).await?;
    for a in have.addrs.difference(&want.addrs) {
        run(ns, &format!("ip addr del {a}"), timeout, &mut log).await?;
    }
    for a in want.addrs.difference(&have.addrs) {
        run(ns, &format!("ip addr add {a}"), timeout, &mut log).await?;
    }
    // Routes once links and addresses are back (they bring their kernel routes with them).
    let have = snapshot(ns, timeout).await?;
    for r in have.routes.difference(&want.routes) {
        run(ns, &format!("ip route del {r}"), timeout, &mut log).await?;
    }
    for r in want.routes.difference(&have.routes) {
        run(ns, &format!("ip route add {r}"), timeout, &mut log).await?;
    }
    for r in have.rules.difference(&want.rules) {
        run(ns, &format!("ip rule del {r}"), timeout, &mut log).await?;
    }
    for r in want.rules.difference(&have.rules) {
        run(ns, &format!("ip rule add {r}"), timeout, &mut log).await?;
    }
    for n in have.neigh.difference(&want.neigh) {
        let (dst, rest) = n.split_once(' ').unwrap_or((n, ""));
        let dev = rest.rsplit_once("dev ").map_or("", |(_, d)| d);
        run(ns, &format!("ip neigh del {dst} dev {dev}"), timeout, &mut log).await?;
    }
    for n in want.neigh.difference(&have.neigh) {
        run(ns, &format!("ip neigh add {n} nud permanent"), timeout, &mut log).await?;
    }
    // nftables first: with iptables-nft (Debian's) the iptables rules live there too, and
    // rebuilding them through iptables would leave empty base chains nft still lists.
    if have.nft != want.nft {
        restore_nft(ns, &have.nft, &want.nft, timeout, &mut log).await?;
    }
    let now = snapshot(ns, timeout).await?;
    if now.iptables != want.iptables {
        restore_iptables(ns, &now.iptables, &want.iptables, timeout, &mut log).await?;
    }
    for (dev, qdiscs) in &want.qdiscs {
        if have.qdiscs.get(dev) != Some(qdiscs) {
            restore_qdisc(ns, dev, have.qdiscs.get(dev), qdiscs, timeout, &mut log).await?;
        }
    }
    let after = snapshot(ns, timeout).await?;
    let differ = want.differences(&after);
    if !differ.is_empty() {
        return Err(NetError::RollbackFailed(format!(
            "after the restore, the node's {} still differ from the state wanted (ran: {})",
            differ.join(", "),
            log.join("; ")
        )));
    }
    Ok(log)
}

async fn snapshot_sysctl(ns: &str, key: &str, timeout: Duration) -> Result<Option<String>, NetError> {
    let text = read(ns, &format!("sysctl {key}"), timeout).await?;
    Ok(text.lines().find_map(|l| l.split_once(" = ").map(|(_, v)| v.to_string())))
}

/// The tables of an nft listing: (`FAMILY NAME`, its chains: (name, the chain's first line
/// when it is a base chain, its rules)).
type NftTables = Vec<(String, Vec<(String, Option<String>, Vec<String>)>)>;

fn nft_tables(text: &str) -> Option<NftTables> {
    let mut tables: NftTables = Vec::new();
    let mut depth = 0;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        if let Some(rest) = line.strip_prefix("table ").and_then(|r| r.strip_suffix(" {")) {
            tables.push((rest.to_string(), vec![]));
            depth = 1;
        } else if let Some(name) = line.strip_prefix("chain ").and_then(|r| r.strip_suffix(" {")) {
            tables.last_mut()?.1.push((name.to_string(), None, vec![]));
            depth = 2;
        } else if line == "}" {
            depth -= 1;
        } else if depth == 2 {
            let chain = tables.last_mut()?.1.last_mut()?;
            if line.starts_with("type ") && chain.1.is_none() && chain.2.is_empty() {
                chain.1 = Some(line.to_string());
            } else {
                chain.2.push(line.to_string());
            }
        } else {
            // Sets, maps, flowtables...: not rebuilt here (the comparison after says so).
            return None;
        }
    }
    Some(tables)
}

/// nftables back to a listing (counters dropped): the tables there now are deleted, and the
/// wanted ones rebuilt chain by chain, rule by rule.
async fn restore_nft(
    ns: &str,
    have: &str,
    want: &str,
    timeout: Duration,
    log: &mut Vec<String>,
) -> Result<(), NetError> {
    let (Some(have), Some(want)) = (nft_tables(have), nft_tables(want)) else {
        return Err(NetError::RollbackFailed(
            "the nftables ruleset holds more than tables, chains and rules".into(),
        ));
    };
    for (table, _) in &have {
        run(ns, &format!("nft delete table {table}"), timeout, log).await?;
    }
    for (table, chains) in &want {
        run(ns, &format!("nft add table {table}"), timeout, log).await?;
        for (chain, base, _) in chains {
            let line = match base {
                Some(b) => format!("nft add chain {table} {chain} {{ {} }}", b.replace(';', " ;")),
                None => format!("nft add chain {table} {chain}"),
            };
            run(ns, &line, timeout, log).await?;
        }
        for (chain, _, rules) in chains {
            for rule in rules {
                run(ns, &format!("nft add rule {table} {chain} {rule}"), timeout, log).await?;
            }
        }
    }
    Ok(())
}

/// iptables back to an iptables-save listing (normalized): each table of it is flushed and
/// rebuilt (policies, chains, rules); a table it does not have is deleted (iptables-nft keeps
/// its tables in nftables).
async fn restore_iptables(
    ns: &str,
    have: &str,
    want: &str,
    timeout: Duration,
    log: &mut Vec<String>,
) -> Result<(), NetError> {
    let tables = |text: &str| -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for line in text.lines() {
            if let Some(t) = line.strip_prefix('*') {
                out.push((t.to_string(), vec![]));
            } else if line != "COMMIT"
                && let Some((_, lines)) = out.last_mut()
            {
                lines.push(line.to_string());
            }
        }
        out
    };
    let wanted = tables(want);
    for (table, _) in tables(have) {
        if !wanted.iter().any(|(t, _)| *t == table) {
            run(ns, &format!("nft delete table ip {table}"), timeout, log).await?;
        }
    }
    for (table, lines) in wanted {
        run(ns, &format!("iptables -t {table} -F"), timeout, log).await?;
        run(ns, &format!("iptables -t {table} -X"), timeout, log).await?;
        for line in &lines {
            if let Some(chain) = line.strip_prefix(':') {
                let (name, policy) = chain.split_once(' ').unwrap_or((chain, "-"));
                let cmd = if policy == "-" { format!("-N {name}") } else { format!("-P {name} {policy}") };
                run(ns, &format!("iptables -t {table} {cmd}"), timeout, log).await?;
            }
        }
        for line in lines.iter().filter(|l| l.starts_with("-A ")) {
            run(ns, &format!("iptables -t {table} {line}"), timeout, log).await?;
        }
    }
    Ok(())
}

/// A device's qdiscs back: the root one removed, and a tbf put back from its parameters
/// (rate, burst, latency: its limit is burst + latency x rate). Other kinds fail the
/// comparison that follows.
async fn restore_qdisc(
    ns: &str,
    dev: &str,
    have: Option<&Vec<String>>,
    want: &[String],
    timeout: Duration,
    log: &mut Vec<String>,
) -> Result<(), NetError> {
    let root_kind = |qdiscs: &[String]| -> Option<Value> {
        qdiscs.iter().filter_map(|q| serde_json::from_str::<Value>(q).ok()).find(|q| q["root"] == true)
    };
    let default =
        |q: &Value| matches!(q["kind"].as_str(), Some("noqueue" | "pfifo_fast" | "mq" | "fq_codel"));
    if let Some(now) = have.and_then(|h| root_kind(h))
        && !default(&now)
    {
        run(ns, &format!("tc qdisc del dev {dev} root"), timeout, log).await?;
    }
    if let Some(q) = root_kind(want)
        && q["kind"] == "tbf"
    {
        let o = &q["options"];
        let rate = o["rate"].as_u64().unwrap_or_default();
        let burst: u64 = o["burst"]
            .as_str()
            .and_then(|b| b.split(['b', '/']).next())
            .and_then(|b| b.parse().ok())
            .unwrap_or_default();
        let lat_us = o["lat"].as_u64().unwrap_or_default();
        let limit = burst + lat_us * rate / 1_000_000;
        let line =
            format!("tc qdisc add dev {dev} root tbf rate {}bit burst {burst} limit {limit}", rate * 8);
        run(ns, &line, timeout, log).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn routes_and_rules_read_back_as_their_arguments() {
        let r = json!({"dst": "192.168.3.0/24", "gateway": "192.168.1.100", "dev": "r0-eth1", "flags": []});
        assert_eq!(route_args(&r), "192.168.3.0/24 via 192.168.1.100 dev r0-eth1");
        let local = json!({"type": "local", "dst": "127.0.0.1", "dev": "lo", "table": "local",
            "protocol": "kernel", "scope": "host", "prefsrc": "127.0.0.1", "flags": []});
        assert_eq!(
            route_args(&local),
            "local 127.0.0.1 dev lo table local proto kernel scope host src 127.0.0.1"
        );
        let multipath = json!({"dst": "10.0.0.0/8", "nexthops": [{"gateway": "10.0.0.1"}]});
        assert!(route_args(&multipath).contains("?nexthops="), "kept, so it compares and fails to restore");
        let rule = json!({"priority": 100, "src": "10.0.0.0", "srclen": 8, "table": "7"});
        assert_eq!(rule_args(&rule), "priority 100 from 10.0.0.0/8 table 7");
    }

    #[test]
    fn counters_and_dates_are_not_state() {
        let a = "# Generated by iptables-save on Mon\n*filter\n:INPUT ACCEPT [4:336]\n:FORWARD DROP [0:0]\n-A FORWARD -j DROP\nCOMMIT\n# Completed";
        let b = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [9:9]\n-A FORWARD -j DROP\nCOMMIT";
        assert_eq!(normalize_iptables(a), normalize_iptables(b));
        assert_eq!(
            normalize_nft("x counter packets 3 bytes 252 drop"),
            normalize_nft("x counter packets 0 bytes 0 drop")
        );
    }

    #[test]
    fn an_nft_listing_reads_back_as_tables_chains_and_rules() {
        let nft = "table ip filter {\n\tchain FORWARD {\n\t\ttype filter hook forward priority filter; policy accept;\n\t\tip saddr 10.1.0.0/24 counter drop\n\t}\n}\ntable inet t {\n\tchain c {\n\t}\n}";
        let tables = nft_tables(nft).expect("tables");
        assert_eq!(tables.len(), 2);
        assert_eq!(tables[0].0, "ip filter");
        assert_eq!(
            tables[0].1[0].1.as_deref(),
            Some("type filter hook forward priority filter; policy accept;")
        );
        assert_eq!(tables[0].1[0].2, ["ip saddr 10.1.0.0/24 counter drop"]);
        assert_eq!(tables[1].1[0], ("c".to_string(), None, vec![]));
        assert!(
            nft_tables("table ip t {\n\tset s {\n\t\ttype ipv4_addr\n\t}\n}").is_none(),
            "sets are not rebuilt"
        );
    }

    #[test]
    fn what_a_rollback_covers() {
        for line in [
            "ip route add 10.0.0.0/24 via 10.0.1.2",
            "ip addr del 192.168.1.1/24 dev r0-eth1",
            "ip link set r0-eth1 down",
            "ip link set dev r0-eth1 mtu 1400",
            "iptables -P FORWARD ACCEPT",
            "nft flush ruleset",
            "sysctl -w net.ipv4.ip_forward=1",
            "tc qdisc del dev r0-eth1 root",
            "ifconfig r0-eth1 192.168.1.1 netmask 255.255.255.0 up",
            "ip route",
        ] {
            assert_eq!(covered(line), Ok(()), "{line}");
        }
        for line in [
            "ethtool -K r0-eth1 tso off",
            "bridge fdb add 00:11:22:33:44:55 dev s1-eth1",
            "ip link set r0-eth1 address 00:11:22:33:44:55",
            "ip link set r0-eth1 promisc on",
            "tc filter add dev r0-eth1 parent ffff: matchall action drop",
            "ifconfig r0-eth1 hw ether 00:11:22:33:44:55",
            "ip tunnel add t0 mode ipip",
        ] {
            assert!(covered(line).is_err(), "{line}");
        }
    }
}
