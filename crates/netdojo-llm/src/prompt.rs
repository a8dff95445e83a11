//! Prompt templates and the strategies that pick them. The templates are files under
//! `prompts/`, compiled in; `{{name}}` marks a value filled at render time.

use std::fmt;
use std::str::FromStr;

use netdojo_core::{Task, ToolCall, ToolSpec};
use serde::{Deserialize, Serialize};

const SYSTEM: &str = include_str!("../prompts/system.md");
const SINGLE_TURN: &str = include_str!("../prompts/strategy/single-turn.md");
const COT: &str = include_str!("../prompts/strategy/cot.md");
const FEW_SHOT: &str = include_str!("../prompts/strategy/few-shot.md");
const REACT: &str = include_str!("../prompts/strategy/react.md");
const NATIVE: &str = include_str!("../prompts/protocol/native.md");
const TEXT: &str = include_str!("../prompts/protocol/text.md");
const CODE: &str = include_str!("../prompts/protocol/code.md");
const EXAMPLE: &str = include_str!("../prompts/example.md");
const LOOKUP: &str = include_str!("../prompts/lookup.md");
pub(crate) const RESULTS: &str = include_str!("../prompts/results.md");

/// How the agent is prompted and how it turns (seed 001 §3.1 item 3, seed 003 §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// One reply: reasoning and the whole batch of calls; no feedback is seen.
    SingleTurn,
    /// Chain-of-thought: reasoning before each turn's calls, with feedback after each turn.
    Cot,
    /// Chain-of-thought with solved examples drawn from the task source (another seed).
    FewShot,
    /// ReAct: a thought and exactly one action per turn, then its observation.
    React,
}

impl Strategy {
    pub const ALL: [Strategy; 4] = [Strategy::SingleTurn, Strategy::Cot, Strategy::FewShot, Strategy::React];

    pub fn name(self) -> &'static str {
        match self {
            Strategy::SingleTurn => "single-turn",
            Strategy::Cot => "cot",
            Strategy::FewShot => "few-shot",
            Strategy::React => "react",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Strategy::ALL.into_iter().find(|x| x.name() == s).ok_or_else(|| {
            format!("unknown strategy `{s}` (known: {})", Strategy::ALL.map(Strategy::name).join(", "))
        })
    }
}

/// How tools reach the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolMode {
    /// The server's own tool calling (OpenAI `tools`, Ollama `tools`).
    Native,
    /// Tools described in the prompt; the model answers JSON in its text (as NetPress asks).
    Text,
    /// NetPress's capacity-planning protocol (seed 003 §B.3): the model answers with a
    /// ```python block; the code becomes one call of the environment's only tool (`run_code`),
    /// then `finish`. One reply per episode, whatever the strategy.
    Code,
}

impl ToolMode {
    pub fn name(self) -> &'static str {
        match self {
            ToolMode::Native => "native",
            ToolMode::Text => "text",
            ToolMode::Code => "code",
        }
    }
}

impl fmt::Display for ToolMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ToolMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "native" => Ok(ToolMode::Native),
            "text" => Ok(ToolMode::Text),
            "code" => Ok(ToolMode::Code),
            other => Err(format!("unknown tool mode `{other}` (known: native, text, code)")),
        }
    }
}

/// Fills the `{{name}}` placeholders of a template in one pass, so a value that itself holds
/// `{{...}}` (an observation, a tool description) is never expanded. A placeholder without a
/// value is left as it is; the template tests check that none is left.
fn render(template: &str, values: &[(&str, &str)]) -> String {
    let template = template.trim_end();
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}").and_then(|end| {
            let name = &after[..end];
            values.iter().find(|(n, _)| *n == name).map(|(_, v)| (end, *v))
        }) {
            Some((end, value)) => {
                out.push_str(value);
                rest = &after[end + 2..];
            }
            None => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// What the prompt says about the `lookup-command` tool when the agent offers it.
#[derive(Debug, Clone, Copy)]
pub struct LookupHint<'a> {
    pub dialects: &'a [String],
    pub default: &'a str,
    pub max_lookups: usize,
}

/// The system prompt of an episode. `tools` are those the model is offered (`lookup-command`
/// included when `lookup` is given).
pub fn system_prompt(
    strategy: Strategy,
    mode: ToolMode,
    tools: &[ToolSpec],
    max_steps: usize,
    examples: &str,
    lookup: Option<LookupHint<'_>>,
) -> String {
    if mode == ToolMode::Code {
        // The environment's brief is the paper's whole prompt; only its chain-of-thought line
        // depends on the strategy (few-shot examples are tool calls, refused in this mode).
        let cot = match strategy {
            Strategy::Cot | Strategy::FewShot => " Please think step by step and provide your output.",
            Strategy::SingleTurn | Strategy::React => "",
        };
        return render(CODE, &[("strategy", cot)]) + "\n";
    }
    let strategy_text = match strategy {
        Strategy::SingleTurn => render(SINGLE_TURN, &[]),
        Strategy::Cot => render(COT, &[]),
        Strategy::FewShot => {
            format!("{}\n\n{}", render(COT, &[]), render(FEW_SHOT, &[("examples", examples.trim_end())]))
        }
        Strategy::React => render(REACT, &[]),
    };
    let protocol = match mode {
        ToolMode::Native => render(NATIVE, &[]),
        ToolMode::Text => {
            let rule = match strategy {
                Strategy::SingleTurn => "`calls` holds every call, in order, ending with the `finish` call.",
                Strategy::React => "`calls` holds exactly one call.",
                Strategy::Cot | Strategy::FewShot => {
                    "`calls` holds the calls to make now, in order; you get their results in the next message."
                }
            };
            render(TEXT, &[("calls_rule", rule), ("tools", &tool_list(tools))])
        }
        ToolMode::Code => String::new(),
    };
    let protocol = match lookup {
        None => protocol,
        Some(hint) => format!("{protocol}\n\n{}", lookup_text(strategy, hint)),
    };
    render(
        SYSTEM,
        &[("strategy", &strategy_text), ("protocol", &protocol), ("max_steps", &max_steps.to_string())],
    ) + "\n"
}

fn lookup_text(strategy: Strategy, hint: LookupHint<'_>) -> String {
    let rule = match strategy {
        Strategy::SingleTurn => {
            "Make your lookups alone in a reply, before your batch: their answers come back to you, then you give the whole batch."
        }
        Strategy::React => "A lookup is an Action like any other: one per reply.",
        Strategy::Cot | Strategy::FewShot => "Its answer comes back with the results of your other calls.",
    };
    let example = match hint.default {
        "linux" => "ip route add",
        _ => "ip route",
    };
    let dialects = hint.dialects.iter().map(|d| format!("`{d}`")).collect::<Vec<_>>().join(", ");
    render(
        LOOKUP,
        &[
            ("example", example),
            ("dialects", &dialects),
            ("default", hint.default),
            ("max_lookups", &hint.max_lookups.to_string()),
            ("rule", rule),
        ],
    )
}

/// The tools as the text protocol shows them: one line of name and description, one of schema.
fn tool_list(tools: &[ToolSpec]) -> String {
    tools
        .iter()
        .map(|t| format!("- {}: {}\n  arguments: {}", t.name, t.description, t.parameters))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Picks up to `k` few-shot examples for `task` from `pool`: never the task itself (same id, or
/// the same query on the same setup: a reactive task's query is often one fixed symptom, so
/// the query alone does not tell tasks apart), tasks of the same label first, then the others
/// in pool order.
pub fn examples_for<'a>(task: &Task, pool: &'a [Task], k: usize) -> Vec<&'a Task> {
    let usable = pool.iter().filter(|t| t.id != task.id && !(t.query == task.query && t.setup == task.setup));
    let same = usable.clone().filter(|t| t.label == task.label);
    let other = usable.filter(|t| t.label != task.label);
    same.chain(other).take(k).collect()
}

/// The examples as the few-shot prompt shows them: each task's request and the calls that
/// complete it (its ground truth, as the oracle plays it).
pub fn render_examples(examples: &[&Task]) -> String {
    examples
        .iter()
        .enumerate()
        .map(|(i, task)| {
            let calls = netdojo_scripted::oracle_plan(task)
                .iter()
                .map(|c: &ToolCall| format!("- {} {}", c.name, c.arguments))
                .collect::<Vec<_>>()
                .join("\n");
            render(EXAMPLE, &[("n", &(i + 1).to_string()), ("query", task.query.trim()), ("calls", &calls)])
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

pub(crate) fn render_results(results: &str) -> String {
    render(RESULTS, &[("results", results)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_fills_once_and_leaves_values_alone() {
        assert_eq!(render("a {{x}} b {{y}}", &[("x", "{{y}}"), ("y", "2")]), "a {{y}} b 2");
        assert_eq!(render("{{unknown}} {{", &[]), "{{unknown}} {{");
    }

    #[test]
    fn every_template_is_filled() {
        let tools = [ToolSpec::finish(None)];
        for strategy in Strategy::ALL {
            for mode in [ToolMode::Native, ToolMode::Text] {
                let p = system_prompt(strategy, mode, &tools, 7, "Example 1", None);
                assert!(!p.contains("{{"), "{strategy} {mode}: {p}");
                assert!(p.contains("at most 7 tool calls"), "{p}");
                assert!(!p.contains("lookup-command"), "{p}");
                let dialects = ["frr".to_string(), "linux".to_string()];
                let hint = LookupHint { dialects: &dialects, default: "frr", max_lookups: 4 };
                let p = system_prompt(strategy, mode, &tools, 7, "Example 1", Some(hint));
                assert!(!p.contains("{{"), "{strategy} {mode}: {p}");
                assert!(p.contains("at most 4 lookups") && p.contains("default `frr`"), "{p}");
            }
        }
        assert!(!render_results("x").contains("{{"));
        for strategy in Strategy::ALL {
            let p = system_prompt(strategy, ToolMode::Code, &tools, 7, "", None);
            assert!(!p.contains("{{") && p.contains("```python"), "{strategy}: {p}");
            assert_eq!(p.contains("step by step"), matches!(strategy, Strategy::Cot | Strategy::FewShot));
        }
    }

    #[test]
    fn names_parse_back() {
        for s in Strategy::ALL {
            assert_eq!(s.name().parse::<Strategy>(), Ok(s));
        }
        assert!(
            "tot".parse::<Strategy>().expect_err("unknown").contains("single-turn, cot, few-shot, react")
        );
        assert_eq!("text".parse::<ToolMode>(), Ok(ToolMode::Text));
        assert_eq!("code".parse::<ToolMode>(), Ok(ToolMode::Code));
    }
}
