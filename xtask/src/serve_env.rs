//! `cargo xtask serve-env`: an environment's tasks served over OpenEnv's protocol
//! (netdojo-envserver), for RL trainers and any OpenEnv client.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use netdojo::core::runner::Budget;
use netdojo::core::{Filtered, TaskFilter};
use netdojo::{Task, TaskSource};
use netdojo_envserver::{EnvServer, Options, Shaping};
use serde::Serialize;
use serde_json::json;

use crate::apps::{self, EnvOptions};

/// `cargo xtask serve-env`.
#[derive(Debug, Clone, clap::Args, Serialize)]
pub struct ServeEnvArgs {
    /// Environment: dcgraph, routing (root), netconf (root), k8s (root), gns3.
    #[arg(long, default_value = "dcgraph")]
    pub env: String,
    /// Number of generated tasks served (ignored with --suite).
    #[arg(long, default_value_t = 120)]
    pub queries: u64,
    /// Seed of the task generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Serve the tasks of a suite (a .jsonl file, a .json task or a directory) instead.
    #[arg(long)]
    pub suite: Option<PathBuf>,
    /// Serve only the tasks of these domains.
    #[arg(long = "domain", value_name = "DOMAIN", value_delimiter = ',')]
    pub domains: Vec<String>,
    /// Serve only the tasks of these levels.
    #[arg(long = "level", value_name = "LEVEL", value_delimiter = ',')]
    pub levels: Vec<u8>,
    /// Serve only the tasks with these labels.
    #[arg(long = "label", value_name = "LABEL", value_delimiter = ',')]
    pub labels: Vec<String>,
    /// dcgraph: a MALT text-protobuf model instead of the generated fabric.
    #[arg(long)]
    pub graph: Option<PathBuf>,
    /// dcgraph: how count, list and rank queries pick their node (`netpress` or `uniform`).
    #[arg(long, default_value = "netpress", value_parser = ["netpress", "uniform"])]
    pub targets: String,
    /// gns3: the GNS3 controller (default: $NETDOJO_GNS3_URL).
    #[arg(long)]
    pub gns3_url: Option<String>,
    /// netconf: routers from a warm pool instead of fresh ones.
    #[arg(long)]
    pub warm_pool: bool,
    /// Port on 127.0.0.1 (0: any free one; the URL is printed on standard output).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Tool calls per episode (`finish` not counted); the call that reaches it ends the
    /// episode with `truncated` in its info.
    #[arg(long, default_value_t = 10)]
    pub max_steps: usize,
    /// Time limit of an episode, in seconds, from its reset (the client's thinking included).
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub episode_timeout_s: u64,
    /// Sessions (WebSocket connections) at once, each with its own episode and environment.
    #[arg(long, default_value_t = 64)]
    pub max_sessions: usize,
    /// Close a session that sends nothing for this many seconds (its episode is ended and
    /// recorded, its environment closed).
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub idle_timeout_s: u64,
    /// Add per-step shaping to the rewards (docs/training.md): progress toward the goal, minus
    /// penalties for unsafe, unproductive and failed steps. Off: rewards are 0 until the final
    /// one, the episode's correctness.
    #[arg(long)]
    pub shaping: bool,
    /// Record every episode to this run directory (as `eval` does: report, export, compare).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn serve_env(args: ServeEnvArgs) -> Result<()> {
    let app = apps::app(
        &args.env,
        &EnvOptions {
            graph: args.graph.clone(),
            targets: args.targets.clone(),
            gns3_url: args.gns3_url.clone(),
            warm_pool: args.warm_pool,
            ..EnvOptions::default()
        },
    )?;
    let tasks = tasks(&args, &app)?;
    if args.max_steps == 0 {
        bail!("--max-steps 0: an episode could make no call; give at least 1");
    }
    if args.max_sessions == 0 {
        bail!("--max-sessions 0: no client could connect; give at least 1");
    }
    let options = Options {
        max_sessions: args.max_sessions,
        idle_timeout: Duration::from_secs(args.idle_timeout_s.max(1)),
        budget: Budget {
            max_steps: args.max_steps,
            episode_timeout: Duration::from_secs(args.episode_timeout_s),
            ..Budget::default()
        },
        shaping: args.shaping.then(Shaping::default),
        record: args.out.clone(),
        ..Options::default()
    };
    let n = tasks.len();
    let config = json!({"cli": args});
    let server =
        EnvServer::new(app.factory, app.scorers, tasks, options, config).with_context(|| {
            match &args.out {
                Some(dir) => format!("serve-env --out {}", dir.display()),
                None => "serve-env".into(),
            }
        })?;
    let server = Arc::new(server);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
        let listener = netdojo_envserver::bind(addr).await.context("serve-env --port")?;
        let local = listener.local_addr()?;
        println!("http://{local}");
        eprintln!(
            "serving {n} {} task(s) over OpenEnv's protocol at ws://{local}/ws (Ctrl-C stops)",
            args.env
        );
        let stop = async {
            let _ = tokio::signal::ctrl_c().await;
            eprintln!("stopping: ending the sessions' episodes");
        };
        netdojo_envserver::serve(server, listener, stop).await?;
        anyhow::Ok(())
    })
}

/// The served tasks: the suite's, or the generator's, after the filters.
fn tasks(args: &ServeEnvArgs, app: &apps::App) -> Result<Vec<Task>> {
    let source = crate::eval::task_source(args.suite.as_deref(), args.seed, args.queries, app)?;
    let filter = TaskFilter {
        domains: args.domains.clone(),
        levels: args.levels.clone(),
        labels: args.labels.clone(),
    };
    let source = Filtered { source, filter };
    let tasks: Vec<Task> =
        source.tasks().collect::<Result<_, _>>().context("serve-env: reading the tasks")?;
    if tasks.is_empty() {
        bail!("serve-env: no task to serve (check --suite, --queries and the filters)");
    }
    Ok(tasks)
}
