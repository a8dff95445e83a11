//! What an agent meets through the runner, whose schema check comes before the environment:
//! `execute-cmd` with `dialect: "linux"` reaches the router's namespace, and its read-only check
//! holds against every way nft has of running a second command (`;`, a newline, a file).

use std::sync::Arc;

use async_trait::async_trait;
use netdojo_core::{
    Agent, AgentError, AgentFactory, AgentTurn, Budget, EpisodeStart, Observation, Runner, Task, ToolCall,
    Trajectory,
};
use netdojo_linux::preflight::{self, Need};
use netdojo_netconf::NetconfFactory;
use serde_json::json;

fn ready(what: &str) -> bool {
    preflight::ready_or_skip(what, &[Need::Root, Need::Frr])
}

/// Plays one call per turn, then finishes.
#[derive(Clone)]
struct Script(Vec<ToolCall>);

struct ScriptAgent {
    calls: Vec<ToolCall>,
    next: usize,
}

#[async_trait]
impl Agent for ScriptAgent {
    async fn start(&mut self, _episode: &EpisodeStart<'_>) -> Result<(), AgentError> {
        Ok(())
    }
    async fn step(&mut self, _feedback: &[Observation]) -> Result<AgentTurn, AgentError> {
        let call = self.calls.get(self.next).cloned().unwrap_or_else(|| ToolCall::finish(None));
        self.next += 1;
        Ok(AgentTurn { reasoning: String::new(), calls: vec![call], ..Default::default() })
    }
}

impl AgentFactory for Script {
    fn name(&self) -> &str {
        "script"
    }
    fn create(&self, _task: &Task) -> Result<Box<dyn Agent>, AgentError> {
        Ok(Box::new(ScriptAgent { calls: self.0.clone(), next: 0 }))
    }
}

fn static_route() -> Task {
    netdojo_testkit::static_task("netconf/static-route.json")
}

async fn run(calls: Vec<ToolCall>) -> Trajectory {
    let runner = Runner {
        env: Arc::new(NetconfFactory::new().expect("factory")),
        agent: Arc::new(Script(calls.clone())),
        scorers: Arc::new(vec![]),
        budget: Budget { max_steps: calls.len() + 1, ..Budget::default() },
        concurrency: 1,
        prepare_ahead: 0,
    };
    let (record, trajectory) = runner.run_episode(&static_route()).await;
    assert_eq!(record.error, None, "the episode ran");
    trajectory
}

fn linux_exec(command: &str) -> ToolCall {
    ToolCall::new("execute-cmd", json!({"device": "R1", "dialect": "linux", "command": command}))
}

/// Every spelling nft reads as a second command (its scanner ends a command at `;` and at a
/// newline, and reads a script with `-f`/`--file` in any getopt abbreviation or cluster),
/// around a `delete table` that would succeed if it ran.
const SECOND_COMMANDS: &[&str] = &[
    "nft list tables ; delete table inet t",
    "nft list tables; delete table inet t",
    "nft list tables ;delete table inet t",
    "nft list tables \\; delete table inet t",
    "nft list tables ';' delete table inet t",
    "nft 'list tables; delete table inet t'",
    "nft \"list tables ; delete table inet t\"",
    "nft list tables\ndelete table inet t",
    "nft list tables\r\ndelete table inet t",
    "nft 'list tables\ndelete table inet t'",
    "nft list tables \\\ndelete table inet t",
    "nft list table inet t ; add table inet evil",
    "nft list table inet t { } delete table inet t",
    "nft -j '{\"nftables\": [{\"delete\": {\"table\": {\"family\": \"inet\", \"name\": \"t\"}}}]}'",
    "nft -f /etc/nftables.conf",
    "nft -f nftables.conf",
    "nft --file nftables.conf",
    "nft --file=nftables.conf",
    "nft --fi nftables.conf",
    "nft -af nftables.conf",
    "nft -cf nftables.conf",
    "nft list tables -f nftables.conf",
    "nft -f - list tables",
    "nft -i",
    "nft delete table inet t",
    "nft -a delete table inet t",
    "nft flush ruleset",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_cmd_with_dialect_linux_reads_nft_and_runs_no_second_command() {
    if !ready("execute-cmd linux through the runner") {
        return;
    }
    let mut calls = vec![
        ToolCall::new(
            "update-cfg",
            json!({"device": "R1", "dialect": "linux", "commands": ["nft add table inet t", "nft add chain inet t c"]}),
        ),
        linux_exec("nft list ruleset"),
    ];
    // The ground truth, so that the evaluation passes at once rather than waiting out convergence.
    calls.push(ToolCall::new(
        "update-cfg",
        json!({"device": "R1", "commands": ["ip route 2.2.2.2/32 10.0.12.2"]}),
    ));
    calls.extend(SECOND_COMMANDS.iter().map(|c| linux_exec(c)));
    calls.push(linux_exec("nft list ruleset"));
    let trajectory = run(calls).await;

    let steps = &trajectory.steps;
    assert_eq!(steps.len(), SECOND_COMMANDS.len() + 4, "every call was a step");
    assert!(steps[0].observation.ok, "{}", steps[0].observation.content);
    let before = &steps[1];
    assert!(!before.invalid, "the schema takes dialect linux: {}", before.observation.content);
    assert!(before.observation.ok, "{}", before.observation.content);
    assert!(before.observation.content.contains("table inet t"), "{}", before.observation.content);

    for (line, step) in SECOND_COMMANDS.iter().zip(&steps[3..]) {
        let obs = &step.observation;
        assert!(!step.invalid, "{line:?} reached the environment: {}", obs.content);
        assert!(!obs.ok && obs.content.contains("refused"), "{line:?} was not refused: {}", obs.content);
    }
    let after = &steps[steps.len() - 1];
    assert_eq!(
        after.observation.content, before.observation.content,
        "no refused command changed the ruleset"
    );
}
