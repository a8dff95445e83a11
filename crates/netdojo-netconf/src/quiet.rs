//! The early verdict: a failing episode's testcases are rerun for up to [`CONVERGENCE`](crate::env::CONVERGENCE)
//! in case routing is still converging, and the last round is the verdict. When the network is
//! provably quiescent, that last round can only repeat the current one, so the verdict is given
//! now. docs/netconf.md states the rule and why it holds; in short, at round `k` there must be an
//! earlier round `j` at least [`MIN_SPAN`] before it such that
//!
//! 1. every round from `j` to `k` gave the same testcase results and the same outputs, clocks
//!    masked ([`mask_clocks`]), and no testcase's verdict depends on a clock: it is the same with
//!    every clock of its output moved to any second up to the deadline ([`clock_invariant`]);
//! 2. every round from `j` to `k` read the same state from every daemon of every router
//!    ([`Probe::state`]: routes, OSPF neighbours and interfaces, BGP peers and routes, RIP routes,
//!    clocks and message counters left out);
//! 3. at round `k`, every timer any daemon has pending before the deadline (`show thread timers`)
//!    is a steady-state timer ([`STEADY`]) or a no-op one ([`NO_OP`], each under its condition),
//!    and every steady-state timer that was pending at `j` was due at least [`SETTLE`] before `k`:
//!    it fired (or was re-armed by its peer's message) inside the span, and nothing changed.
//!
//! Anything else (an unknown timer, a one-shot timer such as an SPF run, a route advertisement,
//! a wait or retransmission timer with work queued, a state that moved) means waiting on, as
//! before.

use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use netdojo_linux::frr::Frr;
use regex::Regex;
use serde_json::Value;

/// The shortest span of identical rounds before an early verdict: longer than the one-second
/// step of every clock FRR prints, so a clock that a testcase's output shows has ticked.
pub const MIN_SPAN: Duration = Duration::from_millis(2500);

/// How long before the last round a steady-state timer must have been due: time for what it
/// sent to reach the other routers and be read back.
pub const SETTLE: Duration = Duration::from_millis(500);

/// Timers that fire over and over while the network stands still, each with the same effect
/// every time (the state it acts on being unchanged): keepalives, hellos, the watchdogs that a
/// peer's hellos and keepalives re-arm, a failed BGP connection's retry, RIP's periodic update
/// and the timeouts RIP's updates re-arm. Observed inside the span with no change, they change
/// nothing later.
pub const STEADY: [&str; 7] = [
    "ospf_hello_timer",
    "ospf_inactivity_timer",
    "bgp_holdtime_timer",
    "bgp_connect_timer",
    "bgp_keepalive_timer",
    "rip_update",
    "rip_timeout",
];

/// Timers whose firing changes no route, adjacency or testcase output (under the condition
/// [`Probe`] checks for the OSPF ones), whatever their period:
/// - `ospf_ls_upd_timer`, `ospf_ls_req_timer`, `ospf_ls_ack_timer`: retransmit LS updates,
///   LS requests and delayed acknowledgements; they send nothing while every neighbour's
///   retransmission, request and database-summary lists are empty on every router (acks only
///   empty a retransmission list);
/// - `ospf_lsa_refresh_walker`: re-originates a router's own LSAs 30 minutes after they were
///   made, with the same content (RFC 2328 §12.4), which changes no route;
/// - `ospf_lsa_maxage_walker`: removes LSAs at MaxAge, which the routing calculation already
///   leaves out (RFC 2328 §16);
/// - `if_zebra_speed_update`: zebra reads an interface's speed again and acts only when it
///   changed; a veth's speed is fixed by its driver.
pub const NO_OP: [&str; 6] = [
    "ospf_ls_upd_timer",
    "ospf_ls_req_timer",
    "ospf_ls_ack_timer",
    "ospf_lsa_refresh_walker",
    "ospf_lsa_maxage_walker",
    "if_zebra_speed_update",
];

/// What one daemon of a router answers to the probe: its state, read without clocks.
const STATE_READS: [(&str, &str); 7] = [
    ("zebra", "show ip route json"),
    ("ospfd", "show ip ospf neighbor json"),
    ("ospfd", "show ip ospf interface json"),
    ("ospfd", "show ip ospf route json"),
    ("bgpd", "show bgp summary json"),
    ("bgpd", "show ip bgp json"),
    ("ripd", "show ip rip"),
];

/// A pending timer of one daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timer {
    pub router: String,
    pub daemon: &'static str,
    pub function: String,
    pub due: Instant,
}

/// One look at every router: the state of each daemon and its pending timers.
#[derive(Debug, Clone)]
pub struct Probe {
    pub at: Instant,
    /// Every daemon's state, clocks and counters left out; `None` when a read failed (which
    /// never counts as quiet).
    pub state: Option<String>,
    pub timers: Vec<Timer>,
    /// Whether every OSPF neighbour's retransmission, request and database-summary lists are
    /// empty on every router (the condition of the OSPF [`NO_OP`] timers).
    pub ospf_lists_empty: bool,
}

/// Reads every router's daemons (their vty sockets, no process started).
pub async fn probe(routers: &[(&str, &Frr)]) -> Probe {
    let at = Instant::now();
    let reads = routers.iter().map(|(name, frr)| async move {
        let daemons = frr.daemons();
        let mut state = String::new();
        let mut timers = Vec::new();
        let mut ok = true;
        let mut lists_empty = true;
        for daemon in &daemons {
            let asked = Instant::now();
            match frr.show(daemon, "show thread timers").await {
                Ok(text) => match parse_timers(&text) {
                    Some(pending) => timers.extend(pending.into_iter().map(|(function, left)| Timer {
                        router: name.to_string(),
                        daemon,
                        function,
                        due: asked + left,
                    })),
                    None => ok = false,
                },
                Err(_) => ok = false,
            }
        }
        for (daemon, command) in STATE_READS {
            if !daemons.contains(&daemon) {
                continue;
            }
            let Ok(text) = frr.show(daemon, command).await else {
                ok = false;
                continue;
            };
            let text = match serde_json::from_str::<Value>(&text) {
                Ok(mut v) => {
                    if command == "show ip ospf neighbor json" {
                        lists_empty &= ospf_lists_empty(&v);
                    }
                    strip_clocks(&mut v);
                    v.to_string()
                }
                Err(_) => mask_clocks(&text),
            };
            state.push_str(&format!("{name} {command}\n{text}\n"));
        }
        (ok.then_some(state), timers, lists_empty)
    });
    let mut state = Some(String::new());
    let mut timers = Vec::new();
    let mut ospf_lists_empty = true;
    for (s, t, empty) in futures::future::join_all(reads).await {
        state = match (state, s) {
            (Some(mut all), Some(s)) => {
                all.push_str(&s);
                Some(all)
            }
            _ => None,
        };
        timers.extend(t);
        ospf_lists_empty &= empty;
    }
    Probe { at, state, timers, ospf_lists_empty }
}

/// `show thread timers`: the function (without the parentheses FRR puts around some) and the
/// time left (`HH:MM:SS.mmm`) of each pending timer; `None` for a line not in that form.
pub fn parse_timers(text: &str) -> Option<Vec<(String, Duration)>> {
    let mut out = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || !line.starts_with("  ") || trimmed.starts_with("---") {
            continue;
        }
        let mut words = trimmed.split_whitespace();
        let (Some(function), Some(left), None) = (words.next(), words.next(), words.next()) else {
            return None;
        };
        let function = function.trim_start_matches('(').trim_end_matches(')').to_string();
        out.push((function, parse_clock(left)?));
    }
    Some(out)
}

fn parse_clock(text: &str) -> Option<Duration> {
    let (hms, ms) = text.split_once('.')?;
    let parts: Vec<u64> = hms.split(':').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    let [h, m, s] = parts.as_slice() else { return None };
    Some(Duration::from_millis(((h * 60 + m) * 60 + s) * 1000 + ms.parse::<u64>().ok()?))
}

/// Whether no OSPF neighbour has anything left to retransmit, request or describe.
fn ospf_lists_empty(neighbors: &Value) -> bool {
    let mut empty = true;
    let mut visit = |n: &Value| {
        for key in ["retransmitCounter", "requestCounter", "dbSummaryCounter"] {
            if n.get(key).and_then(Value::as_u64).unwrap_or(0) != 0 {
                empty = false;
            }
        }
    };
    if let Some(all) = neighbors.get("neighbors").and_then(Value::as_object) {
        for list in all.values() {
            for n in list.as_array().into_iter().flatten() {
                visit(n);
            }
        }
    }
    empty
}

/// Leaves out of a daemon's JSON what moves while nothing happens: clocks (uptimes, ages, what
/// is due when), message counters and memory use.
fn strip_clocks(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|k, _| {
                let k = k.to_ascii_lowercase();
                !(["time", "msec", "epoch", "due", "memory"].iter().any(|w| k.contains(w))
                    || k == "msgrcvd"
                    || k == "msgsent"
                    || k.ends_with("age"))
            });
            map.values_mut().for_each(strip_clocks);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_clocks),
        _ => {}
    }
}

/// The clocks FRR, ping and curl print: `00:01:02` (an uptime), `2m03s`, `0.923s`, ping's
/// `time=0.071 ms`, `time 1003ms` and `rtt min/avg/max/mdev = ...`, curl's `after 2001
/// milliseconds`.
static CLOCKS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\b\d{2}:\d{2}:\d{2}\b|\b\d+m\d+s\b|\b\d+\.\d+s\b|time[= ][0-9.]+ ?ms\b|rtt min/avg/max/mdev = [0-9./]+ ms|after \d+ milliseconds",
    )
    .expect("a valid regex")
});

/// The text with its clocks replaced by `<clock>`.
pub fn mask_clocks(text: &str) -> String {
    CLOCKS.replace_all(text, "<clock>").into_owned()
}

/// Whether `re`'s verdict on `output` stays the same as every clock of the output moves on:
/// uptimes (`HH:MM:SS`, `XmYs`) are advanced second by second up to `ahead` (plus two seconds),
/// and every number of every other clock is set to `0` and to `99999`.
pub fn clock_invariant(re: &Regex, output: &str, ahead: Duration) -> bool {
    let verdict = re.is_match(output);
    if !CLOCKS.is_match(output) {
        return true;
    }
    let seconds = ahead.as_secs() + 2;
    let shifted = |d: u64| {
        CLOCKS
            .replace_all(output, |c: &regex::Captures| {
                let text = &c[0];
                shift(text, d).unwrap_or_else(|| text.to_string())
            })
            .into_owned()
    };
    // Every number of a clock that is not an uptime made short and small, then long and large:
    // a verdict on its value or on its number of digits (ping's `rtt .../[0-9]{3,}\.`) moves.
    let digits = |to: &str| {
        CLOCKS
            .replace_all(output, |c: &regex::Captures| {
                let text = &c[0];
                if shift(text, 0).is_some() {
                    // An uptime: it only moves on, which `shifted` covers.
                    return text.to_string();
                }
                NUMBER.replace_all(text, to).into_owned()
            })
            .into_owned()
    };
    (1..=seconds).all(|d| re.is_match(&shifted(d)) == verdict)
        && re.is_match(&digits("0")) == verdict
        && re.is_match(&digits("99999")) == verdict
}

static NUMBER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d+").expect("a valid regex"));

/// An uptime `d` seconds later, in its own format; `None` for a clock that is not an uptime.
fn shift(clock: &str, d: u64) -> Option<String> {
    if let [h, m, s] = clock.split(':').collect::<Vec<_>>().as_slice() {
        let t = h.parse::<u64>().ok()? * 3600 + m.parse::<u64>().ok()? * 60 + s.parse::<u64>().ok()? + d;
        return Some(format!("{:02}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60));
    }
    let (m, s) = clock.strip_suffix('s')?.split_once('m')?;
    let t = m.parse::<u64>().ok()? * 60 + s.parse::<u64>().ok()? + d;
    Some(format!("{}m{}s", t / 60, t % 60))
}

/// One round of testcases as the rule compares them: results and masked outputs, and whether
/// every verdict is free of clocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Round {
    pub key: String,
    pub clock_free: bool,
}

/// The rounds of one evaluation so far, and the rule.
#[derive(Debug, Default)]
pub struct Watch {
    rounds: Vec<(Round, Probe)>,
}

impl Watch {
    /// Adds round `k` and says whether the verdict may be given now (see the module docs).
    pub fn quiet(&mut self, round: Round, probe: Probe, deadline: Instant) -> bool {
        let now = probe.at;
        self.rounds.push((round, probe));
        let (last_round, last_probe) = self.rounds.last().expect("just pushed");
        if !last_round.clock_free || last_probe.state.is_none() {
            return false;
        }
        // Every timer due before the deadline is known and steady, or a no-op under its condition.
        let known = last_probe.timers.iter().filter(|t| t.due < deadline).all(|t| {
            STEADY.contains(&t.function.as_str())
                || (NO_OP.contains(&t.function.as_str())
                    && (!t.function.starts_with("ospf_ls_") || last_probe.ospf_lists_empty))
        });
        if !known {
            return false;
        }
        // The earliest round from which every round is the same as the last.
        let mut j = self.rounds.len() - 1;
        while j > 0 && self.rounds[j - 1].0 == *last_round && self.rounds[j - 1].1.state == last_probe.state {
            j -= 1;
        }
        let start = &self.rounds[j].1;
        if now.duration_since(start.at) < MIN_SPAN {
            return false;
        }
        start
            .timers
            .iter()
            .filter(|t| t.due < deadline && STEADY.contains(&t.function.as_str()))
            .all(|t| t.due + SETTLE <= now)
    }
}

/// The testcase results of one round, for [`Round::key`].
pub fn round_key(results: &[Option<(bool, String)>], errors: &[Option<String>]) -> String {
    let mut key = BTreeMap::new();
    for (i, (r, e)) in results.iter().zip(errors).enumerate() {
        let v = match (r, e) {
            (_, Some(e)) => format!("error {}", mask_clocks(e)),
            (Some((pass, out)), None) => format!("{pass} {}", mask_clocks(out)),
            (None, None) => "not run".into(),
        };
        key.insert(i, v);
    }
    key.into_values().collect::<Vec<_>>().join("\n\u{0}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_timers_parse() {
        let text = "Thread timers for ospfd:\n\nShowing timers for default\n--------------------------\n  \
                    (ospf_hello_timer)                                00:00:00.149\n  \
                    ospf_lsa_maxage_walker                            00:00:23.353\n";
        assert_eq!(
            parse_timers(text),
            Some(vec![
                ("ospf_hello_timer".to_string(), Duration::from_millis(149)),
                ("ospf_lsa_maxage_walker".to_string(), Duration::from_millis(23_353)),
            ])
        );
        assert_eq!(parse_timers("  something odd here\n"), None);
    }

    #[test]
    fn clocks_are_masked_and_a_verdict_on_a_clock_is_not_invariant() {
        let out = "Known via \"ospf\", distance 110, metric 20, best\n  Last update 00:00:05 ago\n";
        assert_eq!(
            mask_clocks(out),
            "Known via \"ospf\", distance 110, metric 20, best\n  Last update <clock> ago\n"
        );
        let known = Regex::new("Known via \"").expect("regex");
        assert!(clock_invariant(&known, out, Duration::from_secs(10)));
        // bgp-community-filter: a session up for 3 s; at 1 s it fails now and passes later.
        let up = Regex::new(r"\s(00:00:0[3-9]|00:00:[1-5]\d)\s").expect("regex");
        let at = |t: &str| format!("10.0.12.2 4 65002 5 5 0 0 0 {t} 2 3 N/A\n");
        assert!(!clock_invariant(&up, &at("00:00:01"), Duration::from_secs(10)));
        assert!(clock_invariant(&up, &at("00:00:04"), Duration::from_secs(10)));
        // ping's times: a verdict on the packet count holds, one on the time does not.
        let ping = "64 bytes from 1.1.1.1: icmp_seq=1 ttl=64 time=0.071 ms\n1 packets transmitted, 1 received, 0% packet loss, time 0ms\nrtt min/avg/max/mdev = 0.071/0.071/0.071/0.000 ms\n";
        assert!(clock_invariant(&Regex::new("1 received").expect("regex"), ping, Duration::from_secs(9)));
        assert!(!clock_invariant(&Regex::new(r"time=0\.0").expect("regex"), ping, Duration::from_secs(9)));
        // tc-htb-hierarchy: shaped pings are slow, an average of three digits; a failing round
        // (fast pings, under load or not) says nothing of the next one.
        let shaped = Regex::new(r"rtt min/avg/max/mdev = [0-9.]+/[0-9]{3,}\.").expect("regex");
        let fast = "5 packets transmitted, 5 received, 0% packet loss, time 812ms\nrtt min/avg/max/mdev = 40.1/95.123/120.5/10.2 ms\n";
        assert!(!clock_invariant(&shaped, fast, Duration::from_secs(9)));
    }

    #[test]
    fn json_state_leaves_clocks_and_counters_out() {
        let mut v: Value = serde_json::json!({"peers": {"10.0.12.2": {"msgRcvd": 8, "peerUptime": "00:03:37",
            "peerUptimeMsec": 217000, "pfxRcd": 1, "state": "Established"}},
            "neighbors": {"2.2.2.2": [{"deadTimeMsecs": 923, "upTime": "3m37s", "state": "Full/-", "lsaAge": 3}]}});
        strip_clocks(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"peers": {"10.0.12.2": {"pfxRcd": 1, "state": "Established"}},
                "neighbors": {"2.2.2.2": [{"state": "Full/-"}]}})
        );
    }

    fn probe_at(at: Instant, timers: Vec<(&str, Duration)>) -> Probe {
        Probe {
            at,
            state: Some("same".into()),
            timers: timers
                .into_iter()
                .map(|(f, left)| Timer {
                    router: "R1".into(),
                    daemon: "ospfd",
                    function: f.into(),
                    due: at + left,
                })
                .collect(),
            ospf_lists_empty: true,
        }
    }

    #[test]
    fn the_rule_waits_for_a_span_a_full_cycle_and_known_timers() {
        let t0 = Instant::now();
        let deadline = t0 + Duration::from_secs(10);
        let round = Round { key: "false x".into(), clock_free: true };
        let hello = |at: Duration| {
            ("ospf_hello_timer", Duration::from_millis(250) - at.min(Duration::from_millis(249)))
        };
        let mut w = Watch::default();
        let mut quiet_at = None;
        for i in 0..20u32 {
            let at = t0 + Duration::from_millis(250) * i;
            if w.quiet(round.clone(), probe_at(at, vec![hello(Duration::ZERO)]), deadline) {
                quiet_at.get_or_insert(i);
            }
        }
        assert_eq!(quiet_at, Some(10), "2.5 s after the first round");
        // A one-shot timer (an SPF run) due before the deadline: never quiet.
        let mut w = Watch::default();
        for i in 0..20u32 {
            let at = t0 + Duration::from_millis(250) * i;
            let p = probe_at(at, vec![("ospf_spf_calculate_timer", Duration::from_millis(50))]);
            assert!(!w.quiet(round.clone(), p, deadline));
        }
        // A steady timer whose cycle is longer than the span (a 30 s RIP update): not yet.
        let mut w = Watch::default();
        for i in 0..20u32 {
            let at = t0 + Duration::from_millis(250) * i;
            let p =
                probe_at(at, vec![("rip_update", Duration::from_secs(8) - Duration::from_millis(250) * i)]);
            assert!(!w.quiet(round.clone(), p, deadline), "round {i}");
        }
        // A state that moves, or a clock in a verdict: not quiet.
        let mut w = Watch::default();
        for i in 0..20u32 {
            let at = t0 + Duration::from_millis(250) * i;
            let mut p = probe_at(at, vec![]);
            p.state = Some(format!("{}", i % 2));
            assert!(!w.quiet(round.clone(), p, deadline));
        }
        let mut w = Watch::default();
        for i in 0..20u32 {
            let at = t0 + Duration::from_millis(250) * i;
            let r = Round { clock_free: false, ..round.clone() };
            assert!(!w.quiet(r, probe_at(at, vec![]), deadline));
        }
    }
}
