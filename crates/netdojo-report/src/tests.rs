//! The report of run directories written with the store's own writer: the overview's numbers
//! (snapshot), hostile trajectory text, the exports.

use netdojo_core::store::RunDir;
use netdojo_core::{
    Check, EndReason, EpisodeRecord, EpisodeStatus, ErrorCause, Metric, Observation, Outcome, StateCheck,
    Step, TokenUsage, ToolCall, ToolSpec, Trajectory,
};
use serde_json::{Value, json};

use crate::{Overview, Run, export, html};

const HOSTILE: &str =
    "<script>document.title='pwned'</script><img src=x onerror=\"document.body.dataset.pwned=1\">";

struct Episode {
    id: &'static str,
    level: u8,
    label: &'static str,
    correct: bool,
    safe: bool,
    steps: usize,
    wall_ms: u64,
    tokens: (u64, u64),
    errored: bool,
}

fn record(e: &Episode) -> EpisodeRecord {
    EpisodeRecord {
        task_id: e.id.into(),
        epoch: 0,
        application: "dcgraph".into(),
        level: e.level,
        label: e.label.into(),
        domain: None,
        agent: "openai".into(),
        status: if e.errored { EpisodeStatus::Errored } else { EpisodeStatus::Completed },
        error: e.errored.then(|| "the model server is unreachable".into()),
        cause: e.errored.then_some(ErrorCause::Agent),
        end: if e.errored { EndReason::Error } else { EndReason::Finished },
        steps: e.steps,
        invalid_steps: 0,
        wall_ms: e.wall_ms,
        timing: Default::default(),
        class: None,
        tokens: TokenUsage { prompt_tokens: e.tokens.0, completion_tokens: e.tokens.1, cached_tokens: 0 },
        metrics: if e.errored {
            vec![]
        } else {
            vec![
                Metric::pass("correct", e.correct),
                Metric::pass("safe", e.safe),
                Metric::count("steps", e.steps as u64),
                Metric::count("invalid_steps", 0),
                Metric::value("wall_s", e.wall_ms as f64 / 1000.0),
                Metric::value("checks_passed", if e.correct { 1.0 } else { 0.5 }),
            ]
        },
    }
}

fn trajectory(e: &Episode, text: &str) -> Trajectory {
    let steps = (0..e.steps)
        .map(|i| {
            let call =
                ToolCall { id: format!("c{i}"), ..ToolCall::new("count_nodes", json!({"kind": text})) };
            Step {
                index: i,
                turn: i,
                reasoning: format!("thinking {text}"),
                observation: Observation::ok(&call, format!("observed {text}"), Some(json!({"raw": text}))),
                call,
                invalid: false,
                check: if e.safe || i + 1 < e.steps {
                    StateCheck::safe()
                } else {
                    StateCheck::from_violations(vec![format!("broke {text}")])
                },
                at_ms: 10 * i as u64,
                duration_ms: 5,
                usage: Some(TokenUsage {
                    prompt_tokens: e.tokens.0 / e.steps as u64,
                    completion_tokens: e.tokens.1 / e.steps as u64,
                    cached_tokens: 0,
                }),
            }
        })
        .collect();
    Trajectory {
        task_id: e.id.into(),
        agent: "openai".into(),
        brief: format!("Count the nodes. {text}"),
        tools: vec![
            ToolSpec::new(
                "count_nodes",
                "Counts the nodes of a kind.",
                ToolSpec::object_schema(json!({"kind": {"type": "string"}}), &["kind"]),
            ),
            ToolSpec::finish(Some(json!({"type": "string"}))),
        ],
        initial_check: StateCheck::safe(),
        steps,
        answer: Some(json!(text)),
        end: if e.errored { EndReason::Error } else { EndReason::Finished },
        outcome: (!e.errored)
            .then(|| Outcome { checks: vec![Check::new("answer", e.correct, text)], export: json!(null) }),
        wall_ms: e.wall_ms,
        timing: Default::default(),
        usage: Default::default(),
        end_detail: None,
        transcript: vec![
            json!({"role": "user", "content": text}),
            json!({"role": "assistant", "content": text}),
        ],
    }
}

fn episodes() -> Vec<Episode> {
    let e = |id, level, label, correct, safe, steps, wall_ms, tokens| Episode {
        id,
        level,
        label,
        correct,
        safe,
        steps,
        wall_ms,
        tokens,
        errored: false,
    };
    vec![
        e("t1", 1, "count", true, true, 1, 1200, (100, 10)),
        e("t2", 1, "count", false, true, 2, 2400, (200, 20)),
        e("t3", 1, "add", true, false, 3, 800, (300, 30)),
        e("t4", 2, "remove-count", true, true, 2, 1000, (150, 15)),
        Episode { errored: true, ..e("t5", 2, "remove-count", false, true, 0, 50, (0, 0)) },
    ]
}

/// A run directory written by the store, with `text` in every string a trajectory holds.
fn run_dir(dir: &std::path::Path, text: &str) -> Run {
    let mut store = RunDir::create(
        dir,
        &json!({"cli": {"env": "dcgraph", "llm": {"model": "smollm2-135m"}}, "runner": {"agent": {"name": "openai"}}}),
    )
    .expect("create");
    for e in episodes() {
        store.append(&record(&e), &trajectory(&e, text)).expect("append");
    }
    Run::load(dir).expect("load")
}

#[test]
fn the_overview_holds_every_rate_with_its_interval_per_level_label_and_overall() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = run_dir(&tmp.path().join("llm-run"), "x");
    let overview = Overview::of(std::slice::from_ref(&run));
    let o = &overview.runs[0];
    assert_eq!((o.episodes, o.errored, o.solved), (5, 1, 3));
    assert_eq!(o.tokens.total(), 825);
    assert_eq!(o.tokens_per_solved, Some(275.0));
    assert!(o.cost_usd.is_none(), "no episode has a cost");
    // The overall row's rates are the summary's own.
    let all = run.summary.overall().expect("overall");
    assert_eq!(o.rows[0].rates["correct"].ci95, all.rates["correct"].ci95);
    assert_eq!(o.rows[0].scores["checks_passed"].mean, all.means["checks_passed"]);
    assert!(!o.rows[0].scores.contains_key("wall_s"), "wall time has its own column");
    insta::assert_json_snapshot!(overview);
}

#[test]
fn hostile_trajectory_text_is_escaped_everywhere() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let runs = [run_dir(&tmp.path().join("a"), HOSTILE), run_dir(&tmp.path().join("b"), HOSTILE)];
    let site = html::render(&runs).expect("render");
    // Two runs of five episodes, side by side: an index and ten pages.
    assert_eq!(site.files.len(), 11, "{:?}", site.files.keys());
    for (path, bytes) in &site.files {
        let page = String::from_utf8(bytes.clone()).expect("utf-8");
        let scripts = page.matches("<script").count();
        assert_eq!(scripts, usize::from(path == "index.html"), "{path}: only the filter is a script");
        assert!(!page.contains("<img"), "{path}: the agent's markup must not become markup");
    }
    let page = String::from_utf8(site.files["r0/t3.html"].clone()).expect("utf-8");
    for part in [
        "thinking &lt;script&gt;",
        "observed &lt;script&gt;",
        "broke &lt;script&gt;",
        "Count the nodes. &lt;script&gt;",
    ] {
        assert!(page.contains(part), "{part} missing");
    }
    assert!(page.contains("class=\"step unsafe\""), "the unsafe step is marked");
    let index = String::from_utf8(site.files["index.html"].clone()).expect("utf-8");
    assert_eq!(index.matches("<tr data-run=").count(), 10);
    assert!(index.contains("href=\"r1/t5.html\""));
    // Side by side: a row per group, a column pair per run.
    let compare = &index[index.find("class=\"compare\"").expect("the comparison table")..];
    let compare = &compare[..compare.find("</table>").expect("its end")];
    assert_eq!(compare.matches("<tr><td>").count(), 6, "all, 2 levels, 3 labels: {compare}");
    assert!(compare.contains("<tr><td>1 / count</td><td class=\"num\">50.0%"), "{compare}");
}

#[test]
fn exports_have_one_entry_per_episode() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = run_dir(&tmp.path().join("run"), "x");
    let lines: Vec<Value> = export::jsonl(&run)
        .expect("jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[0]["correct"], true);
    assert_eq!(lines[0]["prompt_tokens"], 100);
    assert_eq!(lines[4]["outcome"], "errored");

    let log = export::inspect_log(&run).expect("inspect log");
    let samples = log["samples"].as_array().expect("samples");
    assert_eq!(samples.len(), 5);
    // t2: the brief, then per turn the assistant's call and the tool's answer.
    let roles: Vec<&str> = samples[1]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant", "tool"]);
    assert_eq!(samples[1]["scores"]["correct"]["value"], "I");
    assert_eq!(samples[4]["error"]["message"], "the model server is unreachable");
    let correct = log["results"]["scores"]
        .as_array()
        .expect("scores")
        .iter()
        .find(|s| s["name"] == "correct")
        .expect("correct");
    assert_eq!(correct["metrics"]["accuracy"]["value"], 0.75);
    assert_eq!(log["eval"]["model"], "openai/smollm2-135m");
    assert!(export::inspect_file_name(&run).ends_with("_netdojo-dcgraph_run.json"));
}

#[test]
fn the_chat_export_is_the_fine_tuning_format() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = run_dir(&tmp.path().join("run"), "x");
    let parse = |text: String| -> Vec<Value> {
        text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
    };
    // Four completed episodes (the errored one is left out); three solved.
    let all = parse(export::chat(&run, false).expect("chat"));
    assert_eq!(all.len(), 4);
    let solved = parse(export::chat(&run, true).expect("chat"));
    assert_eq!(solved.len(), 3);
    assert!(solved.iter().all(|l| l["metadata"]["outcome"] == "solved"));

    // t2: system, the brief, per turn the call and its result, then `finish` with the answer.
    let t2 = all.iter().find(|l| l["metadata"]["task_id"] == "t2").expect("t2");
    let messages = t2["messages"].as_array().expect("messages");
    let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]);
    let call = &messages[2]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "count_nodes");
    // Arguments are a JSON string, as the format wants.
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().expect("a string")).expect("JSON");
    assert!(arguments["kind"].is_string());
    assert_eq!(messages[3]["tool_call_id"], call["id"]);
    let finish = &messages[6]["tool_calls"][0]["function"];
    assert_eq!(finish["name"], "finish");
    assert!(finish["arguments"].as_str().expect("a string").contains("answer"));
    let tools: Vec<&str> = t2["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(tools, ["count_nodes", "finish"]);
    assert_eq!(t2["metadata"]["metrics"]["correct"], false);
    assert_eq!(t2["metadata"]["outcome"], "failed");
    insta::assert_json_snapshot!(t2);
}
