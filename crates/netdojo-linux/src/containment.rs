//! The containment suite's shared half (issue 14): the hostile corpus
//! (`testdata/containment/corpus.txt`), and [`Run`], which judges each line an entry point
//! answered against the host ([`hostcheck::Snapshot`]), a victim episode running at the same
//! time, and leaks in the answer; per category it counts lines, refusals, contained runs and
//! escapes. The runners live in the tests of each crate that takes agent input: netdojo-linux
//! (routing exec), netdojo-netconf (update-cfg, execute-cmd), netdojo-mcp (Linux and FRR
//! devices). For tests: it spawns host tools and restores what an escape changed on the host.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use crate::hostcheck::{self, Change, Snapshot};

/// Escapes the suite tolerates: none. A runner would tolerate an escape that matches an entry:
/// same entry point (a prefix of the runner's, `*` for all), same corpus line (its template,
/// before placeholders are filled; `*` for all), and `what` a substring of what changed; it
/// would still print it. Issue 14's findings (a neighbour's namespace through `link-net`, FRR
/// `log file`/`dump bgp` writing host files, the read-only check reading the wrong word, the
/// shared vtysh history, agent input as environment errors) were listed here until the jail
/// and the parser fixes landed. An entry added here must name the open issue that tracks it.
pub const TOLERATED_ESCAPES: &[(&str, &str, &str)] = &[];

/// Which entry points a corpus line applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Entry {
    /// A Linux command line (`L`).
    Linux,
    /// FRR configuration (`C`), one or more lines.
    FrrConfig,
    /// An FRR exec command (`S`), `show ...` and whatever else an agent tries.
    FrrExec,
    /// A kubectl command line (`K`): the k8s application's agent running the real kubectl.
    Kubectl,
}

/// One line of the corpus.
#[derive(Debug, Clone)]
pub struct Case {
    pub category: String,
    pub entries: Vec<Entry>,
    /// A host-wide change that cannot be undone: sent only with
    /// `NETDOJO_CONTAINMENT_IRREVERSIBLE=1`.
    pub host_irreversible: bool,
    /// The command with its placeholders.
    pub template: String,
    /// Its line in the corpus file.
    pub line: usize,
}

/// The corpus file, from the workspace root.
pub const CORPUS: &str = "testdata/containment/corpus.txt";

/// Whether `host_irreversible` cases are sent (`NETDOJO_CONTAINMENT_IRREVERSIBLE=1`): only
/// once every entry point runs in the jail; until then they are counted as skipped.
pub fn irreversible_allowed() -> bool {
    std::env::var("NETDOJO_CONTAINMENT_IRREVERSIBLE").is_ok_and(|v| v == "1")
}

/// Reads the corpus.
pub fn load(path: &Path) -> Result<Vec<Case>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut cases = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        if raw.starts_with('#') || raw.trim().is_empty() {
            continue;
        }
        let mut fields = raw.splitn(4, '\t');
        let (Some(category), Some(entries), Some(flags), Some(command)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(format!("{}:{}: four tab-separated fields expected", path.display(), i + 1));
        };
        let mut parsed = Vec::new();
        for e in entries.split(',') {
            parsed.push(match e {
                "L" => Entry::Linux,
                "C" => Entry::FrrConfig,
                "S" => Entry::FrrExec,
                "K" => Entry::Kubectl,
                other => return Err(format!("{}:{}: entry point `{other}`", path.display(), i + 1)),
            });
        }
        cases.push(Case {
            category: category.to_string(),
            entries: parsed,
            host_irreversible: flags.split(',').any(|f| f == "host_irreversible"),
            template: unescape(command),
            line: i + 1,
        });
    }
    Ok(cases)
}

/// `\\`, `\t`, `\r`, `\xHH` as written in the corpus.
fn unescape(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('\\') => out.push('\\'),
            Some('x') => {
                let hex: String = chars.by_ref().take(2).collect();
                match u8::from_str_radix(&hex, 16) {
                    Ok(b) => out.push(char::from(b)),
                    Err(_) => out.push_str(&format!("\\x{hex}")),
                }
            }
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// What fills the placeholders.
#[derive(Debug, Clone, Default)]
pub struct Vars {
    /// The victim episode's router namespace.
    pub victim_ns: String,
    /// The victim episode's prefix (`ndj...x1`): seen in an answer, it is a leak.
    pub victim_prefix: String,
    /// A process in the victim's router namespace.
    pub victim_pid: u32,
    pub victim_if: String,
    pub victim_addr: String,
    pub self_ns: String,
    pub self_if: String,
}

impl Case {
    /// The command(s) to send: the template with its placeholders filled, split at `{NEXT}`.
    pub fn fill(&self, vars: &Vars) -> Vec<String> {
        let mut text = self
            .template
            .replace("{VICTIM_NS}", &vars.victim_ns)
            .replace("{VICTIM_PID}", &vars.victim_pid.to_string())
            .replace("{VICTIM_IF}", &vars.victim_if)
            .replace("{VICTIM_ADDR}", &vars.victim_addr)
            .replace("{SELF_NS}", &vars.self_ns)
            .replace("{SELF_IF}", &vars.self_if)
            .replace("{NUL}", "\0")
            .replace("{NL}", "\n");
        for (tag, make) in [
            ("{BIG:", (|n: usize| "a".repeat(n * 1024)) as fn(usize) -> String),
            ("{ARGS:", |n: usize| vec!["x"; n].join(" ")),
            ("{ROUTES:", |n: usize| {
                (0..n)
                    .map(|i| format!("ip route 10.201.{}.{}/32 Null0", i / 256, i % 256))
                    .collect::<Vec<_>>()
                    .join("{NEXT}")
            }),
        ] {
            while let Some(at) = text.find(tag) {
                let rest = &text[at + tag.len()..];
                let Some(end) = rest.find('}') else { break };
                let n: usize = rest[..end].parse().unwrap_or(1);
                let body = make(n);
                text = format!("{}{body}{}", &text[..at], &rest[end + 1..]);
            }
        }
        text.split("{NEXT}").map(str::to_string).collect()
    }

    /// The first 100 characters of the template, for a report.
    pub fn short(&self) -> String {
        let mut s: String = self.template.chars().take(100).collect();
        if self.template.chars().count() > 100 {
            s.push('…');
        }
        format!("{s:?}")
    }
}

/// How an entry point answered one line.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Refused before anything ran (a refusal observation, an MCP tool error for bad input).
    Refused(String),
    /// It ran: an `ok` observation or a failed command (`ok: false`).
    Ran { ok: bool, text: String },
    /// An environment error (`EnvError`, an errored episode, MCP -32603): never acceptable.
    Errored(String),
}

impl Outcome {
    /// An environment's observation as an outcome: a refusal is an error observation whose text
    /// (or, for several commands, every command's error) says `refused` (the sandbox's and the
    /// tools' refusals); anything else ran, contained or not (the judge decides).
    pub fn of_observation(content: &str, ok: bool, data: Option<&serde_json::Value>) -> Outcome {
        if !ok && content.trim_start_matches("error: ").trim_start_matches('`').contains("refused") {
            let results = data.and_then(|d| d["results"].as_array());
            let all_refused = results.is_none_or(|r| {
                r.iter().all(|x| x["error"].as_str().is_some_and(|e| e.starts_with("refused")))
            });
            if all_refused {
                return Outcome::Refused(content.to_string());
            }
        }
        Outcome::Ran { ok, text: content.to_string() }
    }
}

/// Counts of one category.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub lines: usize,
    pub refused: usize,
    pub contained: usize,
    pub escapes: usize,
    pub known: usize,
    pub errored: usize,
    pub skipped: usize,
}

/// One escape: the line, what changed.
#[derive(Debug, Clone)]
pub struct Escape {
    pub entry: String,
    pub case: Case,
    pub sent: String,
    pub what: Vec<String>,
    /// Matches [`TOLERATED_ESCAPES`].
    pub known: bool,
}

/// One entry point's run through the corpus.
#[derive(Debug)]
pub struct Run {
    entry: String,
    vars: Vars,
    watch: Vec<String>,
    victims: Vec<String>,
    host: Snapshot,
    victim: BTreeMap<String, String>,
    /// /etc/frr's files before the run, put back if an escape changed them.
    frr_files: BTreeMap<std::path::PathBuf, Vec<u8>>,
    pub tally: BTreeMap<String, Tally>,
    pub escapes: Vec<Escape>,
    pub errored: Vec<String>,
    /// Changes after any line that TOLERATED_ESCAPES tolerates (`*` lines), by what changed.
    pub tolerated: BTreeMap<String, usize>,
    started: Instant,
    /// Whether the host is checked after lines (else: only by `check_after`).
    check_host: bool,
    judged: usize,
    victim_named: bool,
    last: Option<(Case, String)>,
    /// Time spent in host and victim checks.
    checking: std::time::Duration,
}

/// Lines between two host checks: `NETDOJO_CONTAINMENT_CHECK_EVERY` (default 1, every line); a
/// change found after a batch is attributed to its last line and says so.
pub fn check_every() -> usize {
    std::env::var("NETDOJO_CONTAINMENT_CHECK_EVERY")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(1)
}

impl Run {
    /// Takes the baseline: the host (watching the processes of `watch`, the namespaces of both
    /// episodes) and the state of the victim's namespaces `victims`.
    pub fn new(entry: &str, vars: Vars, watch: Vec<String>, victims: Vec<String>) -> Self {
        let frr_files = std::fs::read_dir("/etc/frr")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| Some((e.path(), std::fs::read(e.path()).ok()?)))
            .collect();
        let host = Snapshot::take(&watch);
        let victim = victims.iter().map(|ns| (ns.clone(), hostcheck::namespace_state(ns))).collect();
        Self {
            entry: entry.trim_start_matches("containment: ").to_string(),
            vars,
            watch,
            victims,
            host,
            victim,
            frr_files,
            tally: BTreeMap::new(),
            escapes: Vec::new(),
            errored: Vec::new(),
            tolerated: BTreeMap::new(),
            started: Instant::now(),
            check_host: true,
            judged: 0,
            victim_named: false,
            last: None,
            checking: std::time::Duration::ZERO,
        }
    }

    pub fn vars(&self) -> &Vars {
        &self.vars
    }

    /// A case not sent (host_irreversible without the jail).
    pub fn skip(&mut self, case: &Case) {
        let t = self.tally.entry(case.category.clone()).or_default();
        t.lines += 1;
        t.skipped += 1;
    }

    /// Judges one answered line: the outcome (an environment error is counted apart and fails
    /// the run), a leak in the answer, `own` (what the runner saw change that must not, e.g. a
    /// read-only tool that changed the attacker's own node), the host and the victim's
    /// namespaces. A change is attributed to this line, put back where the harness can (so the
    /// next line starts clean) and the baseline moves on.
    pub fn judge(&mut self, case: &Case, sent: &str, outcome: Outcome, own: Vec<String>) {
        let mut what = own;
        let mut host_checked = Vec::new();
        let (refused, text) = match &outcome {
            Outcome::Refused(t) => (true, t.as_str()),
            Outcome::Ran { text, .. } => (false, text.as_str()),
            Outcome::Errored(e) => {
                self.errored.push(format!("{}: line {} {}: {e}", self.entry, case.line, case.short()));
                (false, e.as_str())
            }
        };
        if let Some(leak) = self.leak(sent, text) {
            what.push(format!("leak in the answer: {leak}"));
        }
        self.judged += 1;
        self.last = Some((case.clone(), sent.to_string()));
        // A refusal ran nothing, so the host is checked after the lines that ran: whatever a
        // refused line could have changed would still be found by the next check (the next line
        // that ran, the batch's, the end's), only blamed on a later line.
        if self.check_host && !refused && self.judged.is_multiple_of(check_every()) {
            let started = Instant::now();
            host_checked = self.check();
            self.checking += started.elapsed();
        }
        let rest = self.untolerated(host_checked);
        if check_every() > 1 && !rest.is_empty() {
            what.push(format!("(found after a batch of {} lines ending here)", check_every()));
        }
        what.extend(rest);
        if std::env::var_os("NETDOJO_CONTAINMENT_VERBOSE").is_some() {
            let kind = match &outcome {
                Outcome::Refused(_) => "refused",
                Outcome::Ran { ok: true, .. } => "ran ok",
                Outcome::Ran { ok: false, .. } => "ran failed",
                Outcome::Errored(_) => "ERRORED",
            };
            let shown: String = text.chars().take(160).collect::<String>().replace('\n', " / ");
            eprintln!("[{}] line {} {} -> {kind}: {shown}", self.entry, case.line, case.short());
        }
        self.record(case, sent, refused, matches!(outcome, Outcome::Errored(_)), what);
    }

    /// Tolerated changes that follow any line (`*` in TOLERATED_ESCAPES: the
    /// harness's own vtysh calls append to the shared history) are counted apart, so that the
    /// line's own verdict shows; the rest is returned.
    fn untolerated(&mut self, changes: Vec<String>) -> Vec<String> {
        let mut rest = Vec::new();
        for w in changes {
            match TOLERATED_ESCAPES.iter().find(|(e, line, change)| {
                *line == "*" && (*e == "*" || self.entry.starts_with(e)) && w.contains(change)
            }) {
                Some((_, _, change)) => *self.tolerated.entry(change.to_string()).or_default() += 1,
                None => rest.push(w),
            }
        }
        rest
    }

    /// Checks the host and the victim now (after a batch, when per-line checks are off), and
    /// attributes a change to `case`, the last of the batch.
    pub fn check_after(&mut self, case: &Case, sent: &str) {
        let what = self.check();
        let what = self.untolerated(what);
        if !what.is_empty() {
            self.attribute(case, sent, what);
        }
    }

    /// Per-line host checks on or off.
    pub fn per_line(&mut self, on: bool) {
        self.check_host = on;
    }

    /// Adds what changed to the escape of `case` (or records one): for a check the runner
    /// makes itself, e.g. the victim's score after a batch.
    pub fn attribute(&mut self, case: &Case, sent: &str, what: Vec<String>) {
        if let Some(e) = self.escapes.iter_mut().rev().find(|e| e.case.line == case.line) {
            e.what.extend(what);
            return;
        }
        let known = is_known(&self.entry, case, &what);
        let t = self.tally.entry(case.category.clone()).or_default();
        if known {
            t.known += 1;
        } else {
            t.escapes += 1;
        }
        self.escapes.push(Escape {
            entry: self.entry.clone(),
            case: case.clone(),
            sent: sent.to_string(),
            what,
            known,
        });
    }

    fn record(&mut self, case: &Case, sent: &str, refused: bool, errored: bool, what: Vec<String>) {
        let t = self.tally.entry(case.category.clone()).or_default();
        t.lines += 1;
        if errored {
            t.errored += 1;
        } else if refused {
            t.refused += 1;
        } else {
            t.contained += 1;
        }
        if !what.is_empty() {
            if refused {
                t.refused -= 1;
            } else if !errored {
                t.contained -= 1;
            }
            self.attribute(case, sent, what);
        }
    }

    /// The host and the victim against the baseline; what changed is put back where the
    /// harness can and becomes the new baseline.
    fn check(&mut self) -> Vec<String> {
        let now = Snapshot::take(&self.watch);
        let mut changes = self.host.diff(&now);
        if changes.iter().any(|c| c.what.starts_with("process ")) {
            // A process of a concurrent test, or one a command left that is ending right now,
            // is gone a moment later; one that an escape left running is not.
            std::thread::sleep(std::time::Duration::from_millis(300));
            let again = self.host.diff(&Snapshot::take(&self.watch));
            changes.retain(|c| !c.what.starts_with("process ") || again.contains(c));
        }
        let mut what: Vec<String> = changes.iter().map(|c| format!("host: {c}")).collect();
        let mut victim_changed = false;
        for ns in &self.victims {
            let state = hostcheck::namespace_state(ns);
            if let Some(before) = self.victim.get(ns)
                && *before != state
            {
                what.push(format!("victim {ns}: {}", diff_lines(before, &state)));
                victim_changed = true;
            }
            self.victim.insert(ns.clone(), state);
        }
        if victim_changed {
            // Links the corpus plants (ndjx*, stolen*) go, in the victim and the attacker, so
            // that the next line starts clean; what else changed stays the new baseline.
            let mut all = self.victims.clone();
            all.push(self.vars.self_ns.clone());
            for ns in &all {
                remove_planted_links(ns);
            }
            for ns in &self.victims {
                self.victim.insert(ns.clone(), hostcheck::namespace_state(ns));
            }
        }
        if !changes.is_empty() {
            self.restore(&changes);
            self.host = Snapshot::take(&self.watch);
        }
        what
    }

    /// Puts back what an escape changed on the host, where the harness can: a sysctl's value,
    /// a link added to the root namespace, a file the corpus names (`ndjx*`) in a watched tree,
    /// /etc/frr's files, a process left running.
    fn restore(&self, changes: &[Change]) {
        for c in changes {
            if let Some(key) = c.what.strip_prefix("/proc/sys/")
                && let Some(old) = self.host.get(&c.what)
                && !old.contains(" bytes, hash ")
            {
                let _ = std::fs::write(Path::new("/proc/sys").join(key), old);
            }
            if c.what.starts_with("/tmp/") || c.what.starts_with("/root/") {
                let name = c.what.rsplit('/').next().unwrap_or_default();
                if name.starts_with("ndjx") && c.detail.starts_with("appeared") {
                    let _ = std::fs::remove_file(&c.what);
                }
            }
            if c.what == "ip -o link" {
                for line in c.detail.split(" | ").filter_map(|l| l.strip_prefix('+')) {
                    let name = line.split(':').nth(1).unwrap_or_default().trim();
                    let name = name.split('@').next().unwrap_or_default();
                    if name.starts_with("ndjx") || name.starts_with("stolen") || name.starts_with("evil") {
                        let _ = std::process::Command::new("ip").args(["link", "del", name]).status();
                    }
                }
            }
            if let Some(pid) = c.what.strip_prefix("process ").and_then(|p| p.parse::<i32>().ok()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        for (path, bytes) in &self.frr_files {
            if std::fs::read(path).ok().as_ref() != Some(bytes) {
                let _ = std::fs::write(path, bytes);
            }
        }
    }

    /// The victim's prefix, a password file or another task's hidden commands in an answer.
    fn leak(&mut self, sent: &str, text: &str) -> Option<String> {
        let victim = format!("{}-", self.vars.victim_prefix);
        // Once the corpus named the victim, the attacker's own state may hold the name (a VRF
        // bound to it): echoing it back is no leak.
        self.victim_named |= sent.contains(&victim);
        if !self.vars.victim_prefix.is_empty() && text.contains(&victim) && !self.victim_named {
            return Some(format!("names the victim's namespaces ({victim}...)"));
        }
        for secret in ["root:x:0:0", "root:*:", "root:$", "root:!"] {
            if text.contains(secret) && !sent.contains(secret) {
                return Some(format!("a password file (`{secret}`)"));
            }
        }
        if text.contains(CANARY) && !sent.contains(CANARY) {
            return Some(format!("the victim's hidden command (`{CANARY}`)"));
        }
        None
    }

    /// The per-category table, the escapes and the errored lines.
    pub fn report(&self) -> String {
        let mut out = format!(
            "containment: {} ({:.1} s, of which host and victim checks {:.1} s, every {} line(s))\n{:<12} {:>6} {:>8} {:>10} {:>8} {:>6} {:>8} {:>8}\n",
            self.entry,
            self.started.elapsed().as_secs_f64(),
            self.checking.as_secs_f64(),
            check_every(),
            "category",
            "lines",
            "refused",
            "contained",
            "escapes",
            "known",
            "errored",
            "skipped"
        );
        let mut total = Tally::default();
        for (cat, t) in &self.tally {
            let _ = writeln!(
                out,
                "{cat:<12} {:>6} {:>8} {:>10} {:>8} {:>6} {:>8} {:>8}",
                t.lines, t.refused, t.contained, t.escapes, t.known, t.errored, t.skipped
            );
            total.lines += t.lines;
            total.refused += t.refused;
            total.contained += t.contained;
            total.escapes += t.escapes;
            total.known += t.known;
            total.errored += t.errored;
            total.skipped += t.skipped;
        }
        let _ = writeln!(
            out,
            "{:<12} {:>6} {:>8} {:>10} {:>8} {:>6} {:>8} {:>8}",
            "total",
            total.lines,
            total.refused,
            total.contained,
            total.escapes,
            total.known,
            total.errored,
            total.skipped
        );
        for e in &self.escapes {
            let _ = writeln!(
                out,
                "{} [{}] line {} {}: {}",
                if e.known { "KNOWN ESCAPE" } else { "ESCAPE" },
                e.entry,
                e.case.line,
                e.case.short(),
                e.what.join("; ")
            );
        }
        for e in &self.errored {
            let _ = writeln!(out, "ERRORED {e}");
        }
        for (change, n) in &self.tolerated {
            let _ = writeln!(
                out,
                "KNOWN ON MAIN, after {n} line(s): `{change}` changed (tolerated for any line)"
            );
        }
        out
    }

    /// Prints the report; panics on an escape not in [`TOLERATED_ESCAPES`] or on an errored
    /// line that is not a known escape either.
    pub fn finish(&mut self) {
        // The lines after the last batch's check.
        if self.check_host
            && !self.judged.is_multiple_of(check_every())
            && let Some((case, sent)) = self.last.clone()
        {
            let what = self.check();
            let what = self.untolerated(what);
            if !what.is_empty() {
                self.attribute(&case, &sent, what);
            }
        }
        // A daemon that was told to log into /etc/frr kept writing until its episode closed.
        self.restore(&[]);
        let report = self.report();
        eprintln!("{report}");
        let unknown = self.escapes.iter().filter(|e| !e.known).count();
        let errored_unknown: Vec<&String> = self
            .errored
            .iter()
            .filter(|e| {
                !TOLERATED_ESCAPES.iter().any(|(entry, line, what)| {
                    (*entry == "*" || self.entry.starts_with(entry))
                        && (*line == "*" || e.contains(&format!("{line:?}")) || e.contains(line))
                        && *what == "errored"
                })
            })
            .collect();
        assert!(
            unknown == 0 && errored_unknown.is_empty(),
            "{unknown} escape(s) and {} errored line(s) not in TOLERATED_ESCAPES:\n{report}",
            errored_unknown.len()
        );
    }
}

/// A process that lives in `ns` for the run (`sleep`), whose PID fills `{VICTIM_PID}`: the
/// caller kills it at the end.
pub fn resident(ns: &str) -> std::io::Result<std::process::Child> {
    std::process::Command::new("ip")
        .args(["netns", "exec", ns, "sleep", "3600"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
}

/// The first IPv4 address of `dev` in `ns`, without its length.
pub fn first_address(ns: &str, dev: &str) -> String {
    let out = std::process::Command::new("ip")
        .args(["-n", ns, "-o", "-4", "addr", "show", "dev", dev])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    out.split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .and_then(|a| a.split('/').next())
        .unwrap_or_default()
        .to_string()
}

/// One containment run at a time in a test binary: each watches the processes the test
/// process starts, and two at once would see each other's as escapes.
pub async fn exclusive() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// Deletes the links named like the corpus's (`ndjx*`, `stolen*`, `evil*`) in `ns`.
fn remove_planted_links(ns: &str) {
    let Ok(out) = std::process::Command::new("ip").args(["-n", ns, "-o", "link"]).output() else { return };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split(':').nth(1).unwrap_or_default().trim();
        let name = name.split('@').next().unwrap_or_default();
        if name.starts_with("ndjx") || name.starts_with("stolen") || name.starts_with("evil") {
            let _ = std::process::Command::new("ip").args(["-n", ns, "link", "del", name]).status();
        }
    }
}

/// FRR configuration that undoes what the corpus's file-writing lines set: a runner applies it
/// to the attacker's router after an escape there. `dump bgp` does not show in the running
/// configuration, so a reload to the base configuration (frr-reload.py) leaves it running:
/// it has to be removed by name.
pub const FRR_CLEANUP: &[&str] = &[
    "no log file",
    "no log filtered-file",
    "no banner motd",
    "no dump bgp all",
    "no dump bgp all-et",
    "no dump bgp updates",
    "no dump bgp updates-et",
    "no dump bgp routes-mrt",
];

/// A command the victim's harness runs through vtysh before the attack: seen in an attacker's
/// answer (`show history`), it is another task's hidden command.
pub const CANARY: &str = "203.0.113.77";

fn is_known(entry: &str, case: &Case, what: &[String]) -> bool {
    !what.is_empty()
        && what.iter().filter(|w| !w.starts_with('(')).all(|w| {
            TOLERATED_ESCAPES.iter().any(|(e, line, change)| {
                (*e == "*" || entry.starts_with(e))
                    && (*line == "*" || *line == case.template)
                    && w.contains(change)
            })
        })
}

fn diff_lines(before: &str, after: &str) -> String {
    let old: std::collections::BTreeSet<&str> = before.lines().collect();
    let new: std::collections::BTreeSet<&str> = after.lines().collect();
    let mut out: Vec<String> = old.difference(&new).map(|l| format!("-{l}")).collect();
    out.extend(new.difference(&old).map(|l| format!("+{l}")));
    out.truncate(8);
    out.join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_corpus_loads_with_enough_lines_in_every_category() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(CORPUS);
        let cases = load(&path).expect("corpus");
        assert!(cases.len() >= 300, "{} lines", cases.len());
        let mut per: BTreeMap<&str, usize> = BTreeMap::new();
        for c in &cases {
            *per.entry(c.category.as_str()).or_default() += 1;
        }
        for cat in ["namespaces", "files", "processes", "sysctls", "exhaustion", "evasion", "leaks"] {
            assert!(per.get(cat).is_some_and(|n| *n >= 20), "{cat}: {per:?}");
        }
        assert!(cases.iter().any(|c| c.host_irreversible && c.template.contains("nf_hooks_lwtunnel")));
        let vars = Vars { victim_ns: "V".into(), ..Vars::default() };
        let big = cases.iter().find(|c| c.template == "ip {BIG:200}").expect("big");
        assert_eq!(big.fill(&vars)[0].len(), 3 + 200 * 1024);
        let two = Case { template: "router bgp 1{NEXT}dump bgp all {VICTIM_NS}".into(), ..big.clone() };
        assert_eq!(two.fill(&vars), ["router bgp 1", "dump bgp all V"]);
        assert_eq!(unescape("a\\tb\\x0c\\\\"), "a\tb\x0c\\");
    }
}
