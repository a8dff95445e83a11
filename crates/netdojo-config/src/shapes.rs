//! Large inputs of the shapes that once cost quadratic time to read or diff, generated to a
//! given number of lines: `cargo xtask bench config` times them against the 1 s target (issue
//! 16), and netdojo-config's tests check that each reads and diffs to what it should.
//!
//! - `nft-open-brace`: an nftables set whose `elements = {` stays open over every line, closed
//!   on the last (each line used to re-count the whole pending statement).
//! - `nft-unclosed`: the same, never closed: refused as [`ConfigError::UnclosedBlock`].
//! - `prefix-lists`: one-entry prefix-lists, all distinct (the diff used to scan the level once
//!   per list).
//! - `one-long-list`: one numbered prefix-list, entries paired by number.
//! - `ios-sections`: IOS `vlan N` sections with a `name` each.
//!
//! [`ConfigError::UnclosedBlock`]: crate::config::ConfigError::UnclosedBlock

use std::fmt::Write;

use crate::config::Dialect;

/// What reading and diffing a shape's texts must give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// Both texts read; their diff has this many edits.
    Edits(usize),
    /// Neither text reads: a block is left open.
    Unclosed,
}

/// One shape: a configuration, a changed copy, and what their diff must be.
#[derive(Debug, Clone)]
pub struct Shape {
    pub name: &'static str,
    pub dialect: Dialect,
    pub before: String,
    pub after: String,
    /// Lines in `before` (about the number asked for).
    pub lines: usize,
    pub expected: Expected,
}

/// Every shape, each about `lines` lines long.
pub fn shapes(lines: usize) -> Vec<Shape> {
    let lines = lines.max(10);
    vec![nft(lines, true), nft(lines, false), prefix_lists(lines), one_long_list(lines), ios_sections(lines)]
}

fn address(i: usize) -> String {
    format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255)
}

fn nft(lines: usize, closed: bool) -> Shape {
    let elements = lines - 5;
    let text = |skip: Option<usize>| {
        let mut t =
            String::from("table inet filter {\n\tset blocked {\n\t\ttype ipv4_addr\n\t\telements = { ");
        let kept: Vec<usize> = (0..elements).filter(|&i| Some(i) != skip).collect();
        for (k, i) in kept.iter().enumerate() {
            let last = k + 1 == kept.len();
            let end = if !last {
                ",\n\t\t\t"
            } else if closed {
                " }\n\t}\n}\n"
            } else {
                "\n"
            };
            let _ = write!(t, "{}{end}", address(*i));
        }
        t
    };
    Shape {
        name: if closed { "nft-open-brace" } else { "nft-unclosed" },
        dialect: Dialect::Linux,
        before: text(None),
        after: text(Some(elements / 2)),
        lines,
        expected: if closed { Expected::Edits(1) } else { Expected::Unclosed },
    }
}

fn prefix_lists(lines: usize) -> Shape {
    let text = |changed: usize| {
        let mut t = String::new();
        for i in 0..lines {
            let action = if i == changed { "deny" } else { "permit" };
            let _ = writeln!(t, "ip prefix-list PL{i} seq 5 {action} {}/32", address(i));
        }
        t
    };
    // The changed entry keeps its number: it is replaced (removed and added).
    Shape {
        name: "prefix-lists",
        dialect: Dialect::Frr,
        before: text(usize::MAX),
        after: text(lines / 2),
        lines,
        expected: Expected::Edits(2),
    }
}

fn one_long_list(lines: usize) -> Shape {
    let text = |skip: usize| {
        let mut t = String::new();
        for i in (0..lines).filter(|&i| i != skip) {
            let _ = writeln!(t, "ip prefix-list BIG seq {} permit {}/32", (i + 1) * 5, address(i));
        }
        t
    };
    Shape {
        name: "one-long-list",
        dialect: Dialect::Frr,
        before: text(usize::MAX),
        after: text(lines / 2),
        lines,
        expected: Expected::Edits(1),
    }
}

fn ios_sections(lines: usize) -> Shape {
    let text = |renamed: usize| {
        let mut t = String::new();
        for v in 0..lines / 3 {
            let name = if v == renamed { "RENAMED".to_string() } else { format!("V{v}") };
            let _ = write!(t, "vlan {}\n name {name}\n!\n", v + 1);
        }
        t
    };
    Shape {
        name: "ios-sections",
        dialect: Dialect::Ios,
        before: text(usize::MAX),
        after: text(lines / 6),
        lines: lines / 3 * 3,
        expected: Expected::Edits(2),
    }
}
