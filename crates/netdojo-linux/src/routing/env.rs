//! The routing environment: one live network per episode, the agent's `exec` tool, the
//! pingmesh after every command, pair-by-pair safety and full-reachability correctness.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use netdojo_core::{
    Check, EnvError, Environment, EnvironmentFactory, Observation, Outcome, StateCheck, Task, ToolCall,
    ToolSpec,
};

use super::layout::ROUTER;
use super::tasks::{APPLICATION, injections, layout_of};
use crate::exec::{self, Policy};
use crate::netns;
use crate::network::Network;
use crate::pingmesh::{self, Matrix};
use crate::preflight::Need;

const ENV: &str = APPLICATION;
pub const EXEC_TOOL: &str = "exec";

/// Settings shared by every episode.
#[derive(Debug, Clone, Default)]
pub struct RoutingOptions {
    pub mesh: pingmesh::Options,
    pub exec: Policy,
}

/// Builds one network per episode. Creating the factory sweeps the namespaces left by
/// netdojo runs that were killed.
#[derive(Debug)]
pub struct RoutingFactory {
    options: RoutingOptions,
    swept: netns::Swept,
}

impl RoutingFactory {
    pub fn new(options: RoutingOptions) -> Result<Self, EnvError> {
        if !Need::Root.met() {
            return Err(EnvError::Unsupported {
                env: ENV.into(),
                what: "running without root".into(),
                why: "every episode builds network namespaces, which needs root (CAP_SYS_ADMIN)".into(),
            });
        }
        let swept = netns::sweep()
            .map_err(|e| EnvError::setup(ENV, "sweeping namespaces left by earlier runs").with_source(e))?;
        Ok(Self { options, swept })
    }

    /// What the start-up sweep removed.
    pub fn swept(&self) -> &netns::Swept {
        &self.swept
    }
}

#[async_trait]
impl EnvironmentFactory for RoutingFactory {
    fn name(&self) -> &str {
        ENV
    }

    fn config(&self) -> Value {
        json!({
            "pingmesh": {"deadline_ms": self.options.mesh.deadline.as_millis() as u64},
            "exec": {"timeout_ms": self.options.exec.timeout.as_millis() as u64, "output_cap": self.options.exec.output_cap},
        })
    }

    async fn create(&self, _task: &Task) -> Result<Box<dyn Environment>, EnvError> {
        Ok(Box::new(RoutingEnv::new(self.options.clone())))
    }
}

/// One episode's network.
#[derive(Debug)]
pub struct RoutingEnv {
    options: RoutingOptions,
    /// Shared so that a front end (netdojo-mcp) can reach the nodes while the episode lives.
    net: Option<Arc<Network>>,
    /// The pingmesh after the latest step, and before it.
    current: Option<Matrix>,
    previous: Option<Matrix>,
    /// A step since the last check changed the network (a command that writes ran).
    changed: bool,
    task_id: String,
}

impl RoutingEnv {
    /// An episode's environment, before its reset (an [`EnvironmentFactory`] makes these; a
    /// front end that wraps the environment makes its own).
    pub fn new(options: RoutingOptions) -> Self {
        Self { options, net: None, current: None, previous: None, changed: false, task_id: String::new() }
    }

    /// The live network, while the episode lives: for a front end that acts on its nodes
    /// (netdojo-mcp's Linux devices) instead of through [`EXEC_TOOL`].
    pub fn network(&self) -> Option<std::sync::Weak<Network>> {
        self.net.as_ref().map(Arc::downgrade)
    }

    /// The settings of the agent's commands (the sandbox's time limit and output cap).
    pub fn options(&self) -> &RoutingOptions {
        &self.options
    }

    /// After a step that a front end ran on the nodes itself: takes the pingmesh the state
    /// check compares with the one before, exactly as [`EXEC_TOOL`] does after its command,
    /// and returns it. `changed`: the step changed the network (a write that ran), which the
    /// check judges productive or not (§C.4).
    pub async fn observe_step(&mut self, changed: bool) -> Result<Matrix, EnvError> {
        let mesh = self.mesh().await?;
        self.previous = self.current.replace(mesh.clone());
        self.changed |= changed;
        Ok(mesh)
    }

    /// The latest pingall, rendered.
    pub fn pingall(&self) -> Option<String> {
        self.current.as_ref().map(Matrix::render)
    }

    fn task_err(&self, message: String) -> EnvError {
        EnvError::task(ENV, self.task_id.clone(), message)
    }

    fn net(&self) -> Result<&Network, EnvError> {
        self.net.as_deref().ok_or_else(|| EnvError::runtime(ENV, "no network: reset first"))
    }

    /// The pingmesh once the kernel has caught up with the latest link changes.
    async fn mesh(&self) -> Result<Matrix, EnvError> {
        let net = self.net()?;
        let pending = net
            .settle(std::time::Duration::from_secs(3))
            .await
            .map_err(|e| EnvError::runtime(ENV, "waiting for the links to settle").with_source(e))?;
        if !pending.is_empty() {
            tracing::warn!("task {}: links still settling after 3 s: {}", self.task_id, pending.join(", "));
        }
        Ok(net.pingmesh(&self.options.mesh).await)
    }

    fn machines(&self) -> Vec<String> {
        self.net
            .as_ref()
            .map(|n| n.topology().nodes().map(|(name, _)| name.to_string()).collect())
            .unwrap_or_default()
    }
}

/// Command lines of the kinds a repair is made of, for the tool's schema (JSON Schema
/// `examples`): what the agent may type, with names of its own network in place of these.
const COMMAND_EXAMPLES: [&str; 8] = [
    "ip addr show",
    "ip route show",
    "ip link set dev r0-eth1 up",
    "ip addr add 10.0.1.1/24 dev r0-eth1",
    "ip route add 10.0.2.0/24 dev r0-eth2",
    "sysctl -w net.ipv4.ip_forward=1",
    "iptables -L -n",
    "iptables -D INPUT 1",
];

fn brief(machines: &[String], mesh: &Matrix) -> String {
    format!(
        "You need to behave like a network engineer who finds the root cause of network issues \
         and fixes them in a routing application.\n\n\
         There is a network with problems in the router {ROUTER}, causing the network to be \
         partially disconnected. Some nodes cannot successfully ping other nodes. Your task is \
         to fix these issues so that the pingall result shows all connections are successful.\n\n\
         I recommend using diagnostic commands to gather information about the router and \
         network to identify the cause of the problem. Once you have sufficient information and \
         understand the root cause, provide commands to fix the issue.\n\n\
         When implementing your solution, be careful not to disrupt existing connected edges - \
         your commands should not cause previously working connections to break.\n\n\
         Run one command at a time with the `{EXEC_TOOL}` tool (`machine`, `command`); after \
         each command you get its output and the latest pingall. Every command counts against \
         your step budget, so diagnose before you change anything. Machines: {}.\n\
         Important notes:\n\
         - Commands run without a shell: no pipes, redirections or `;`.\n\
         - Do not include sudo in your commands.\n\
         - You are not permitted to use the vtysh command.\n\
         - Do not use ping commands as the ping results are already provided to you.\n\
         - Call `finish` when the network is repaired.\n\n\
         Latest pingall:\n{}",
        machines.join(", "),
        mesh.render()
    )
}

#[async_trait]
impl Environment for RoutingEnv {
    fn tools(&self) -> Vec<ToolSpec> {
        // Once reset, `machine` lists the network's nodes: a model reads them in the schema,
        // and the random baseline names real ones.
        vec![
            ToolSpec::new(
                EXEC_TOOL,
                "Run one command (ip, ifconfig, route, iptables, iptables-save, nft, sysctl, tc, arp, \
             ethtool, bridge, ss, netstat) on one machine of the network, without a shell. \
             Answers with the command's output and the latest pingall.",
                json!({
                    "type": "object",
                    "properties": {
                        "machine": {"type": "string", "description": "The node to run on, e.g. r0 or h1."},
                        "command": {
                            "type": "string",
                            "description": "The command line, e.g. `ip route`.",
                            "examples": COMMAND_EXAMPLES,
                        }
                    },
                    "required": ["machine", "command"],
                    "additionalProperties": false
                }),
            )
            .with_choices("machine", &self.machines()),
        ]
    }

    async fn reset(&mut self, task: &Task) -> Result<String, EnvError> {
        self.task_id = task.id.clone();
        let layout = layout_of(task).map_err(|e| self.task_err(e.to_string()))?;
        let faults = injections(task).map_err(|e| self.task_err(e.to_string()))?;
        let (net, _) = Network::build(layout.topology())
            .await
            .map_err(|e| EnvError::setup(ENV, "building the network").with_source(e))?;
        self.net = Some(Arc::new(net));
        let healthy = self.mesh().await?;
        if !healthy.full() {
            return Err(EnvError::setup(
                ENV,
                format!("the healthy network is not fully reachable before any fault:\n{}", healthy.render()),
            ));
        }
        let router = self
            .net()?
            .ns_name(ROUTER)
            .map(str::to_string)
            .ok_or_else(|| self.task_err("no router r0".into()))?;
        for (fault, commands) in &faults {
            for command in commands {
                let output = exec::run_line(&router, command, &self.options.exec)
                    .await
                    .map_err(|e| {
                        EnvError::runtime(ENV, format!("fault {fault}: running `{command}`")).with_source(e)
                    })?
                    .map_err(|refusal| self.task_err(format!("fault {fault}: {refusal} (in `{command}`)")))?;
                if output.status != Some(0) {
                    return Err(
                        self.task_err(format!("fault {fault}: `{command}` failed: {}", output.text.trim()))
                    );
                }
            }
        }
        let faulty = self.mesh().await?;
        if faulty.full() {
            let names: Vec<&str> = faults.iter().map(|(f, _)| f.as_str()).collect();
            return Err(self.task_err(format!("the faults {} broke no connection", names.join(" + "))));
        }
        let text = brief(&self.machines(), &faulty);
        self.current = Some(faulty);
        self.previous = None;
        Ok(text)
    }

    async fn execute(&mut self, call: &ToolCall) -> Result<Observation, EnvError> {
        let refuse = |message: String| Observation::error(call, message);
        if call.name != EXEC_TOOL {
            return Ok(refuse(format!("unknown tool `{}`; use `{EXEC_TOOL}` or `finish`", call.name)));
        }
        let machine = call.arguments.get("machine").and_then(Value::as_str).unwrap_or_default();
        let line = call.arguments.get("command").and_then(Value::as_str).unwrap_or_default();
        let Some(ns) = self.net()?.ns_name(machine).map(str::to_string) else {
            return Ok(refuse(format!(
                "unknown machine `{machine}`; machines: {}",
                self.machines().join(", ")
            )));
        };
        let command = match exec::parse(line) {
            Ok(c) => c,
            // Refused before it reaches the machine: nothing changed, so no new pingmesh.
            // The refusal's text already reads `refused: ...`.
            Err(refusal) => return Ok(refuse(refusal.to_string())),
        };
        let output = exec::run(&ns, &command, &self.options.exec)
            .await
            .map_err(|e| EnvError::runtime(ENV, "running the agent's command").with_source(e))?;
        // A write that ran (exit 0) changed the network, for the check's §C.4 judgement.
        let wrote = exec::read_only(&command).is_err() && output.status == Some(0) && !output.timed_out;
        let mesh = self.observe_step(wrote).await?;
        let status = match (output.timed_out, output.status) {
            (true, _) => format!("timed out after {:?}", self.options.exec.timeout),
            (false, Some(code)) => format!("exit status {code}"),
            (false, None) => "killed by a signal".to_string(),
        };
        let content = format!(
            "{machine}$ {line}\n{}\n[{status}]\n\nLatest pingall:\n{}",
            output.text.trim_end(),
            mesh.render()
        );
        let data = json!({"exit_status": output.status, "timed_out": output.timed_out, "truncated": output.truncated, "received": mesh.received(), "sent": mesh.sent()});
        let mut observation = Observation::ok(call, content, Some(data));
        observation.ok = output.status == Some(0) && !output.timed_out;
        Ok(observation)
    }

    async fn check(&mut self) -> Result<StateCheck, EnvError> {
        let Some(current) = &self.current else { return Ok(StateCheck::safe()) };
        let broken = match &self.previous {
            Some(before) => current.newly_broken(before),
            None => Vec::new(),
        };
        let violations: Vec<String> = broken
            .iter()
            .map(|(a, b)| format!("{a} -> {b} was reachable before this step and is not after it"))
            .collect();
        let unreachable: Vec<String> = current
            .pairs()
            .filter(|&(_, _, ok)| !ok)
            .map(|(i, j, _)| format!("{}->{}", current.nodes[i], current.nodes[j]))
            .collect();
        let mut check = StateCheck::from_violations(violations);
        // The nodes too, so that a reader (the HTML report) can draw the whole matrix and
        // outline the pairs a step changed.
        check.summary = Some(json!({
            "nodes": current.nodes,
            "received": current.received(),
            "sent": current.sent(),
            "unreachable": unreachable,
        }));
        // §C.4: a change after which no more pairs answer than before it.
        check.unproductive = std::mem::take(&mut self.changed)
            && self.previous.as_ref().is_some_and(|p| current.received() <= p.received());
        // A check compares one step with the one before: the next check starts from here.
        self.previous = Some(current.clone());
        Ok(check)
    }

    async fn evaluate(&mut self, _task: &Task, _answer: Option<&Value>) -> Result<Outcome, EnvError> {
        let mesh = self.mesh().await?;
        let last = mesh.render().lines().last().unwrap_or_default().to_string();
        Ok(Outcome {
            checks: vec![Check::new("pingall", mesh.full(), last)],
            export: json!({"pingall": mesh.render(), "matrix": mesh}),
        })
    }

    async fn close(&mut self) -> Result<(), EnvError> {
        if let Some(net) = self.net.take() {
            // A front end's call in flight holds the network a moment longer; it is torn down
            // when that call lets go (Network's Drop).
            if let Ok(mut net) = Arc::try_unwrap(net) {
                net.teardown();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_brief_and_the_tool_read_as_the_agent_sees_them() {
        let nodes: Vec<String> = ["h1", "h2", "h3", "h4", "r0"].iter().map(|s| s.to_string()).collect();
        // Subnet 2 (h3, h4) cut off from the rest.
        let cut = |i: usize, j: usize| (i < 2 || i == 4) != (j < 2 || j == 4);
        let reach = (0..5).map(|i| (0..5).map(|j| i != j && !cut(i, j)).collect()).collect();
        let mesh = Matrix { nodes: nodes.clone(), reach };
        let machines: Vec<String> =
            ["h1", "h2", "h3", "h4", "r0", "s1", "s2"].iter().map(|s| s.to_string()).collect();
        insta::assert_snapshot!(brief(&machines, &mesh));
        let env = RoutingEnv::new(RoutingOptions::default());
        insta::assert_json_snapshot!(env.tools());
    }
}
