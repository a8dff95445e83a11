//! A device configuration as a tree of command lines (seed 001 §3.1: the command score diffs
//! configurations hierarchically).
//!
//! Two ways in, which must agree so that a ground truth compares with a diff:
//!
//! - [`Config::parse`] reads a configuration as a device prints it: FRR's `show
//!   running-config` (or an IOS-style one) for [`Dialect::Frr`]; `nft list ruleset` and
//!   `tc qdisc show` for [`Dialect::Linux`]. Every line is state.
//! - [`Config::from_commands`] and [`Config::apply`] read commands as an operator types them
//!   (a task's `ground_truth_configs`): every line is an operation on the tree, so `no X`
//!   removes, `ospf router-id B` replaces `ospf router-id A`, `ip prefix-list PL seq 7 ...`
//!   lands between seq 5 and seq 10. Applying a ground truth to the parsed initial
//!   configuration gives the tree of the running configuration the device would print.
//!
//! # FRR and IOS style
//!
//! A line indented under another belongs to it, whatever either says: in a printed
//! configuration any line with more indented lines under it is a section (IOS's `ip vrf`,
//! `vlan`, `crypto map`, `event manager applet`... need no keyword). A block ends at `exit`,
//! `!`, a dedent, or `exit-<section>` (`exit-address-family`, `exit-vrf`, `exit-vni`). Typed
//! command lists are usually flat, so a known header also opens a context that lasts until
//! `exit`, `end` or a command that only exists elsewhere. Those are decided by two tables,
//! which only flat lines consult:
//!
//! - [`SECTIONS`]: the commands that open a section, and where they may be nested:
//!   `interface`, `router`, `route-map`, `key chain` (> `key`), `line`, `vrf`,
//!   `segment-routing` (> `traffic-eng`), `mpls ldp` (> `address-family` > `interface`),
//!   `address-family` (under `router bgp`, `mpls ldp`, `vrf`), `vni` (under
//!   `address-family l2vpn evpn`), `nexthop-group`, `pbr-map`, `bfd` (> `peer`, `profile`),
//!   `rpki`, `control-plane`, IOS's `class-map`, `policy-map` (> `class`) and named
//!   `ip access-list standard|extended NAME` / `ipv6 access-list NAME` (FRR's own access-lists
//!   are one line each and do not open anything), and IOS's sections for typed lists: `ip vrf`,
//!   `ip dhcp pool`, `vlan`, `crypto isakmp policy`, `crypto map NAME SEQ`, `ip sla N`, `track`,
//!   `ipv6 router`, `aaa group server`, `object-group`, `zone-pair`, `archive`,
//!   `event manager applet`, `spanning-tree mst configuration`, ...
//! - [`TOP_LEVEL`]: commands that only exist at the top level (`ip route`, `ip prefix-list`,
//!   `access-list`, `hostname`, ...), so typing one leaves any open section, except where a
//!   section accepts it too (`vrf` accepts `ip route`, see [`NESTED_COMMANDS`]).
//!
//! A delimited banner (`banner motd ^C`, body lines, `^C`; the delimiter is the first character
//! after the banner type, `^C` counting as one) is one line, `banner TYPE ^CBODY^C`, its body's
//! lines trimmed and joined by newlines, whatever delimiter it was typed with; FRR's `banner
//! motd line TEXT` is an ordinary line. [`Dialect::Ios`] also writes the port names IOS prints in
//! access-list entries as numbers ([`IOS_PORT_NAMES`]).
//!
//! Lines that carry no configuration are dropped: `Building configuration...`, `Current
//! configuration...`, `frr version`, `frr defaults`, `configure terminal`, `end`, `!`
//! separators, blank lines, and exec-mode commands in a typed list (`do ...`, `show ...`,
//! `write ...`, `copy ...`). `hostname` is configuration and stays. Netmask forms are written
//! as FRR prints them: `ip route 2.2.2.0 255.255.255.0 NH` is `ip route 2.2.2.0/24 NH`,
//! `ip address A M` is `ip address A/len`, and an OSPF `network A WILDCARD area N` is
//! `network A/len area N`.
//!
//! # nftables and tc
//!
//! An nftables listing is a tree by its braces (`table inet filter` > `chain input` > rules);
//! `nft add|create|insert` commands build the same tree: `add table`, `add chain` (with its
//! `{ type ... ; policy ... ; }`), `add set|map`, `add element`, `add rule` (appends),
//! `insert rule` (prepends), `delete table|chain|set|map|element`. Statement lines are split at
//! `;`, so a chain's `type filter hook input priority filter; policy accept;` is two lines,
//! standard priority numbers are written by name as nft lists them (`priority 0` is
//! `priority filter`), a base chain typed without a policy gets nft's `policy accept`, a set's
//! `elements = { a, b }` is one `element` line per element, quotes are dropped and counters
//! lose their values. Out of scope, reported as [`ConfigError::Unsupported`]: `flush`,
//! `delete rule` (it needs a handle), rule positions (`position`, `handle`, `index`), `nft -f`.
//!
//! `tc qdisc|class|filter add|replace|change dev X ARGS` is the line `qdisc|class|filter ARGS`
//! under `dev X`, in lower case; a qdisc's position comes first (`qdisc root tbf rate 8kbit
//! ...`) and its handle is dropped, because `tc qdisc show` prints a handle the kernel chose
//! whether or not one was typed. `tc qdisc show` lines read into the same form (`lat` is
//! `latency`, `refcnt` is dropped; htb's computed `r2q 10`, `direct_*` go, its `default 0x20` is
//! `default 20`) and the kernel's default qdiscs (handle `0:`) are skipped. Classes read back
//! too (`class CLASSID root|parent X KIND PARAMS`, htb's `ceil` defaulting to its `rate`, the
//! kernel's computed `burst`/`cburst`/`prio 0` left out). Filters read back from `tc filter show`
//! (folded one per line by [`tc_filter_listing`]): u32 selectors as the kernel keeps them
//! (`match ip dst 10.0.0.0/24` is `match 0a000000/ffffff00 at 16`), `classid` as `flowid`, a
//! priority the kernel chose left out. `sysctl -w KEY=VALUE` and a `sysctl -a` listing's `KEY =
//! VALUE` are the line `sysctl KEY VALUE`, one per key.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use serde::Serialize;
use thiserror::Error;

/// One command line and the lines nested under it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Node {
    /// The normalised line: trimmed, whitespace collapsed.
    pub line: String,
    pub children: Vec<Node>,
}

impl Node {
    pub fn new(line: impl Into<String>) -> Self {
        Node { line: line.into(), children: Vec::new() }
    }
}

/// A device configuration: its top-level lines, in the order they were read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Config {
    pub nodes: Vec<Node>,
}

/// Which reader a text goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Dialect {
    /// FRR's vtysh (and IOS-style) configurations and commands. `nft ...`, `tc ...` and `sysctl ...`
    /// command lines go to the Linux reader, as nothing in vtysh starts with them.
    Frr,
    /// nftables listings and `nft` commands, `tc qdisc|class show` lines, folded `tc filter
    /// show` lines and `tc` commands, `sysctl` listings and writes. Other Linux commands (`ip
    /// link ...`) leave nothing these listings show and are skipped in command lists.
    Linux,
    /// Cisco IOS configurations and commands: FRR's reader, where IOS differs: every banner is
    /// delimited (`banner motd ^C ... ^C`), and the port names IOS prints in access-lists
    /// (`eq www`) are their numbers (`eq 80`), so that either spelling compares equal.
    Ios,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    #[error("line {line}: `}}` closes no block")]
    UnbalancedClose { line: usize },
    #[error("{open} nftables block(s) still open at the end of the text")]
    UnclosedBlock { open: usize },
    #[error("line {line}: cannot read `{text}`: {reason}")]
    Malformed { line: usize, text: String, reason: &'static str },
    #[error("line {line}: `{text}` is not supported: {reason}")]
    Unsupported { line: usize, text: String, reason: &'static str },
}

/// The commands that open a section, each with where it may be opened: a list of parent
/// patterns, each pattern the word-prefixes of the innermost enclosing sections, outermost
/// first; the empty pattern is the top level. A header typed where none of its patterns
/// matches is an ordinary line (`vni 100` inside `vrf` is a setting, inside `address-family
/// l2vpn evpn` a section).
pub const SECTIONS: &[(&str, &[&[&str]])] = &[
    ("interface", &[&[], &["mpls ldp", "address-family"]]),
    ("router", &[&[]]),
    ("route-map", &[&[]]),
    ("key chain", &[&[]]),
    ("key", &[&["key chain"]]),
    ("line", &[&[]]),
    ("vrf", &[&[]]),
    ("segment-routing", &[&[]]),
    ("traffic-eng", &[&["segment-routing"]]),
    ("mpls ldp", &[&[]]),
    ("address-family", &[&["router bgp"], &["mpls ldp"], &["vrf"]]),
    ("vni", &[&["address-family l2vpn evpn"]]),
    ("nexthop-group", &[&[]]),
    ("pbr-map", &[&[]]),
    ("bfd", &[&[]]),
    ("peer", &[&["bfd"]]),
    ("profile", &[&["bfd"]]),
    ("rpki", &[&[]]),
    ("control-plane", &[&[]]),
    ("class-map", &[&[]]),
    ("policy-map", &[&[]]),
    ("class", &[&["policy-map"]]),
    // Named ACLs open a section only in their IOS form; see `opener_patterns`.
    ("ip access-list", &[&[]]),
    ("ipv6 access-list", &[&[]]),
    ("mac access-list", &[&[]]),
    // IOS sections, for flat typed lists (a printed configuration nests by indentation alone).
    // `crypto map` and `ip sla` open one only in some forms; see `opener_patterns`.
    ("ip vrf", &[&[]]),
    ("vrf definition", &[&[]]),
    ("ip dhcp pool", &[&[]]),
    ("ipv6 dhcp pool", &[&[]]),
    ("vlan", &[&[]]),
    ("crypto isakmp policy", &[&[]]),
    ("crypto isakmp profile", &[&[]]),
    ("crypto ipsec profile", &[&[]]),
    ("crypto keyring", &[&[]]),
    ("crypto map", &[&[]]),
    ("ip sla", &[&[]]),
    ("track", &[&[]]),
    ("ipv6 router", &[&[]]),
    ("aaa group server", &[&[]]),
    ("object-group", &[&[]]),
    ("zone-pair", &[&[]]),
    ("zone security", &[&[]]),
    ("parameter-map", &[&[]]),
    ("archive", &[&[]]),
    ("event manager applet", &[&[]]),
    ("spanning-tree mst configuration", &[&[]]),
    ("redundancy", &[&[]]),
];

/// Commands that exist only at the top level (or inside a section that accepts them, see
/// [`NESTED_COMMANDS`]): in a flat typed list, one closes whatever section is open. Words that
/// also start a line inside some section are left out (`version` in `router rip`, IOS's
/// `password` and `logging` under `line`, `clock rate` under an interface): a flat list
/// reaches the top level from those sections by `exit` or a header.
pub const TOP_LEVEL: &[&str] = &[
    "ip route",
    "ipv6 route",
    "ip prefix-list",
    "ipv6 prefix-list",
    "access-list",
    "ipv6 access-list",
    "ip as-path",
    "ip community-list",
    "ip extcommunity-list",
    "bgp as-path",
    "bgp community-list",
    "bgp large-community-list",
    "bgp extcommunity-list",
    "hostname",
    "enable password",
    "enable secret",
    "log",
    "service",
    "ip forwarding",
    "ipv6 forwarding",
    "ip nht",
    "ipv6 nht",
    "ip protocol",
    "ipv6 protocol",
    "ip import-table",
    "debug",
    "agentx",
    "zebra",
    "mpls label",
    "mpls lsp",
    "fpm",
    "username",
    "banner",
    "ntp",
    "snmp-server",
    "ip domain-name",
    "ip domain-lookup",
    "ip name-server",
    "ip cef",
    "ip routing",
    "ip classless",
    "ipv6 unicast-routing",
    "boot-start-marker",
    "boot-end-marker",
    // IOS; their section forms (`ip sla 1`, `crypto map CM 10 ...`, `crypto isakmp policy 10`)
    // are headers, which are matched first.
    "ip sla",
    "crypto map",
    "crypto isakmp",
    "crypto ipsec",
    "ip dhcp excluded-address",
    "aaa",
];

/// Top-level commands a section accepts as its own (`vrf RED` > `ip route ...`).
pub const NESTED_COMMANDS: &[(&str, &[&str])] = &[(
    "vrf",
    &["ip route", "ipv6 route", "ip protocol", "ipv6 protocol", "ip nht", "ipv6 nht", "ip import-table"],
)];

/// Settings that are on by default: FRR prints only their negation (`no ipv6 forwarding`,
/// ` no bgp network import-check`), so typing the positive form removes the `no` line and
/// prints nothing, and typing `no X` adds a `no X` line. For any other `X`, `no X` only
/// removes (`no shutdown` on an interface that is up prints nothing). `*` is any one word.
/// Checked on FRR 8.4.4 with `frr defaults traditional`; `neighbor X activate` is a default
/// only while `bgp default ipv4-unicast` is (FRR prints the positive form after
/// `no bgp default ipv4-unicast`), which this context-free table cannot follow.
pub const NEGATED_DEFAULTS: &[&str] = &[
    "ip forwarding",
    "ipv6 forwarding",
    "bgp ebgp-requires-policy",
    "bgp default ipv4-unicast",
    "bgp network import-check",
    "bgp suppress-duplicates",
    "neighbor * activate",
    "ip rip split-horizon",
    "ipv6 nd suppress-ra",
    // IOS.
    "auto-summary",
    "synchronization",
    "ip split-horizon",
    "ip domain-lookup",
];

/// Commands that hold one value in their context: typing one replaces the line it conflicts
/// with (`ip ospf cost 30` replaces `ip ospf cost 20`). `?` is the value being replaced, `*` a
/// word that must be equal for two lines to conflict, a final `...` any further words.
pub const SINGLE_VALUED: &[&str] = &[
    "hostname ?",
    "description ...",
    "ospf router-id ?",
    "bgp router-id ?",
    "router-id ?",
    "ip ospf cost ?",
    "ip ospf hello-interval ?",
    "ip ospf dead-interval ...",
    "ip ospf priority ?",
    "ip ospf network ?",
    "ip ospf area ?",
    "ip ospf retransmit-interval ?",
    "ip ospf transmit-delay ?",
    "ipv6 ospf6 cost ?",
    "ipv6 ospf6 hello-interval ?",
    "ipv6 ospf6 dead-interval ?",
    "ip rip authentication mode ...",
    "ip rip authentication key-chain ?",
    "ip rip authentication string ?",
    "bandwidth ?",
    "mtu ?",
    "set metric ?",
    "set local-preference ?",
    "set weight ?",
    "set origin ?",
    "set tag ?",
    "set ip next-hop ?",
    "set community ...",
    "match ip address ?",
    "match ip address prefix-list ?",
    "match ipv6 address ?",
    "match ipv6 address prefix-list ?",
    "match as-path ?",
    "match community ...",
    "match interface ?",
    "match tag ?",
    "match metric ?",
    "default-metric ?",
    "distance ?",
    "distance bgp ...",
    "auto-cost reference-bandwidth ?",
    "timers basic ...",
    "timers throttle spf ...",
    "version ?",
    "redistribute * ...",
    "default-information originate ...",
    "neighbor * remote-as ?",
    "neighbor * description ...",
    "neighbor * password ?",
    "neighbor * update-source ?",
    "neighbor * ebgp-multihop ...",
    // FRR keeps `timers connect N` apart from the keepalive/hold `timers K H`.
    "neighbor * timers connect ?",
    "neighbor * timers delayopen ?",
    "neighbor * timers ...",
    "neighbor * weight ?",
    "neighbor * route-map ? in",
    "neighbor * route-map ? out",
    "neighbor * prefix-list ? in",
    "neighbor * prefix-list ? out",
    "neighbor * filter-list ? in",
    "neighbor * filter-list ? out",
    "neighbor * distribute-list ? in",
    "neighbor * distribute-list ? out",
    "key-string ?",
    "banner * ...",
    "policy ?",
    "qdisc root ...",
    "qdisc ingress ...",
    // A class is one per class id: `tc class change|replace` gives it new parameters.
    "class * ...",
    "qdisc clsact ...",
    "qdisc parent * ...",
    "class parent * classid * ...",
    // One value per key: `sysctl -w K=V` replaces what the listing read.
    "sysctl * ?",
];

/// nftables families: the optional first argument of `nft add table|chain|rule ...`.
const NFT_FAMILIES: [&str; 6] = ["ip", "ip6", "inet", "arp", "bridge", "netdev"];

impl Config {
    /// Reads a configuration as the device prints it.
    pub fn parse(text: &str, dialect: Dialect) -> Result<Config, ConfigError> {
        let mut builder = Builder::default();
        match dialect {
            Dialect::Frr | Dialect::Ios => {
                let mut reader = FrrReader::new(dialect);
                let mut linux = LinuxReader::default();
                let mut lines = 0;
                for (n, raw) in text.lines().enumerate() {
                    lines = n + 1;
                    if dialect == Dialect::Frr && is_linux_command(raw) {
                        for stmt in linux.read(n + 1, raw, true)? {
                            builder.add(stmt, n + 1)?;
                        }
                    } else if let Some(stmt) = reader.read(raw) {
                        builder.add(stmt, n + 1)?;
                    }
                }
                if let Some(stmt) = reader.finish() {
                    builder.add(stmt, lines)?;
                }
                linux.finish()?;
            }
            Dialect::Linux => {
                let mut reader = LinuxReader::default();
                for (n, raw) in text.lines().enumerate() {
                    for stmt in reader.read(n + 1, raw, false)? {
                        builder.add(stmt, n + 1)?;
                    }
                }
                reader.finish()?;
            }
        }
        Ok(builder.config)
    }

    /// The configuration these commands leave on a device that had none.
    pub fn from_commands<S: AsRef<str>>(commands: &[S], dialect: Dialect) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        config.apply(commands, dialect)?;
        Ok(config)
    }

    /// Applies typed commands (each entry may hold several lines) as the device would. Costs
    /// a scan of the siblings per command: meant for command lists, not whole listings.
    pub fn apply<S: AsRef<str>>(&mut self, commands: &[S], dialect: Dialect) -> Result<(), ConfigError> {
        let mut frr = FrrReader::new(dialect);
        let mut linux = LinuxReader::default();
        let mut n = 0;
        for command in commands {
            for raw in command.as_ref().lines() {
                n += 1;
                let stmts = if dialect == Dialect::Linux || dialect == Dialect::Frr && is_linux_command(raw) {
                    linux.read(n, raw, true)?
                } else {
                    frr.read(raw).into_iter().collect()
                };
                for stmt in stmts {
                    apply_stmt(&mut self.nodes, stmt);
                }
            }
        }
        if let Some(stmt) = frr.finish() {
            apply_stmt(&mut self.nodes, stmt);
        }
        linux.finish()
    }

    /// Adds another configuration's lines (a device's FRR and Linux parts), merging sections
    /// with the same header.
    pub fn merge(&mut self, other: Config) {
        merge_nodes(&mut self.nodes, other.nodes);
    }

    /// Every line with its ancestors, outermost first, depth-first.
    pub fn paths(&self) -> Vec<Vec<String>> {
        fn walk(nodes: &[Node], prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
            for n in nodes {
                prefix.push(n.line.clone());
                out.push(prefix.clone());
                walk(&n.children, prefix, out);
                prefix.pop();
            }
        }
        let mut out = Vec::new();
        walk(&self.nodes, &mut Vec::new(), &mut out);
        out
    }

    /// The number of lines.
    pub fn len(&self) -> usize {
        fn count(nodes: &[Node]) -> usize {
            nodes.iter().map(|n| 1 + count(&n.children)).sum()
        }
        count(&self.nodes)
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The tree as text, one space of indentation per level.
    pub fn render(&self) -> String {
        fn walk(nodes: &[Node], depth: usize, out: &mut String) {
            for n in nodes {
                out.extend(std::iter::repeat_n(' ', depth));
                out.push_str(&n.line);
                out.push('\n');
                walk(&n.children, depth + 1, out);
            }
        }
        let mut out = String::new();
        walk(&self.nodes, 0, &mut out);
        out
    }
}

fn merge_nodes(into: &mut Vec<Node>, from: Vec<Node>) {
    let mut index: HashMap<String, usize> = into
        .iter()
        .enumerate()
        .filter(|(_, n)| !n.children.is_empty())
        .map(|(i, n)| (n.line.clone(), i))
        .collect();
    for node in from {
        match index.get(&node.line) {
            Some(&i) if !node.children.is_empty() => merge_nodes(&mut into[i].children, node.children),
            _ => {
                if !node.children.is_empty() {
                    index.insert(node.line.clone(), into.len());
                }
                into.push(node);
            }
        }
    }
}

/// What a reader makes of one line: where it goes and what it does.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stmt {
    context: Vec<String>,
    line: String,
    /// The line is a section header: reading it again enters the same section.
    opens: bool,
    op: Op,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// The line holds (FRR configuration, chain specs, set elements): idempotent.
    Set,
    /// A new rule at the end of its chain, even if an equal one exists.
    Append,
    /// A new rule at the start of its chain.
    Prepend,
    /// Remove the line (`no X`, `nft delete`, `tc ... del`).
    Unset,
}

impl Stmt {
    fn new(context: Vec<String>, line: String, opens: bool, op: Op) -> Self {
        Stmt { context, line, opens, op }
    }
}

/// Builds a listing's tree by appending. Statements arrive along one path at a time (the
/// reader's open sections), so the builder keeps that path's positions and looks sections up
/// by path only when the text enters one again (FRR prints each section once; a typed list may
/// not): a listing of any size reads in linear time.
#[derive(Default)]
struct Builder {
    config: Config,
    /// The lines of the last statement's path, and their positions.
    lines: Vec<String>,
    at: Vec<usize>,
    /// Sections by path, to merge a section entered again.
    sections: HashMap<Vec<String>, Vec<usize>>,
}

impl Builder {
    fn add(&mut self, stmt: Stmt, line: usize) -> Result<(), ConfigError> {
        if stmt.op == Op::Unset {
            return Err(ConfigError::Unsupported {
                line,
                text: stmt.line,
                reason: "a listing holds state; removals belong in a command list",
            });
        }
        let same = self.lines.iter().zip(&stmt.context).take_while(|(a, b)| a == b).count();
        self.lines.truncate(same);
        self.at.truncate(same);
        for depth in same..stmt.context.len() {
            let key = &stmt.context[..=depth];
            match self.sections.get(key) {
                Some(at) => self.at.clone_from(at),
                None => {
                    // A section the text never opened itself.
                    let siblings = children_mut(&mut self.config.nodes, &self.at);
                    self.at.push(siblings.len());
                    siblings.push(Node::new(key[depth].clone()));
                    self.sections.insert(key.to_vec(), self.at.clone());
                }
            }
            self.lines.push(key[depth].clone());
        }
        self.lines.push(stmt.line);
        if stmt.opens
            && let Some(at) = self.sections.get(&self.lines)
        {
            self.at.clone_from(at);
            return Ok(());
        }
        let siblings = children_mut(&mut self.config.nodes, &self.at);
        self.at.push(siblings.len());
        siblings.push(Node::new(self.lines.last().cloned().unwrap_or_default()));
        if stmt.opens {
            self.sections.insert(self.lines.clone(), self.at.clone());
        }
        Ok(())
    }
}

/// The children list at an index path (empty path: the top level). `Builder` only holds index
/// paths of nodes it pushed, and never removes any.
fn children_mut<'a>(mut nodes: &'a mut Vec<Node>, at: &[usize]) -> &'a mut Vec<Node> {
    for &i in at {
        let len = nodes.len();
        // Only reachable through a stale index, which `Builder` never produces; fall back to
        // the deepest valid level rather than panic.
        if i >= len {
            break;
        }
        nodes = &mut nodes[i].children;
    }
    nodes
}

// ---------------------------------------------------------------------------------------------
// FRR / IOS reader

#[derive(Debug, Clone)]
struct Frame {
    line: String,
    indent: usize,
    /// A header from [`SECTIONS`]. Other indented lines are pushed too, as possible parents of
    /// deeper lines, so that unknown nested blocks of an indented listing keep their shape.
    real: bool,
    indented_children: bool,
}

#[derive(Debug)]
struct FrrReader {
    stack: Vec<Frame>,
    ios: bool,
    /// A banner whose closing delimiter has not been read yet.
    banner: Option<Banner>,
}

#[derive(Debug)]
struct Banner {
    /// `banner motd`.
    head: String,
    delimiter: String,
    body: Vec<String>,
}

impl Banner {
    /// Reads one line of the body; `true` once the closing delimiter was in it.
    fn push(&mut self, text: &str) -> bool {
        match text.find(&self.delimiter) {
            Some(at) => {
                self.body.push(text[..at].to_string());
                true
            }
            None => {
                self.body.push(text.to_string());
                false
            }
        }
    }

    /// The banner as one line: its body's lines trimmed, without the blank lines that open and
    /// close it, between `^C`s (the delimiter IOS prints, whichever was typed).
    fn stmt(self) -> Stmt {
        let lines: Vec<&str> = self.body.iter().map(|l| l.trim()).collect();
        let first = lines.iter().position(|l| !l.is_empty()).unwrap_or(lines.len());
        let last = lines.iter().rposition(|l| !l.is_empty()).map_or(first, |i| i + 1);
        let body = lines[first..last.max(first)].join("\n");
        Stmt::new(Vec::new(), format!("{} ^C{body}^C", self.head), false, Op::Set)
    }
}

impl FrrReader {
    fn new(dialect: Dialect) -> Self {
        FrrReader { stack: Vec::new(), ios: dialect == Dialect::Ios, banner: None }
    }

    /// What is left at the end of the text: a banner never closed keeps the body read so far.
    fn finish(&mut self) -> Option<Stmt> {
        self.banner.take().map(Banner::stmt)
    }

    /// A delimited banner starting on this line: `banner TYPE D...D`, the delimiter `D` being
    /// the first character after the type (`^C` as IOS prints it counts as one). FRR's own
    /// `banner motd line TEXT|file PATH|default` is one ordinary line.
    fn banner_start(&self, trimmed: &str) -> Option<Banner> {
        let rest = trimmed.strip_prefix("banner")?;
        let rest = rest.strip_prefix([' ', '\t'])?.trim_start();
        let (kind, rest) = rest.split_once([' ', '\t'])?;
        let rest = rest.trim_start();
        let first_word = rest.split_whitespace().next()?;
        if !self.ios && matches!(first_word, "line" | "file" | "default") {
            return None;
        }
        let delimiter: String =
            if rest.starts_with("^C") { "^C".into() } else { rest.chars().next()?.to_string() };
        Some(Banner { head: format!("banner {kind}"), delimiter, body: Vec::new() })
    }

    fn read_banner(&mut self, raw: &str) -> Option<Stmt> {
        let banner = self.banner.as_mut()?;
        if banner.push(raw.trim_end_matches('\r')) { self.finish() } else { None }
    }
    fn context(&self) -> Vec<String> {
        self.stack.iter().map(|f| f.line.clone()).collect()
    }

    fn pop_weak(&mut self) {
        while self.stack.last().is_some_and(|f| !f.real) {
            self.stack.pop();
        }
    }

    fn read(&mut self, raw: &str) -> Option<Stmt> {
        if self.banner.is_some() {
            return self.read_banner(raw);
        }
        let raw = raw.trim_end_matches('\r');
        let trimmed = raw.trim();
        let indent = raw.len() - raw.trim_start().len();
        if trimmed.is_empty() {
            return None;
        }
        if let Some(mut banner) = self.banner_start(trimmed) {
            self.stack.clear();
            let after =
                trimmed.find(&banner.delimiter).map_or("", |at| &trimmed[at + banner.delimiter.len()..]);
            if banner.push(after) {
                return Some(banner.stmt());
            }
            self.banner = Some(banner);
            return None;
        }
        if trimmed.starts_with('!') {
            self.stack.retain(|f| f.indent < indent);
            return None;
        }
        let mut line = normalise_frr(trimmed);
        if self.ios {
            line = port_numbers(&line);
        }
        if is_noise(&line) {
            return None;
        }
        match line.as_str() {
            "end" => {
                self.stack.clear();
                return None;
            }
            "exit" | "quit" => {
                self.pop_weak();
                self.stack.pop();
                return None;
            }
            _ => {}
        }
        if let Some(section) = line.strip_prefix("exit-") {
            if let Some(i) = self.stack.iter().rposition(|f| starts_with_words(&f.line, section)) {
                self.stack.truncate(i);
            }
            return None;
        }
        let negated = line.starts_with("no ");
        let subject = line.strip_prefix("no ").unwrap_or(&line).to_string();

        // Indentation decides where an indented line goes, whatever its words.
        if indent > 0 {
            self.stack.retain(|f| f.indent < indent);
            if let Some(parent) = self.stack.last_mut() {
                parent.indented_children = true;
                let context = self.context();
                let real = !negated && self.nested_depth(&line) == Some(self.stack.len());
                if !negated {
                    self.stack.push(Frame { line: line.clone(), indent, real, indented_children: false });
                }
                return Some(Stmt::new(context, line, real, Op::Set));
            }
        }

        // A flat line: its words decide.
        let dedented = self.stack.iter().any(|f| f.indented_children);
        self.pop_weak();
        if let Some(depth) = self.nested_depth(&subject) {
            // A nested header finds its parent even after a dedent (a sloppy typed list).
            self.stack.truncate(depth);
            let context = self.context();
            if !negated {
                self.stack.push(Frame { line: line.clone(), indent, real: true, indented_children: false });
            }
            return Some(Stmt::new(context, line, !negated, Op::Set));
        }
        if TOP_LEVEL.iter().any(|t| starts_with_words(&subject, t)) {
            let accepting = if dedented {
                None
            } else {
                self.stack.iter().rposition(|f| {
                    NESTED_COMMANDS.iter().any(|(section, commands)| {
                        starts_with_words(&f.line, section)
                            && commands.iter().any(|c| starts_with_words(&subject, c))
                    })
                })
            };
            self.stack.truncate(accepting.map_or(0, |i| i + 1));
            let stmt = Stmt::new(self.context(), line.clone(), false, Op::Set);
            self.may_open(line, indent, negated);
            return Some(stmt);
        }
        if dedented {
            self.stack.clear();
        }
        let stmt = Stmt::new(self.context(), line.clone(), false, Op::Set);
        self.may_open(line, indent, negated);
        Some(stmt)
    }

    /// In a printed configuration any line with more indented lines under it is a section,
    /// known keyword or not (`ip vrf`, `vlan`, `crypto map`, `event manager applet`): a
    /// top-level line is kept as a possible parent, which the next unindented line drops.
    fn may_open(&mut self, line: String, indent: usize, negated: bool) {
        if self.stack.is_empty() && !negated {
            self.stack.push(Frame { line, indent, real: false, indented_children: false });
        }
    }

    /// Where `line` would open a section: the number of enclosing frames it stays under, or
    /// `None` if it opens nothing here.
    fn nested_depth(&self, line: &str) -> Option<usize> {
        let patterns = opener_patterns(line)?;
        (0..=self.stack.len()).rev().find(|&depth| {
            patterns.iter().any(|pattern| match pattern.len() {
                0 => depth == 0,
                n if n > depth => false,
                n => pattern
                    .iter()
                    .zip(&self.stack[depth - n..depth])
                    .all(|(want, frame)| frame.real && starts_with_words(&frame.line, want)),
            })
        })
    }
}

/// The parent patterns of a section header, if `line` is one.
fn opener_patterns(line: &str) -> Option<&'static [&'static [&'static str]]> {
    let words: Vec<&str> = line.split(' ').collect();
    // FRR's `access-list NAME seq 5 permit ...` and `ipv6 access-list NAME seq 5 ...` are
    // entries; only IOS's `ip access-list standard|extended NAME` and `ipv6 access-list NAME`
    // open a list of entries.
    let named_acl = match words.as_slice() {
        ["ip" | "mac", "access-list", "standard" | "extended", _] => Some(true),
        ["ipv6", "access-list", _] => Some(true),
        [_, "access-list", ..] => Some(false),
        _ => None,
    };
    if named_acl == Some(false) {
        return None;
    }
    // `crypto map NAME SEQ ...` is an entry with settings under it, `crypto map NAME
    // local-address X` one line; `ip sla N` a probe, `ip sla schedule|responder|...` one line.
    match words.as_slice() {
        ["crypto", "map", _, seq, ..] if seq.parse::<u64>().is_err() => return None,
        ["crypto", "map", ..] if words.len() < 4 => return None,
        ["ip", "sla", n, ..] if n.parse::<u64>().is_err() => return None,
        _ => {}
    }
    SECTIONS
        .iter()
        // Longest keyword first: `key chain` before `key`.
        .filter(|(keyword, _)| starts_with_words(line, keyword))
        .max_by_key(|(keyword, _)| keyword.len())
        .map(|(_, patterns)| *patterns)
}

fn is_noise(line: &str) -> bool {
    const EXACT: [&str; 4] = ["configure", "conf t", "enable", "vtysh"];
    const WORDS: [&str; 7] =
        ["frr version", "frr defaults", "configure terminal", "do", "show", "write", "copy"];
    line.starts_with("Building configuration")
        || line.starts_with("Current configuration")
        || EXACT.contains(&line)
        || WORDS.iter().any(|p| starts_with_words(line, p))
}

/// True when the words of `line` begin with the words of `prefix`.
pub(crate) fn starts_with_words(line: &str, prefix: &str) -> bool {
    line.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
}

fn collapse(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Collapses whitespace and writes netmask forms as FRR prints them.
fn normalise_frr(line: &str) -> String {
    let mut words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let joined = |words: &mut Vec<String>, at: usize, len: u32| {
        let prefix = format!("{}/{len}", words[at]);
        words.splice(at..at + 2, [prefix]);
    };
    let ipv4 = |w: &str| w.parse::<Ipv4Addr>().ok();
    match words.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["ip", "route", addr, mask, ..] | ["ip", "address", addr, mask, ..]
            if ipv4(addr).is_some() && ipv4(mask).is_some() =>
        {
            if let Some(len) = ipv4(mask).and_then(netmask_len) {
                joined(&mut words, 2, len);
            }
        }
        ["network", addr, wildcard, "area", ..] if ipv4(addr).is_some() => {
            if let Some(len) = ipv4(wildcard).and_then(wildcard_len) {
                joined(&mut words, 1, len);
            }
        }
        _ => {}
    }
    words.join(" ")
}

fn netmask_len(mask: Ipv4Addr) -> Option<u32> {
    let m = u32::from(mask);
    (m.leading_ones() + m.trailing_zeros() >= 32).then_some(m.leading_ones())
}

/// The port names IOS prints in access-list entries, with their numbers (TCP and UDP names
/// together: no name means two numbers).
pub const IOS_PORT_NAMES: &[(&str, u16)] = &[
    ("echo", 7),
    ("discard", 9),
    ("daytime", 13),
    ("chargen", 19),
    ("ftp-data", 20),
    ("ftp", 21),
    ("telnet", 23),
    ("smtp", 25),
    ("time", 37),
    ("nameserver", 42),
    ("whois", 43),
    ("tacacs", 49),
    ("domain", 53),
    ("bootps", 67),
    ("bootpc", 68),
    ("tftp", 69),
    ("gopher", 70),
    ("finger", 79),
    ("www", 80),
    ("hostname", 101),
    ("pop2", 109),
    ("pop3", 110),
    ("sunrpc", 111),
    ("ident", 113),
    ("nntp", 119),
    ("ntp", 123),
    ("netbios-ns", 137),
    ("netbios-dgm", 138),
    ("netbios-ss", 139),
    ("snmp", 161),
    ("snmptrap", 162),
    ("xdmcp", 177),
    ("bgp", 179),
    ("irc", 194),
    ("dnsix", 195),
    ("mobile-ip", 434),
    ("pim-auto-rp", 496),
    ("isakmp", 500),
    ("biff", 512),
    ("exec", 512),
    ("login", 513),
    ("who", 513),
    ("cmd", 514),
    ("syslog", 514),
    ("lpd", 515),
    ("talk", 517),
    ("rip", 520),
    ("uucp", 540),
    ("klogin", 543),
    ("kshell", 544),
    ("drip", 3949),
    ("non500-isakmp", 4500),
];

/// An access-list entry with the port names IOS prints written as numbers: what follows
/// `eq`, `neq`, `lt`, `gt` (one port) and `range` (two) in a `tcp` or `udp` entry.
fn port_numbers(line: &str) -> String {
    let words: Vec<&str> = line.split(' ').collect();
    let is_entry = words.iter().any(|w| matches!(*w, "permit" | "deny"))
        && words.iter().any(|w| matches!(*w, "tcp" | "udp"));
    if !is_entry {
        return line.to_string();
    }
    let number = |w: &str| IOS_PORT_NAMES.iter().find(|(name, _)| *name == w).map(|(_, n)| n.to_string());
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut ports = 0;
    for w in words {
        if ports > 0 {
            ports -= 1;
            out.push(number(w).unwrap_or_else(|| w.to_string()));
            continue;
        }
        ports = match w {
            "eq" | "neq" | "lt" | "gt" => 1,
            "range" => 2,
            _ => 0,
        };
        out.push(w.to_string());
    }
    out.join(" ")
}

fn wildcard_len(wildcard: Ipv4Addr) -> Option<u32> {
    let w = u32::from(wildcard);
    (w.leading_zeros() + w.trailing_ones() >= 32).then_some(w.leading_zeros())
}

// ---------------------------------------------------------------------------------------------
// Ordered entries, shared with the diff

/// A line that is one entry of an ordered list: the device evaluates the list top down and
/// stops at the first match, so the entries' order is part of the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The list the entry belongs to among its siblings (`access-list 10`, `route-map RM`).
    pub group: String,
    /// The sequence number it was given, if any.
    pub seq: Option<u64>,
    /// The entry without its sequence number: what makes two entries the same.
    pub key: String,
}

/// Whether `line`, under `context`, is an entry of an ordered list (see the `diff` module for
/// which lists are ordered and why).
pub(crate) fn entry(context: &[String], line: &str) -> Option<Entry> {
    let words: Vec<&str> = line.split(' ').collect();
    if let [.., parent] = context
        && is_named_acl_header(parent)
    {
        let (seq, key) = match words.split_first() {
            Some((first, rest)) if first.parse::<u64>().is_ok() => (first.parse().ok(), rest.join(" ")),
            _ => (None, line.to_string()),
        };
        return Some(Entry { group: "entries".into(), seq, key });
    }
    if let [table, chain] = context
        && table.starts_with("table ")
        && chain.starts_with("chain ")
    {
        let spec = ["type", "policy", "comment", "devices"];
        return (!words.first().is_some_and(|w| spec.contains(w))).then(|| Entry {
            group: "rules".into(),
            seq: None,
            key: line.to_string(),
        });
    }
    if !context.is_empty() {
        return None;
    }
    let name_at = match words.as_slice() {
        ["route-map", name, "permit" | "deny", rest @ ..] => {
            return Some(Entry {
                group: format!("route-map {name}"),
                seq: rest.first().and_then(|s| s.parse().ok()),
                key: words[..3].join(" "),
            });
        }
        ["access-list", _, kind, ..] if *kind != "remark" => 1,
        ["ipv6", "access-list", _, kind, ..] if *kind != "remark" => 2,
        ["ip" | "ipv6", "prefix-list", _, "seq" | "permit" | "deny", ..] => 2,
        ["bgp" | "ip", "as-path", "access-list", _, _, ..] => 3,
        [
            "bgp" | "ip",
            "community-list" | "large-community-list" | "extcommunity-list",
            "standard" | "expanded",
            _,
            _,
            ..,
        ] => 3,
        ["bgp" | "ip", "community-list" | "large-community-list" | "extcommunity-list", _, _, ..] => 2,
        _ => return None,
    };
    let group = words[..=name_at].join(" ");
    let rest = &words[name_at + 1..];
    let (seq, key) = match rest {
        ["seq", n, tail @ ..] => match n.parse::<u64>() {
            Ok(n) => (Some(n), format!("{group} {}", tail.join(" "))),
            Err(_) => (None, line.to_string()),
        },
        _ => (None, line.to_string()),
    };
    Some(Entry { group, seq, key: key.trim_end().to_string() })
}

pub(crate) fn is_named_acl_header(line: &str) -> bool {
    let words: Vec<&str> = line.split(' ').collect();
    matches!(
        words.as_slice(),
        ["ip" | "mac", "access-list", "standard" | "extended", _] | ["ipv6", "access-list", _]
    )
}

/// The sequence numbers a device gives a list's entries: a number typed with the entry, else,
/// for IOS's named access-lists (`group` is `entries`), the highest so far plus 10, and for
/// FRR's lists the highest so far rounded down to a multiple of 5, plus 5. Past `u64::MAX` the
/// number stays `u64::MAX`: a typed number can be that large (a device would refuse it), and the
/// entries that follow it then share it, in list order, after it.
pub(crate) fn effective_seqs(group: &str, entries: &[Option<u64>]) -> Vec<u64> {
    let ios = group == "entries";
    let mut max: u64 = 0;
    entries
        .iter()
        .map(|seq| {
            let s = seq.unwrap_or(if ios { max.saturating_add(10) } else { (max / 5 * 5).saturating_add(5) });
            max = max.max(s);
            s
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Applying commands

fn apply_stmt(nodes: &mut Vec<Node>, stmt: Stmt) {
    let mut siblings = nodes;
    let mut context: Vec<String> = Vec::new();
    for line in &stmt.context {
        let at = match find_section(siblings, &context, line) {
            Some(at) => at,
            None => {
                set_line(siblings, &context, line);
                match find_section(siblings, &context, line) {
                    Some(at) => at,
                    None => {
                        siblings.push(Node::new(line.clone()));
                        siblings.len() - 1
                    }
                }
            }
        };
        context.push(line.clone());
        let len = siblings.len();
        if at >= len {
            return;
        }
        siblings = &mut siblings[at].children;
    }
    match stmt.op {
        Op::Set => match stmt.line.strip_prefix("no ") {
            Some(subject) => unset_line(siblings, &context, subject),
            None => set_line(siblings, &context, &stmt.line),
        },
        Op::Unset => unset_line(siblings, &context, &stmt.line),
        Op::Append => siblings.push(Node::new(stmt.line)),
        Op::Prepend => {
            let first_rule =
                siblings.iter().position(|n| entry(&context, &n.line).is_some()).unwrap_or(siblings.len());
            siblings.insert(first_rule, Node::new(stmt.line));
        }
    }
}

/// The section to enter for a context line: that line, or the ordered entry it names (by its
/// number where it has one: `route-map RM deny 10` enters entry 10 whatever its action).
fn find_section(siblings: &[Node], context: &[String], line: &str) -> Option<usize> {
    siblings.iter().position(|n| n.line == line).or_else(|| {
        let want = entry(context, line)?;
        let members: Vec<(usize, Entry)> = siblings
            .iter()
            .enumerate()
            .filter_map(|(i, n)| entry(context, &n.line).filter(|e| e.group == want.group).map(|e| (i, e)))
            .collect();
        match want.seq {
            Some(s) => {
                let seqs =
                    effective_seqs(&want.group, &members.iter().map(|(_, e)| e.seq).collect::<Vec<_>>());
                seqs.iter().position(|&x| x == s).map(|k| members[k].0)
            }
            None => members.iter().find(|(_, e)| e.key == want.key).map(|(i, _)| *i),
        }
    })
}

fn set_line(siblings: &mut Vec<Node>, context: &[String], line: &str) {
    if siblings.iter().any(|n| n.line == line) {
        return;
    }
    let negation = format!("no {line}");
    if let Some(i) = siblings.iter().position(|n| n.line == negation) {
        siblings.remove(i);
        return;
    }
    if NEGATED_DEFAULTS.iter().any(|p| matches_pattern(line, p)) {
        return;
    }
    if let Some(new) = entry(context, line) {
        set_entry(siblings, context, line, new);
        return;
    }
    if let Some(key) = conflict_key(line) {
        let conflicts = |n: &Node| conflict_key(&n.line).as_deref() == Some(key.as_str());
        if let Some(i) = siblings.iter().position(conflicts) {
            siblings[i] = Node::new(line);
            let mut k = i + 1;
            while k < siblings.len() {
                if conflicts(&siblings[k]) {
                    siblings.remove(k);
                } else {
                    k += 1;
                }
            }
            return;
        }
    }
    siblings.push(Node::new(line));
}

/// Places an ordered entry as FRR does: a typed sequence number sorts it among the others (and
/// replaces an entry with the same number); without one it goes last, unless the list holds
/// the same entry already.
fn set_entry(siblings: &mut Vec<Node>, context: &[String], line: &str, new: Entry) {
    let members: Vec<(usize, Entry)> = siblings
        .iter()
        .enumerate()
        .filter_map(|(i, n)| entry(context, &n.line).filter(|e| e.group == new.group).map(|e| (i, e)))
        .collect();
    let seqs = effective_seqs(&new.group, &members.iter().map(|(_, e)| e.seq).collect::<Vec<_>>());
    let after_last = members.last().map_or(siblings.len(), |(i, _)| i + 1);
    match new.seq {
        Some(s) => {
            if let Some(k) = seqs.iter().position(|&x| x == s) {
                siblings[members[k].0].line = line.to_string();
                return;
            }
            let at = seqs.iter().position(|&x| x > s).map_or(after_last, |k| members[k].0);
            siblings.insert(at, Node::new(line));
        }
        None => {
            if members.iter().any(|(_, e)| e.key == new.key) {
                return;
            }
            siblings.insert(after_last, Node::new(line));
        }
    }
}

fn unset_line(siblings: &mut Vec<Node>, context: &[String], subject: &str) {
    let before = siblings.len();
    if let Some(i) = siblings.iter().position(|n| n.line == subject) {
        siblings.remove(i);
        return;
    }
    if let Some(want) = entry(context, subject) {
        let same =
            |n: &Node| entry(context, &n.line).is_some_and(|e| e.group == want.group && e.key == want.key);
        if let Some(i) = siblings.iter().position(same) {
            siblings.remove(i);
            return;
        }
    }
    // `no ip ospf cost` removes `ip ospf cost 20`; `no access-list 10` the whole list.
    siblings.retain(|n| !starts_with_words(&n.line, subject));
    if siblings.len() == before && NEGATED_DEFAULTS.iter().any(|p| matches_pattern(subject, p)) {
        let negation = format!("no {subject}");
        if !siblings.iter().any(|n| n.line == negation) {
            siblings.push(Node::new(negation));
        }
    }
}

/// Whether `line` has exactly the words of `pattern`, `*` matching any one word.
fn matches_pattern(line: &str, pattern: &str) -> bool {
    let (l, p): (Vec<&str>, Vec<&str>) = (line.split(' ').collect(), pattern.split(' ').collect());
    l.len() == p.len() && l.iter().zip(&p).all(|(w, want)| *want == "*" || w == want)
}

/// What two lines that replace each other share (see [`SINGLE_VALUED`]).
fn conflict_key(line: &str) -> Option<String> {
    let words: Vec<&str> = line.split(' ').collect();
    SINGLE_VALUED.iter().find_map(|pattern| {
        let p: Vec<&str> = pattern.split(' ').collect();
        let (fixed, open) = match p.split_last() {
            Some((&"...", fixed)) => (fixed, true),
            _ => (p.as_slice(), false),
        };
        let fits = if open { words.len() >= fixed.len() } else { words.len() == fixed.len() };
        if !fits {
            return None;
        }
        let mut key = Vec::with_capacity(fixed.len());
        for (w, want) in words.iter().zip(fixed) {
            match *want {
                "?" => key.push("?"),
                "*" => key.push(w),
                literal if literal == *w => key.push(w),
                _ => return None,
            }
        }
        Some(key.join(" "))
    })
}

// ---------------------------------------------------------------------------------------------
// Linux reader: nftables listings and commands, tc

fn is_linux_command(raw: &str) -> bool {
    let first = raw.split_whitespace().next();
    matches!(first, Some("nft" | "tc" | "sysctl"))
}

#[derive(Debug, Default)]
struct LinuxReader {
    /// Open nftables blocks, outermost first.
    stack: Vec<String>,
    /// A statement whose braces are not closed yet (`elements = { a,` over several lines).
    pending: Option<Pending>,
}

/// An open statement and its brace counts, kept as it grows so that each line costs its own
/// length, however long the statement gets.
#[derive(Debug)]
struct Pending {
    text: String,
    opens: usize,
    closes: usize,
}

impl LinuxReader {
    fn finish(&self) -> Result<(), ConfigError> {
        match self.stack.len() + usize::from(self.pending.is_some()) {
            0 => Ok(()),
            open => Err(ConfigError::UnclosedBlock { open }),
        }
    }

    /// `commands`: lines other than `nft`/`tc` commands are skipped (typed `ip link ...`)
    /// rather than read as a listing.
    fn read(&mut self, n: usize, raw: &str, commands: bool) -> Result<Vec<Stmt>, ConfigError> {
        let trimmed = raw.trim();
        if self.pending.is_none() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            return Ok(Vec::new());
        }
        // `nft -a list ruleset` tags blocks and rules with their handles.
        let trimmed = match trimmed.find(" # handle ") {
            Some(at) => trimmed[..at].trim_end(),
            None => trimmed,
        };
        let (line, opens, closes) = match self.pending.take() {
            Some(mut pending) => {
                pending.text.push(' ');
                pending.text.push_str(trimmed);
                pending.opens += trimmed.matches('{').count();
                pending.closes += trimmed.matches('}').count();
                if pending.opens > pending.closes {
                    self.pending = Some(pending);
                    return Ok(Vec::new());
                }
                (pending.text, pending.opens, pending.closes)
            }
            None => (trimmed.to_string(), trimmed.matches('{').count(), trimmed.matches('}').count()),
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first() {
            Some(&"nft") if opens > closes => {
                self.pending = Some(Pending { text: line, opens, closes });
                return Ok(Vec::new());
            }
            Some(&"nft") => return nft_command(n, &line),
            Some(&"tc") => return tc_command(n, &line),
            Some(&"qdisc") if self.stack.is_empty() => return Ok(tc_show(&words).into_iter().collect()),
            Some(&"class") if self.stack.is_empty() => {
                return Ok(tc_class_show(&words).into_iter().collect());
            }
            Some(&"filter") if self.stack.is_empty() => {
                return Ok(tc_filter_show(&words).into_iter().collect());
            }
            Some(&"sysctl") => return Ok(sysctl_command(&words)),
            Some(key) if self.stack.is_empty() && key.starts_with("net.") && words.get(1) == Some(&"=") => {
                return Ok(sysctl_stmt(key, &words[2..].join(" ")).into_iter().collect());
            }
            _ if commands && self.stack.is_empty() => return Ok(Vec::new()),
            _ => {}
        }
        if line == "}" {
            return match self.stack.pop() {
                Some(_) => Ok(Vec::new()),
                None => Err(ConfigError::UnbalancedClose { line: n }),
            };
        }
        if let Some(header) = line.strip_suffix('{')
            && opens == closes + 1
        {
            let header = nft_norm(header);
            let header = match header.split(' ').collect::<Vec<_>>().as_slice() {
                ["table", name] if self.stack.is_empty() => format!("table ip {name}"),
                _ => header,
            };
            let context = self.stack.clone();
            self.stack.push(header.clone());
            return Ok(vec![Stmt::new(context, header, true, Op::Set)]);
        }
        if opens > closes {
            self.pending = Some(Pending { text: line, opens, closes });
            return Ok(Vec::new());
        }
        if self.stack.is_empty() {
            return Err(ConfigError::Malformed {
                line: n,
                text: line,
                reason: "neither an nftables block, a qdisc, a class, a filter, a sysctl key nor an nft, tc or sysctl command",
            });
        }
        let family = table_family(&self.stack);
        Ok(block_lines(&self.stack, &line, family)
            .into_iter()
            .map(|(text, op)| Stmt::new(self.stack.clone(), text, false, op))
            .collect())
    }
}

fn table_family(context: &[String]) -> &str {
    context.first().and_then(|t| t.split(' ').nth(1)).unwrap_or("ip")
}

/// The lines one statement of an nftables block stands for.
fn block_lines(context: &[String], statement: &str, family: &str) -> Vec<(String, Op)> {
    let in_chain = context.len() == 2 && context[1].starts_with("chain ");
    let mut out = Vec::new();
    for part in statement.split(';') {
        let part = part.trim();
        if let Some(rest) = part.strip_prefix("elements") {
            let list = rest.trim_start().trim_start_matches('=');
            out.extend(elements(list).into_iter().map(|e| (format!("element {e}"), Op::Set)));
            continue;
        }
        let line = chain_spec(&nft_norm(part), family);
        if line.is_empty() {
            continue;
        }
        let op = if in_chain && entry(context, &line).is_some() { Op::Append } else { Op::Set };
        out.push((line, op));
    }
    out
}

/// The elements of `{ a, b, c }`.
fn elements(list: &str) -> Vec<String> {
    let inner = list.trim().trim_start_matches('{').trim_end_matches('}');
    inner.split(',').map(nft_norm).filter(|e| !e.is_empty()).collect()
}

/// A chain's `type ... priority N` with the standard priority written by name, as nft lists it.
fn chain_spec(line: &str, family: &str) -> String {
    let words: Vec<&str> = line.split(' ').collect();
    if words.first() != Some(&"type") || matches!(family, "bridge" | "arp" | "netdev") {
        return line.to_string();
    }
    let Some(at) = words.iter().position(|w| *w == "priority") else {
        return line.to_string();
    };
    let name = match words.get(at + 1).copied() {
        Some("-300") => "raw",
        Some("-150") => "mangle",
        Some("-100") => "dstnat",
        Some("0") => "filter",
        Some("50") => "security",
        Some("100") => "srcnat",
        _ => return line.to_string(),
    };
    let mut out: Vec<&str> = words.clone();
    out[at + 1] = name;
    out.join(" ")
}

/// nft's listing and typed forms side by side: quotes dropped, braces and the commas between
/// set elements spaced as nft lists them, counters without their values, `# handle N` comments dropped.
fn nft_norm(text: &str) -> String {
    let text = text.split(" # handle ").next().unwrap_or(text);
    let mut spaced = String::with_capacity(text.len() + 8);
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '"' => {}
            '{' | '}' => {
                depth = if c == '{' { depth + 1 } else { depth.saturating_sub(1) };
                spaced.push(' ');
                spaced.push(c);
                spaced.push(' ');
            }
            // nft spaces the elements of a set, not a value list (`ct state established,related`).
            ',' if depth > 0 => spaced.push_str(", "),
            _ => spaced.push(c),
        }
    }
    let words: Vec<&str> = spaced.split_whitespace().collect();
    let mut out: Vec<&str> = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        if words[i] == "counter" && words.get(i + 1) == Some(&"packets") && words.get(i + 3) == Some(&"bytes")
        {
            out.push("counter");
            i += 5;
            continue;
        }
        out.push(words[i]);
        i += 1;
    }
    out.join(" ").replace(" ,", ",")
}

/// One `nft ...` command as statements.
fn nft_command(n: usize, line: &str) -> Result<Vec<Stmt>, ConfigError> {
    let unsupported = |reason| ConfigError::Unsupported { line: n, text: line.to_string(), reason };
    let malformed = |reason| ConfigError::Malformed { line: n, text: line.to_string(), reason };
    let tokens = shlex::split(line).ok_or_else(|| malformed("unbalanced quotes"))?;
    // Braces and semicolons are nft's own syntax; give them their own tokens.
    let spaced = tokens.join(" ").replace('{', " { ").replace('}', " } ").replace(';', " ; ");
    let words: Vec<&str> = spaced.split_whitespace().collect();
    let mut at = 1;
    while let Some(w) = words.get(at).filter(|w| w.starts_with('-')) {
        if matches!(*w, "-f" | "--file") {
            return Err(unsupported("nft -f reads a file this parser never sees"));
        }
        at += 1;
    }
    let (Some(verb), Some(object)) = (words.get(at), words.get(at + 1)) else {
        return Err(malformed("expected `nft VERB OBJECT ...`"));
    };
    let args = &words[at + 2..];
    let brace = args.iter().position(|w| *w == "{").unwrap_or(args.len());
    let (names, body) = args.split_at(brace);
    let (family, names) = match names.split_first() {
        Some((f, rest)) if NFT_FAMILIES.contains(f) && !rest.is_empty() => (*f, rest),
        _ => ("ip", names),
    };
    let table = |name: &str| format!("table {family} {name}");
    let body_text = body.join(" ");
    let body_inner = body_text.trim().trim_start_matches('{').trim_end_matches('}').trim().to_string();
    let op = match *verb {
        "add" | "create" | "insert" | "replace" => Op::Set,
        "delete" | "destroy" => Op::Unset,
        "list" => return Ok(Vec::new()),
        "flush" => {
            return Err(unsupported(
                "flush empties whole tables or chains; only add and delete are modelled",
            ));
        }
        _ => return Err(unsupported("only add, create, insert, delete and list are modelled")),
    };
    match (*object, names, op) {
        ("table", [name], _) => Ok(vec![Stmt::new(Vec::new(), table(name), op == Op::Set, op)]),
        ("chain", [t, chain], _) => {
            let mut out = vec![Stmt::new(vec![table(t)], format!("chain {chain}"), op == Op::Set, op)];
            if op == Op::Set && !body_inner.is_empty() {
                let context = vec![table(t), format!("chain {chain}")];
                let mut lines = block_lines(&context, &body_inner, family);
                // nft lists a base chain typed without a policy with its default one.
                if lines.iter().any(|(l, _)| l.starts_with("type "))
                    && !lines.iter().any(|(l, _)| l.starts_with("policy "))
                {
                    lines.push(("policy accept".into(), Op::Set));
                }
                out.extend(lines.into_iter().map(|(l, op)| Stmt::new(context.clone(), l, false, op)));
            }
            Ok(out)
        }
        ("set" | "map", [t, name], _) => {
            let mut out = vec![Stmt::new(vec![table(t)], format!("{object} {name}"), op == Op::Set, op)];
            if op == Op::Set && !body_inner.is_empty() {
                let context = vec![table(t), format!("{object} {name}")];
                out.extend(
                    block_lines(&context, &body_inner, family)
                        .into_iter()
                        .map(|(l, op)| Stmt::new(context.clone(), l, false, op)),
                );
            }
            Ok(out)
        }
        ("element", [t, set], _) => {
            // A set or a map: the listing says which; commands do not. Sets are far more common.
            let context = vec![table(t), format!("set {set}")];
            Ok(elements(&body_text)
                .into_iter()
                .map(|e| Stmt::new(context.clone(), format!("element {e}"), false, op))
                .collect())
        }
        ("rule", [t, chain, rule @ ..], Op::Set) => {
            if rule.first().is_some_and(|w| matches!(*w, "position" | "handle" | "index")) {
                return Err(unsupported("rule positions refer to handles this parser cannot know"));
            }
            let mut text = rule.to_vec();
            text.extend(body.iter());
            let context = vec![table(t), format!("chain {chain}")];
            let op = if *verb == "insert" { Op::Prepend } else { Op::Append };
            Ok(vec![Stmt::new(context, nft_norm(&text.join(" ")), false, op)])
        }
        ("rule", _, _) => Err(unsupported("deleting a rule needs its handle")),
        _ => Err(malformed("expected a table, chain, set, map, element or rule with its names")),
    }
}

/// One `tc qdisc|class|filter VERB dev X ...` command as a statement under `dev X`.
fn tc_command(n: usize, line: &str) -> Result<Vec<Stmt>, ConfigError> {
    let malformed = |reason| ConfigError::Malformed { line: n, text: line.to_string(), reason };
    let lower = line.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().skip(1).filter(|w| !w.starts_with('-')).collect();
    let (Some(object), Some(verb)) = (words.first(), words.get(1)) else {
        return Err(malformed("expected `tc OBJECT VERB dev DEV ...`"));
    };
    let object = match *object {
        "qdisc" | "qd" | "q" => "qdisc",
        "class" | "cl" | "c" => "class",
        "filter" | "f" => "filter",
        _ => return Err(malformed("only qdisc, class and filter are modelled")),
    };
    let op = match *verb {
        "add" | "replace" | "change" | "link" => Op::Set,
        "del" | "delete" => Op::Unset,
        "show" | "list" | "ls" => return Ok(Vec::new()),
        _ => return Err(malformed("expected add, replace, change or del")),
    };
    let mut args: Vec<&str> = words[2..].to_vec();
    let dev_at = args.iter().position(|w| *w == "dev").ok_or_else(|| malformed("no `dev DEV`"))?;
    let dev = args.get(dev_at + 1).ok_or_else(|| malformed("no device after `dev`"))?.to_string();
    args.drain(dev_at..dev_at + 2);
    let text = match object {
        "qdisc" => qdisc_line(&args),
        "class" => class_line(&args),
        _ => filter_line(&args).ok_or_else(|| malformed("a filter needs its parent, priority or match"))?,
    };
    Ok(vec![Stmt::new(vec![format!("dev {dev}")], latency(&text), false, op)])
}

/// A class as `class CLASSID POSITION KIND PARAMS`, from a command's arguments (`parent 1:
/// classid 1:10 htb rate 1mbit ceil 1mbit`) or a `tc class show` line's: `root` for a class
/// right under its qdisc (`parent 1:`), `parent X` under another class; htb's `ceil` defaults to
/// its `rate`, and what the kernel computes or counts (`burst`, `cburst`, `prio 0`, `quantum`,
/// `leaf`) is left out, so that a typed class and the class `tc` shows are one line.
fn class_line(args: &[&str]) -> String {
    let (mut classid, mut parent, mut kind) = (None, None, None);
    let mut params: Vec<(String, String)> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let next = args.get(i + 1).copied().unwrap_or_default();
        match args[i] {
            "classid" => {
                classid = Some(next.to_string());
                i += 1;
            }
            "parent" => {
                parent = Some(next.to_string());
                i += 1;
            }
            "root" => parent = Some("root".into()),
            k if kind.is_none() && CLASS_KINDS.contains(&k) => kind = Some(k.to_string()),
            "burst" | "cburst" | "quantum" | "leaf" | "mtu" | "mpu" | "overhead" => i += 1,
            "prio" if next == "0" => i += 1,
            w if !next.is_empty() && kind.is_some() => {
                params.push((w.to_string(), next.to_string()));
                i += 1;
            }
            w => params.push((w.to_string(), String::new())),
        }
        i += 1;
    }
    if kind.as_deref() == Some("htb")
        && !params.iter().any(|(k, _)| k == "ceil")
        && let Some((_, rate)) = params.iter().find(|(k, _)| k == "rate").cloned()
    {
        params.push(("ceil".into(), rate));
    }
    // Under its qdisc: `parent 1:` (or `1:0`) typed, `root` shown.
    let position = match parent.as_deref() {
        Some(p) if p == "root" || p.ends_with(':') || p.ends_with(":0") => "root".to_string(),
        Some(p) => format!("parent {p}"),
        None => "root".to_string(),
    };
    // A deletion names the class only (`tc class del dev eth0 classid 1:20`): it removes the
    // class whatever its place and parameters.
    let Some(kind) = kind else { return format!("class {}", classid.unwrap_or_default()) };
    params.sort();
    let params: Vec<String> =
        params.into_iter().map(|(k, v)| if v.is_empty() { k } else { format!("{k} {v}") }).collect();
    collapse(&format!("class {} {position} {kind} {}", classid.unwrap_or_default(), params.join(" ")))
}

/// A filter as `filter parent P [pref N] protocol X KIND MATCH... flowid C`, from a command's
/// arguments (`parent 1: protocol ip prio 1 u32 match ip dst 10.0.0.0/24 flowid 1:10`) or a
/// folded `tc filter show` entry ([`tc_filter_listing`]): u32 selectors are written as the
/// kernel keeps them (`match ip dst 10.0.0.0/24` is `match 0a000000/ffffff00 at 16`), keys at
/// one offset merged as tc merges them and sorted by offset; `classid` is `flowid`; a
/// protocol left out is `all`; a priority the kernel chose (49152 and the ones it counts down
/// from) is left out, as a command typed without `prio` has none. What only the listing shows
/// (`chain 0`, `fh`, `order`, `key ht`, `bkt`, `not_in_hw`) goes. `None` for a u32 hash table
/// line of the listing (`fh 800: ht divisor 1`), which no command made. A deletion keeps the
/// words it names in the same order, so that it removes every filter they start.
fn filter_line(args: &[&str]) -> Option<String> {
    let (mut parent, mut pref, mut protocol, mut kind, mut flowid) = (None, None, None, None, None);
    let mut keys: Vec<(u32, u32, u32)> = Vec::new();
    let mut raw: Vec<String> = Vec::new();
    let mut rest: Vec<String> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let next = args.get(i + 1).copied().unwrap_or_default();
        match args[i] {
            "parent" => {
                let p = next.strip_suffix(":0").map_or(next.to_string(), |p| format!("{p}:"));
                parent = Some(p);
                i += 1;
            }
            "root" => parent = Some("root".to_string()),
            "prio" | "pref" | "priority" | "preference" => {
                pref = Some(next.to_string());
                i += 1;
            }
            "protocol" | "proto" => {
                protocol = Some(next.to_string());
                i += 1;
            }
            "flowid" | "classid" | "*flowid" => {
                flowid = Some(next.to_string());
                i += 1;
            }
            "divisor" => return None,
            "chain" if next == "0" => i += 1,
            "handle" | "fh" | "order" | "bkt" | "in_hw_count" => i += 1,
            "key" if next == "ht" => i += 2,
            "not_in_hw" | "in_hw" | "skip_hw" | "skip_sw" | "terminal" => {}
            "match" if kind.as_deref() == Some("u32") => {
                let used = u32_selector(&args[i + 1..], &mut keys, &mut raw);
                i += used;
            }
            k if kind.is_none()
                && !k.contains(':')
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                kind = Some(k.to_string());
            }
            w => rest.push(w.to_string()),
        }
        i += 1;
    }
    let pref = pref.filter(|p| !p.parse::<u32>().is_ok_and(|n| (AUTO_PREF_LOWEST..=AUTO_PREF).contains(&n)));
    let mut words = vec!["filter".to_string()];
    if let Some(p) = parent {
        words.extend(["parent".to_string(), p]);
    }
    if let Some(p) = pref {
        words.extend(["pref".to_string(), p]);
    }
    let Some(kind) = kind else {
        // A deletion (`tc filter del dev eth0 parent 1: prio 1`): the words it names.
        if let Some(p) = protocol {
            words.extend(["protocol".to_string(), p]);
        }
        return Some(words.join(" "));
    };
    words.extend(["protocol".to_string(), protocol.unwrap_or_else(|| "all".into()), kind]);
    keys.sort_unstable();
    let mut merged: Vec<(u32, u32, u32)> = Vec::new();
    for (off, val, mask) in keys {
        match merged.last_mut() {
            Some(last) if last.0 == off => {
                last.1 |= val & mask;
                last.2 |= mask;
            }
            _ => merged.push((off, val & mask, mask)),
        }
    }
    words.extend(merged.iter().map(|(off, val, mask)| format!("match {val:08x}/{mask:08x} at {off}")));
    raw.sort();
    words.extend(raw);
    words.extend(rest);
    if let Some(f) = flowid {
        words.extend(["flowid".to_string(), f]);
    }
    Some(words.join(" "))
}

/// The priority the kernel gives the first filter typed without one (`0xC000`); later ones get
/// the lowest priority present less one.
const AUTO_PREF: u32 = 0xC000;
const AUTO_PREF_LOWEST: u32 = AUTO_PREF - 1024;

/// Reads one u32 selector after `match` into `keys` (offset, value, mask): `ip src|dst
/// A[/LEN]`, `ip protocol|tos|dsfield|sport|dport|icmp_type|icmp_code V M`, `u32|u16|u8 V M at
/// N`, or the listing's `VALUE/MASK at N`. A selector it does not know (`ip nofrag`, `nexthdr+`
/// offsets) is kept as its words in `raw`. Returns how many words it read.
fn u32_selector(words: &[&str], keys: &mut Vec<(u32, u32, u32)>, raw: &mut Vec<String>) -> usize {
    let word = |i: usize| words.get(i).copied().unwrap_or_default();
    let number = |w: &str| match w.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => w.parse::<u32>().ok(),
    };
    // `u8 V M at N` (and u16, u32) as the 32-bit word holding it.
    let sized = |bits: u32, v: u32, m: u32, at: u32| -> Option<(u32, u32, u32)> {
        let bytes = bits / 8;
        let within = at % 4;
        if within + bytes > 4 {
            return None;
        }
        let shift = (4 - within - bytes) * 8;
        let width = if bits == 32 { u32::MAX } else { (1u32 << bits) - 1 };
        Some((at - within, (v & width) << shift, (m & width) << shift))
    };
    let key = match word(0) {
        listing if listing.contains('/') && word(1) == "at" => {
            let (v, m) = listing.split_once('/').unwrap_or_default();
            let parsed = (u32::from_str_radix(v, 16).ok(), u32::from_str_radix(m, 16).ok(), number(word(2)));
            match parsed {
                (Some(v), Some(m), Some(at)) => Some(((at, v, m), 3)),
                _ => None,
            }
        }
        size @ ("u32" | "u16" | "u8") if word(3) == "at" => {
            let bits = match size {
                "u32" => 32,
                "u16" => 16,
                _ => 8,
            };
            match (number(word(1)), number(word(2)), number(word(4))) {
                (Some(v), Some(m), Some(at)) => sized(bits, v, m, at).map(|k| (k, 5)),
                _ => None,
            }
        }
        "ip" => match word(1) {
            field @ ("src" | "dst") => {
                let (addr, len) = word(2).split_once('/').unwrap_or((word(2), "32"));
                match (addr.parse::<Ipv4Addr>(), len.parse::<u32>()) {
                    (Ok(a), Ok(len)) if len <= 32 => {
                        let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
                        Some(((if field == "src" { 12 } else { 16 }, u32::from(a), mask), 3))
                    }
                    _ => None,
                }
            }
            field @ ("protocol" | "tos" | "dsfield" | "sport" | "dport" | "icmp_type" | "icmp_code") => {
                let (bits, at) = match field {
                    "protocol" => (8, 9),
                    "tos" | "dsfield" => (8, 1),
                    "sport" => (16, 20),
                    "dport" => (16, 22),
                    "icmp_type" => (8, 20),
                    _ => (8, 21),
                };
                match (number(word(2)), number(word(3))) {
                    (Some(v), Some(m)) => sized(bits, v, m, at).map(|k| (k, 4)),
                    _ => None,
                }
            }
            _ => None,
        },
        _ => None,
    };
    match key {
        Some((k, used)) => {
            keys.push(k);
            used
        }
        None => {
            // Unknown: the selector's words up to the next keyword this reader knows.
            let used = words
                .iter()
                .position(|w| matches!(*w, "match" | "flowid" | "classid" | "action" | "police"))
                .unwrap_or(words.len());
            raw.push(format!("match {}", words[..used].join(" ")));
            used
        }
    }
}

/// A folded `tc filter show` entry (`filter dev eth0 parent 1: ... match ...`, see
/// [`tc_filter_listing`]) as its command's statement.
fn tc_filter_show(words: &[&str]) -> Option<Stmt> {
    let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
    let dev_at = lower.iter().position(|w| w == "dev")?;
    let dev = lower.get(dev_at + 1)?.clone();
    let args: Vec<&str> = lower
        .iter()
        .enumerate()
        .filter(|(i, _)| *i > 0 && *i != dev_at && *i != dev_at + 1)
        .map(|(_, w)| w.as_str())
        .collect();
    let line = filter_line(&args)?;
    // A listing's filter with no rule in it: the u32 root line (`filter parent 1: protocol ip
    // pref 1 u32 chain 0`), which the kernel makes for the priority.
    if !line.contains(" match ") && !line.contains(" flowid ") {
        return None;
    }
    Some(Stmt::new(vec![format!("dev {dev}")], line, false, Op::Set))
}

/// `tc filter show dev DEV` output as one line per filter that [`Config::parse`] reads in
/// [`Dialect::Linux`]: the device put in (tc leaves it out), each u32 key's indented `match`
/// line joined to its filter's line.
pub fn tc_filter_listing(dev: &str, show: &str) -> String {
    let mut out = String::new();
    for line in show.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if line.starts_with(char::is_whitespace) && !out.is_empty() {
            out.pop();
            out.push(' ');
            out.push_str(trimmed);
        } else if let Some(rest) = trimmed.strip_prefix("filter ") {
            out.push_str(&format!("filter dev {dev} {rest}"));
        } else {
            continue;
        }
        out.push('\n');
    }
    out
}

/// A sysctl command: each `KEY=VALUE` it writes (`sysctl -w net.ipv4.conf.eth0.rp_filter=1`);
/// a read (`sysctl KEY`) changes nothing.
fn sysctl_command(words: &[&str]) -> Vec<Stmt> {
    words[1..]
        .iter()
        .filter(|w| !w.starts_with('-'))
        .filter_map(|w| w.split_once('='))
        .filter_map(|(k, v)| sysctl_stmt(k, v))
        .collect()
}

/// `sysctl KEY VALUE`, the key in its dotted form (`net/ipv4/ip_forward` is
/// `net.ipv4.ip_forward`).
fn sysctl_stmt(key: &str, value: &str) -> Option<Stmt> {
    let (key, value) = (key.trim().replace('/', "."), collapse(value.trim().trim_matches('"')));
    (!key.is_empty() && !value.is_empty())
        .then(|| Stmt::new(Vec::new(), format!("sysctl {key} {value}"), false, Op::Set))
}

/// The qdiscs whose classes are made by `tc class add`.
const CLASS_KINDS: [&str; 5] = ["htb", "hfsc", "drr", "qfq", "cbq"];

/// A `tc class show` line as the netconf backend reads it (`class htb 1:10 dev eth0 root prio 0
/// rate 1Mbit ceil 1Mbit burst 1600b cburst 1600b`: the reader puts in `dev`).
fn tc_class_show(words: &[&str]) -> Option<Stmt> {
    let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
    let kind = lower.get(1)?.clone();
    // Only classes one creates: tbf and other classless-looking qdiscs show an inner class of
    // their own (`class tbf 8001:1 parent 8001:`), which no command made.
    if !CLASS_KINDS.contains(&kind.as_str()) {
        return None;
    }
    let classid = lower.get(2)?.clone();
    let dev_at = lower.iter().position(|w| w == "dev")?;
    let dev = lower.get(dev_at + 1)?.clone();
    let mut args: Vec<&str> = vec!["classid", &classid, &kind];
    args.extend(
        lower
            .iter()
            .enumerate()
            .filter(|(i, _)| *i > 2 && *i != dev_at && *i != dev_at + 1)
            .map(|(_, w)| w.as_str()),
    );
    Some(Stmt::new(vec![format!("dev {dev}")], class_line(&args), false, Op::Set))
}

/// A qdisc's parameters without what its kind computes or counts: htb's `r2q 10`, `direct_*`
/// and version, and its `default` class as tc takes it (`default 20` is shown `default 0x20`).
fn qdisc_params(kind: &str, params: &[&str]) -> Vec<String> {
    if kind != "htb" {
        return params.iter().map(|p| p.to_string()).collect();
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < params.len() {
        let next = params.get(i + 1).copied().unwrap_or_default();
        match params[i] {
            "r2q" if next == "10" => i += 1,
            "direct_packets_stat" | "direct_qlen" | "ver" | "version" => i += 1,
            "default" => {
                out.push(format!("default {}", next.trim_start_matches("0x")));
                i += 1;
            }
            w => out.push(w.to_string()),
        }
        i += 1;
    }
    out
}

/// `qdisc POSITION KIND PARAMS` from a qdisc's arguments in any order, without its handle.
fn qdisc_line(args: &[&str]) -> String {
    let mut position: Vec<&str> = Vec::new();
    let mut rest: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        match args[i] {
            "handle" => i += 1,
            "root" | "ingress" | "clsact" if position.is_empty() => position.push(args[i]),
            "parent" if position.is_empty() => {
                position.push("parent");
                if let Some(p) = args.get(i + 1) {
                    position.push(p);
                }
                i += 1;
            }
            w => rest.push(w),
        }
        i += 1;
    }
    if matches!(position.first(), Some(&"ingress" | &"clsact")) {
        rest.retain(|w| !matches!(*w, "ingress" | "clsact"));
    }
    let (kind, params) = rest.split_first().map_or(("", &[][..]), |(k, p)| (*k, p));
    let mut words: Vec<String> = position.iter().map(|w| w.to_string()).collect();
    if !kind.is_empty() {
        words.push(kind.to_string());
        words.extend(qdisc_params(kind, params));
    }
    format!("qdisc {}", words.join(" "))
}

/// `tc qdisc show` prints `lat` for the `latency` it was given.
fn latency(text: &str) -> String {
    text.split(' ').map(|w| if w == "lat" { "latency" } else { w }).collect::<Vec<_>>().join(" ")
}

/// A `tc qdisc show` line (`qdisc tbf 8001: dev eth0 root refcnt 2 rate 8Kbit ...`) in the
/// form its command gives; `None` for the kernel's default qdiscs (handle `0:`).
fn tc_show(words: &[&str]) -> Option<Stmt> {
    let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
    let kind = lower.get(1)?;
    let handle = lower.get(2)?;
    if handle == "0:" {
        return None;
    }
    let mut dev = None;
    let mut position: Vec<&str> = Vec::new();
    let mut params: Vec<&str> = Vec::new();
    let mut i = 3;
    while i < lower.len() {
        match lower[i].as_str() {
            "dev" => {
                dev = lower.get(i + 1).map(String::as_str);
                i += 1;
            }
            "root" if position.is_empty() => position.push("root"),
            "parent" if position.is_empty() => {
                position.push("parent");
                if let Some(p) = lower.get(i + 1) {
                    position.push(p);
                }
                i += 1;
            }
            "refcnt" => i += 1,
            w => params.push(w),
        }
        i += 1;
    }
    let line = if matches!(kind.as_str(), "ingress" | "clsact") {
        format!("qdisc {kind}")
    } else {
        format!("qdisc {} {kind} {}", position.join(" "), qdisc_params(kind, &params).join(" "))
    };
    Some(Stmt::new(vec![format!("dev {}", dev?)], latency(&collapse(&line)), false, Op::Set))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frr(text: &str) -> Config {
        Config::parse(text, Dialect::Frr).expect("parses")
    }

    #[test]
    fn indented_and_flat_forms_give_the_same_tree() {
        let listing = frr(
            "router ospf\n ospf router-id 1.1.1.1\n network 10.0.0.0/24 area 0\nexit\n!\nip route 2.2.2.0/24 10.0.0.2\n",
        );
        let typed = Config::from_commands(
            &[
                "router ospf",
                "ospf router-id 1.1.1.1",
                "network 10.0.0.0/24 area 0",
                "exit",
                "ip route 2.2.2.0/24 10.0.0.2",
            ],
            Dialect::Frr,
        )
        .expect("applies");
        assert_eq!(listing, typed);
        // Without `exit`: a top-level command leaves the section.
        let no_exit = Config::from_commands(
            &[
                "router ospf",
                "ospf router-id 1.1.1.1",
                "network 10.0.0.0/24 area 0",
                "ip route 2.2.2.0/24 10.0.0.2",
            ],
            Dialect::Frr,
        )
        .expect("applies");
        assert_eq!(listing, no_exit);
    }

    #[test]
    fn netmask_forms_are_written_as_prefixes() {
        assert_eq!(
            normalise_frr("ip route 2.2.2.0 255.255.255.252 192.168.1.2 100"),
            "ip route 2.2.2.0/30 192.168.1.2 100"
        );
        assert_eq!(normalise_frr("ip route 0.0.0.0 0.0.0.0 10.0.0.1"), "ip route 0.0.0.0/0 10.0.0.1");
        assert_eq!(normalise_frr("network 10.0.0.0 0.0.0.255 area 0"), "network 10.0.0.0/24 area 0");
        assert_eq!(normalise_frr("network 1.1.1.1 0.0.0.0 area 0"), "network 1.1.1.1/32 area 0");
        assert_eq!(normalise_frr("ip address 10.0.0.1 255.255.255.0"), "ip address 10.0.0.1/24");
        assert_eq!(
            normalise_frr("ip route 2.2.2.0 255.0.255.0 1.1.1.1"),
            "ip route 2.2.2.0 255.0.255.0 1.1.1.1"
        );
    }

    #[test]
    fn nested_sections_in_a_flat_list() {
        let typed = Config::from_commands(
            &[
                "router bgp 65001",
                "neighbor 10.0.0.2 remote-as 65002",
                "address-family ipv4 unicast",
                "network 192.168.1.0/24",
                "address-family ipv6 unicast",
                "network 2001:db8::/32",
                "exit-address-family",
                "bgp router-id 1.1.1.1",
                "key chain KC",
                "key 1",
                "key-string s",
                "vrf RED",
                "ip route 9.9.9.0/24 blackhole",
                "exit-vrf",
                "ip route 1.1.1.0/24 blackhole",
            ],
            Dialect::Frr,
        )
        .expect("applies");
        insta::assert_snapshot!(typed.render(), @r"
        router bgp 65001
         neighbor 10.0.0.2 remote-as 65002
         address-family ipv4 unicast
          network 192.168.1.0/24
         address-family ipv6 unicast
          network 2001:db8::/32
         bgp router-id 1.1.1.1
        key chain KC
         key 1
          key-string s
        vrf RED
         ip route 9.9.9.0/24 blackhole
        ip route 1.1.1.0/24 blackhole
        ");
    }

    #[test]
    fn ios_style_blocks_end_at_bang_and_dedent() {
        let ios = "!\r\nversion 12.4\r\nhostname NewYork\r\n!\r\ninterface Serial0/0\r\n ip address 192.168.1.1 255.255.255.0\r\n no shutdown\r\n!\r\nrouter ospf 1\r\n network 192.168.1.0 0.0.0.255 area 0\r\nip classless\r\nip access-list extended WEB\r\n 10 permit tcp any any eq 80\r\n 20 deny ip any any\r\nline con 0\r\nline vty 0 4\r\n login\r\nend\r\n";
        insta::assert_snapshot!(frr(ios).render(), @r"
        version 12.4
        hostname NewYork
        interface Serial0/0
         ip address 192.168.1.1/24
         no shutdown
        router ospf 1
         network 192.168.1.0/24 area 0
        ip classless
        ip access-list extended WEB
         10 permit tcp any any eq 80
         20 deny ip any any
        line con 0
        line vty 0 4
         login
        ");
    }

    #[test]
    fn any_line_with_more_indented_lines_under_it_is_a_section() {
        let ios = "ip vrf RED\n rd 1:1\n route-target export 1:1\n!\nip dhcp pool LAN\n network 10.0.0.0 255.255.255.0\n dns-server 8.8.8.8\n!\nvlan 10\n name USERS\n!\ncrypto isakmp policy 10\n encr aes\n authentication pre-share\ncrypto map CM 10 ipsec-isakmp\n set peer 1.1.1.1\n match address 101\nevent manager applet X\n event syslog pattern \"DOWN\"\n action 1.0 cli command \"enable\"\nspanning-tree mst configuration\n name R\n instance 1 vlan 10\nhostname R1\n";
        insta::assert_snapshot!(Config::parse(ios, Dialect::Ios).expect("parses").render(), @r#"
        ip vrf RED
         rd 1:1
         route-target export 1:1
        ip dhcp pool LAN
         network 10.0.0.0 255.255.255.0
         dns-server 8.8.8.8
        vlan 10
         name USERS
        crypto isakmp policy 10
         encr aes
         authentication pre-share
        crypto map CM 10 ipsec-isakmp
         set peer 1.1.1.1
         match address 101
        event manager applet X
         event syslog pattern "DOWN"
         action 1.0 cli command "enable"
        spanning-tree mst configuration
         name R
         instance 1 vlan 10
        hostname R1
        "#);
        // Swapped VLAN names are edits.
        let before =
            Config::parse("vlan 10\n name A\n!\nvlan 20\n name B\n!\n", Dialect::Ios).expect("parses");
        let after =
            Config::parse("vlan 10\n name B\n!\nvlan 20\n name A\n!\n", Dialect::Ios).expect("parses");
        assert_eq!(crate::diff::diff(&before, &after).len(), 4);
        // A setting under the wrong section does not score.
        let initial = Config::parse("ip dhcp pool A\n network 10.0.0.0 255.255.255.0\n!\nip dhcp pool B\n network 10.1.0.0 255.255.255.0\n!\n", Dialect::Ios).expect("parses");
        let mut truth = initial.clone();
        truth.apply(&["ip dhcp pool A", " dns-server 8.8.8.8"], Dialect::Ios).expect("applies");
        let mut agent = initial.clone();
        agent.apply(&["ip dhcp pool B", " dns-server 8.8.8.8"], Dialect::Ios).expect("applies");
        let s = crate::score::score(&[crate::score::DeviceEdits::new("R1", &initial, &agent, &truth)]);
        assert_eq!(s.f1, 0.0, "{s:#?}");
    }

    #[test]
    fn typed_ios_sections_nest_as_printed_ones() {
        let typed = Config::from_commands(
            &[
                "ip vrf RED",
                "rd 1:1",
                "route-target export 1:1",
                "ip dhcp pool LAN",
                "dns-server 8.8.8.8",
                "vlan 10",
                "name USERS",
                "crypto map CM 10 ipsec-isakmp",
                "set peer 1.1.1.1",
                "crypto map CM local-address Loopback0",
                "ip sla 1",
                "icmp-echo 8.8.8.8",
                "ip sla schedule 1 life forever start-time now",
                "track 1 ip sla 1 reachability",
                "delay down 5",
                "hostname R1",
            ],
            Dialect::Ios,
        )
        .expect("applies");
        let printed = Config::parse(
            "ip vrf RED\n rd 1:1\n route-target export 1:1\n!\nip dhcp pool LAN\n dns-server 8.8.8.8\n!\nvlan 10\n name USERS\n!\ncrypto map CM 10 ipsec-isakmp\n set peer 1.1.1.1\ncrypto map CM local-address Loopback0\nip sla 1\n icmp-echo 8.8.8.8\nip sla schedule 1 life forever start-time now\ntrack 1 ip sla 1 reachability\n delay down 5\nhostname R1\n",
            Dialect::Ios,
        )
        .expect("parses");
        assert_eq!(typed, printed, "{}", typed.render());
    }

    #[test]
    fn banners_are_one_line_whatever_their_delimiter() {
        let printed =
            "banner motd ^C\nAuthorised access only\ninterface everything is logged\n^C\nhostname R1\n";
        let c = Config::parse(printed, Dialect::Ios).expect("parses");
        assert_eq!(
            c.render(),
            "banner motd ^CAuthorised access only\ninterface everything is logged^C\nhostname R1\n"
        );
        // Typed with another delimiter, on one line or several: the same banner.
        let typed = Config::from_commands(
            &[
                "banner motd #",
                "Authorised access only",
                "interface everything is logged",
                "#",
                "hostname R1",
            ],
            Dialect::Ios,
        )
        .expect("applies");
        assert_eq!(typed, c);
        let one = Config::from_commands(&["banner login %Keep out%", "hostname R1"], Dialect::Ios)
            .expect("applies");
        assert_eq!(one.render(), "banner login ^CKeep out^C\nhostname R1\n");
        // FRR's own banner is one line.
        let frr = Config::from_commands(&["banner motd line hello"], Dialect::Frr).expect("applies");
        assert_eq!(frr.render(), "banner motd line hello\n");
    }

    #[test]
    fn ios_port_names_are_their_numbers() {
        let printed = "ip access-list extended WEB\n 10 permit tcp any any eq www\n 20 permit udp any range bootps bootpc any\n 30 permit tcp any eq 22 any\naccess-list 101 permit tcp any any eq telnet\n";
        insta::assert_snapshot!(Config::parse(printed, Dialect::Ios).expect("parses").render(), @r"
        ip access-list extended WEB
         10 permit tcp any any eq 80
         20 permit udp any range 67 68 any
         30 permit tcp any eq 22 any
        access-list 101 permit tcp any any eq 23
        ");
        let typed = Config::from_commands(&["access-list 101 permit tcp any any eq 23"], Dialect::Ios)
            .expect("applies");
        let printed =
            Config::parse("access-list 101 permit tcp any any eq telnet\n", Dialect::Ios).expect("parses");
        assert_eq!(typed, printed);
    }

    #[test]
    fn commands_replace_remove_and_order_as_frr_does() {
        let mut c = frr(
            "interface eth1\n ip ospf cost 20\n shutdown\nexit\nno ipv6 forwarding\naccess-list 10 seq 5 permit 10.0.0.0/8\naccess-list 10 seq 10 deny any\nip prefix-list PL seq 5 permit 10.0.0.0/8\nip prefix-list PL seq 10 permit 172.16.0.0/12\n",
        );
        c.apply(
            &[
                "interface eth1",
                " ip ospf cost 30",
                " no shutdown",
                " no shutdown",
                "exit",
                "ipv6 forwarding",
                "no ip forwarding",
                "access-list 10 permit 10.0.0.0/8",
                "access-list 10 permit 192.168.0.0/16",
                "ip prefix-list PL seq 7 permit 1.0.0.0/8",
                "ip prefix-list PL seq 10 deny 172.16.0.0/12",
                "no ip prefix-list PL seq 5 permit 10.0.0.0/8",
            ],
            Dialect::Frr,
        )
        .expect("applies");
        insta::assert_snapshot!(c.render(), @r"
        interface eth1
         ip ospf cost 30
        access-list 10 seq 5 permit 10.0.0.0/8
        access-list 10 seq 10 deny any
        access-list 10 permit 192.168.0.0/16
        ip prefix-list PL seq 7 permit 1.0.0.0/8
        ip prefix-list PL seq 10 deny 172.16.0.0/12
        no ip forwarding
        ");
    }

    #[test]
    fn ordered_entries_and_their_keys() {
        let e = entry(&[], "ip prefix-list PL seq 5 permit 10.0.0.0/8 le 24").expect("entry");
        assert_eq!(
            (e.group.as_str(), e.seq, e.key.as_str()),
            ("ip prefix-list PL", Some(5), "ip prefix-list PL permit 10.0.0.0/8 le 24")
        );
        let e = entry(&[], "access-list 10 permit any").expect("entry");
        assert_eq!(
            (e.group.as_str(), e.seq, e.key.as_str()),
            ("access-list 10", None, "access-list 10 permit any")
        );
        let e = entry(&[], "route-map RM permit 20").expect("entry");
        assert_eq!(
            (e.group.as_str(), e.seq, e.key.as_str()),
            ("route-map RM", Some(20), "route-map RM permit")
        );
        let e = entry(&[], "bgp community-list standard CL seq 5 permit 65001:100").expect("entry");
        assert_eq!(e.group, "bgp community-list standard CL");
        assert!(entry(&[], "ip prefix-list PL description x").is_none());
        assert!(entry(&[], "ip route 1.0.0.0/8 blackhole").is_none());
        assert!(entry(&["router ospf".into()], "network 10.0.0.0/8 area 0").is_none());
        let chain = ["table inet filter".to_string(), "chain input".to_string()];
        assert!(entry(&chain, "policy accept").is_none());
        assert!(entry(&chain, "tcp dport 22 accept").is_some());
        assert_eq!(effective_seqs("access-list 1", &[None, None, Some(7), None]), [5, 10, 7, 15]);
        assert_eq!(effective_seqs("entries", &[None, Some(15), None]), [10, 15, 25]);
    }

    #[test]
    fn the_largest_sequence_number_does_not_overflow() {
        let text = "access-list 1 seq 18446744073709551615 permit any\naccess-list 1 permit 10.0.0.0/8\n";
        // The number after the largest stays the largest: the entry goes last.
        assert_eq!(effective_seqs("access-list 1", &[Some(u64::MAX), None]), [u64::MAX, u64::MAX]);
        assert_eq!(effective_seqs("entries", &[Some(u64::MAX - 3), None]), [u64::MAX - 3, u64::MAX]);
        let parsed = frr(text);
        assert_eq!(parsed.len(), 2);
        let empty = Config::default();
        assert_eq!(crate::diff::diff(&empty, &parsed).len(), 2);
        assert_eq!(crate::diff::diff(&parsed, &empty).len(), 2);
        let mut applied = parsed.clone();
        applied
            .apply(&["access-list 1 permit 192.168.0.0/16", "access-list 1 seq 7 deny any"], Dialect::Frr)
            .expect("applies");
        assert_eq!(
            applied.render(),
            "access-list 1 seq 7 deny any\naccess-list 1 seq 18446744073709551615 permit any\naccess-list 1 permit 10.0.0.0/8\naccess-list 1 permit 192.168.0.0/16\n"
        );
    }

    #[test]
    fn single_valued_commands_conflict_by_key() {
        assert_eq!(conflict_key("ip ospf cost 20"), conflict_key("ip ospf cost 30"));
        assert_eq!(
            conflict_key("neighbor 10.0.0.2 route-map A out"),
            conflict_key("neighbor 10.0.0.2 route-map B out")
        );
        assert_ne!(
            conflict_key("neighbor 10.0.0.2 route-map A out"),
            conflict_key("neighbor 10.0.0.2 route-map A in")
        );
        assert_ne!(
            conflict_key("neighbor 10.0.0.2 remote-as 1"),
            conflict_key("neighbor 10.0.0.3 remote-as 1")
        );
        assert_eq!(conflict_key("redistribute static"), conflict_key("redistribute static route-map RM"));
        assert_ne!(
            conflict_key("neighbor 10.0.0.2 timers 1 3"),
            conflict_key("neighbor 10.0.0.2 timers connect 1")
        );
        assert_eq!(
            conflict_key("neighbor 10.0.0.2 timers 1 3"),
            conflict_key("neighbor 10.0.0.2 timers 3 9")
        );
        assert!(conflict_key("ip address 10.0.0.1/24").is_none());
    }

    #[test]
    fn nft_listing_errors() {
        assert_eq!(Config::parse("}\n", Dialect::Linux), Err(ConfigError::UnbalancedClose { line: 1 }));
        assert_eq!(
            Config::parse("table inet f {\n", Dialect::Linux),
            Err(ConfigError::UnclosedBlock { open: 1 })
        );
        assert!(matches!(
            Config::from_commands(&["nft flush ruleset"], Dialect::Linux),
            Err(ConfigError::Unsupported { line: 1, .. })
        ));
        assert!(matches!(
            Config::from_commands(&["nft add rule inet f input position 3 accept"], Dialect::Linux),
            Err(ConfigError::Unsupported { .. })
        ));
        assert!(matches!(Config::parse("bogus\n", Dialect::Linux), Err(ConfigError::Malformed { .. })));
        let handles = "table inet f { # handle 7\n\tchain input { # handle 1\n\t\ttcp dport 22 counter packets 3 bytes 180 accept # handle 4\n\t}\n}\n";
        assert_eq!(
            Config::parse(handles, Dialect::Linux).expect("parses").render(),
            "table inet f\n chain input\n  tcp dport 22 counter accept\n"
        );
    }

    #[test]
    fn tc_commands_and_show_lines_meet() {
        let typed = Config::from_commands(
            &["tc qdisc add dev eth0 root tbf rate 8kbit burst 2kb latency 50ms", "ip link set eth0 up"],
            Dialect::Linux,
        )
        .expect("applies");
        let shown = Config::parse(
            "qdisc noqueue 0: dev lo root refcnt 2 \nqdisc tbf 8199: dev eth0 root refcnt 3 rate 8Kbit burst 2Kb lat 50ms \n",
            Dialect::Linux,
        )
        .expect("parses");
        assert_eq!(typed, shown);
        let mut replaced = typed.clone();
        replaced
            .apply(
                &["tc qdisc replace dev eth0 root handle 1: tbf rate 1mbit burst 10kb latency 70ms"],
                Dialect::Linux,
            )
            .expect("applies");
        assert_eq!(replaced.render(), "dev eth0\n qdisc root tbf rate 1mbit burst 10kb latency 70ms\n");
        replaced.apply(&["tc qdisc del dev eth0 root"], Dialect::Linux).expect("applies");
        assert_eq!(replaced.render(), "dev eth0\n");
    }

    /// `tc filter show dev va` on this machine's kernel (u32 is its only classifier), for the
    /// filters `FILTERS` type.
    const FILTER_SHOW: &str = r"filter parent 1: protocol ip pref 1 u32 chain 0 
filter parent 1: protocol ip pref 1 u32 chain 0 fh 800: ht divisor 1 
filter parent 1: protocol ip pref 1 u32 chain 0 fh 800::800 order 2048 key ht 800 bkt 0 *flowid 1:10 not_in_hw 
  match 0a000c00/ffffff00 at 16
filter parent 1: protocol ip pref 2 u32 chain 0 
filter parent 1: protocol ip pref 2 u32 chain 0 fh 801: ht divisor 1 
filter parent 1: protocol ip pref 2 u32 chain 0 fh 801::800 order 2048 key ht 801 bkt 0 *flowid 1:10 not_in_hw 
  match 00060000/00ff0000 at 8
  match 00000050/0000ffff at 20
filter parent 1: protocol ip pref 3 u32 chain 0 
filter parent 1: protocol ip pref 3 u32 chain 0 fh 802: ht divisor 1 
filter parent 1: protocol ip pref 3 u32 chain 0 fh 802::800 order 2048 key ht 802 bkt 0 *flowid 1:10 not_in_hw 
  match 00b80000/00fc0000 at 0
filter parent 1: protocol ip pref 4 u32 chain 0 
filter parent 1: protocol ip pref 4 u32 chain 0 fh 803: ht divisor 1 
filter parent 1: protocol ip pref 4 u32 chain 0 fh 803::800 order 2048 key ht 803 bkt 0 *flowid 1:1 not_in_hw 
  match 01020304/ffffffff at 12
  match 00350000/ffff0000 at 20
filter parent 1: protocol ip pref 8 u32 chain 0 
filter parent 1: protocol ip pref 8 u32 chain 0 fh 804: ht divisor 1 
filter parent 1: protocol ip pref 8 u32 chain 0 fh 804::800 order 2048 key ht 804 bkt 0 *flowid 1:1 not_in_hw 
  match 08000000/ff000000 at 20
filter parent 1: protocol ip pref 49152 u32 chain 0 
filter parent 1: protocol ip pref 49152 u32 chain 0 fh 805: ht divisor 1 
filter parent 1: protocol ip pref 49152 u32 chain 0 fh 805::800 order 2048 key ht 805 bkt 0 *flowid 1:1 not_in_hw 
  match 0a090000/ffff0000 at 16
";

    const FILTERS: [&str; 6] = [
        "tc filter add dev va parent 1: protocol ip prio 1 u32 match ip dst 10.0.12.0/24 flowid 1:10",
        "tc filter add dev va parent 1: protocol ip prio 2 u32 match ip protocol 6 0xff match ip dport 80 0xffff flowid 1:10",
        "tc filter add dev va parent 1: protocol ip prio 3 u32 match ip tos 0xb8 0xfc classid 1:10",
        "tc filter add dev va parent 1: protocol ip prio 4 u32 match ip src 1.2.3.4 match ip sport 53 0xffff flowid 1:1",
        "tc filter add dev va parent 1:0 protocol ip prio 8 u32 match ip icmp_type 8 0xff flowid 1:1",
        "tc filter add dev va parent 1: protocol ip u32 match ip dst 10.9.0.0/16 flowid 1:1",
    ];

    #[test]
    fn u32_filters_typed_and_shown_meet() {
        let typed = Config::from_commands(&FILTERS, Dialect::Linux).expect("applies");
        let shown = Config::parse(&tc_filter_listing("va", FILTER_SHOW), Dialect::Linux).expect("parses");
        assert_eq!(typed.render(), shown.render());
        assert_eq!(shown.nodes.len(), 1, "{}", shown.render());
        assert_eq!(
            shown.nodes[0].children.len(),
            6,
            "the hash-table lines are no filters: {}",
            shown.render()
        );
        assert!(
            shown.render().contains(
                "filter parent 1: pref 1 protocol ip u32 match 0a000c00/ffffff00 at 16 flowid 1:10"
            ),
            "{}",
            shown.render()
        );
        // The same selectors spelled as raw keys are the same filter.
        let raw = Config::from_commands(
            &["tc filter add dev va parent 1: protocol ip prio 1 u32 match u32 0x0a000c00 0xffffff00 at 16 flowid 1:10"],
            Dialect::Linux,
        )
        .expect("applies");
        assert_eq!(raw.nodes[0].children[0], typed.nodes[0].children[0]);
        let byte = Config::from_commands(
            &["tc filter add dev va parent 1: protocol ip prio 8 u32 match u8 8 0xff at 20 classid 1:1"],
            Dialect::Linux,
        )
        .expect("applies");
        assert!(typed.nodes[0].children.contains(&byte.nodes[0].children[0]), "{}", byte.render());
        // Another class, another address: another filter.
        let other = Config::from_commands(
            &["tc filter add dev va parent 1: protocol ip prio 1 u32 match ip dst 10.0.13.0/24 flowid 1:10"],
            Dialect::Linux,
        )
        .expect("applies");
        assert!(!typed.nodes[0].children.contains(&other.nodes[0].children[0]));
        // Deleting a priority removes its filters, and only them.
        let mut deleted = typed.clone();
        deleted.apply(&["tc filter del dev va parent 1: prio 2"], Dialect::Linux).expect("applies");
        assert_eq!(deleted.nodes[0].children.len(), 5, "{}", deleted.render());
        assert!(!deleted.render().contains("pref 2 "), "{}", deleted.render());
        let mut flushed = typed.clone();
        flushed.apply(&["tc filter del dev va"], Dialect::Linux).expect("applies");
        assert!(!flushed.render().contains("filter"), "{}", flushed.render());
    }

    #[test]
    fn sysctl_writes_and_listings_meet() {
        let listing =
            "net.ipv4.conf.eth0.rp_filter = 0\nnet.ipv4.conf.all.rp_filter = 0\nnet.ipv4.ip_forward = 1\n";
        let mut state = Config::parse(listing, Dialect::Linux).expect("parses");
        let initial = state.clone();
        state.apply(&["sysctl -w net.ipv4.conf.eth0.rp_filter=1"], Dialect::Linux).expect("applies");
        let after =
            Config::parse(&listing.replace("eth0.rp_filter = 0", "eth0.rp_filter = 1"), Dialect::Linux)
                .expect("parses");
        assert_eq!(state.render(), after.render());
        assert_ne!(state.render(), initial.render());
        // A read changes nothing; the slash form is the dotted key.
        let mut read = initial.clone();
        read.apply(&["sysctl net.ipv4.conf.eth0.rp_filter", "sysctl net/ipv4/ip_forward=1"], Dialect::Linux)
            .expect("applies");
        assert_eq!(read.render(), initial.render());
        // Typed among FRR commands, it goes to the Linux reader.
        let frr = Config::from_commands(&["sysctl -w net.ipv4.ip_forward=0"], Dialect::Frr).expect("applies");
        assert_eq!(frr.render().trim(), "sysctl net.ipv4.ip_forward 0");
    }

    /// An htb hierarchy as typed and as `tc qdisc show` / `tc class show` print it (FRR 8.4's
    /// kernel, the lines the netconf backend reads, `dev` put in by it).
    #[test]
    fn htb_qdiscs_and_classes_typed_and_shown_meet() {
        let typed = Config::from_commands(
            &[
                "tc qdisc add dev eth0 root handle 1: htb default 20",
                "tc class add dev eth0 parent 1: classid 1:1 htb rate 2mbit",
                "tc class add dev eth0 parent 1:1 classid 1:10 htb rate 1mbit ceil 2mbit",
                "tc class add dev eth0 parent 1:1 classid 1:20 htb rate 512kbit ceil 1mbit prio 1",
            ],
            Dialect::Linux,
        )
        .expect("applies");
        let shown = Config::parse(
            "qdisc htb 1: dev eth0 root refcnt 2 r2q 10 default 0x20 direct_packets_stat 0 direct_qlen 1000\n\
             class htb 1:1 dev eth0 root rate 2Mbit ceil 2Mbit burst 1600b cburst 1600b\n\
             class htb 1:10 dev eth0 parent 1:1 prio 0 rate 1Mbit ceil 2Mbit burst 1600b cburst 1600b\n\
             class htb 1:20 dev eth0 parent 1:1 leaf 8001: prio 1 rate 512Kbit ceil 1Mbit burst 1600b cburst 1600b\n",
            Dialect::Linux,
        )
        .expect("parses");
        assert_eq!(typed.render(), shown.render());
        // A different rate is a different class; a deleted class is gone.
        let mut changed = typed.clone();
        changed
            .apply(
                &["tc class change dev eth0 parent 1:1 classid 1:10 htb rate 1500kbit ceil 2mbit"],
                Dialect::Linux,
            )
            .expect("applies");
        assert_ne!(changed.render(), shown.render());
        // tbf's own inner class is no class anyone made.
        let tbf = Config::parse("class tbf 8001:1 dev eth0 parent 8001: \n", Dialect::Linux).expect("parses");
        assert_eq!(tbf.render(), "");
        let mut deleted = typed.clone();
        deleted.apply(&["tc class del dev eth0 classid 1:20"], Dialect::Linux).expect("applies");
        assert!(!deleted.render().contains("1:20"), "{}", deleted.render());
    }
}
