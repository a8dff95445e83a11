//! The command score (seed 001 §3.1): the agent's effective edits (the diff of each device's
//! final configuration against its initial one) against the ground truth's (its commands
//! applied to the initial configuration, diffed the same way), under wildcard matching of
//! non-essential identifiers; precision, recall and their harmonic mean.
//!
//! # Wildcards
//!
//! The names an operator makes up are not essential: access-list numbers and names,
//! prefix-list, route-map, community-list (standard, expanded, large, ext), as-path list and
//! key-chain names, wherever they appear (`ip prefix-list PL ...`, `match ip address
//! prefix-list PL`, `neighbor X route-map RM out`, `ip rip authentication key-chain KC`, ...).
//! Sequence numbers are not either: `seq N` is dropped (a typed entry has none, the listing
//! numbers it), a route-map entry's number and `continue N` become `<SEQ>`, and an IOS named
//! access-list entry loses its leading number. Where an entry stands in its list still counts
//! (see the `diff` module), so only the numbering is free.
//!
//! A renaming must be consistent: each of the agent's names is paired with at most one of the
//! ground truth's of the same kind, then both are written as the same placeholder (`<PL1>`).
//! The pairs are chosen greedily by how many edits the two names share once each is written
//! as a generic placeholder, so that the pairing does not depend on the order either side
//! defined its lists in (FRR prints them sorted by name). Names the initial configuration
//! already holds are essential (other configuration refers to them) and stay as they are.
//!
//! # Scores
//!
//! precision = matched / agent edits, recall = matched / ground-truth edits, F1 = their
//! harmonic mean (0 when both are 0). With no agent edits, precision is 1 if no edits were
//! expected either and 0 otherwise; with no ground-truth edits, recall is 1. So a task that
//! expects nothing scores F1 = 1 for doing nothing and 0 for any edit, and a no-op agent scores
//! 0 wherever edits were expected.

use std::collections::{BTreeSet, HashMap, VecDeque};

use serde::Serialize;

use crate::config::{Config, is_named_acl_header};
use crate::diff::{Edit, diff};

/// The kinds of non-essential identifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum IdKind {
    AccessList,
    PrefixList,
    RouteMap,
    CommunityList,
    AsPathList,
    KeyChain,
}

impl IdKind {
    fn tag(self) -> &'static str {
        match self {
            IdKind::AccessList => "ACL",
            IdKind::PrefixList => "PL",
            IdKind::RouteMap => "RM",
            IdKind::CommunityList => "CL",
            IdKind::AsPathList => "ASP",
            IdKind::KeyChain => "KC",
        }
    }
}

/// A name of a kind the seed treats as non-essential.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Identifier {
    pub kind: IdKind,
    pub name: String,
}

/// One device's edits, and the names that are essential on it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceEdits {
    pub device: String,
    /// The agent's effective edits: final against initial.
    pub agent: Vec<Edit>,
    /// The ground truth's: expected against initial.
    pub truth: Vec<Edit>,
    /// Identifiers that stay literal (those of the initial configuration).
    pub fixed: BTreeSet<Identifier>,
}

impl DeviceEdits {
    /// `expected` is the initial configuration with the ground truth applied
    /// ([`Config::apply`]).
    pub fn new(
        device: impl Into<String>,
        initial: &Config,
        final_config: &Config,
        expected: &Config,
    ) -> Self {
        DeviceEdits {
            device: device.into(),
            agent: diff(initial, final_config),
            truth: diff(initial, expected),
            fixed: identifiers(initial),
        }
    }
}

/// An agent edit and the ground-truth edit it matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Matched {
    pub agent: String,
    pub truth: String,
}

/// The command score and what it was computed from, for the report. Edits are written as
/// `[device: ]context > command`, ordered entries with the entry they follow.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoreReport {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub agent_edits: usize,
    pub truth_edits: usize,
    pub matched: Vec<Matched>,
    /// Ground-truth edits the agent did not make.
    pub missing: Vec<String>,
    /// Edits the agent made that the ground truth does not.
    pub extra: Vec<String>,
}

/// Scores one device's edits, with every identifier a wildcard.
pub fn score_edits(agent: &[Edit], truth: &[Edit]) -> ScoreReport {
    score(&[DeviceEdits {
        device: String::new(),
        agent: agent.to_vec(),
        truth: truth.to_vec(),
        fixed: BTreeSet::new(),
    }])
}

/// Scores all devices' edits together (names pair within a device only).
pub fn score(devices: &[DeviceEdits]) -> ScoreReport {
    let mut agent_keys: Vec<(String, String)> = Vec::new();
    let mut truth_keys: Vec<(String, String)> = Vec::new();
    for d in devices {
        let (agent, truth) = canonical(d);
        let label = |e: &Edit| if d.device.is_empty() { e.to_string() } else { format!("{}: {e}", d.device) };
        let prefix = |k: String| format!("{}\u{0}{k}", d.device);
        agent_keys.extend(agent.into_iter().map(prefix).zip(d.agent.iter().map(label)));
        truth_keys.extend(truth.into_iter().map(prefix).zip(d.truth.iter().map(label)));
    }
    let mut pool: HashMap<&str, VecDeque<usize>> = HashMap::new();
    for (t, (key, _)) in truth_keys.iter().enumerate() {
        pool.entry(key.as_str()).or_default().push_back(t);
    }
    let mut used = vec![false; truth_keys.len()];
    let (mut matched, mut extra) = (Vec::new(), Vec::new());
    for (key, label) in &agent_keys {
        match pool.get_mut(key.as_str()).and_then(VecDeque::pop_front) {
            Some(t) => {
                used[t] = true;
                matched.push(Matched { agent: label.clone(), truth: truth_keys[t].1.clone() });
            }
            None => extra.push(label.clone()),
        }
    }
    let missing: Vec<String> =
        truth_keys.iter().zip(&used).filter(|(_, u)| !**u).map(|((_, label), _)| label.clone()).collect();
    let (m, a, t) = (matched.len() as f64, agent_keys.len() as f64, truth_keys.len() as f64);
    let precision = match (agent_keys.is_empty(), truth_keys.is_empty()) {
        (true, true) => 1.0,
        (true, false) => 0.0,
        (false, _) => m / a,
    };
    let recall = if truth_keys.is_empty() { 1.0 } else { m / t };
    let f1 = if precision + recall == 0.0 { 0.0 } else { 2.0 * precision * recall / (precision + recall) };
    ScoreReport {
        precision,
        recall,
        f1,
        agent_edits: agent_keys.len(),
        truth_edits: truth_keys.len(),
        matched,
        missing,
        extra,
    }
}

/// Every non-essential identifier a configuration names.
pub fn identifiers(config: &Config) -> BTreeSet<Identifier> {
    let mut out = BTreeSet::new();
    for path in config.paths() {
        let parent = path.len().checked_sub(2).map(|i| path[i].as_str());
        if let Some(line) = path.last() {
            let words: Vec<&str> = line.split(' ').collect();
            for (i, mark) in marks(parent, &words) {
                if let Mark::Id(kind) = mark {
                    out.insert(Identifier { kind, name: words[i].to_string() });
                }
            }
        }
    }
    out
}

/// What a word of a line is to the wildcards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    Id(IdKind),
    /// A sequence number (and its `seq` keyword): dropped.
    Drop,
    /// A sequence number that stays in place as `<SEQ>`.
    Seq,
}

fn marks(parent: Option<&str>, words: &[&str]) -> Vec<(usize, Mark)> {
    const COMMUNITY_LISTS: [&str; 3] = ["community-list", "large-community-list", "extcommunity-list"];
    // A removal marks as the line it removes.
    if let Some((&"no", rest)) = words.split_first() {
        return marks(parent, rest).into_iter().map(|(i, m)| (i + 1, m)).collect();
    }
    let mut out = Vec::new();
    for (i, w) in words.iter().copied().enumerate() {
        let before = |n: usize| if i >= n { words[i - n] } else { "" };
        let (p1, p2, p3) = (before(1), before(2), before(3));
        let numeric = w.parse::<u64>().is_ok();
        let mark = if p1 == "seq" && numeric {
            out.push((i - 1, Mark::Drop));
            Some(Mark::Drop)
        } else if i == 0 && numeric && parent.is_some_and(is_named_acl_header) {
            Some(Mark::Drop)
        } else if numeric
            && (i == 3 && words[0] == "route-map" && matches!(p1, "permit" | "deny")
                || p1 == "continue"
                || p2 == "on-match" && p1 == "goto")
        {
            Some(Mark::Seq)
        } else if p1 == "prefix-list" && !matches!(w, "seq" | "description" | "sequence-number")
            || p2 == "distribute-list" && p1 == "prefix"
        {
            Some(Mark::Id(IdKind::PrefixList))
        } else if p1 == "route-map" {
            Some(Mark::Id(IdKind::RouteMap))
        } else if p2 == "as-path" && p1 == "access-list"
            || p2 == "match" && p1 == "as-path"
            || p1 == "filter-list"
        {
            Some(Mark::Id(IdKind::AsPathList))
        } else if p1 == "access-list" && !matches!(w, "standard" | "extended")
            || p2 == "access-list" && matches!(p1, "standard" | "extended")
            || p3 == "match" && matches!(p2, "ip" | "ipv6") && p1 == "address" && w != "prefix-list"
            || p1 == "distribute-list" && !matches!(w, "prefix" | "gateway")
            || matches!(p1, "access-group" | "access-class")
        {
            Some(Mark::Id(IdKind::AccessList))
        } else if COMMUNITY_LISTS.contains(&p1) && !matches!(w, "standard" | "expanded")
            || COMMUNITY_LISTS.contains(&p2) && matches!(p1, "standard" | "expanded")
            || p2 == "match" && matches!(p1, "community" | "large-community" | "extcommunity")
            || p2 == "set" && p1 == "comm-list"
        {
            Some(Mark::Id(IdKind::CommunityList))
        } else if p2 == "key" && p1 == "chain" || p1 == "key-chain" {
            Some(Mark::Id(IdKind::KeyChain))
        } else {
            None
        };
        if let Some(mark) = mark {
            out.push((i, mark));
        }
    }
    out
}

/// One line of an edit, split into words with their marks.
struct Marked {
    words: Vec<String>,
    marks: Vec<Option<Mark>>,
}

impl Marked {
    fn new(parent: Option<&str>, line: &str) -> Self {
        let words: Vec<String> = line.split(' ').map(str::to_string).collect();
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        let mut slots = vec![None; words.len()];
        for (i, mark) in marks(parent, &refs) {
            slots[i] = Some(mark);
        }
        Marked { words, marks: slots }
    }

    fn ids(&self) -> impl Iterator<Item = Identifier> + '_ {
        self.words.iter().zip(&self.marks).filter_map(|(w, m)| match m {
            Some(Mark::Id(kind)) => Some(Identifier { kind: *kind, name: w.clone() }),
            _ => None,
        })
    }

    fn render(&self, name: &dyn Fn(&Identifier) -> String) -> String {
        let mut out: Vec<String> = Vec::with_capacity(self.words.len());
        for (w, m) in self.words.iter().zip(&self.marks) {
            match m {
                Some(Mark::Drop) => {}
                Some(Mark::Seq) => out.push("<SEQ>".into()),
                Some(Mark::Id(kind)) => out.push(name(&Identifier { kind: *kind, name: w.clone() })),
                None => out.push(w.clone()),
            }
        }
        out.join(" ")
    }
}

/// An edit as marked lines: its path, then the entry it follows if it is ordered.
struct MarkedEdit {
    path: Vec<Marked>,
    after: Option<Option<Marked>>,
}

impl MarkedEdit {
    fn new(edit: &Edit) -> Self {
        let mut path = Vec::with_capacity(edit.context.len() + 1);
        let mut parent: Option<&str> = None;
        for line in &edit.context {
            path.push(Marked::new(parent, line));
            parent = Some(line);
        }
        path.push(Marked::new(parent, &edit.command()));
        let after = edit.order.as_ref().map(|o| {
            let parent = o.group.len().checked_sub(2).map(|i| o.group[i].as_str());
            o.after.as_deref().map(|line| Marked::new(parent, line))
        });
        MarkedEdit { path, after }
    }

    fn ids(&self) -> BTreeSet<Identifier> {
        self.path.iter().chain(self.after.iter().flatten()).flat_map(Marked::ids).collect()
    }

    fn render(&self, name: &dyn Fn(&Identifier) -> String) -> String {
        let mut out = self.path.iter().map(|m| m.render(name)).collect::<Vec<_>>().join(" > ");
        match &self.after {
            Some(Some(after)) => {
                out.push_str(" @after ");
                out.push_str(&after.render(name));
            }
            Some(None) => out.push_str(" @first"),
            None => {}
        }
        out
    }
}

/// The device's agent and truth edits as comparable strings, identifiers paired and renamed.
fn canonical(device: &DeviceEdits) -> (Vec<String>, Vec<String>) {
    let agent: Vec<MarkedEdit> = device.agent.iter().map(MarkedEdit::new).collect();
    let truth: Vec<MarkedEdit> = device.truth.iter().map(MarkedEdit::new).collect();
    let pairs = pair_identifiers(&agent, &truth, &device.fixed);

    // Placeholders numbered by first appearance in the ground truth, per kind.
    let mut placeholder: HashMap<Identifier, String> = HashMap::new();
    let mut counts: HashMap<IdKind, usize> = HashMap::new();
    for e in &truth {
        for id in e.path.iter().chain(e.after.iter().flatten()).flat_map(Marked::ids) {
            if device.fixed.contains(&id) || placeholder.contains_key(&id) {
                continue;
            }
            let n = counts.entry(id.kind).or_default();
            *n += 1;
            placeholder.insert(id.clone(), format!("<{}{n}>", id.kind.tag()));
        }
    }
    let truth_name = |id: &Identifier| placeholder.get(id).cloned().unwrap_or_else(|| id.name.clone());
    let mut extra_names: HashMap<Identifier, String> = HashMap::new();
    let mut extra_counts: HashMap<IdKind, usize> = HashMap::new();
    for e in &agent {
        for id in e.ids() {
            if device.fixed.contains(&id) || pairs.contains_key(&id) || extra_names.contains_key(&id) {
                continue;
            }
            let n = extra_counts.entry(id.kind).or_default();
            *n += 1;
            extra_names.insert(id.clone(), format!("<{}x{n}>", id.kind.tag()));
        }
    }
    let agent_name = |id: &Identifier| match pairs.get(id) {
        Some(partner) => truth_name(partner),
        None => extra_names.get(id).cloned().unwrap_or_else(|| id.name.clone()),
    };
    (
        agent.iter().map(|e| e.render(&agent_name)).collect(),
        truth.iter().map(|e| e.render(&truth_name)).collect(),
    )
}

/// Pairs each agent identifier with at most one ground-truth identifier of the same kind, by
/// the number of edits they share when each is the only name told apart.
fn pair_identifiers(
    agent: &[MarkedEdit],
    truth: &[MarkedEdit],
    fixed: &BTreeSet<Identifier>,
) -> HashMap<Identifier, Identifier> {
    // Signature: per identifier, the multiset of its edits rendered with itself as `<KIND*>`
    // and every other free name as `<KIND>`.
    let signatures =
        |edits: &[MarkedEdit]| -> (Vec<Identifier>, HashMap<Identifier, HashMap<String, usize>>) {
            let mut order = Vec::new();
            let mut sigs: HashMap<Identifier, HashMap<String, usize>> = HashMap::new();
            for e in edits {
                for id in e.ids() {
                    if fixed.contains(&id) {
                        continue;
                    }
                    let text = e.render(&|other: &Identifier| {
                        if fixed.contains(other) {
                            other.name.clone()
                        } else if *other == id {
                            format!("<{}*>", other.kind.tag())
                        } else {
                            format!("<{}>", other.kind.tag())
                        }
                    });
                    if !sigs.contains_key(&id) {
                        order.push(id.clone());
                    }
                    *sigs.entry(id).or_default().entry(text).or_default() += 1;
                }
            }
            (order, sigs)
        };
    let (agent_order, agent_sigs) = signatures(agent);
    let (truth_order, truth_sigs) = signatures(truth);
    let mut holders: HashMap<&str, Vec<(&Identifier, usize)>> = HashMap::new();
    for id in &truth_order {
        for (text, count) in &truth_sigs[id] {
            holders.entry(text.as_str()).or_default().push((id, *count));
        }
    }
    let truth_rank: HashMap<&Identifier, usize> =
        truth_order.iter().enumerate().map(|(i, id)| (id, i)).collect();
    let mut candidates: Vec<(usize, bool, usize, usize, &Identifier, &Identifier)> = Vec::new();
    for (a_rank, a) in agent_order.iter().enumerate() {
        let mut shared: HashMap<&Identifier, usize> = HashMap::new();
        for (text, count) in &agent_sigs[a] {
            for (t, t_count) in holders.get(text.as_str()).into_iter().flatten() {
                if t.kind == a.kind {
                    *shared.entry(t).or_default() += (*count).min(*t_count);
                }
            }
        }
        for (t, n) in shared {
            candidates.push((n, t.name == a.name, truth_rank[t], a_rank, a, t));
        }
    }
    // Most shared edits first; then same names; then order of appearance, for determinism.
    candidates.sort_by(|x, y| y.0.cmp(&x.0).then(y.1.cmp(&x.1)).then(x.2.cmp(&y.2)).then(x.3.cmp(&y.3)));
    let mut pairs = HashMap::new();
    let mut taken: BTreeSet<&Identifier> = BTreeSet::new();
    for (_, _, _, _, a, t) in candidates {
        if pairs.contains_key(a) || taken.contains(t) {
            continue;
        }
        taken.insert(t);
        pairs.insert(a.clone(), t.clone());
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Dialect;

    fn frr(text: &str) -> Config {
        Config::parse(text, Dialect::Frr).expect("parses")
    }

    fn typed(initial: &Config, commands: &[&str]) -> Config {
        let mut c = initial.clone();
        c.apply(commands, Dialect::Frr).expect("applies");
        c
    }

    #[test]
    fn marks_find_names_and_numbers() {
        let line = |l: &str| {
            let words: Vec<&str> = l.split(' ').collect();
            Marked::new(None, l).render(&|id| format!("<{}>", id.kind.tag()))
                + &format!(" ({} marks)", marks(None, &words).len())
        };
        assert_eq!(
            line("ip prefix-list PL seq 5 permit 10.0.0.0/8"),
            "ip prefix-list <PL> permit 10.0.0.0/8 (3 marks)"
        );
        assert_eq!(line("route-map RM-OUT permit 10"), "route-map <RM> permit <SEQ> (2 marks)");
        assert_eq!(line("no route-map RM-OUT deny 20"), "no route-map <RM> deny <SEQ> (2 marks)");
        assert_eq!(line("match ip address prefix-list PL"), "match ip address prefix-list <PL> (1 marks)");
        assert_eq!(line("match ip address 10"), "match ip address <ACL> (1 marks)");
        assert_eq!(
            line("neighbor 10.0.0.2 route-map RM out"),
            "neighbor 10.0.0.2 route-map <RM> out (1 marks)"
        );
        assert_eq!(
            line("bgp as-path access-list ASP seq 5 permit _65002_"),
            "bgp as-path access-list <ASP> permit _65002_ (3 marks)"
        );
        assert_eq!(
            line("bgp community-list standard CL seq 5 permit 65001:100"),
            "bgp community-list standard <CL> permit 65001:100 (3 marks)"
        );
        assert_eq!(line("ip access-list extended WEB"), "ip access-list extended <ACL> (1 marks)");
        assert_eq!(line("key chain KC"), "key chain <KC> (1 marks)");
        assert_eq!(
            line("ip rip authentication key-chain KC"),
            "ip rip authentication key-chain <KC> (1 marks)"
        );
        assert_eq!(line("set community 65001:100"), "set community 65001:100 (0 marks)");
        assert_eq!(
            Marked::new(Some("ip access-list extended WEB"), "10 permit tcp any any eq 80")
                .render(&|id| id.name.clone()),
            "permit tcp any any eq 80"
        );
    }

    #[test]
    fn a_consistent_renaming_matches_and_an_inconsistent_one_does_not() {
        let initial = frr("router ospf\n network 10.0.0.0/30 area 0\nexit\n");
        let truth = typed(
            &initial,
            &[
                "ip prefix-list PL1 seq 5 permit 10.0.0.0/8",
                "ip prefix-list PL2 seq 5 permit 192.168.0.0/16",
                "route-map RM permit 10",
                "match ip address prefix-list PL1",
                "exit",
                "route-map RM permit 20",
                "match ip address prefix-list PL2",
                "set metric 50",
                "exit",
                "router ospf",
                "redistribute static route-map RM",
            ],
        );
        // FRR would list ALLOW before ZZZ: the pairing must not follow first appearance.
        let renamed = typed(
            &initial,
            &[
                "ip prefix-list ZZZ seq 10 permit 10.0.0.0/8",
                "ip prefix-list ALLOW seq 10 permit 192.168.0.0/16",
                "route-map EXPORT permit 100",
                "match ip address prefix-list ZZZ",
                "exit",
                "route-map EXPORT permit 200",
                "match ip address prefix-list ALLOW",
                "set metric 50",
                "exit",
                "router ospf",
                "redistribute static route-map EXPORT",
            ],
        );
        let s = score(&[DeviceEdits::new("R1", &initial, &renamed, &truth)]);
        assert_eq!((s.precision, s.recall, s.f1), (1.0, 1.0, 1.0), "{s:#?}");

        // The same name for both lists: one of them cannot pair.
        let merged = typed(
            &initial,
            &[
                "ip prefix-list ONE seq 5 permit 10.0.0.0/8",
                "ip prefix-list ONE seq 10 permit 192.168.0.0/16",
                "route-map RM permit 10",
                "match ip address prefix-list ONE",
                "exit",
                "route-map RM permit 20",
                "match ip address prefix-list ONE",
                "set metric 50",
                "exit",
                "router ospf",
                "redistribute static route-map RM",
            ],
        );
        let s = score(&[DeviceEdits::new("R1", &initial, &merged, &truth)]);
        assert!(s.f1 < 1.0 && !s.missing.is_empty() && !s.extra.is_empty(), "{s:#?}");
    }

    #[test]
    fn names_of_the_initial_configuration_are_essential() {
        let initial = frr("route-map A permit 10\nexit\nroute-map B permit 10\nexit\n");
        let truth = typed(&initial, &["route-map A permit 10", "set metric 5"]);
        let agent = typed(&initial, &["route-map B permit 10", "set metric 5"]);
        let s = score(&[DeviceEdits::new("R1", &initial, &agent, &truth)]);
        assert_eq!(s.f1, 0.0, "{s:#?}");
        assert_eq!(s.extra, ["R1: route-map B permit 10 > set metric 5"]);
    }

    #[test]
    fn the_empty_cases_are_defined() {
        let add = Edit {
            change: crate::diff::Change::Add,
            context: vec![],
            line: "ip route 1.0.0.0/8 blackhole".into(),
            order: None,
        };
        let none = score_edits(&[], &[]);
        assert_eq!((none.precision, none.recall, none.f1), (1.0, 1.0, 1.0));
        let noop = score_edits(&[], std::slice::from_ref(&add));
        assert_eq!((noop.precision, noop.recall, noop.f1), (0.0, 0.0, 0.0));
        let unasked = score_edits(std::slice::from_ref(&add), &[]);
        assert_eq!((unasked.precision, unasked.recall, unasked.f1), (0.0, 1.0, 0.0));
    }
}
