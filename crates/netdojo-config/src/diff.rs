//! The hierarchical diff of two configurations (seed 001 §3.1: the agent's effective edits are
//! the diff of each device's final configuration against its initial one).
//!
//! Siblings are compared by line, each section's children recursively. An added line is an
//! edit, and so is each line under it (the operator types them all); a removed line is one
//! edit written as `no LINE` (removing a section removes what is under it), or `LINE` when the
//! line was itself a negation (`no ipv6 forwarding` disappears when `ipv6 forwarding` is typed).
//! Lines of `nft` and `tc` trees use the same `no` notation.
//!
//! # Order
//!
//! Most of a configuration is a set: FRR prints OSPF `network` statements, interface settings
//! or static routes in its own order whatever order they were typed in, and their meaning does
//! not depend on it. Lists evaluated top down, first match wins, are different: moving an
//! entry changes what the list does. These are compared in order:
//!
//! - entries of one access-list (`access-list NAME [seq N] ...`, `ipv6 access-list NAME ...`,
//!   the entries under an IOS `ip access-list standard|extended NAME`),
//! - entries of one prefix-list (`ip|ipv6 prefix-list NAME [seq N] ...`),
//! - entries of one as-path list and one community-list (standard, expanded, large, ext),
//! - the entries of one route-map (`route-map NAME permit|deny N`, with what is under them),
//! - the rules of one nftables chain.
//!
//! An entry's position is its sequence number where it has one and the device's numbering
//! where it has none (FRR: the highest so far, rounded down to a multiple of 5, plus 5; IOS
//! named access-lists: the highest so far plus 10), in list order for nftables rules.
//!
//! Which entries are the same entry follows the device. An entry with a number (on either
//! side: a typed `seq`, a route-map entry's, an IOS named access-list entry's) is that number:
//! entries with the same number are the same entry (equal, or replaced: its line removed and
//! added, what is under it diffed against what was, as typing `route-map RM deny 10` over
//! `permit 10` keeps its clauses), and a renumbered entry is one removed and another added. So
//! inserting `route-map RM permit 15` with one clause is two edits, and deleting entry 10 is one
//! (`no route-map RM permit 10`), whatever else the list holds. Entries without a number (IOS
//! numbered access-lists, IOS named ones as IOS 12/15 print them, typed entries the device will
//! number, nftables rules, whose handles a typed command cannot know) are their content: equal
//! ones are matched as the longest common subsequence and what is left was added or removed.
//! Each edit of an ordered entry carries the entry before it ([`Order::after`]), so that
//! scoring can tell an entry appended after `deny any` from the same entry inserted before it.

use std::collections::{HashMap, VecDeque};
use std::fmt;

use serde::Serialize;

use crate::config::{Config, Entry, Node, effective_seqs, entry};

/// Beyond this many cells, the middle of two long lists is matched greedily instead of by
/// dynamic programming, so that a pathological list of thousands of reordered entries still
/// diffs in linear time (with a common subsequence that may not be the longest).
const LCS_CELLS: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Change {
    Add,
    Remove,
}

/// Where an edit sits in an ordered list.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Order {
    /// The list: the lines of its context and its name (`access-list 10`, `route-map RM`,
    /// `rules` in an nftables chain, `entries` under an IOS named access-list).
    pub group: Vec<String>,
    /// The entry right before this one, in the configuration the edit belongs to (the final
    /// one for an addition, the initial one for a removal); `None` for the first entry. Lines
    /// under a route-map entry carry their entry's.
    pub after: Option<String>,
}

/// One command an operator would type to go from the first configuration to the second.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Edit {
    pub change: Change,
    /// The section lines above it, outermost first.
    pub context: Vec<String>,
    /// The configuration line added or removed, as the configuration holds it.
    pub line: String,
    /// Set for the entries of ordered lists and the lines under them.
    pub order: Option<Order>,
}

impl Edit {
    /// The command as typed: the line, `no LINE` for a removal, or `X` for the removal of a
    /// `no X` line.
    pub fn command(&self) -> String {
        match self.change {
            Change::Add => self.line.clone(),
            Change::Remove => match self.line.strip_prefix("no ") {
                Some(positive) => positive.to_string(),
                None => format!("no {}", self.line),
            },
        }
    }

    /// The command with its context: `router bgp 65001 > address-family ipv4 unicast > network
    /// 192.168.1.0/24`.
    pub fn path(&self) -> String {
        let mut parts: Vec<String> = self.context.clone();
        parts.push(self.command());
        parts.join(" > ")
    }

    /// Whether the edit is itself an entry of an ordered list (rather than a line under one).
    pub fn is_entry(&self) -> bool {
        self.order.as_ref().is_some_and(|o| o.group.len() == self.context.len() + 1)
    }
}

impl fmt::Display for Edit {
    /// The path, and for an ordered entry the entry it follows.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.path())?;
        match &self.order {
            Some(order) if self.is_entry() => match &order.after {
                Some(after) => write!(f, " [after: {after}]"),
                None => f.write_str(" [first]"),
            },
            _ => Ok(()),
        }
    }
}

/// The edits that take `before` to `after`: removals first, then additions and the changes
/// inside sections, in `after`'s order.
pub fn diff(before: &Config, after: &Config) -> Vec<Edit> {
    let mut out = Vec::new();
    diff_level(&before.nodes, &after.nodes, &mut Vec::new(), None, &mut out);
    out
}

fn diff_level(
    before: &[Node],
    after: &[Node],
    context: &mut Vec<String>,
    inherited: Option<&Order>,
    out: &mut Vec<Edit>,
) {
    let b_entries: Vec<_> = before.iter().map(|n| entry(context, &n.line)).collect();
    let a_entries: Vec<_> = after.iter().map(|n| entry(context, &n.line)).collect();
    let edit = |change, line: &str, order: Option<Order>, context: &[String]| Edit {
        change,
        context: context.to_vec(),
        line: line.to_string(),
        order,
    };

    // Which `before` node each `after` node continues, and the order of ordered `after` nodes.
    let mut continues: Vec<Option<usize>> = vec![None; after.len()];
    let mut a_order: Vec<Option<Order>> = vec![None; after.len()];

    // Sets: pair equal lines, as many times as they occur.
    let mut unpaired: HashMap<&str, VecDeque<usize>> = HashMap::new();
    for (j, n) in after.iter().enumerate() {
        if a_entries[j].is_none() {
            unpaired.entry(n.line.as_str()).or_default().push_back(j);
        }
    }
    for (i, n) in before.iter().enumerate() {
        if b_entries[i].is_some() {
            continue;
        }
        match unpaired.get_mut(n.line.as_str()).and_then(VecDeque::pop_front) {
            Some(j) => continues[j] = Some(i),
            None => out.push(edit(Change::Remove, &n.line, inherited.cloned(), context)),
        }
    }

    // Ordered lists, each list's members gathered in one pass so that a level with many lists
    // costs no more than one with a single long list.
    let mut group_at: HashMap<&str, usize> = HashMap::new();
    let mut groups: Vec<(&str, Vec<usize>, Vec<usize>)> = Vec::new();
    for (side, entries) in [&b_entries, &a_entries].into_iter().enumerate() {
        for (i, e) in entries.iter().enumerate() {
            let Some(e) = e else { continue };
            let g = *group_at.entry(e.group.as_str()).or_insert_with(|| {
                groups.push((e.group.as_str(), Vec::new(), Vec::new()));
                groups.len() - 1
            });
            if side == 0 { groups[g].1.push(i) } else { groups[g].2.push(i) }
        }
    }
    // `after` nodes that replace the `before` entry with their number.
    let mut replaces: Vec<bool> = vec![false; after.len()];
    for (group, b_idx, a_idx) in groups {
        let seq = |entries: &[Option<Entry>], i: usize| entries[i].as_ref().and_then(|e| e.seq);
        let in_order = |entries: &[Option<Entry>], idx: Vec<usize>| -> (Vec<usize>, Vec<u64>) {
            let seqs = effective_seqs(group, &idx.iter().map(|&i| seq(entries, i)).collect::<Vec<_>>());
            let mut by_seq: Vec<(u64, usize)> = seqs.into_iter().zip(idx).collect();
            by_seq.sort_by_key(|(seq, _)| *seq);
            by_seq.into_iter().map(|(s, i)| (i, s)).unzip()
        };
        let (b_list, b_seqs) = in_order(&b_entries, b_idx);
        let (a_list, a_seqs) = in_order(&a_entries, a_idx);
        // (position in b_list, position in a_list, same entry rather than a replacement)
        let mut pairs: Vec<(usize, usize, bool)> = Vec::new();
        // The device knows an entry typed or printed with a number by that number: the same
        // number on both sides is the same entry, its content changed or not, and a renumbered
        // entry is another one.
        let mut by_seq: HashMap<u64, Vec<usize>> = HashMap::new();
        for (bk, &i) in b_list.iter().enumerate() {
            if let Some(s) = seq(&b_entries, i) {
                by_seq.entry(s).or_default().push(bk);
            }
        }
        for (ak, &j) in a_list.iter().enumerate() {
            let Some(candidates) = seq(&a_entries, j).and_then(|s| by_seq.get_mut(&s)) else { continue };
            let a_key = key(&a_entries, j);
            let pick = candidates
                .iter()
                .position(|&bk| key(&b_entries, b_list[bk]) == a_key)
                .map(|at| (at, true))
                .or_else(|| (!candidates.is_empty()).then_some((0, false)));
            if let Some((at, same)) = pick {
                pairs.push((candidates.remove(at), ak, same));
            }
        }
        // An entry typed without a number, on one side, is the equal entry the device printed
        // with the number it would have given it, on the other (`access-list A permit X` typed
        // on an empty list is `access-list A seq 5 permit X`).
        let (mut b_taken, mut a_taken) = (vec![false; b_list.len()], vec![false; a_list.len()]);
        for &(bk, ak, _) in &pairs {
            b_taken[bk] = true;
            a_taken[ak] = true;
        }
        let mut b_numbered: HashMap<(u64, &str), usize> = HashMap::new();
        for (bk, &i) in b_list.iter().enumerate() {
            if !b_taken[bk] && seq(&b_entries, i).is_some() {
                b_numbered.entry((b_seqs[bk], key(&b_entries, i))).or_insert(bk);
            }
        }
        let mut a_numbered: HashMap<(u64, &str), usize> = HashMap::new();
        for (ak, &j) in a_list.iter().enumerate() {
            if !a_taken[ak] && seq(&a_entries, j).is_some() {
                a_numbered.entry((a_seqs[ak], key(&a_entries, j))).or_insert(ak);
            }
        }
        for (ak, &j) in a_list.iter().enumerate() {
            if !a_taken[ak]
                && seq(&a_entries, j).is_none()
                && let Some(bk) = b_numbered.remove(&(a_seqs[ak], key(&a_entries, j)))
            {
                pairs.push((bk, ak, true));
                (b_taken[bk], a_taken[ak]) = (true, true);
            }
        }
        for (bk, &i) in b_list.iter().enumerate() {
            if !b_taken[bk]
                && seq(&b_entries, i).is_none()
                && let Some(ak) = a_numbered.remove(&(b_seqs[bk], key(&b_entries, i)))
                && !a_taken[ak]
            {
                pairs.push((bk, ak, true));
                (b_taken[bk], a_taken[ak]) = (true, true);
            }
        }
        // Entries without a number (IOS numbered access-lists, named ones as IOS 12/15 print
        // them, nft rules) are their content: equal ones pair in order.
        let unnumbered = |list: &[usize], entries: &[Option<Entry>], taken: &[bool]| -> Vec<usize> {
            (0..list.len()).filter(|&k| !taken[k] && seq(entries, list[k]).is_none()).collect()
        };
        let b_free = unnumbered(&b_list, &b_entries, &b_taken);
        let a_free = unnumbered(&a_list, &a_entries, &a_taken);
        let b_keys: Vec<&str> = b_free.iter().map(|&k| key(&b_entries, b_list[k])).collect();
        let a_keys: Vec<&str> = a_free.iter().map(|&k| key(&a_entries, a_list[k])).collect();
        pairs.extend(
            common_subsequence(&b_keys, &a_keys).into_iter().map(|(b, a)| (b_free[b], a_free[a], true)),
        );
        let mut group_path = context.clone();
        group_path.push(group.to_string());
        let order = |list: &[usize], nodes: &[Node], k: usize| -> Order {
            Order { group: group_path.clone(), after: k.checked_sub(1).map(|p| nodes[list[p]].line.clone()) }
        };
        let mut b_kept = vec![false; b_list.len()];
        for &(bk, ak, same) in &pairs {
            b_kept[bk] = same;
            continues[a_list[ak]] = Some(b_list[bk]);
            replaces[a_list[ak]] = !same;
        }
        for (bk, kept) in b_kept.iter().enumerate() {
            if !kept {
                out.push(edit(
                    Change::Remove,
                    &before[b_list[bk]].line,
                    Some(order(&b_list, before, bk)),
                    context,
                ));
            }
        }
        for ak in 0..a_list.len() {
            a_order[a_list[ak]] = Some(order(&a_list, after, ak));
        }
    }

    for (j, n) in after.iter().enumerate() {
        let order = a_order[j].take().or_else(|| inherited.cloned());
        if replaces[j] {
            // A replaced entry keeps what is under it, as the device does.
            out.push(edit(Change::Add, &n.line, order.clone(), context));
        }
        let children_before: &[Node] = match continues[j] {
            Some(i) => &before[i].children,
            None => {
                out.push(edit(Change::Add, &n.line, order.clone(), context));
                &[]
            }
        };
        context.push(n.line.clone());
        diff_level(children_before, &n.children, context, order.as_ref(), out);
        context.pop();
    }
}

fn key(entries: &[Option<Entry>], i: usize) -> &str {
    entries[i].as_ref().map_or("", |e| e.key.as_str())
}

/// Pairs of positions `(in a, in b)` of a common subsequence of `a` and `b`: the longest one,
/// unless the lists differ in a middle too large for that (see [`LCS_CELLS`]).
fn common_subsequence(a: &[&str], b: &[&str]) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    let mut start = 0;
    while start < a.len() && start < b.len() && a[start] == b[start] {
        pairs.push((start, start));
        start += 1;
    }
    let (mut end_a, mut end_b) = (a.len(), b.len());
    let mut tail = Vec::new();
    while end_a > start && end_b > start && a[end_a - 1] == b[end_b - 1] {
        end_a -= 1;
        end_b -= 1;
        tail.push((end_a, end_b));
    }
    let (ma, mb) = (&a[start..end_a], &b[start..end_b]);
    if !ma.is_empty() && !mb.is_empty() {
        let middle =
            if ma.len().saturating_mul(mb.len()) <= LCS_CELLS { lcs(ma, mb) } else { greedy(ma, mb) };
        pairs.extend(middle.into_iter().map(|(i, j)| (i + start, j + start)));
    }
    pairs.extend(tail.into_iter().rev());
    pairs
}

fn lcs(a: &[&str], b: &[&str]) -> Vec<(usize, usize)> {
    let (n, m) = (a.len(), b.len());
    let width = m + 1;
    // table[i * width + j]: the LCS length of a[i..] and b[j..].
    let mut table = vec![0u32; (n + 1) * width];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            table[i * width + j] = if a[i] == b[j] {
                table[(i + 1) * width + j + 1] + 1
            } else {
                table[(i + 1) * width + j].max(table[i * width + j + 1])
            };
        }
    }
    let mut pairs = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if a[i] == b[j] {
            pairs.push((i, j));
            i += 1;
            j += 1;
        } else if table[(i + 1) * width + j] >= table[i * width + j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    pairs
}

/// An increasing matching: each entry of `a` takes the next equal entry of `b` after the last
/// one taken.
fn greedy(a: &[&str], b: &[&str]) -> Vec<(usize, usize)> {
    let mut positions: HashMap<&str, VecDeque<usize>> = HashMap::new();
    for (j, k) in b.iter().enumerate() {
        positions.entry(k).or_default().push_back(j);
    }
    let mut next = 0;
    let mut pairs = Vec::new();
    for (i, k) in a.iter().enumerate() {
        if let Some(queue) = positions.get_mut(k) {
            while queue.front().is_some_and(|&j| j < next) {
                queue.pop_front();
            }
            if let Some(j) = queue.pop_front() {
                pairs.push((i, j));
                next = j + 1;
            }
        }
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

    fn paths(edits: &[Edit]) -> Vec<String> {
        edits.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn sets_ignore_order_and_sections_recurse() {
        let before = frr("router ospf\n network 10.0.0.0/30 area 0\n network 1.1.1.1/32 area 0\nexit\n");
        let after = frr("router ospf\n network 1.1.1.1/32 area 0\n network 10.0.0.0/30 area 0\nexit\n");
        assert!(diff(&before, &after).is_empty());
        let after = frr(
            "router ospf\n network 1.1.1.1/32 area 0\n redistribute static\nexit\ninterface lo\n ip address 1.1.1.1/32\nexit\n",
        );
        assert_eq!(
            paths(&diff(&before, &after)),
            [
                "router ospf > no network 10.0.0.0/30 area 0",
                "router ospf > redistribute static",
                "interface lo",
                "interface lo > ip address 1.1.1.1/32"
            ]
        );
    }

    #[test]
    fn removing_a_section_is_one_edit_and_removing_a_negation_types_the_positive() {
        let before = frr("no ipv6 forwarding\nkey chain KC\n key 1\n  key-string s\n exit\nexit\n");
        let after = frr("!\n");
        assert_eq!(paths(&diff(&before, &after)), ["ipv6 forwarding", "no key chain KC"]);
    }

    #[test]
    fn ordered_lists_compare_by_number_or_in_order() {
        let before = frr("access-list 10 seq 5 permit 10.0.0.0/8\naccess-list 10 seq 10 deny any\n");
        // Renumbered: the device knows entries by number, so each renumbered entry is removed
        // and added.
        let renumbered = frr("access-list 10 seq 5 permit 10.0.0.0/8\naccess-list 10 seq 20 deny any\n");
        assert_eq!(
            paths(&diff(&before, &renumbered)),
            [
                "no access-list 10 seq 10 deny any [after: access-list 10 seq 5 permit 10.0.0.0/8]",
                "access-list 10 seq 20 deny any [after: access-list 10 seq 5 permit 10.0.0.0/8]"
            ]
        );
        // Swapped contents: both numbered entries change.
        let swapped = frr("access-list 10 seq 5 deny any\naccess-list 10 seq 10 permit 10.0.0.0/8\n");
        assert_eq!(
            paths(&diff(&before, &swapped)),
            [
                "no access-list 10 seq 5 permit 10.0.0.0/8 [first]",
                "no access-list 10 seq 10 deny any [after: access-list 10 seq 5 permit 10.0.0.0/8]",
                "access-list 10 seq 5 deny any [first]",
                "access-list 10 seq 10 permit 10.0.0.0/8 [after: access-list 10 seq 5 deny any]"
            ]
        );
        // Without numbers, the entries are their content: one entry moved.
        let before = frr("access-list 10 permit 10.0.0.0/8\naccess-list 10 deny any\n");
        let swapped = frr("access-list 10 deny any\naccess-list 10 permit 10.0.0.0/8\n");
        assert_eq!(
            paths(&diff(&before, &swapped)),
            [
                "no access-list 10 permit 10.0.0.0/8 [first]",
                "access-list 10 permit 10.0.0.0/8 [after: access-list 10 deny any]"
            ]
        );
        let before = frr("access-list 10 seq 5 permit 10.0.0.0/8\naccess-list 10 seq 10 deny any\n");
        // Inserted by sequence number, listed out of order: sorted before comparing.
        let inserted = frr(
            "access-list 10 seq 10 deny any\naccess-list 10 seq 5 permit 10.0.0.0/8\naccess-list 10 seq 7 permit 1.0.0.0/8\n",
        );
        assert_eq!(
            paths(&diff(&before, &inserted)),
            ["access-list 10 seq 7 permit 1.0.0.0/8 [after: access-list 10 seq 5 permit 10.0.0.0/8]"]
        );
    }

    #[test]
    fn route_map_entries_carry_their_order_to_their_lines() {
        let before = frr("route-map RM permit 10\n match ip address prefix-list PL\nexit\n");
        let after = frr(
            "route-map RM permit 10\n match ip address prefix-list PL\n set metric 5\nexit\nroute-map RM deny 20\nexit\n",
        );
        let edits = diff(&before, &after);
        assert_eq!(
            paths(&edits),
            ["route-map RM permit 10 > set metric 5", "route-map RM deny 20 [after: route-map RM permit 10]"]
        );
        assert_eq!(edits[0].order.as_ref().map(|o| o.group.clone()), Some(vec!["route-map RM".to_string()]));
        assert!(!edits[0].is_entry() && edits[1].is_entry());
    }

    const ROUTE_MAP: &str = "route-map RM permit 10\n match ip address prefix-list A\nexit\nroute-map RM permit 20\n match ip address prefix-list B\nexit\nroute-map RM deny 30\nexit\n";

    #[test]
    fn route_map_entries_are_identified_by_their_sequence_numbers() {
        let before = frr(ROUTE_MAP);
        let deleted_10 = frr(
            "route-map RM permit 20\n match ip address prefix-list B\nexit\nroute-map RM deny 30\nexit\n",
        );
        assert_eq!(paths(&diff(&before, &deleted_10)), ["no route-map RM permit 10 [first]"]);
        let inserted_15 =
            frr(&format!("{ROUTE_MAP}route-map RM permit 15\n match ip address prefix-list C\nexit\n"));
        assert_eq!(
            paths(&diff(&before, &inserted_15)),
            [
                "route-map RM permit 15 [after: route-map RM permit 10]",
                "route-map RM permit 15 > match ip address prefix-list C"
            ]
        );
        // Renumbering is a new entry: the device knows entries by number.
        let renumbered = frr(
            "route-map RM permit 10\n match ip address prefix-list A\nexit\nroute-map RM permit 25\n match ip address prefix-list B\nexit\nroute-map RM deny 30\nexit\n",
        );
        assert_eq!(
            paths(&diff(&before, &renumbered)),
            [
                "no route-map RM permit 20 [after: route-map RM permit 10]",
                "route-map RM permit 25 [after: route-map RM permit 10]",
                "route-map RM permit 25 > match ip address prefix-list B"
            ]
        );
        // Deleting entry 20 is not deleting entry 10.
        let deleted_20 = frr(
            "route-map RM permit 10\n match ip address prefix-list A\nexit\nroute-map RM deny 30\nexit\n",
        );
        let s = crate::score::score_edits(&diff(&before, &deleted_20), &diff(&before, &deleted_10));
        assert_eq!((s.precision, s.recall), (0.0, 0.0), "{s:#?}");
    }

    #[test]
    fn numbered_list_entries_pair_by_number_and_unnumbered_ones_by_content() {
        let before = frr(
            "ip prefix-list PL seq 5 permit 10.0.0.0/8\nip prefix-list PL seq 10 permit 172.16.0.0/12\nip prefix-list PL seq 15 deny any\n",
        );
        let after = frr("ip prefix-list PL seq 10 permit 172.16.0.0/12\nip prefix-list PL seq 15 deny any\n");
        assert_eq!(paths(&diff(&before, &after)), ["no ip prefix-list PL seq 5 permit 10.0.0.0/8 [first]"]);
        // Same number, new content: the entry is replaced.
        let after = frr(
            "ip prefix-list PL seq 5 deny 10.0.0.0/8\nip prefix-list PL seq 10 permit 172.16.0.0/12\nip prefix-list PL seq 15 deny any\n",
        );
        assert_eq!(
            paths(&diff(&before, &after)),
            [
                "no ip prefix-list PL seq 5 permit 10.0.0.0/8 [first]",
                "ip prefix-list PL seq 5 deny 10.0.0.0/8 [first]"
            ]
        );
        // IOS numbered access-lists print no numbers: entries are their content.
        let before =
            frr("access-list 1 permit 10.0.0.1\naccess-list 1 permit 10.0.0.2\naccess-list 1 deny any\n");
        let after = frr("access-list 1 permit 10.0.0.2\naccess-list 1 deny any\n");
        assert_eq!(paths(&diff(&before, &after)), ["no access-list 1 permit 10.0.0.1 [first]"]);
        // IOS 12/15 print named access-lists without numbers: an entry typed with one goes
        // between the others, which keep their identity.
        let before = Config::parse(
            "ip access-list extended WEB\n permit tcp any any eq 80\n permit tcp any any eq 443\n deny ip any any\n",
            Dialect::Ios,
        )
        .expect("parses");
        let mut after = before.clone();
        after
            .apply(&["ip access-list extended WEB", "15 permit udp any any eq 53"], Dialect::Ios)
            .expect("applies");
        assert_eq!(
            paths(&diff(&before, &after)),
            ["ip access-list extended WEB > 15 permit udp any any eq 53 [after: permit tcp any any eq 80]"]
        );
        // Typed without a number, printed with the one the device gave: the same entry.
        let typed = Config::from_commands(
            &["access-list A permit 10.0.0.0/8", "access-list A deny any"],
            Dialect::Frr,
        )
        .expect("applies");
        assert!(
            diff(&typed, &frr("access-list A seq 5 permit 10.0.0.0/8\naccess-list A seq 10 deny any\n"))
                .is_empty()
        );
    }

    #[test]
    fn common_subsequences() {
        assert_eq!(common_subsequence(&["a", "b", "c"], &["a", "x", "c"]), [(0, 0), (2, 2)]);
        assert_eq!(lcs(&["b", "a"], &["a", "b"]).len(), 1);
        assert_eq!(lcs(&["x", "a", "y", "b"], &["a", "b", "z"]), [(1, 0), (3, 1)]);
        assert_eq!(greedy(&["a", "b", "a"], &["b", "a", "a"]), [(0, 1), (2, 2)]);
    }
}
