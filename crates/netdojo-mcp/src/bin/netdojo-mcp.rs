//! `netdojo-mcp serve`: a NetConfBench task's routers, or a routing task's Linux nodes, behind
//! MCP (the same as `cargo xtask mcp serve`, without the reasoning score's model). The
//! integration tests start it on stdio.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use netdojo_mcp::auth::Tokens;
use netdojo_mcp::serve::{
    ServeOptions, default_budget, default_out, default_suite, load_task, serve, summary,
};
use netdojo_mcp::transport::AllowedOrigin;
use netdojo_mcp::{Role, Settings};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Parser)]
#[command(name = "netdojo-mcp", about = "netdojo's emulated devices as MCP servers (draft 002)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve one task's network until the client calls `done`.
    Serve(ServeArgs),
    /// Serve a scripted agent over the `netdojo.agent` protocol (docs/mcp.md).
    ServeAgent(ServeAgentArgs),
}

#[derive(Debug, clap::Args)]
struct ServeAgentArgs {
    /// oracle, noop or random.
    #[arg(long)]
    agent: String,
    /// The suite whose tasks' ground truth the agent may read (required by the oracle).
    #[arg(long)]
    suite: Option<PathBuf>,
    /// Streamable HTTP on 127.0.0.1:PORT/mcp (0: any free port) instead of stdio.
    #[arg(long)]
    http: Option<u16>,
    /// random: the seed and the calls per episode.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value_t = 5)]
    random_steps: usize,
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// The task's id (NetConfBench, on FRR or with --env gns3 on GNS3; or with --env routing,
    /// see --seed / --index).
    #[arg(long, required_unless_present = "env")]
    task: Option<String>,
    /// `routing`: a task of the routing application, drawn like `eval --env routing` does.
    /// `gns3`: a NetConfBench task on a GNS3 server (--gns3-url), its nodes' consoles the devices.
    #[arg(long, value_parser = ["routing", "netconf", "gns3"])]
    env: Option<String>,
    /// --env gns3: the GNS3 controller (default: $NETDOJO_GNS3_URL); the user and password
    /// come from NETDOJO_GNS3_USER / NETDOJO_GNS3_PASSWORD.
    #[arg(long)]
    gns3_url: Option<String>,
    /// --env routing: the generator's seed and the task's index.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[arg(long, default_value_t = 0)]
    index: u64,
    /// The suite holding it (default testdata/netconf, testdata/gns3 with --env gns3).
    #[arg(long)]
    suite: Option<PathBuf>,
    /// Streamable HTTP on 127.0.0.1:PORT (0: any free port) instead of stdio.
    #[arg(long)]
    http: Option<u16>,
    /// stdio: serve one device only.
    #[arg(long)]
    device: Option<String>,
    /// operator or read-only.
    #[arg(long, default_value = "operator")]
    role: Role,
    /// rollbackTimeout, seconds.
    #[arg(long, default_value_t = 300.0)]
    rollback_timeout: f64,
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Every log line redacted, rmcp's request logs off (§8).
    netdojo_mcp::redact::init_logging("NETDOJO_LOG", "warn");
    let result = match cli.command {
        Command::Serve(args) => run(args),
        Command::ServeAgent(args) => serve_agent(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve_agent(args: ServeAgentArgs) -> Result<(), Box<dyn std::error::Error>> {
    use netdojo_mcp::agent_server::{AgentServer, serve_until_ctrl_c, suite_tasks};
    use netdojo_scripted::{NoopFactory, OracleFactory, RandomFactory};
    let factory: std::sync::Arc<dyn netdojo_core::AgentFactory> = match args.agent.as_str() {
        "oracle" => std::sync::Arc::new(OracleFactory),
        "noop" => std::sync::Arc::new(NoopFactory),
        "random" => std::sync::Arc::new(RandomFactory { seed: args.seed, steps: args.random_steps }),
        other => return Err(format!("--agent {other}: unknown (oracle, noop, random)").into()),
    };
    let mut server = AgentServer::new(factory);
    match &args.suite {
        Some(path) => {
            let tasks = suite_tasks(path).map_err(|e| format!("--suite {}: {e}", path.display()))?;
            server = server.with_tasks(tasks);
        }
        None if args.agent == "oracle" => {
            return Err("--agent oracle plays each task's ground truth: give its --suite".into());
        }
        None => {}
    }
    serve_until_ctrl_c(server, args.http)?;
    Ok(())
}

fn run(args: ServeArgs) -> Result<(), Box<dyn std::error::Error>> {
    let gns3 = args.env.as_deref() == Some("gns3");
    let suite = args.suite.clone().unwrap_or_else(|| default_suite(gns3).into());
    let task = match (args.env.as_deref(), &args.task) {
        (Some("routing"), _) => netdojo_mcp::serve::routing_task(args.seed, args.index)?,
        (_, Some(id)) => load_task(&suite, id)?,
        (_, None) => return Err("--task ID (or --env routing --seed S --index N)".into()),
    };
    let gns3 = match gns3 {
        true => {
            let url = args.gns3_url.clone().or_else(|| std::env::var("NETDOJO_GNS3_URL").ok()).ok_or(
                "--env gns3: give the GNS3 server with --gns3-url http://127.0.0.1:PORT (or NETDOJO_GNS3_URL)",
            )?;
            let mut options = netdojo_gns3::Gns3Options::new(url);
            options.credentials = netdojo_gns3::Credentials::from_env();
            Some(options)
        }
        false => None,
    };
    if !(args.rollback_timeout.is_finite() && args.rollback_timeout > 0.0) {
        return Err(
            format!("--rollback-timeout {}: a positive number of seconds", args.rollback_timeout).into()
        );
    }
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
        budget: default_budget(),
        out: args.out.unwrap_or_else(|| default_out(&task.id)),
        gns3,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let finished = runtime.block_on(async {
        let stop = CancellationToken::new();
        netdojo_mcp::serve::stop_on_signals(stop.clone())?;
        let scorers = netdojo_mcp::serve::scorers_for(&task);
        serve(task, scorers, options, stop).await
    })?;
    // tokio reads stdin on a blocking thread that only a new line or EOF ends: do not wait
    // for it when the client keeps stdin open.
    runtime.shutdown_timeout(Duration::from_secs(1));
    eprintln!("{}", summary(&finished));
    Ok(())
}
