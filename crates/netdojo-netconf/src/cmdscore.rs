//! The command score (seed 001 §3.1 item 4): the commands an agent effectively added or removed
//! (a hierarchical diff of each device's final configuration against its initial one),
//! compared with the ground truth's under wildcard matching of non-essential identifiers, as
//! precision, recall and F1.
//!
//! A configuration is read as a list of command *paths*: each command with the section lines
//! above it (`router ospf` > `network 10.0.12.0/30 area 0`). Running configurations (FRR's
//! indentation and `exit` lines) and typed command lists (indented or flat, closed by `exit`)
//! give the same paths, and so do nftables listings (braces) and `nft add` commands.

use std::collections::BTreeMap;

use serde::Serialize;

/// Commands that open a section: the lines after them belong to it until `exit` or another
/// top-level command.
const SECTIONS: [&str; 9] = [
    "interface ",
    "router ",
    "route-map ",
    "key chain ",
    "line ",
    "vrf ",
    "segment-routing",
    "nexthop-group ",
    "pbr-map ",
];
/// Commands that only exist at the top level: seeing one closes any open section, which is
/// how a flat typed list (`router ospf`, ` network ...`, `ip route ...`) leaves a section
/// without `exit`.
const TOP_LEVEL: [&str; 14] = [
    "ip route ",
    "ipv6 route ",
    "ip prefix-list ",
    "ipv6 prefix-list ",
    "access-list ",
    "ip access-list ",
    "bgp community-list ",
    "bgp as-path ",
    "hostname ",
    "log ",
    "service ",
    "ip forwarding",
    "ipv6 forwarding",
    "no ip",
];
/// Lines that carry no configuration: banners of `show running-config`, separators.
const NOISE: [&str; 5] =
    ["Building configuration...", "Current configuration:", "frr version ", "frr defaults ", "end"];

/// A configuration as command paths, in order.
pub type Paths = Vec<Vec<String>>;

fn normalise(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Parses an FRR running configuration or a typed list of FRR commands.
pub fn parse_frr(text: &str) -> Paths {
    let mut paths = Vec::new();
    let mut stack: Vec<String> = Vec::new();
    for raw in text.lines() {
        let line = normalise(raw);
        if line.is_empty() || line == "!" || NOISE.iter().any(|n| line == n.trim() || line.starts_with(n)) {
            continue;
        }
        match line.as_str() {
            "exit" | "exit-vrf" | "quit" => {
                stack.pop();
                continue;
            }
            "exit-address-family" => {
                if stack.last().is_some_and(|s| s.starts_with("address-family")) {
                    stack.pop();
                }
                continue;
            }
            "configure terminal" | "conf t" | "configure" => continue,
            _ => {}
        }
        let indented = raw.starts_with(' ') || raw.starts_with('\t');
        let opens = SECTIONS.iter().any(|s| line.starts_with(s) || line == s.trim());
        let top = TOP_LEVEL.iter().any(|s| line.starts_with(s));
        if !indented && (opens || top) {
            stack.clear();
        }
        if line.starts_with("address-family ") {
            // Nested inside `router bgp`; a second one replaces the first.
            if stack.last().is_some_and(|s| s.starts_with("address-family")) {
                stack.pop();
            }
            let mut path = stack.clone();
            path.push(line.clone());
            paths.push(path);
            stack.push(line);
            continue;
        }
        let mut path = stack.clone();
        path.push(line.clone());
        paths.push(path);
        if opens && !indented {
            stack.push(line);
        }
    }
    paths
}

/// Parses the Linux side: an `nft list ruleset` listing or `nft add` commands, and `tc`
/// qdiscs (`tc qdisc show` lines or `tc qdisc add` commands), all prefixed by `linux`.
pub fn parse_linux(text: &str) -> Paths {
    let mut paths = Vec::new();
    let mut stack: Vec<String> = Vec::new();
    for raw in text.lines() {
        let line = normalise(raw);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = line.split(' ').collect();
        let linux = |rest: &[String]| {
            let mut p = vec!["linux".to_string()];
            p.extend_from_slice(rest);
            p
        };
        match words.as_slice() {
            ["nft", "add" | "create", "table", family, table] => {
                paths.push(linux(&[format!("table {family} {table}")]))
            }
            ["nft", "add" | "create", "chain", family, table, chain, ..] => {
                paths.push(linux(&[format!("table {family} {table}"), format!("chain {chain}")]))
            }
            ["nft", "add" | "insert", "rule", family, table, chain, rule @ ..] => paths.push(linux(&[
                format!("table {family} {table}"),
                format!("chain {chain}"),
                rule.join(" "),
            ])),
            ["table", family, table, "{"] => {
                stack = vec![format!("table {family} {table}")];
                paths.push(linux(&stack));
            }
            ["chain", chain, "{"] => {
                stack.truncate(1);
                stack.push(format!("chain {chain}"));
                paths.push(linux(&stack));
            }
            ["}"] => {
                stack.pop();
            }
            // A chain's hook line (`type filter hook input priority filter; policy accept;`)
            // is part of its definition, which `nft add chain` also carries.
            ["type", ..] if stack.len() == 2 => {}
            ["tc", "qdisc", "add" | "replace", rest @ ..] => {
                if let Some(q) = qdisc(rest) {
                    paths.push(linux(&q));
                }
            }
            ["qdisc", kind, _handle, rest @ ..] => {
                if !matches!(*kind, "noqueue" | "noop" | "pfifo_fast" | "fq_codel" | "mq")
                    && let Some(dev) = rest.iter().position(|w| *w == "dev").and_then(|i| rest.get(i + 1))
                {
                    let at = if rest.contains(&"root") { "root" } else { "child" };
                    paths.push(linux(&[format!("dev {dev}"), format!("qdisc {kind} {at}")]));
                }
            }
            _ if stack.len() == 2 => {
                let mut p = stack.clone();
                p.push(line.clone());
                paths.push(linux(&p));
            }
            _ => {}
        }
    }
    paths
}

/// `dev X root KIND ...` of a `tc qdisc add` command → [dev X, qdisc KIND root].
fn qdisc(args: &[&str]) -> Option<Vec<String>> {
    let dev = args.iter().position(|w| *w == "dev").and_then(|i| args.get(i + 1))?;
    let root = args.iter().position(|w| *w == "root");
    let kind = match root {
        Some(i) => args.get(i + 1)?,
        None => args.iter().find(|w| **w == "ingress")?,
    };
    let at = if root.is_some() { "root" } else { "child" };
    Some(vec![format!("dev {dev}"), format!("qdisc {kind} {at}")])
}

/// Replaces the identifiers the seed calls non-essential (names of prefix-lists, route-maps,
/// access-lists, community-lists; sequence numbers) with wildcards, so that an agent's
/// `ip prefix-list ALLOW seq 10 ...` matches the ground truth's `ip prefix-list PL1 seq 5 ...`.
pub fn wildcard(line: &str) -> String {
    let words: Vec<&str> = line.split(' ').collect();
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        let prev = if i > 0 { words[i - 1] } else { "" };
        let before = |n: usize| if i >= n { words[i - n] } else { "" };
        let replaced = if prev == "prefix-list" {
            Some("<PL>")
        } else if prev == "route-map" {
            Some("<RM>")
        } else if prev == "access-list"
            || (before(3) == "match" && before(2) == "ip" && prev == "address" && w != "prefix-list")
        {
            Some("<ACL>")
        } else if prev == "community-list" {
            Some("<CL>")
        } else if prev == "seq" {
            Some("<SEQ>")
        } else {
            None
        };
        // `route-map NAME permit 10`: the entry number is a sequence number too.
        let route_map_seq =
            i == 3 && words.first() == Some(&"route-map") && w.bytes().all(|b| b.is_ascii_digit());
        out.push(match (replaced, route_map_seq) {
            (_, true) => "<SEQ>".to_string(),
            (Some(r), _) => r.to_string(),
            (None, _) => w.to_string(),
        });
        i += 1;
    }
    out.join(" ")
}

/// A path as one comparable string, with wildcards.
fn key(path: &[String]) -> String {
    path.iter().map(|l| wildcard(l)).collect::<Vec<_>>().join(" > ")
}

/// The edits that take `before` to `after`: lines added, and lines removed written as `no ...`
/// under the same parents. Compared as sets of paths: a device holds a command once in a given
/// context (entering it again changes nothing), and the order inside a section is not
/// significant for FRR, which orders what it prints itself.
pub fn edits(before: &Paths, after: &Paths) -> Vec<String> {
    let keys = |paths: &Paths| paths.iter().map(|p| key(p)).collect::<std::collections::BTreeSet<String>>();
    let (b, a) = (keys(before), keys(after));
    let mut out: Vec<String> = a.difference(&b).cloned().collect();
    for k in b.difference(&a) {
        let (parents, last) = k.rsplit_once(" > ").map_or(("", k.as_str()), |(p, l)| (p, l));
        out.push(if parents.is_empty() { format!("no {last}") } else { format!("{parents} > no {last}") });
    }
    out
}

/// Precision, recall and F1 of an agent's edits against the ground truth's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandScore {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub matched: Vec<String>,
    /// Ground-truth edits the agent did not make.
    pub missing: Vec<String>,
    /// Edits the agent made that the ground truth does not.
    pub extra: Vec<String>,
}

/// Scores `agent` edits against `truth` edits (multisets of edit strings). No edits expected
/// and none made is a perfect score; edits expected and none made scores 0.
pub fn score(agent: &[String], truth: &[String]) -> CommandScore {
    let mut pool: BTreeMap<&str, usize> = BTreeMap::new();
    for t in truth {
        *pool.entry(t.as_str()).or_default() += 1;
    }
    let (mut matched, mut extra) = (Vec::new(), Vec::new());
    for a in agent {
        match pool.get_mut(a.as_str()) {
            Some(n) if *n > 0 => {
                *n -= 1;
                matched.push(a.clone());
            }
            _ => extra.push(a.clone()),
        }
    }
    let missing: Vec<String> =
        pool.iter().flat_map(|(k, n)| std::iter::repeat_n(k.to_string(), *n)).collect();
    let (m, a, t) = (matched.len() as f64, agent.len() as f64, truth.len() as f64);
    let (precision, recall) = match (agent.is_empty(), truth.is_empty()) {
        (true, true) => (1.0, 1.0),
        (true, false) => (0.0, 0.0),
        (false, true) => (0.0, 1.0),
        (false, false) => (m / a, m / t),
    };
    let f1 = if precision + recall == 0.0 { 0.0 } else { 2.0 * precision * recall / (precision + recall) };
    CommandScore { precision, recall, f1, matched, missing, extra }
}

/// The command score of one device set: initial and final FRR and Linux configurations per
/// device, and the ground truth per device in each dialect.
pub fn command_score(
    initial: &BTreeMap<String, (String, String)>,
    finals: &BTreeMap<String, (String, String)>,
    truth_frr: &BTreeMap<String, Vec<String>>,
    truth_linux: &BTreeMap<String, Vec<String>>,
) -> CommandScore {
    let mut agent = Vec::new();
    let mut truth = Vec::new();
    let empty = (String::new(), String::new());
    for (device, (frr_after, linux_after)) in finals {
        let (frr_before, linux_before) = initial.get(device).unwrap_or(&empty);
        let before: Paths = parse_frr(frr_before).into_iter().chain(parse_linux(linux_before)).collect();
        let after: Paths = parse_frr(frr_after).into_iter().chain(parse_linux(linux_after)).collect();
        agent.extend(edits(&before, &after).into_iter().map(|e| format!("{device}: {e}")));
        // The ground truth's edits: its commands applied on top of the initial configuration.
        let mut expected = before.clone();
        expected.extend(parse_frr(&truth_frr.get(device).cloned().unwrap_or_default().join("\n")));
        expected.extend(parse_linux(&truth_linux.get(device).cloned().unwrap_or_default().join("\n")));
        truth.extend(edits(&before, &expected).into_iter().map(|e| format!("{device}: {e}")));
    }
    score(&agent, &truth)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNNING: &str = "Building configuration...\n\nCurrent configuration:\n!\nfrr version 8.4.4\nfrr defaults traditional\nhostname R1\n!\nip route 2.2.2.0/24 10.0.12.2\n!\ninterface eth0\n ip address 10.0.12.1/30\n ip ospf network point-to-point\nexit\n!\nrouter ospf\n ospf router-id 1.1.1.1\n network 10.0.12.0/30 area 0\nexit\n!\nrouter bgp 65001\n neighbor 10.0.12.2 remote-as 65002\n !\n address-family ipv4 unicast\n  network 192.168.1.0/24\n  neighbor 10.0.12.2 route-map RM-OUT out\n exit-address-family\nexit\n!\nip prefix-list PL seq 5 permit 10.0.0.0/8 le 24\n!\nroute-map RM-OUT permit 10\n match ip address prefix-list PL\n set metric 100\nexit\n!\nend\n";

    fn render(paths: &Paths) -> String {
        paths.iter().map(|p| p.join(" > ")).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn running_config_parses_into_command_paths() {
        insta::assert_snapshot!(render(&parse_frr(RUNNING)), @r"
        hostname R1
        ip route 2.2.2.0/24 10.0.12.2
        interface eth0
        interface eth0 > ip address 10.0.12.1/30
        interface eth0 > ip ospf network point-to-point
        router ospf
        router ospf > ospf router-id 1.1.1.1
        router ospf > network 10.0.12.0/30 area 0
        router bgp 65001
        router bgp 65001 > neighbor 10.0.12.2 remote-as 65002
        router bgp 65001 > address-family ipv4 unicast
        router bgp 65001 > address-family ipv4 unicast > network 192.168.1.0/24
        router bgp 65001 > address-family ipv4 unicast > neighbor 10.0.12.2 route-map RM-OUT out
        ip prefix-list PL seq 5 permit 10.0.0.0/8 le 24
        route-map RM-OUT permit 10
        route-map RM-OUT permit 10 > match ip address prefix-list PL
        route-map RM-OUT permit 10 > set metric 100
        ");
    }

    #[test]
    fn a_flat_typed_list_gives_the_same_paths_as_the_running_config() {
        let typed = "router ospf\nospf router-id 1.1.1.1\nnetwork 10.0.12.0/30 area 0\nip route 2.2.2.0/24 10.0.12.2\n";
        let paths = parse_frr(typed);
        assert_eq!(
            render(&paths),
            "router ospf\nrouter ospf > ospf router-id 1.1.1.1\nrouter ospf > network 10.0.12.0/30 area 0\nip route 2.2.2.0/24 10.0.12.2"
        );
    }

    #[test]
    fn renamed_policy_objects_still_match_and_misses_and_extras_count() {
        let before = parse_frr("hostname R1\n");
        let truth = parse_frr(
            "ip prefix-list PL1 seq 5 permit 172.16.1.0/24\nroute-map RM permit 10\n match ip address prefix-list PL1\nexit\nrouter ospf\n redistribute static route-map RM\nexit\n",
        );
        let agent = parse_frr(
            "ip prefix-list ALLOW seq 10 permit 172.16.1.0/24\nroute-map ONLY-ONE permit 20\n match ip address prefix-list ALLOW\nexit\nrouter ospf\n redistribute static route-map ONLY-ONE\nexit\n",
        );
        let with = |p: &Paths| before.iter().cloned().chain(p.iter().cloned()).collect::<Paths>();
        let s = score(&edits(&before, &with(&agent)), &edits(&before, &with(&truth)));
        assert_eq!((s.precision, s.recall, s.f1), (1.0, 1.0, 1.0), "{s:?}");

        let partial = parse_frr("router ospf\n redistribute static\nexit\nip route 9.9.9.0/24 10.0.0.1\n");
        let s = score(&edits(&before, &with(&partial)), &edits(&before, &with(&truth)));
        // `router ospf` matches; the route-map-less redistribute and the static route do not.
        assert_eq!(s.matched, ["router ospf"]);
        assert_eq!(s.extra.len(), 2);
        assert!((s.precision - 1.0 / 3.0).abs() < 1e-9 && (s.recall - 1.0 / 5.0).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn removals_are_edits_written_with_no() {
        let before = parse_frr("interface eth0\n ip ospf cost 10\nexit\n");
        let after = parse_frr("interface eth0\nexit\n");
        assert_eq!(edits(&before, &after), ["interface eth0 > no ip ospf cost 10"]);
    }

    #[test]
    fn nft_commands_and_listings_give_the_same_paths() {
        let commands = "nft add table inet filter\nnft add chain inet filter input { type filter hook input priority 0 ; policy accept ; }\nnft add rule inet filter input ip saddr 10.0.12.1 ip daddr 2.2.2.2 icmp type echo-request drop\ntc qdisc add dev eth0 root tbf rate 8kbit burst 2kb latency 50ms\n";
        let listing = "# nft list ruleset\ntable inet filter {\n\tchain input {\n\t\ttype filter hook input priority filter; policy accept;\n\t\tip saddr 10.0.12.1 ip daddr 2.2.2.2 icmp type echo-request drop\n\t}\n}\n# tc qdisc show\nqdisc noqueue 0: dev lo root refcnt 2\nqdisc tbf 8001: dev eth0 root refcnt 3 rate 8Kbit burst 2Kb lat 50ms\n";
        assert_eq!(render(&parse_linux(commands)), render(&parse_linux(listing)));
        assert_eq!(parse_linux(listing).len(), 4);
    }

    #[test]
    fn the_empty_cases_are_defined() {
        assert_eq!(score(&[], &[]).f1, 1.0);
        assert_eq!(score(&[], &["x".into()]).f1, 0.0);
        assert_eq!(score(&["x".into()], &[]).f1, 0.0);
    }

    #[test]
    fn a_large_configuration_diffs_correctly() {
        let before: String =
            (0..20_000).map(|i| format!("ip route 10.{}.{}.0/24 10.0.0.1\n", i / 256, i % 256)).collect();
        let after = format!("{before}ip route 192.168.0.0/24 10.0.0.2\n");
        let e = edits(&parse_frr(&before), &parse_frr(&after));
        assert_eq!(e, ["ip route 192.168.0.0/24 10.0.0.2"]);
    }
}
