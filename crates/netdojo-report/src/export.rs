//! A run in the formats other tools read.
//!
//! - [`inspect_log`]: an inspect_ai eval log (its JSON format, version 2: `EvalLog` of
//!   `inspect_ai.log`), one sample per task, its messages rebuilt from the trajectory's steps,
//!   one score per metric. `inspect view` opens it; CI reads it back with inspect_ai's own
//!   `read_eval_log`.
//! - [`jsonl`]: one flat JSON object per episode, for `pandas.read_json(path, lines=True)`.
//! - [`chat`]: one JSON object per episode in the chat-completions fine-tuning format
//!   (`messages` with tool calls and tool results, `tools`), the episode's metrics beside them.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use netdojo_core::{EpisodeRecord, EpisodeStatus, MetricValue, Trajectory};
use serde_json::{Map, Value, json};

use crate::overview::solved;
use crate::{ReportError, Run};

/// One line per episode (the latest record of each task): the record's fields, then each
/// metric under its own name.
pub fn jsonl(run: &Run) -> Result<String, ReportError> {
    let mut out = String::new();
    for r in &run.records {
        let mut row = Map::new();
        row.insert("run".into(), json!(run.name));
        row.insert("task_id".into(), json!(r.task_id));
        row.insert("epoch".into(), json!(r.epoch));
        row.insert("application".into(), json!(r.application));
        row.insert("level".into(), json!(r.level));
        row.insert("label".into(), json!(r.label));
        row.insert("domain".into(), json!(r.domain));
        row.insert("agent".into(), json!(r.agent));
        row.insert("status".into(), json!(r.status));
        row.insert("outcome".into(), json!(outcome(r)));
        row.insert("class".into(), json!(r.class()));
        row.insert("cause".into(), json!(r.cause));
        row.insert("error".into(), json!(r.error));
        row.insert("end".into(), json!(r.end));
        row.insert("steps".into(), json!(r.steps));
        row.insert("invalid_steps".into(), json!(r.invalid_steps));
        row.insert("wall_s".into(), json!(r.wall_ms as f64 / 1000.0));
        row.insert("prompt_tokens".into(), json!(r.tokens.prompt_tokens));
        row.insert("completion_tokens".into(), json!(r.tokens.completion_tokens));
        row.insert("cached_tokens".into(), json!(r.tokens.cached_tokens));
        let t = &r.timing;
        for (name, us) in [
            ("setup_s", t.setup_us),
            ("agent_s", t.agent_us),
            ("tools_s", t.tools_us),
            ("checks_s", t.checks_us),
            ("evaluate_s", t.evaluate_us),
            ("close_s", t.close_us),
        ] {
            row.insert(name.into(), json!(us as f64 / 1e6));
        }
        for m in &r.metrics {
            // A metric named like a field (`steps`) holds the same number: the field stays.
            row.entry(m.name.clone()).or_insert_with(|| json!(m.value));
        }
        out.push_str(&Value::Object(row).to_string());
        out.push('\n');
    }
    Ok(out)
}

/// The system message of an exported conversation. The agent's own system prompt is not in a
/// run directory (an LLM agent's transcript has it); this one says what the conversation is.
pub const CHAT_SYSTEM: &str = "You are a network engineer working on a live network through the tools \
     given. Make one tool call at a time, read its result, and call `finish` (with the answer, when the \
     task asks for one) when the task is done.";

/// One line per episode in the chat-completions fine-tuning format (OpenAI's, which TRL's
/// `SFTTrainer` also reads): `messages` (system, the brief as the user's message, each turn as
/// an assistant message with its tool calls followed by one tool message per call, and the
/// final `finish` call), `tools` (the tools the agent was given, as function definitions), and
/// `metadata` (the task, the outcome and every metric). Errored episodes are left out (their
/// trajectories stop where the infrastructure failed); with `solved_only`, so are the failed
/// ones. An episode recorded before trajectories kept their tools has an empty `tools`.
pub fn chat(run: &Run, solved_only: bool) -> Result<String, ReportError> {
    let mut out = String::new();
    for r in &run.records {
        if r.status == EpisodeStatus::Errored || (solved_only && !solved(r)) {
            continue;
        }
        let t = run.trajectory(r)?;
        let mut messages = vec![
            json!({"role": "system", "content": CHAT_SYSTEM}),
            json!({"role": "user", "content": t.brief}),
        ];
        let mut i = 0;
        while i < t.steps.len() {
            let turn = t.steps[i].turn;
            let steps: Vec<_> = t.steps[i..].iter().take_while(|s| s.turn == turn).collect();
            i += steps.len();
            let calls: Vec<Value> =
                steps.iter().map(|s| function_call(&call_id(s), &s.call.name, &s.call.arguments)).collect();
            messages.push(json!({"role": "assistant", "content": steps[0].reasoning, "tool_calls": calls}));
            for s in steps {
                messages.push(
                    json!({"role": "tool", "tool_call_id": call_id(s), "content": s.observation.content}),
                );
            }
        }
        if t.end == netdojo_core::EndReason::Finished {
            let arguments = match &t.answer {
                Some(answer) => json!({"answer": answer}),
                None => json!({}),
            };
            let call = function_call("call-finish", netdojo_core::FINISH_TOOL, &arguments);
            messages.push(json!({"role": "assistant", "content": "", "tool_calls": [call]}));
        }
        let tools: Vec<Value> = t
            .tools
            .iter()
            .map(|tool| json!({"type": "function", "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters}}))
            .collect();
        let metrics: Map<String, Value> =
            r.metrics.iter().map(|m| (m.name.clone(), json!(m.value))).collect();
        let line = json!({
            "messages": messages,
            "tools": tools,
            "metadata": {
                "run": run.name,
                "task_id": r.task_id,
                "epoch": r.epoch,
                "application": r.application,
                "level": r.level,
                "label": r.label,
                "domain": r.domain,
                "agent": r.agent,
                "outcome": outcome(r),
                "class": r.class(),
                "end": r.end,
                "metrics": metrics,
            },
        });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    Ok(out)
}

/// A tool call as the chat-completions format writes it: arguments as a JSON string.
fn function_call(id: &str, name: &str, arguments: &Value) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}})
}

fn outcome(r: &EpisodeRecord) -> &'static str {
    if r.status == EpisodeStatus::Errored {
        "errored"
    } else if solved(r) {
        "solved"
    } else {
        "failed"
    }
}

/// The log's file name as inspect_ai names its own (`{timestamp}_{task}_{id}.json`): `inspect
/// view` lists a JSON log only when its name starts with the timestamp.
pub fn inspect_file_name(run: &Run) -> String {
    let created = created(run).replace(':', "-");
    format!("{created}_netdojo-{}_{}.json", word(&run.env().unwrap_or_else(|| "run".into())), word(&run.name))
}

/// A name with nothing but `[A-Za-z0-9-]` (inspect splits file names on `_`).
fn word(s: &str) -> String {
    let w: String = s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).collect();
    if w.is_empty() { "run".into() } else { w }
}

/// When the run was created: its config.json's modification time, in UTC.
fn created(run: &Run) -> String {
    modified(run, "config.json")
}

/// A file of the run's modification time, in UTC (now if it cannot be read).
fn modified(run: &Run, file: &str) -> String {
    let path: PathBuf = run.store.path().join(file);
    let secs = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default())
        .as_secs();
    rfc3339(secs)
}

/// `2026-11-26T11:00:00+00:00` for seconds since the epoch (the civil-from-days algorithm of
/// Howard Hinnant's date library).
fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}+00:00", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// The model name inspect shows: `AGENT/MODEL` for an LLM agent, `netdojo/AGENT` otherwise.
fn model_name(run: &Run) -> String {
    match run.model() {
        Some(model) => format!("{}/{model}", run.agent()),
        None => format!("netdojo/{}", run.agent()),
    }
}

/// The run as an inspect_ai eval log (JSON format, version 2).
pub fn inspect_log(run: &Run) -> Result<Value, ReportError> {
    let created = created(run);
    let model = model_name(run);
    let env = run.env().unwrap_or_else(|| "run".into());
    let completed = run.records.iter().filter(|r| r.status == EpisodeStatus::Completed).count();

    // One score per pass metric over the run: the summary's rate and 95% interval.
    let mut scores = Vec::new();
    if let Some(all) = run.summary.overall() {
        for (name, p) in &all.rates {
            scores.push(json!({
                "name": name,
                "scorer": name,
                "scored_samples": p.n,
                "unscored_samples": run.records.len() - p.n,
                "metrics": {
                    "accuracy": {"name": "accuracy", "value": p.rate},
                    "ci95_low": {"name": "ci95_low", "value": p.ci95.0},
                    "ci95_high": {"name": "ci95_high", "value": p.ci95.1},
                },
            }));
        }
    }

    let mut samples = Vec::new();
    let (mut prompt, mut completion) = (0u64, 0u64);
    for r in &run.records {
        let trajectory = run.trajectory(r).ok();
        prompt += r.tokens.prompt_tokens;
        completion += r.tokens.completion_tokens;
        samples.push(sample(r, trajectory.as_ref(), &model));
    }
    let mut model_usage = Map::new();
    if prompt + completion > 0 {
        model_usage.insert(
            model.clone(),
            json!({"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion}),
        );
    }
    let id = word(&run.name);
    // A sample is a task; with `--epochs K` each is run K times (inspect's epochs).
    let mut sample_ids: Vec<String> = run.records.iter().map(|r| r.task_id.clone()).collect();
    sample_ids.sort();
    sample_ids.dedup();
    let epochs = run.records.iter().map(|r| r.epoch + 1).max().unwrap_or(1);
    Ok(json!({
        "version": 2,
        "status": "success",
        "eval": {
            "eval_id": id,
            "run_id": id,
            "created": created,
            "task": format!("netdojo/{env}"),
            "task_id": id,
            "task_version": 0,
            "dataset": {
                "name": env,
                "samples": sample_ids.len(),
                "sample_ids": sample_ids,
            },
            "model": model,
            "config": {"epochs": epochs},
            "metadata": {"netdojo_config": run.config},
        },
        "plan": {"name": "plan", "steps": [{"solver": run.agent(), "params": {}}]},
        "results": {"total_samples": run.records.len(), "completed_samples": completed, "scores": scores},
        // The last record's write is when the run (so far) ended.
        "stats": {"started_at": created, "completed_at": modified(run, "episodes.jsonl"), "model_usage": model_usage},
        "samples": samples,
    }))
}

/// An episode as an inspect sample: the brief as the user's message, each turn as the
/// assistant's reasoning and tool calls, each observation as a tool message.
fn sample(r: &EpisodeRecord, t: Option<&Trajectory>, model: &str) -> Value {
    let mut messages = Vec::new();
    if let Some(t) = t {
        messages.push(json!({"role": "user", "content": t.brief}));
        let mut i = 0;
        while i < t.steps.len() {
            let turn = t.steps[i].turn;
            let steps: Vec<_> = t.steps[i..].iter().take_while(|s| s.turn == turn).collect();
            i += steps.len();
            let calls: Vec<Value> = steps
                .iter()
                .map(|s| {
                    let arguments = match &s.call.arguments {
                        Value::Object(_) => s.call.arguments.clone(),
                        other => json!({"value": other}),
                    };
                    json!({"id": call_id(s), "function": s.call.name, "arguments": arguments, "type": "function"})
                })
                .collect();
            messages.push(json!({"role": "assistant", "content": steps[0].reasoning, "tool_calls": calls}));
            for s in steps {
                let mut m = json!({
                    "role": "tool",
                    "content": s.observation.content,
                    "tool_call_id": call_id(s),
                    "function": s.call.name,
                });
                if !s.observation.ok {
                    m["error"] = json!({"type": "unknown", "message": s.observation.content});
                }
                messages.push(m);
            }
        }
    }
    let brief = t.map(|t| t.brief.clone()).unwrap_or_default();
    let answer = t.and_then(|t| t.answer.as_ref()).map(|a| match a {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    });

    let mut scores = Map::new();
    for m in &r.metrics {
        let value = match m.value {
            // inspect's CORRECT and INCORRECT, which its `accuracy` reads.
            MetricValue::Pass(p) => json!(if p { "C" } else { "I" }),
            MetricValue::Count(c) => json!(c),
            MetricValue::Value(v) => json!(v),
        };
        let mut score = json!({"value": value});
        if m.name == "correct"
            && let Some(outcome) = t.and_then(|t| t.outcome.as_ref())
        {
            let lines: Vec<String> = outcome
                .checks
                .iter()
                .map(|c| {
                    format!(
                        "{}: {}{}",
                        c.name,
                        if c.passed { "passed" } else { "failed" },
                        if c.detail.is_empty() { String::new() } else { format!(" ({})", c.detail) }
                    )
                })
                .collect();
            score["explanation"] = json!(lines.join("\n"));
        }
        if let Some(a) = &answer {
            score["answer"] = json!(a);
        }
        scores.insert(m.name.clone(), score);
    }

    let mut s = json!({
        "id": r.task_id,
        // inspect_ai counts epochs from 1.
        "epoch": r.epoch + 1,
        "input": brief,
        "target": "",
        "messages": messages,
        "output": {"model": model, "choices": [], "completion": answer.clone().unwrap_or_default()},
        "scores": scores,
        "metadata": {
            "application": r.application,
            "level": r.level,
            "label": r.label,
            "domain": r.domain,
            "agent": r.agent,
            "status": r.status,
            "end": r.end,
            "steps": r.steps,
            "invalid_steps": r.invalid_steps,
        },
        "total_time": r.wall_ms as f64 / 1000.0,
    });
    let tokens = r.tokens.prompt_tokens + r.tokens.completion_tokens;
    if tokens > 0 {
        s["model_usage"] = json!({model: {
            "input_tokens": r.tokens.prompt_tokens,
            "output_tokens": r.tokens.completion_tokens,
            "total_tokens": tokens,
        }});
    }
    if let Some(error) = &r.error {
        s["error"] = json!({"message": error, "traceback": "", "traceback_ansi": ""});
    }
    s
}

fn call_id(s: &netdojo_core::Step) -> String {
    if s.call.id.is_empty() { format!("call-{}", s.index) } else { s.call.id.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00+00:00");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00+00:00");
        assert_eq!(rfc3339(1_795_690_861), "2026-11-26T11:01:01+00:00");
    }
}
