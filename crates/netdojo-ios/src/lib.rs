//! netdojo-ios: configuration, commands and interface names written in Cisco IOS style,
//! translated for an FRRouting router on Linux, so that NetConfBench tasks written the way
//! engineers write them (seed 001's own example, textbooks, NetConfEval) run without IOS images.
//!
//! - [`names`]: IOS interface names and their Linux names (`Serial0/0` is `s0-0`).
//! - [`Translator`]: configuration lines, one at a time with the context of the block they are
//!   in, to FRR lines (vtysh) and Linux commands (nftables for ACLs, interfaces of their own for
//!   loopbacks); show commands to FRR's; FRR's output back to IOS interface names.
//!
//! A line with no translation is an error naming it ([`IosError::Untranslatable`]), never
//! dropped: only lines that mean nothing on FRR ([`IGNORED`]: `version`, `service ...`,
//! console lines...) are skipped, and the docs list them. The table of translations is in
//! docs/netconf.md.

pub mod names;

use std::collections::BTreeMap;

pub use names::Interface;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IosError {
    #[error("`{line}`: no translation to FRR or Linux ({why})")]
    Untranslatable { line: String, why: String },
    #[error("`{what}` is ambiguous: {}", choices.join(", "))]
    Ambiguous { what: String, choices: Vec<String> },
    #[error("interface {ios} would be `{linux}` on Linux, longer than 15 characters")]
    NameTooLong { ios: String, linux: String },
}

/// What one IOS line becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Translated {
    /// A line for vtysh's configuration mode.
    Frr(String),
    /// A command to run on the router (nft, ip).
    Linux(String),
}

/// Lines (and blocks) with no meaning on an FRR router, skipped: IOS housekeeping, the console
/// and VTY lines (`line ...` and the block under it), hardware settings. Matched on their first
/// words: at the top level ...
pub const IGNORED: [&str; 20] = [
    "version",
    "service",
    "no service",
    "boot-start-marker",
    "boot-end-marker",
    "boot",
    "no aaa new-model",
    "ip cef",
    "no ip cef",
    "no ip domain lookup",
    "no ip domain-lookup",
    "ip subnet-zero",
    "no ip http server",
    "no ip http secure-server",
    "ip forward-protocol",
    "memory-size",
    "multilink",
    "control-plane",
    "line",
    "end",
];

/// ... under an interface ...
pub const IGNORED_INTERFACE: [&str; 6] =
    ["duplex", "speed", "clock rate", "serial restart-delay", "encapsulation hdlc", "encapsulation ppp"];

/// ... and under `router rip` / `router bgp` (FRR never summarises, and has no IGP sync).
pub const IGNORED_ROUTER: [&str; 2] = ["no auto-summary", "no synchronization"];

/// The block a line is in.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Block {
    Top,
    Interface(Interface),
    Ospf,
    Rip,
    Bgp,
    /// `ip access-list standard|extended NAME`: its entries.
    Acl {
        name: String,
        standard: bool,
    },
    /// A block whose lines are all skipped (`line vty 0 4`, `control-plane`).
    Ignored,
}

/// One ACL entry: `permit|deny PROTO SRC [PORTS] DST [PORTS] [established]`, as nft matches.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AclEntry {
    /// Its place in a named ACL (its sequence number); numbered ACLs keep their order.
    seq: u64,
    permit: bool,
    matches: String,
}

/// Translates one device's IOS lines, in order (the block a line is in is the context).
#[derive(Debug, Clone, Default)]
pub struct Translator {
    block: Option<Block>,
    acls: BTreeMap<String, Vec<AclEntry>>,
    /// The loopbacks seen: each an interface of its own to create.
    loopbacks: Vec<String>,
}

fn untranslatable(line: &str, why: impl Into<String>) -> IosError {
    IosError::Untranslatable { line: line.trim().to_string(), why: why.into() }
}

/// `255.255.255.0` → 24; `None` for a mask that is not contiguous ones.
pub fn mask_len(mask: &str) -> Option<u32> {
    let bits = u32::from(mask.parse::<std::net::Ipv4Addr>().ok()?);
    let len = bits.leading_ones();
    (bits.checked_shl(len).unwrap_or(0) == 0).then_some(len)
}

/// `0.0.0.255` → 24 (an OSPF wildcard: the mask's complement).
pub fn wildcard_len(wildcard: &str) -> Option<u32> {
    let bits = u32::from(wildcard.parse::<std::net::Ipv4Addr>().ok()?);
    mask_len(&std::net::Ipv4Addr::from(!bits).to_string())
}

fn prefix(line: &str, address: &str, mask: &str) -> Result<String, IosError> {
    address
        .parse::<std::net::Ipv4Addr>()
        .map_err(|_| untranslatable(line, format!("`{address}` is not an IPv4 address")))?;
    let len = mask_len(mask).ok_or_else(|| untranslatable(line, format!("`{mask}` is not a netmask")))?;
    Ok(format!("{address}/{len}"))
}

fn starts_with_words(line: &str, words: &str) -> bool {
    let mut l = line.split_whitespace();
    words.split_whitespace().all(|w| l.next().is_some_and(|x| x.eq_ignore_ascii_case(w)))
}

impl Translator {
    pub fn new() -> Self {
        Self::default()
    }

    /// The Linux name of an IOS interface name; a name that is not IOS's passes unchanged.
    fn ifname(line: &str, name: &str) -> Result<String, IosError> {
        match Interface::parse(name)? {
            Some(i) => i.linux(),
            None if name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) => {
                Ok(name.to_string())
            }
            None => Err(untranslatable(line, format!("`{name}` is not an interface name"))),
        }
    }

    /// One line of configuration (a startup configuration's, a ground truth's or an agent's
    /// configuration command). Returns what to apply, possibly nothing (a comment, an ignored
    /// line, an ACL entry waiting for its `ip access-group`).
    pub fn line(&mut self, raw: &str) -> Result<Vec<Translated>, IosError> {
        let line = raw.trim_end_matches(['\r', '\n']);
        let text = line.trim();
        if text.is_empty() || text.starts_with('!') {
            return Ok(vec![]);
        }
        let indented = line.starts_with(char::is_whitespace);
        let words: Vec<&str> = text.split_whitespace().collect();
        if words[0].eq_ignore_ascii_case("exit") {
            self.block = Some(Block::Top);
            return Ok(vec![Translated::Frr("exit".into())]);
        }
        if let Some(opened) = self.open_block(line, &words)? {
            return Ok(opened);
        }
        // A line in a block, or typed after the line that opened it (typed commands are not
        // indented): the block's commands first, then, for an unindented line, the top level's,
        // as IOS's parser falls back to the parent mode.
        // Commands and keywords are matched case-insensitively; names and values keep their case.
        let lowered: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
        let lower: Vec<&str> = lowered.iter().map(String::as_str).collect();
        let block = self.block.clone().unwrap_or(Block::Top);
        let in_block = match &block {
            Block::Top => None,
            Block::Ignored => Some(Ok(vec![])),
            Block::Interface(iface) => Some(self.interface_line(line, text, &words, iface, &lower)),
            Block::Ospf => Some(Self::ospf_line(line, text, &words, &lower)),
            Block::Rip => Some(Self::rip_line(line, text, &words, &lower)),
            Block::Bgp => Some(Self::bgp_line(line, text, &words, &lower)),
            Block::Acl { name, standard } => Some(self.named_acl_line(line, &words, name, *standard)),
        };
        let block_error = match in_block {
            Some(Ok(out)) if indented || block != Block::Ignored => return Ok(out),
            Some(Err(e)) if indented => return Err(e),
            Some(Err(e)) => Some(e),
            _ => None,
        };
        // Neither the block nor the top level: the block's reason is the one that says more.
        let top = self.top_line(line, text, &words).map_err(|e| block_error.unwrap_or(e));
        if top.is_ok() {
            self.block = Some(
                if IGNORED.iter().any(|i| starts_with_words(text, i))
                    && (starts_with_words(text, "line") || starts_with_words(text, "control-plane"))
                {
                    Block::Ignored
                } else {
                    Block::Top
                },
            );
        }
        top
    }

    /// A line that opens a block (`interface`, `router ...`): what it becomes.
    fn open_block(&mut self, line: &str, words: &[&str]) -> Result<Option<Vec<Translated>>, IosError> {
        let frr = |s: String| Ok(Some(vec![Translated::Frr(s)]));
        match words {
            [i, name @ ..] if i.eq_ignore_ascii_case("interface") && !name.is_empty() => {
                let iface = Interface::parse(&name.join(" "))?
                    .ok_or_else(|| untranslatable(line, "not an IOS interface name"))?;
                let linux = iface.linux()?;
                let mut out = vec![];
                if iface.is_loopback() && !self.loopbacks.contains(&linux) {
                    self.loopbacks.push(linux.clone());
                    out.extend(loopback(&linux).into_iter().map(Translated::Linux));
                }
                self.block = Some(Block::Interface(iface));
                out.push(Translated::Frr(format!("interface {linux}")));
                Ok(Some(out))
            }
            [r, o, ..] if r.eq_ignore_ascii_case("router") && o.eq_ignore_ascii_case("ospf") => {
                // FRR runs one OSPF instance per VRF: the IOS process id has no meaning there.
                self.block = Some(Block::Ospf);
                frr("router ospf".into())
            }
            [r, p] if r.eq_ignore_ascii_case("router") && p.eq_ignore_ascii_case("rip") => {
                self.block = Some(Block::Rip);
                frr("router rip".into())
            }
            [r, b, asn] if r.eq_ignore_ascii_case("router") && b.eq_ignore_ascii_case("bgp") => {
                self.block = Some(Block::Bgp);
                frr(format!("router bgp {asn}"))
            }
            [ip, acl, kind, name]
                if ip.eq_ignore_ascii_case("ip")
                    && acl.eq_ignore_ascii_case("access-list")
                    && (kind.eq_ignore_ascii_case("standard") || kind.eq_ignore_ascii_case("extended")) =>
            {
                // The name becomes part of an nftables chain's name: letters, digits, `-`, `_`.
                if name.len() > 64 || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                {
                    return Err(untranslatable(
                        line,
                        format!("`{name}`: an ACL name is letters, digits, `-` and `_`"),
                    ));
                }
                self.acls.entry((*name).to_string()).or_default();
                let standard = kind.eq_ignore_ascii_case("standard");
                self.block = Some(Block::Acl { name: (*name).to_string(), standard });
                Ok(Some(vec![]))
            }
            _ => Ok(None),
        }
    }

    fn top_line(&mut self, line: &str, text: &str, words: &[&str]) -> Result<Vec<Translated>, IosError> {
        if IGNORED.iter().any(|i| starts_with_words(text, i)) {
            return Ok(vec![]);
        }
        let frr = |s: String| Ok(vec![Translated::Frr(s)]);
        match words {
            ["hostname", name] => frr(format!("hostname {name}")),
            [ip, route, rest @ ..]
                if ip.eq_ignore_ascii_case("ip") && route.eq_ignore_ascii_case("route") =>
            {
                Self::static_route(line, false, rest)
            }
            [no, ip, route, rest @ ..]
                if no.eq_ignore_ascii_case("no")
                    && ip.eq_ignore_ascii_case("ip")
                    && route.eq_ignore_ascii_case("route") =>
            {
                Self::static_route(line, true, rest)
            }
            [acl, number, rest @ ..] if acl.eq_ignore_ascii_case("access-list") => {
                let entry = Self::acl_entry(line, Self::numbered_standard(line, number)?, rest)?;
                self.acls.entry((*number).to_string()).or_default().push(entry);
                Ok(vec![])
            }
            _ => Err(untranslatable(line, format!("no IOS command `{text}` is translated at the top level"))),
        }
    }

    /// `ip route A MASK NEXTHOP|INTERFACE [DISTANCE] [name N] [permanent]`.
    fn static_route(line: &str, no: bool, rest: &[&str]) -> Result<Vec<Translated>, IosError> {
        let [address, mask, via, tail @ ..] = rest else {
            return Err(untranslatable(line, "`ip route ADDRESS MASK NEXT-HOP [DISTANCE]`"));
        };
        let dest = prefix(line, address, mask)?;
        let via = if via.parse::<std::net::Ipv4Addr>().is_ok() {
            via.to_string()
        } else {
            Self::ifname(line, via)?
        };
        let mut out = format!("{}ip route {dest} {via}", if no { "no " } else { "" });
        let mut tail = tail.iter();
        while let Some(word) = tail.next() {
            match *word {
                d if d.parse::<u8>().is_ok() => out.push_str(&format!(" {d}")),
                "permanent" => {}
                w if w.eq_ignore_ascii_case("name") => {
                    tail.next();
                }
                w if w.eq_ignore_ascii_case("tag") => {
                    let tag = tail.next().ok_or_else(|| untranslatable(line, "`tag` without a value"))?;
                    out.push_str(&format!(" tag {tag}"));
                }
                other => return Err(untranslatable(line, format!("`{other}` after the next hop"))),
            }
        }
        Ok(vec![Translated::Frr(out)])
    }

    fn interface_line(
        &mut self,
        line: &str,
        text: &str,
        words: &[&str],
        iface: &Interface,
        lower: &[&str],
    ) -> Result<Vec<Translated>, IosError> {
        let frr = |s: String| Ok(vec![Translated::Frr(s)]);
        if IGNORED_INTERFACE.iter().any(|i| starts_with_words(text, i)) {
            return Ok(vec![]);
        }
        match lower {
            ["ip", "address", _, _] | ["ip", "address", _, _, "secondary"] => {
                frr(format!(" ip address {}", prefix(line, words[2], words[3])?))
            }
            ["no", "ip", "address", _, _, ..] => {
                frr(format!(" no ip address {}", prefix(line, words[3], words[4])?))
            }
            // An unnumbered interface with no address: nothing to remove on FRR.
            ["no", "ip", "address"] => Ok(vec![]),
            ["shutdown"] | ["no", "shutdown"] => frr(format!(" {}", lower.join(" "))),
            ["description", ..] | ["bandwidth", _] | ["ip", "ospf", ..] => frr(format!(" {text}")),
            ["ip", "access-group", _, dir @ ("in" | "out")] => self.access_group(line, iface, words[2], dir),
            _ => Err(untranslatable(
                line,
                format!("no translation of `{text}` under interface {}", iface.ios()),
            )),
        }
    }

    fn ospf_line(
        line: &str,
        text: &str,
        words: &[&str],
        lower: &[&str],
    ) -> Result<Vec<Translated>, IosError> {
        let frr = |s: String| Ok(vec![Translated::Frr(s)]);
        match lower {
            ["network", address, wildcard, "area", area] => {
                let len = wildcard_len(wildcard)
                    .ok_or_else(|| untranslatable(line, format!("`{wildcard}` is not a wildcard mask")))?;
                frr(format!(" network {address}/{len} area {area}"))
            }
            ["passive-interface", _] => frr(format!(" passive-interface {}", Self::ifname(line, words[1])?)),
            // IOS's `router-id` is FRR's `ospf router-id`.
            ["router-id", id] => frr(format!(" ospf router-id {}", ipv4(line, id)?)),
            // IOS throttles LSAs by start, hold and max; FRR by one minimum interval (the start).
            ["timers", "throttle", "lsa", "all", start, _, _] => {
                frr(format!(" timers throttle lsa all {}", number(line, start)?))
            }
            ["timers", "throttle", "spf", a, b, c] => frr(format!(
                " timers throttle spf {} {} {}",
                number(line, a)?,
                number(line, b)?,
                number(line, c)?
            )),
            ["timers", "lsa", "arrival", ms] => frr(format!(" timers lsa min-arrival {}", number(line, ms)?)),
            ["redistribute", kind, rest @ ..] => {
                // IOS's `subnets` is FRR's only behaviour.
                let rest: Vec<&str> = rest.iter().copied().filter(|w| *w != "subnets").collect();
                frr(format!(
                    " redistribute {kind}{}",
                    rest.iter().map(|w| format!(" {w}")).collect::<String>()
                ))
            }
            ["log-adjacency-changes", ..]
            | ["default-information", ..]
            | ["area", ..]
            | ["auto-cost", ..]
            | ["default-metric", _]
            | ["distance", ..]
            | ["maximum-paths", _] => frr(format!(" {text}")),
            _ => Err(untranslatable(line, format!("no translation of `{text}` under router ospf"))),
        }
    }

    fn rip_line(line: &str, text: &str, words: &[&str], lower: &[&str]) -> Result<Vec<Translated>, IosError> {
        let frr = |s: String| Ok(vec![Translated::Frr(s)]);
        if IGNORED_ROUTER.iter().any(|i| starts_with_words(text, i)) {
            return Ok(vec![]);
        }
        match lower {
            // IOS's RIP `network` is classful.
            ["network", address] => {
                let ip: std::net::Ipv4Addr = address
                    .parse()
                    .map_err(|_| untranslatable(line, format!("`{address}` is not an address")))?;
                let len = match ip.octets()[0] {
                    0..=127 => 8,
                    128..=191 => 16,
                    _ => 24,
                };
                frr(format!(" network {address}/{len}"))
            }
            ["version", _] | ["redistribute", ..] | ["default-information", ..] | ["timers", ..] => {
                frr(format!(" {text}"))
            }
            ["passive-interface", _] => frr(format!(" passive-interface {}", Self::ifname(line, words[1])?)),
            _ => Err(untranslatable(line, format!("no translation of `{text}` under router rip"))),
        }
    }

    fn bgp_line(line: &str, text: &str, words: &[&str], lower: &[&str]) -> Result<Vec<Translated>, IosError> {
        let frr = |s: String| Ok(vec![Translated::Frr(s)]);
        if IGNORED_ROUTER.iter().any(|i| starts_with_words(text, i)) {
            return Ok(vec![]);
        }
        match lower {
            ["network", _, "mask", _] => frr(format!(" network {}", prefix(line, words[1], words[3])?)),
            ["neighbor", ..] | ["bgp", ..] | ["redistribute", ..] | ["timers", ..] => frr(format!(" {text}")),
            _ => Err(untranslatable(line, format!("no translation of `{text}` under router bgp"))),
        }
    }

    /// An entry of a named ACL: `[SEQ] permit|deny ...` (entries run in sequence order; without
    /// a number, after the others, as IOS numbers them by tens), or `remark ...`.
    fn named_acl_line(
        &mut self,
        line: &str,
        words: &[&str],
        name: &str,
        standard: bool,
    ) -> Result<Vec<Translated>, IosError> {
        if words.first().is_some_and(|w| w.eq_ignore_ascii_case("remark")) {
            return Ok(vec![]);
        }
        let (seq, rest) = match words.first().and_then(|w| w.parse::<u64>().ok()) {
            Some(seq) => (Some(seq), &words[1..]),
            None => (None, words),
        };
        let entry = Self::acl_entry(line, standard, rest)?;
        let entries = self.acls.entry(name.to_string()).or_default();
        let seq = seq
            .unwrap_or_else(|| entries.iter().map(|e| e.seq).max().unwrap_or(0).saturating_add(10) / 10 * 10);
        entries.retain(|e| e.seq != seq);
        let at = entries.iter().position(|e| e.seq > seq).unwrap_or(entries.len());
        entries.insert(at, AclEntry { seq, ..entry });
        Ok(vec![])
    }

    /// The kind of a numbered ACL: standard (1-99, 1300-1999) or extended (100-199, 2000-2699).
    fn numbered_standard(line: &str, number: &str) -> Result<bool, IosError> {
        let n: u32 =
            number.parse().map_err(|_| untranslatable(line, format!("`{number}` is not an ACL number")))?;
        match n {
            1..=99 | 1300..=1999 => Ok(true),
            100..=199 | 2000..=2699 => Ok(false),
            _ => Err(untranslatable(line, format!("{n} is neither a standard nor an extended ACL number"))),
        }
    }

    /// One entry, `permit|deny ...`: of a standard ACL (a source) or an extended one (protocol,
    /// source, destination, ports).
    fn acl_entry(line: &str, standard: bool, rest: &[&str]) -> Result<AclEntry, IosError> {
        let (action, rest) =
            rest.split_first().ok_or_else(|| untranslatable(line, "`permit` or `deny` missing"))?;
        let permit = match action.to_ascii_lowercase().as_str() {
            "permit" => true,
            "deny" => false,
            _ => return Err(untranslatable(line, "`permit` or `deny` expected")),
        };
        let mut words = rest.iter().copied().peekable();
        let mut matches = Vec::new();
        let address = |words: &mut std::iter::Peekable<std::iter::Copied<std::slice::Iter<'_, &str>>>| -> Result<Option<String>, IosError> {
            match words.next() {
                Some(w) if w.eq_ignore_ascii_case("any") => Ok(None),
                Some(w) if w.eq_ignore_ascii_case("host") => {
                    let a = words.next().ok_or_else(|| untranslatable(line, "`host` without an address"))?;
                    Ok(Some(ipv4(line, a)?))
                }
                // Every word that reaches an nft command is checked: an address is an address.
                Some(a) => match words.peek().and_then(|w| wildcard_len(w)) {
                    Some(len) => {
                        words.next();
                        Ok(Some(format!("{}/{len}", ipv4(line, a)?)))
                    }
                    None => Ok(Some(ipv4(line, a)?)),
                },
                None => Err(untranslatable(line, "an address is missing")),
            }
        };
        if standard {
            if let Some(src) = address(&mut words)? {
                matches.push(format!("ip saddr {src}"));
            }
        } else {
            let proto = words
                .next()
                .ok_or_else(|| untranslatable(line, "a protocol is missing"))?
                .to_ascii_lowercase();
            if !["ip", "tcp", "udp", "icmp"].contains(&proto.as_str()) {
                return Err(untranslatable(
                    line,
                    format!("protocol `{proto}` is not translated (ip, tcp, udp, icmp)"),
                ));
            }
            let src = address(&mut words)?;
            let port = |words: &mut std::iter::Peekable<std::iter::Copied<std::slice::Iter<'_, &str>>>,
                        dir: &str|
             -> Result<Option<String>, IosError> {
                match words.peek().map(|w| w.to_ascii_lowercase()) {
                    Some(op) if op == "eq" => {
                        words.next();
                        let p = words.next().ok_or_else(|| untranslatable(line, "`eq` without a port"))?;
                        Ok(Some(format!("{dir} {}", port_number(line, p)?)))
                    }
                    Some(op) if op == "range" => {
                        words.next();
                        let a = words.next().ok_or_else(|| untranslatable(line, "`range` without ports"))?;
                        let b =
                            words.next().ok_or_else(|| untranslatable(line, "`range` without its end"))?;
                        Ok(Some(format!("{dir} {}-{}", port_number(line, a)?, port_number(line, b)?)))
                    }
                    _ => Ok(None),
                }
            };
            let sport = if proto == "tcp" || proto == "udp" {
                port(&mut words, &format!("{proto} sport"))?
            } else {
                None
            };
            let dst = address(&mut words)?;
            let dport = if proto == "tcp" || proto == "udp" {
                port(&mut words, &format!("{proto} dport"))?
            } else {
                None
            };
            if let Some(src) = src {
                matches.push(format!("ip saddr {src}"));
            }
            if let Some(dst) = dst {
                matches.push(format!("ip daddr {dst}"));
            }
            match proto.as_str() {
                "ip" => {}
                "icmp" => match words.peek().map(|w| w.to_ascii_lowercase()) {
                    Some(t) if ["echo", "echo-reply"].contains(&t.as_str()) => {
                        words.next();
                        matches.push(format!(
                            "icmp type {}",
                            if t == "echo" { "echo-request" } else { "echo-reply" }
                        ));
                    }
                    _ => matches.push("ip protocol icmp".into()),
                },
                p => {
                    if sport.is_none() && dport.is_none() {
                        matches.push(format!("ip protocol {p}"));
                    }
                }
            }
            matches.extend(sport);
            matches.extend(dport);
            if words.peek().is_some_and(|w| w.eq_ignore_ascii_case("established")) {
                words.next();
                matches.push("tcp flags & (ack | rst) != 0".into());
            }
        }
        if words.peek().is_some_and(|w| w.eq_ignore_ascii_case("log")) {
            words.next();
        }
        if let Some(extra) = words.next() {
            return Err(untranslatable(line, format!("`{extra}` is not translated")));
        }
        Ok(AclEntry { seq: 0, permit, matches: matches.join(" ") })
    }

    /// `ip access-group N in|out` on `iface`: the ACL's entries as an nftables chain of its own,
    /// jumped to for packets in (or out of) that interface, ending in the ACL's implicit deny.
    fn access_group(
        &mut self,
        line: &str,
        iface: &Interface,
        acl: &str,
        dir: &str,
    ) -> Result<Vec<Translated>, IosError> {
        let entries = self.acls.get(acl).ok_or_else(|| {
            untranslatable(line, format!("access list {acl} is not defined before it is applied"))
        })?;
        let linux = iface.linux()?;
        let chain = format!("acl_{}_{dir}_{}", acl.replace('-', "_"), linux.replace(['-', '.'], "_"));
        let (hooks, meta) =
            if dir == "in" { (["input", "forward"], "iifname") } else { (["output", "forward"], "oifname") };
        let mut out = vec![Translated::Linux("nft add table ip ios_acl".into())];
        for hook in hooks {
            out.push(Translated::Linux(format!(
                "nft add chain ip ios_acl {hook} {{ type filter hook {hook} priority 0 ; policy accept ; }}"
            )));
        }
        out.push(Translated::Linux(format!("nft add chain ip ios_acl {chain}")));
        for e in entries {
            let verdict = if e.permit { "accept" } else { "drop" };
            let rule =
                if e.matches.is_empty() { verdict.to_string() } else { format!("{} {verdict}", e.matches) };
            out.push(Translated::Linux(format!("nft add rule ip ios_acl {chain} {rule}")));
        }
        out.push(Translated::Linux(format!("nft add rule ip ios_acl {chain} drop")));
        for hook in hooks {
            out.push(Translated::Linux(format!(
                "nft add rule ip ios_acl {hook} {meta} \"{linux}\" jump {chain}"
            )));
        }
        Ok(out)
    }

    /// An IOS show command as FRR's vtysh takes it: `show ip route A MASK` → `show ip route
    /// A/LEN`, `show ip interface brief` → `show interface brief`, interface names translated.
    pub fn show(command: &str) -> Result<String, IosError> {
        let words: Vec<&str> = command.split_whitespace().collect();
        let lower: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
        let lower: Vec<&str> = lower.iter().map(String::as_str).collect();
        Ok(match lower.as_slice() {
            ["show", "ip", "route", a, m] if mask_len(m).is_some() => {
                format!("show ip route {}", prefix(command, words[3], words[4])?)
            }
            ["show", "ip", "interface", "brief"]
            | ["show", "ip", "int", "brief"]
            | ["sh", "ip", "int", "br"] => "show interface brief".into(),
            ["show", "interfaces", name @ ..] | ["show", "interface", name @ ..] if !name.is_empty() => {
                format!("show interface {}", Self::ifname(command, &words[2..].join(""))?)
            }
            _ => command.trim().to_string(),
        })
    }

    /// FRR's output with each Linux interface name of `interfaces` shown as IOS names it.
    pub fn names_back(output: &str, interfaces: &[Interface]) -> String {
        let mut out = output.to_string();
        // Longest first: `s0-0.10` before `s0-0`.
        let mut pairs: Vec<(String, String)> =
            interfaces.iter().filter_map(|i| Some((i.linux().ok()?, i.ios()))).collect();
        pairs.sort_by_key(|(l, _)| std::cmp::Reverse(l.len()));
        for (linux, ios) in pairs {
            out = replace_word(&out, &linux, &ios);
        }
        out
    }
}

/// Replaces `from` where it stands as a whole word (not inside `s0-01`).
fn replace_word(text: &str, from: &str, to: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(from) {
        let before = rest[..i].chars().next_back();
        let after = rest[i + from.len()..].chars().next();
        let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
        out.push_str(&rest[..i]);
        if word(before) || word(after) && after != Some('.') {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = &rest[i + from.len()..];
    }
    out.push_str(rest);
    out
}

/// The Linux commands that make a loopback interface `name`: a veth pair whose peer (`p` +
/// the name) stays beside it, both up, so that `name` has carrier and its addresses are local.
/// Not a dummy interface: kernels built without CONFIG_DUMMY (this project's) have none, and
/// the namespace's own `lo` is one interface where IOS may have several loopbacks.
pub fn loopback(name: &str) -> Vec<String> {
    vec![
        format!("ip link add {name} type veth peer name p{name}"),
        format!("ip link set p{name} up"),
        format!("ip link set {name} up"),
    ]
}

fn number(line: &str, word: &str) -> Result<u32, IosError> {
    word.parse().map_err(|_| untranslatable(line, format!("`{word}` is not a number")))
}

fn ipv4(line: &str, word: &str) -> Result<String, IosError> {
    word.parse::<std::net::Ipv4Addr>()
        .map(|a| a.to_string())
        .map_err(|_| untranslatable(line, format!("`{word}` is not an IPv4 address")))
}

/// A port as IOS writes it: a number or one of its names (`www` is 80).
fn port_number(line: &str, port: &str) -> Result<u16, IosError> {
    if let Ok(n) = port.parse() {
        return Ok(n);
    }
    const NAMES: [(&str, u16); 19] = [
        ("ftp-data", 20),
        ("ftp", 21),
        ("ssh", 22),
        ("telnet", 23),
        ("smtp", 25),
        ("domain", 53),
        ("bootps", 67),
        ("bootpc", 68),
        ("tftp", 69),
        ("www", 80),
        ("pop3", 110),
        ("ntp", 123),
        ("snmp", 161),
        ("snmptrap", 162),
        ("bgp", 179),
        ("https", 443),
        ("isakmp", 500),
        ("syslog", 514),
        ("non500-isakmp", 4500),
    ];
    NAMES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(port))
        .map(|(_, p)| *p)
        .ok_or_else(|| untranslatable(line, format!("`{port}` is not a port")))
}

/// A whole configuration (a startup configuration, `\r\n` or `\n` lines) translated: the FRR
/// configuration and the Linux commands, in order.
pub fn configuration(text: &str) -> Result<(Vec<String>, Vec<String>), IosError> {
    translate_lines(text.split('\n'))
}

/// Lines translated in order by one [`Translator`]: the FRR lines and the Linux commands.
pub fn translate_lines<'a>(
    lines: impl IntoIterator<Item = &'a str>,
) -> Result<(Vec<String>, Vec<String>), IosError> {
    let mut t = Translator::new();
    let (mut frr, mut linux) = (Vec::new(), Vec::new());
    for line in lines {
        for out in t.line(line)? {
            match out {
                Translated::Frr(l) => frr.push(l),
                Translated::Linux(l) => linux.push(l),
            }
        }
    }
    Ok((frr, linux))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frr(lines: &[&str]) -> Vec<String> {
        let (frr, _) = configuration(&lines.join("\n")).expect("translates");
        frr
    }

    #[test]
    fn the_drafts_startup_lines_and_static_routes() {
        let (frr, linux) = configuration(
            "!\r\nversion 12.4\r\nservice timestamps debug datetime msec\r\nhostname NewYork\r\n!\r\n",
        )
        .expect("translates");
        assert_eq!(frr, ["hostname NewYork"]);
        assert!(linux.is_empty());
        assert_eq!(
            frr_of(&[
                "ip route 2.2.2.0 255.255.255.252 192.168.1.2",
                "ip route 2.2.2.0 255.255.255.252 192.168.2.2 100"
            ]),
            ["ip route 2.2.2.0/30 192.168.1.2", "ip route 2.2.2.0/30 192.168.2.2 100"]
        );
        assert_eq!(frr_of(&["ip route 0.0.0.0 0.0.0.0 Serial0/0"]), ["ip route 0.0.0.0/0 s0-0"]);
    }

    fn frr_of(lines: &[&str]) -> Vec<String> {
        frr(lines)
    }

    #[test]
    fn interfaces_ospf_rip_bgp() {
        assert_eq!(
            frr(&[
                "interface Serial0/0",
                " ip address 192.168.1.1 255.255.255.252",
                " clock rate 64000",
                " no shutdown",
                "!",
                "interface Loopback0",
                " ip address 1.1.1.1 255.255.255.255",
                "router ospf 1",
                " router-id 1.1.1.1",
                " timers throttle lsa all 0 20 5000",
                " timers lsa arrival 0",
                " network 192.168.1.0 0.0.0.3 area 0",
                " passive-interface Loopback0",
                " redistribute static subnets",
                "router rip",
                " version 2",
                " network 10.0.0.0",
                " no auto-summary",
                "router bgp 65001",
                " neighbor 192.168.1.2 remote-as 65002",
                " network 1.1.1.1 mask 255.255.255.255",
            ]),
            [
                "interface s0-0",
                " ip address 192.168.1.1/30",
                " no shutdown",
                "interface lo0",
                " ip address 1.1.1.1/32",
                "router ospf",
                " ospf router-id 1.1.1.1",
                " timers throttle lsa all 0",
                " timers lsa min-arrival 0",
                " network 192.168.1.0/30 area 0",
                " passive-interface lo0",
                " redistribute static",
                "router rip",
                " version 2",
                " network 10.0.0.0/8",
                "router bgp 65001",
                " neighbor 192.168.1.2 remote-as 65002",
                " network 1.1.1.1/32",
            ]
        );
        let (_, linux) =
            configuration("interface Loopback0\n ip address 1.1.1.1 255.255.255.255\n").expect("ok");
        assert_eq!(
            linux,
            ["ip link add lo0 type veth peer name plo0", "ip link set plo0 up", "ip link set lo0 up"]
        );
    }

    #[test]
    fn typed_commands_keep_their_mode_until_a_top_level_command() {
        assert_eq!(
            frr(&[
                "router ospf 1",
                "network 10.0.12.0 0.0.0.3 area 0",
                "ip route 2.2.2.2 255.255.255.255 10.0.12.2",
                "interface Gi0/0",
                "ip address 10.0.0.1 255.255.255.0",
                "exit",
                "hostname R1",
            ]),
            [
                "router ospf",
                " network 10.0.12.0/30 area 0",
                "ip route 2.2.2.2/32 10.0.12.2",
                "interface gi0-0",
                " ip address 10.0.0.1/24",
                "exit",
                "hostname R1",
            ]
        );
        let err = configuration(
            "router ospf 1
network 10.0.0.0 0.255.0.255 area 0",
        )
        .expect_err("bad")
        .to_string();
        assert!(err.contains("wildcard"), "{err}");
    }

    #[test]
    fn an_untranslatable_line_is_an_error_naming_it() {
        for bad in [
            "snmp-server community public RO",
            "interface Serial0/0\n frame-relay map ip 10.0.0.1 102",
            "ip route 10.0.0.0 255.0.255.0 1.2.3.4",
            "router ospf 1\n network 10.0.0.0 0.255.0.255 area 0",
            "access-list 101 permit gre any any",
            "access-list 10 permit 1.1.1.1;flush",
        ] {
            let err = configuration(bad).expect_err(bad).to_string();
            let last = bad.lines().last().expect("a line").trim();
            assert!(err.contains(last), "{bad}: {err}");
        }
    }

    #[test]
    fn acls_become_nftables_chains_with_the_implicit_deny() {
        let (_, linux) = configuration(
            "access-list 101 deny tcp any host 2.2.2.2 eq www\naccess-list 101 permit ip any any\n\
             access-list 10 permit 192.168.1.0 0.0.0.255\ninterface GigabitEthernet0/1\n ip access-group 101 in\n",
        )
        .expect("translates");
        assert_eq!(
            linux,
            [
                "nft add table ip ios_acl",
                "nft add chain ip ios_acl input { type filter hook input priority 0 ; policy accept ; }",
                "nft add chain ip ios_acl forward { type filter hook forward priority 0 ; policy accept ; }",
                "nft add chain ip ios_acl acl_101_in_gi0_1",
                "nft add rule ip ios_acl acl_101_in_gi0_1 ip daddr 2.2.2.2 tcp dport 80 drop",
                "nft add rule ip ios_acl acl_101_in_gi0_1 accept",
                "nft add rule ip ios_acl acl_101_in_gi0_1 drop",
                "nft add rule ip ios_acl input iifname \"gi0-1\" jump acl_101_in_gi0_1",
                "nft add rule ip ios_acl forward iifname \"gi0-1\" jump acl_101_in_gi0_1",
            ]
        );
        // A named ACL, its entries by sequence number (15, typed last, runs second).
        let (_, linux) = configuration(
            "ip access-list extended WEB-IN\n 10 permit tcp any host 2.2.2.2 eq 443\n 20 deny ip any any\n\
             15 permit icmp any any echo\n remark keep pings\ninterface Gi0/2\n ip access-group WEB-IN in\n",
        )
        .expect("translates");
        let rules: Vec<&String> =
            linux.iter().filter(|l| l.contains("add rule ip ios_acl acl_WEB_IN")).collect();
        assert_eq!(
            rules,
            [
                "nft add rule ip ios_acl acl_WEB_IN_in_gi0_2 ip daddr 2.2.2.2 tcp dport 443 accept",
                "nft add rule ip ios_acl acl_WEB_IN_in_gi0_2 icmp type echo-request accept",
                "nft add rule ip ios_acl acl_WEB_IN_in_gi0_2 drop",
                "nft add rule ip ios_acl acl_WEB_IN_in_gi0_2 drop",
            ]
        );
        for bad in ["ip access-list extended bad;name\n", "access-list 700 permit any\n"] {
            assert!(configuration(bad).is_err(), "{bad}");
        }
        let err =
            configuration("interface Gi0/1\n ip access-group 5 in\n").expect_err("undefined").to_string();
        assert!(err.contains("access list 5 is not defined"), "{err}");
    }

    #[test]
    fn show_commands_and_names_back() {
        assert_eq!(
            Translator::show("show ip route 2.2.2.0 255.255.255.252").expect("ok"),
            "show ip route 2.2.2.0/30"
        );
        assert_eq!(Translator::show("show ip interface brief").expect("ok"), "show interface brief");
        assert_eq!(Translator::show("show interfaces Serial0/0").expect("ok"), "show interface s0-0");
        let ifaces = [
            Interface::parse("Serial0/0").expect("ok").expect("some"),
            Interface::parse("Serial0/0.10").expect("ok").expect("some"),
        ];
        assert_eq!(
            Translator::names_back("s0-0 up\ns0-0.10 up\ns0-01 down\nvia 10.0.0.1, s0-0", &ifaces),
            "Serial0/0 up\nSerial0/0.10 up\ns0-01 down\nvia 10.0.0.1, Serial0/0"
        );
    }

    #[test]
    fn masks_and_wildcards() {
        assert_eq!(mask_len("255.255.255.252"), Some(30));
        assert_eq!(mask_len("0.0.0.0"), Some(0));
        assert_eq!(mask_len("255.0.255.0"), None);
        assert_eq!(wildcard_len("0.0.0.3"), Some(30));
        assert_eq!(wildcard_len("0.0.0.0"), Some(32));
    }
}
