//! `cargo xtask mcp serve`: a NetConfBench task's routers (or, with `--env routing`, a routing
//! task's Linux nodes; with `--env gns3`, a GNS3 project's consoles) behind MCP, scored like `eval` scores that environment (the same
//! scorers, the reasoning score included for netconf).
//! `cargo xtask mcp serve-agent`: a netdojo agent behind MCP (the `netdojo.agent` protocol),
//! for `eval --agent mcp` here or elsewhere.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use netdojo::mcp::auth::Tokens;
use netdojo::mcp::serve::{
    ServeOptions, default_budget, default_out, default_suite, load_task, routing_task, serve, summary,
};
use netdojo::mcp::transport::AllowedOrigin;
use netdojo::mcp::{Role, Settings};
use tokio_util::sync::CancellationToken;

use crate::apps::{self, EnvOptions};

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Serve one task until the client calls `done` (or closes stdio, or Ctrl-C).
    Serve(ServeArgs),
    /// Serve an agent over the `netdojo.agent` protocol (stdio, or HTTP on 127.0.0.1), for
    /// `eval --agent mcp`.
    ServeAgent(ServeAgentArgs),
}

#[derive(Debug, Args)]
pub struct ServeAgentArgs {
    /// The agent: oracle, noop, random.
    #[arg(long)]
    agent: String,
    /// The suite whose tasks' ground truth the agent may read (the oracle needs it; the task
    /// an episode starts with carries none).
    #[arg(long)]
    suite: Option<PathBuf>,
    /// Streamable HTTP on http://127.0.0.1:PORT/mcp (0: any free port) instead of stdio.
    #[arg(long)]
    http: Option<u16>,
    /// random: its seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// random: calls per episode before it finishes.
    #[arg(long, default_value_t = 5)]
    random_steps: usize,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The task's id (NetConfBench, on FRR or with --env gns3 on GNS3; or with --env routing,
    /// see --seed / --index).
    #[arg(long, required_unless_present = "env")]
    task: Option<String>,
    /// `routing`: a task of the routing application (its router, hosts and switches as Linux
    /// devices), drawn like `eval --env routing --seed S` draws task N. `gns3`: a NetConfBench
    /// task on a GNS3 server, each node with a console a device.
    #[arg(long, value_parser = ["routing", "netconf", "gns3"])]
    env: Option<String>,
    /// --env gns3: the GNS3 controller, `http://127.0.0.1:3080` (default: $NETDOJO_GNS3_URL).
    #[arg(long)]
    gns3_url: Option<String>,
    /// --env gns3: a node mapping file (`{"R1": {"template": "c7200", "dialect": "ios"}}`).
    #[arg(long)]
    gns3_nodes: Option<PathBuf>,
    /// --env routing: the generator's seed and the task's index.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[arg(long, default_value_t = 0)]
    index: u64,
    /// The suite holding it (a directory, a .json or a .jsonl; default testdata/netconf, or
    /// testdata/gns3 with --env gns3).
    #[arg(long)]
    suite: Option<PathBuf>,
    /// Streamable HTTP on 127.0.0.1:PORT (0: any free port): /mcp for the network, /mcp/DEVICE
    /// for each device.
    #[arg(long, conflicts_with = "stdio")]
    http: Option<u16>,
    /// stdio (the default).
    #[arg(long)]
    stdio: bool,
    /// stdio: one device's server instead of the whole network's.
    #[arg(long, requires = "stdio")]
    device: Option<String>,
    /// operator, or read-only (reads only; changes refused with -32083).
    #[arg(long, default_value = "operator")]
    role: Role,
    /// rollbackTimeout in seconds: the longest a confirmed commit waits for its confirmation.
    #[arg(long, default_value_t = 300.0)]
    rollback_timeout: f64,
    /// Tool calls the client may make.
    #[arg(long, default_value_t = 200)]
    max_steps: usize,
    /// HTTP: a token file (YAML/JSON, token: role, mode 600); each client's bearer token
    /// gives its role, a request without a known token gets 401. --role is then stdio's only.
    #[arg(long, requires = "http")]
    tokens: Option<PathBuf>,
    /// HTTP: a browser origin allowed besides the loopback ones (http(s)://127.0.0.1,
    /// localhost, [::1], any port): scheme://host[:port], :* for any port, or null; repeatable.
    /// A request with any other Origin header is refused with 403 (DNS rebinding).
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
    allow_origins: Vec<AllowedOrigin>,
    /// HTTP: a session with no message for this many seconds is closed; its id then answers
    /// 404 and its client initializes a new session.
    #[arg(long, value_name = "SECS", default_value_t = 1800, value_parser = clap::value_parser!(u64).range(1..))]
    session_idle_timeout: u64,
    /// The run directory (default runs/mcp-TASK-TIME).
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(command: McpCommand) -> Result<()> {
    match command {
        McpCommand::Serve(args) => serve_task(args),
        McpCommand::ServeAgent(args) => serve_agent(args),
    }
}

fn serve_agent(args: ServeAgentArgs) -> Result<()> {
    use netdojo::mcp::agent_server::{AgentServer, serve_until_ctrl_c, suite_tasks};
    if matches!(args.agent.as_str(), "openai" | "ollama" | "mcp") {
        bail!("--agent {}: only the scripted agents (oracle, noop, random) are served yet", args.agent);
    }
    let factory = apps::agent(&args.agent, args.seed, args.random_steps)?;
    let mut server = AgentServer::new(factory);
    match &args.suite {
        Some(path) => {
            let tasks = suite_tasks(path).with_context(|| format!("--suite {}", path.display()))?;
            server = server.with_tasks(tasks);
        }
        None if args.agent == "oracle" => {
            bail!("--agent oracle plays each task's ground truth: give the suite with --suite")
        }
        None => {}
    }
    serve_until_ctrl_c(server, args.http)?;
    Ok(())
}

fn serve_task(args: ServeArgs) -> Result<()> {
    if !(args.rollback_timeout.is_finite() && args.rollback_timeout > 0.0) {
        bail!("--rollback-timeout {}: a positive number of seconds", args.rollback_timeout);
    }
    let gns3 = args.env.as_deref() == Some("gns3");
    let suite = args.suite.clone().unwrap_or_else(|| default_suite(gns3).into());
    let (task, env) = match (args.env.as_deref(), &args.task) {
        (Some("routing"), _) => (routing_task(args.seed, args.index)?, "routing"),
        (_, Some(id)) => (load_task(&suite, id)?, if gns3 { "gns3" } else { "netconf" }),
        (_, None) => bail!("--task ID (or --env routing --seed S --index N)"),
    };
    let env_options = EnvOptions {
        gns3_url: args.gns3_url.clone(),
        gns3_nodes: args.gns3_nodes.clone(),
        ..EnvOptions::default()
    };
    let app = apps::app(env, &env_options)?;
    let gns3 = if gns3 { Some(apps::gns3_options(&env_options)?) } else { None };
    let out = args.out.unwrap_or_else(|| default_out(&task.id));
    let options = ServeOptions {
        http: args.http,
        device: args.device,
        role: args.role,
        tokens: args.tokens.as_deref().map(Tokens::load).transpose()?,
        allow_origins: args.allow_origins,
        session_idle_timeout: Duration::from_secs(args.session_idle_timeout),
        settings: Settings {
            rollback_timeout: Duration::from_secs_f64(args.rollback_timeout),
            ..Settings::default()
        },
        budget: netdojo::core::runner::Budget { max_steps: args.max_steps, ..default_budget() },
        out: out.clone(),
        gns3,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let finished = runtime
        .block_on(async {
            let stop = CancellationToken::new();
            netdojo::mcp::serve::stop_on_signals(stop.clone())?;
            serve(task, app.scorers, options, stop).await
        })
        .with_context(|| format!("mcp serve (run directory {})", out.display()))?;
    // tokio reads stdin on a blocking thread that only a new line or EOF ends: do not wait
    // for it when the client keeps stdin open.
    runtime.shutdown_timeout(Duration::from_secs(1));
    eprintln!("{}", summary(&finished));
    eprintln!("run directory: {}", finished.run_dir.display());
    Ok(())
}
