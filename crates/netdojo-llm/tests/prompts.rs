//! The prompts as a model reads them, for each environment and strategy, under insta: the
//! system prompt (strategy, tool protocol, few-shot examples) and the brief that follows it.
//! dcgraph's brief and tools come from the crate itself; routing's from the routing crate's
//! own reviewed snapshots (the live ones need root); netconf's from a fixture (see its
//! `source`). Few-shot examples come from each environment's generator with another seed.

use std::sync::Arc;

use netdojo_core::{Environment, Task, TaskGenerator, ToolSpec};
use netdojo_dcgraph::{DcGraphEnv, FabricParams, GraphSource, QueryGenerator, answer_schema_for, brief};
use netdojo_linux::routing::RoutingGenerator;
use netdojo_llm::lookup::{default_dialect, lookup_tool};
use netdojo_llm::{LookupHint, Strategy, ToolMode, examples_for, render_examples, system_prompt};
use netdojo_netconf::NetconfGenerator;
use serde_json::Value;

const EVAL_SEED: u64 = 7;
const SHOTS_SEED: u64 = 1007;

struct Case {
    env: &'static str,
    task: Task,
    brief: String,
    tools: Vec<ToolSpec>,
    pool: Vec<Task>,
}

fn pool(g: &dyn TaskGenerator, n: u64) -> Vec<Task> {
    (0..n).map(|i| g.generate(SHOTS_SEED, i).expect("example task")).collect()
}

fn dcgraph() -> Case {
    let source = GraphSource::Generated(FabricParams::default());
    let graph = Arc::new(source.load().expect("graph"));
    let generator = QueryGenerator::new(graph.clone(), source);
    let task = generator.generate(EVAL_SEED, 9).expect("task");
    let mut tools = DcGraphEnv::new(graph.clone()).tools();
    tools.push(ToolSpec::finish(answer_schema_for(&task.label)));
    Case { env: "dcgraph", brief: brief(&graph, &task), tools, pool: pool(&generator, 24), task }
}

/// The body of an insta snapshot file (after its second `---` line).
fn snapshot_body(path: &str) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut parts = text.splitn(3, "---\n");
    parts.nth(2).unwrap_or_else(|| panic!("{path}: not an insta snapshot")).to_string()
}

fn routing() -> Case {
    let dir = "../netdojo-linux/src/routing/snapshots";
    let stem = "netdojo_linux__routing__env__tests__the_brief_and_the_tool_read_as_the_agent_sees_them";
    let brief = snapshot_body(&format!("{dir}/{stem}.snap"));
    let tools: Vec<ToolSpec> =
        serde_json::from_str(&snapshot_body(&format!("{dir}/{stem}-2.snap"))).expect("routing tools");
    let mut tools = tools;
    tools.push(ToolSpec::finish(None));
    let task = RoutingGenerator.generate(EVAL_SEED, 0).expect("task");
    Case {
        env: "routing",
        brief: brief.trim_end().to_string(),
        tools,
        pool: pool(&RoutingGenerator, 12),
        task,
    }
}

fn netconf() -> Case {
    let text = std::fs::read_to_string("tests/data/netconf-static-route.json").expect("fixture");
    let fixture: Value = serde_json::from_str(&text).expect("fixture JSON");
    // The environment's own tools: a prompt snapshot follows their schema as it changes.
    let mut tools = netdojo_core::Environment::tools(&netdojo_netconf::NetconfEnv::default());
    tools.push(ToolSpec::finish(None));
    let brief = fixture["brief"].as_str().expect("brief").to_string();
    let task = NetconfGenerator.generate(EVAL_SEED, 0).expect("task");
    Case { env: "netconf", brief, tools, pool: pool(&NetconfGenerator, 6), task }
}

#[test]
fn the_prompts_of_each_environment_and_strategy() {
    for case in [dcgraph(), routing(), netconf()] {
        for strategy in Strategy::ALL {
            // Text mode lists the tools in the prompt; native mode sends them beside it.
            let modes: &[ToolMode] = if strategy == Strategy::React {
                &[ToolMode::Native, ToolMode::Text]
            } else {
                &[ToolMode::Native]
            };
            for &mode in modes {
                let examples = if strategy == Strategy::FewShot {
                    let picked = examples_for(&case.task, &case.pool, 3);
                    assert_eq!(picked.len(), 3, "{}: three examples", case.env);
                    assert!(picked.iter().all(|t| t.id != case.task.id
                        && (&t.query, &t.setup) != (&case.task.query, &case.task.setup)));
                    render_examples(&picked)
                } else {
                    String::new()
                };
                let system = system_prompt(strategy, mode, &case.tools, 10, &examples, None);
                assert!(!system.contains("{{"), "{} {strategy} {mode}: a placeholder is left", case.env);
                let name = format!("{}-{strategy}-{mode}", case.env);
                insta::assert_snapshot!(name, format!("=== system\n{system}\n=== user\n{}\n", case.brief));
            }
        }
    }
}

/// With `lookup-command` on: the tool is offered beside the environment's (before `finish`)
/// and the prompt says how to use it, for each strategy; netconf's routers default to `frr`,
/// routing's hosts to `linux` (text mode shows the tool in the list).
#[test]
fn the_prompts_with_lookup_command() {
    let dialects = vec!["frr".to_string(), "linux".to_string()];
    for case in [netconf(), routing()] {
        let default = default_dialect(&case.task.application, &case.tools, &dialects).expect("a dialect");
        assert_eq!(default, if case.env == "netconf" { "frr" } else { "linux" });
        let mut tools = case.tools.clone();
        tools.insert(tools.len() - 1, lookup_tool(&dialects, &default));
        let hint = LookupHint { dialects: &dialects, default: &default, max_lookups: 5 };
        let cases: Vec<(Strategy, ToolMode)> = if case.env == "netconf" {
            Strategy::ALL.iter().map(|s| (*s, ToolMode::Native)).collect()
        } else {
            vec![(Strategy::React, ToolMode::Text)]
        };
        for (strategy, mode) in cases {
            let examples = if strategy == Strategy::FewShot {
                render_examples(&examples_for(&case.task, &case.pool, 3))
            } else {
                String::new()
            };
            let system = system_prompt(strategy, mode, &tools, 10, &examples, Some(hint));
            assert!(!system.contains("{{"), "{} {strategy} {mode}: a placeholder is left", case.env);
            assert!(system.contains("`lookup-command`"), "{system}");
            let name = format!("{}-{strategy}-{mode}-lookup", case.env);
            insta::assert_snapshot!(name, format!("=== system\n{system}\n"));
        }
        insta::assert_json_snapshot!(format!("{}-lookup-tool", case.env), tools[tools.len() - 2]);
    }
}

#[test]
fn few_shot_examples_prefer_the_tasks_label_and_never_show_the_task() {
    let case = dcgraph();
    let mut pool = case.pool.clone();
    pool.push(case.task.clone());
    let picked = examples_for(&case.task, &pool, 3);
    assert!(picked.iter().all(|t| t.id != case.task.id));
    let same = pool.iter().filter(|t| t.label == case.task.label && t.id != case.task.id).count();
    let same_picked = picked.iter().filter(|t| t.label == case.task.label).count();
    assert_eq!(same_picked, same.min(3), "same-label examples come first");
}
