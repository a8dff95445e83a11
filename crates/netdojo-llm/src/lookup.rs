//! The command reference behind the optional `lookup-command` tool (seed 001 §3.1 item 3,
//! "External Knowledge Retrieval"): the vendor documentation shipped in `testdata/commands/`
//! (one directory per dialect, entries as `## TITLE` + body; see its README), searched with
//! BM25.
//!
//! Why BM25 and not netdojo-embed's sentence embeddings: a lookup is mostly an exact command
//! name or option (`ip route`, `network`, `area`, `prefix-list`), which lexical matching finds
//! and a MiniLM embedding blurs; BM25 needs no model on disk (the tool works on any machine,
//! CI included), answers in microseconds, and ranks the same way everywhere, ties broken by
//! the entry's place in the reference, so the tests can say which entry comes first.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use netdojo_core::ToolSpec;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The tool's name.
pub const LOOKUP_TOOL: &str = "lookup-command";

/// BM25's term-frequency saturation and length normalisation (the usual values).
const K1: f64 = 1.2;
const B: f64 = 0.75;
/// Title words count this many times: a command's name is what a lookup names.
const TITLE_WEIGHT: u32 = 2;

#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    #[error("command reference {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("command reference {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// One entry: a command (FRR) or a section or option of a man page (Linux).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub dialect: String,
    /// The file it comes from, without `.txt` (`router-ospf`, `ip-route`).
    pub source: String,
    pub title: String,
    pub body: String,
}

#[derive(Debug)]
struct Doc {
    terms: HashMap<String, u32>,
    len: u32,
    /// The title in lower case with single spaces, and its part after the last `: ` (a man
    /// page entry's command or option), for the phrase bonus.
    title: String,
    tail: String,
}

#[derive(Debug, Default)]
struct Stats {
    docs: usize,
    total_len: u64,
    df: HashMap<String, u32>,
}

/// The entries of every dialect and their BM25 index.
#[derive(Debug)]
pub struct CommandReference {
    entries: Vec<Entry>,
    docs: Vec<Doc>,
    stats: HashMap<String, Stats>,
    /// Where it was read from, for the run's configuration.
    origin: String,
}

/// Lower-case words of letters, digits, `-` and `_`; a hyphenated word also gives its parts
/// (`prefix-list` → `prefix-list`, `prefix`, `list`). One-letter words (the `A.B.C.D` of FRR's
/// syntax) are dropped: they match everything.
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_')) {
        let word = word.trim_matches('-').to_lowercase();
        if word.chars().count() < 2 {
            continue;
        }
        if word.contains('-') {
            out.extend(word.split('-').filter(|p| p.chars().count() >= 2).map(str::to_string));
        }
        out.push(word);
    }
    out
}

/// Lower case, `[no] ` dropped, single spaces: how titles and queries are compared as phrases.
fn phrase(text: &str) -> String {
    let lower = text.to_lowercase();
    let lower = lower.trim_start_matches("[no] ");
    lower.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl CommandReference {
    /// Reads `dir/<dialect>/*.txt` (README and other files are ignored).
    pub fn load(dir: &Path) -> Result<Self, ReferenceError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ReferenceError::Io { path, source }
        };
        let mut files = Vec::new();
        let mut dialects: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(io(dir))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        dialects.sort();
        for d in dialects {
            let dialect = d.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
            let mut texts: Vec<PathBuf> = std::fs::read_dir(&d)
                .map_err(io(&d))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "txt"))
                .collect();
            texts.sort();
            for path in texts {
                let text = std::fs::read_to_string(&path).map_err(io(&path))?;
                let source = path.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
                files.push((dialect.clone(), source, text));
            }
        }
        let reference = Self::from_texts(files.iter().map(|(d, s, t)| (d.as_str(), s.as_str(), t.as_str())));
        if reference.entries.is_empty() {
            return Err(ReferenceError::Invalid {
                path: dir.to_path_buf(),
                message: "no entries (expected DIALECT/*.txt files with `## TITLE` lines; see testdata/commands/README.md)".into(),
            });
        }
        Ok(Self { origin: dir.display().to_string(), ..reference })
    }

    /// Builds the reference from `(dialect, source, text)` files.
    pub fn from_texts<'a>(files: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>) -> Self {
        let mut entries = Vec::new();
        for (dialect, source, text) in files {
            let mut current: Option<(String, Vec<&str>)> = None;
            let mut push = |current: Option<(String, Vec<&str>)>| {
                if let Some((title, body)) = current {
                    entries.push(Entry {
                        dialect: dialect.to_string(),
                        source: source.to_string(),
                        title,
                        body: body.join("\n").trim().to_string(),
                    });
                }
            };
            for line in text.lines() {
                if let Some(title) = line.strip_prefix("## ") {
                    push(current.take());
                    current = Some((title.trim().to_string(), Vec::new()));
                } else if let Some((_, body)) = current.as_mut() {
                    body.push(line);
                }
            }
            push(current);
        }
        let mut stats: HashMap<String, Stats> = HashMap::new();
        let docs: Vec<Doc> = entries
            .iter()
            .map(|e| {
                let mut terms: HashMap<String, u32> = HashMap::new();
                for t in tokens(&e.title) {
                    *terms.entry(t).or_default() += TITLE_WEIGHT;
                }
                for t in tokens(&e.body) {
                    *terms.entry(t).or_default() += 1;
                }
                let len = terms.values().sum();
                let s = stats.entry(e.dialect.clone()).or_default();
                s.docs += 1;
                s.total_len += u64::from(len);
                for t in terms.keys() {
                    *s.df.entry(t.clone()).or_default() += 1;
                }
                let title = phrase(&e.title);
                let tail = title.rsplit(": ").next().unwrap_or_default().to_string();
                Doc { terms, len, title, tail }
            })
            .collect();
        Self { entries, docs, stats, origin: "(in memory)".into() }
    }

    /// The dialects, sorted.
    pub fn dialects(&self) -> Vec<String> {
        let mut d: Vec<String> = self.stats.keys().cloned().collect();
        d.sort();
        d
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// What the run's configuration says about it.
    pub fn describe(&self) -> Value {
        let per: serde_json::Map<String, Value> =
            self.dialects().into_iter().map(|d| (d.clone(), json!(self.stats[&d].docs))).collect();
        json!({"dir": self.origin, "entries": per})
    }

    /// The `k` best entries of `dialect` for `query`, best first: BM25 over title and body,
    /// times 2 when the title (or its part after the last `: `) begins with the query as a
    /// phrase, `[no]` aside: the command itself, not `show ...` or `no ...` of it; ties go to
    /// the entry that comes first in the reference. Entries that share no word with the query
    /// are never returned.
    pub fn search(&self, dialect: &str, query: &str, k: usize) -> Vec<(&Entry, f64)> {
        let Some(stats) = self.stats.get(dialect) else { return vec![] };
        let mut terms = tokens(query);
        terms.sort();
        terms.dedup();
        let wanted = phrase(query);
        let n = stats.docs as f64;
        let avg = (stats.total_len as f64 / n.max(1.0)).max(1.0);
        let mut scored: Vec<(usize, f64)> = self
            .entries
            .iter()
            .zip(&self.docs)
            .enumerate()
            .filter(|(_, (e, _))| e.dialect == dialect)
            .filter_map(|(i, (_, doc))| {
                let mut score = 0.0;
                for t in &terms {
                    let Some(&tf) = doc.terms.get(t) else { continue };
                    let df = f64::from(stats.df.get(t).copied().unwrap_or(0));
                    let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                    let tf = f64::from(tf);
                    score += idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * f64::from(doc.len) / avg));
                }
                if score <= 0.0 {
                    return None;
                }
                if !wanted.is_empty() && (begins_with(&doc.title, &wanted) || begins_with(&doc.tail, &wanted))
                {
                    score *= 2.0;
                }
                Some((i, score))
            })
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.into_iter().take(k).map(|(i, s)| (&self.entries[i], s)).collect()
    }
}

/// `hay` begins with `needle`, followed by the end or a word boundary.
fn begins_with(hay: &str, needle: &str) -> bool {
    hay.strip_prefix(needle).is_some_and(|rest| {
        rest.chars().next().is_none_or(|c| !(c.is_alphanumeric() || c == '-' || c == '_'))
    })
}

/// How the agent uses the reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lookup {
    /// Entries in one answer.
    pub top_k: usize,
    /// Characters in one answer, at most.
    pub max_chars: usize,
    /// Lookups answered per episode; later ones are answered as invalid steps, so a model
    /// that only looks things up still runs out of budget.
    pub max_lookups: usize,
}

impl Default for Lookup {
    fn default() -> Self {
        Self { top_k: 3, max_chars: 2500, max_lookups: 5 }
    }
}

/// The tool as the model sees it.
pub fn lookup_tool(dialects: &[String], default: &str) -> ToolSpec {
    ToolSpec::new(
        LOOKUP_TOOL,
        format!(
            "Look up the command reference of the devices' command line: `query` is a command name or a \
             few keywords; `dialect` is one of {} (default `{default}`). Answered from the vendor's \
             documentation, not by the network: it changes nothing.",
            dialects.iter().map(|d| format!("`{d}`")).collect::<Vec<_>>().join(", ")
        ),
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1},
                "dialect": {"type": "string", "enum": dialects},
            },
            "required": ["query"],
            "additionalProperties": false,
        }),
    )
}

/// The answer to a lookup the schema accepted, or why it is refused (told to the model as an
/// invalid step).
pub fn answer(
    reference: &CommandReference,
    settings: &Lookup,
    default_dialect: &str,
    arguments: &Value,
) -> Result<String, String> {
    let query = arguments.get("query").and_then(Value::as_str).unwrap_or_default().trim();
    if query.is_empty() {
        return Err(format!("tool `{LOOKUP_TOOL}`: `query` is empty; give a command name or keywords"));
    }
    let dialect = arguments.get("dialect").and_then(Value::as_str).unwrap_or(default_dialect);
    let hits = reference.search(dialect, query, settings.top_k);
    if hits.is_empty() {
        return Ok(format!("no entry of the `{dialect}` command reference matches `{query}`"));
    }
    let mut out = format!("{} entries of the `{dialect}` command reference for `{query}`:", hits.len());
    for (entry, _) in hits {
        let body = if entry.body.is_empty() { String::new() } else { format!("\n{}", entry.body) };
        out.push_str(&format!("\n\n## {} ({}){body}", entry.title, entry.source));
    }
    Ok(cut_chars(&out, settings.max_chars))
}

fn cut_chars(text: &str, cap: usize) -> String {
    match text.char_indices().nth(cap) {
        None => text.to_string(),
        Some((at, _)) => format!("{}\n[... cut at {cap} characters]", &text[..at]),
    }
}

/// The dialect a lookup uses when it names none: the first value of a `dialect` enum in the
/// environment's tools (netconf's `update-cfg`: `frr`), else what the application's devices
/// speak (routing and k8s hosts: `linux`; netconf routers: `frr`); `None` when the
/// environment has no command line the reference covers (dcgraph), and then the tool is not
/// offered.
pub fn default_dialect(application: &str, tools: &[ToolSpec], available: &[String]) -> Option<String> {
    let from_tools = tools.iter().find_map(|t| {
        t.parameters
            .pointer("/properties/dialect/enum")
            .and_then(Value::as_array)
            .and_then(|e| e.iter().filter_map(Value::as_str).find(|d| available.iter().any(|a| a == d)))
            .map(str::to_string)
    });
    let from_application = match application {
        "netconf" => Some("frr"),
        "routing" | "k8s" => Some("linux"),
        _ => None,
    }
    .filter(|d| available.iter().any(|a| a == d))
    .map(str::to_string);
    from_tools.or(from_application)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped() -> CommandReference {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/commands");
        CommandReference::load(&dir).expect("the shipped reference")
    }

    fn first(r: &CommandReference, dialect: &str, query: &str) -> String {
        let hits = r.search(dialect, query, 3);
        hits.first().map(|(e, _)| e.title.clone()).unwrap_or_else(|| panic!("{query}: no hit"))
    }

    #[test]
    fn known_commands_come_first() {
        let r = shipped();
        assert_eq!(r.dialects(), vec!["frr".to_string(), "linux".to_string()]);
        assert!(r.len() > 1000, "{}", r.len());
        assert!(first(&r, "frr", "ip route").starts_with("[no] ip route <A.B.C.D/M"));
        assert!(first(&r, "frr", "network area").contains("network A.B.C.D/M area"));
        assert!(first(&r, "frr", "ip prefix-list").starts_with("ip prefix-list WORD"));
        assert_eq!(first(&r, "linux", "ip route add"), "ip-route(8) DESCRIPTION: ip route add");
        assert!(first(&r, "linux", "sysctl variable=value").starts_with("sysctl(8)"));
        // The same query gives the same ranking, scores included.
        let a: Vec<_> =
            r.search("linux", "nft add rule", 5).into_iter().map(|(e, s)| (e.title.clone(), s)).collect();
        let b: Vec<_> =
            r.search("linux", "nft add rule", 5).into_iter().map(|(e, s)| (e.title.clone(), s)).collect();
        assert_eq!(a, b);
        assert_eq!(a.len(), 5);
    }

    #[test]
    fn unknown_words_and_dialects_find_nothing() {
        let r = shipped();
        assert!(r.search("frr", "zzqx", 3).is_empty());
        assert!(r.search("ios", "ip route", 3).is_empty());
    }

    #[test]
    fn answers_are_capped_and_bad_queries_refused() {
        let r = shipped();
        let s = Lookup { top_k: 5, max_chars: 300, max_lookups: 5 };
        let a = answer(&r, &s, "frr", &json!({"query": "ip route"})).expect("answer");
        assert!(a.starts_with("5 entries of the `frr` command reference for `ip route`"), "{a}");
        assert!(a.ends_with("[... cut at 300 characters]"), "{a}");
        let a = answer(&r, &s, "frr", &json!({"query": "ip route add", "dialect": "linux"})).expect("answer");
        assert!(a.contains("## ip-route(8) DESCRIPTION: ip route add (ip-route)"), "{a}");
        let e = answer(&r, &s, "frr", &json!({"query": "  "})).expect_err("empty");
        assert!(e.contains("`query` is empty"), "{e}");
        let none = answer(&r, &s, "frr", &json!({"query": "zzqx"})).expect("no hit is an answer");
        assert!(none.contains("no entry"), "{none}");
    }

    #[test]
    fn entries_parse_and_the_default_dialect_follows_the_environment() {
        let r = CommandReference::from_texts([("frr", "x", "# header\n\n## a b\nbody\n\n## c\n")]);
        assert_eq!(r.len(), 2);
        assert_eq!(r.entries[0].body, "body");
        let available = vec!["frr".to_string(), "linux".to_string()];
        let update = ToolSpec::new(
            "update-cfg",
            "",
            json!({"type": "object", "properties": {"dialect": {"type": "string", "enum": ["frr", "linux"]}}}),
        );
        assert_eq!(default_dialect("x", &[update], &available).as_deref(), Some("frr"));
        assert_eq!(default_dialect("routing", &[], &available).as_deref(), Some("linux"));
        assert_eq!(default_dialect("dcgraph", &[], &available), None);
        assert_eq!(default_dialect("netconf", &[], &["linux".to_string()]), None);
        assert!(tokens("prefix-list A.B.C.D/M").contains(&"prefix".to_string()));
        assert!(begins_with("ip route add", "ip route") && !begins_with("ip router-id", "ip route"));
        assert!(!begins_with("show ip route", "ip route"));
    }
}
