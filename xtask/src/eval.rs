//! `cargo xtask eval`, `generate` and `report`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use netdojo::core::runner::{Budget, Progress, Runner};
use netdojo::core::store::RunDir;
use netdojo::core::{Filtered, TaskFilter};
use netdojo::score::Summary;
use netdojo::{EpisodeRecord, GeneratedSuite, MetricValue, StaticSuite, TaskGenerator, TaskSource};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::watch;

use crate::apps::{self, EnvOptions};

/// `cargo xtask eval`: with no flags, the oracle on 120 generated datacenter-planning queries.
#[derive(Debug, Clone, clap::Args, Serialize, Deserialize)]
pub struct EvalArgs {
    /// Environment: dcgraph (datacenter planning), routing (misconfigured routers, root), netconf
    /// (NetConfBench on FRR, root), k8s (NetworkPolicies, root), gns3 (NetConfBench on a GNS3
    /// server).
    #[arg(long, default_value = "dcgraph")]
    pub env: String,
    /// Agent: oracle, noop, random, openai, ollama, mcp.
    #[arg(long, default_value = "oracle")]
    pub agent: String,
    /// Number of generated queries (ignored with --suite).
    #[arg(long, default_value_t = 120)]
    pub queries: u64,
    /// Seed of the task generator (and of the random agent).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run the tasks of a suite (a .jsonl file, a .json task or a directory) instead of generating.
    #[arg(long)]
    pub suite: Option<PathBuf>,
    /// Run only the tasks of these domains (NetConfBench: routing, policy, security, qos).
    #[arg(long = "domain", value_name = "DOMAIN", value_delimiter = ',')]
    #[serde(default)]
    pub domains: Vec<String>,
    /// Run only the tasks of these levels.
    #[arg(long = "level", value_name = "LEVEL", value_delimiter = ',')]
    #[serde(default)]
    pub levels: Vec<u8>,
    /// Run only the tasks with these labels (the seeds' action or fault labels; a NetConfBench
    /// task's name).
    #[arg(long = "label", value_name = "LABEL", value_delimiter = ',')]
    #[serde(default)]
    pub labels: Vec<String>,
    /// Episodes run in parallel.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Tool calls an agent may make per episode.
    #[arg(long, default_value_t = 10)]
    pub max_steps: usize,
    /// Wall-clock budget of one episode, in seconds.
    #[arg(long, default_value_t = 300)]
    pub episode_timeout_s: u64,
    /// dcgraph: a MALT text-protobuf model instead of the generated fabric.
    #[arg(long)]
    pub graph: Option<PathBuf>,
    /// gns3: the GNS3 controller, `http://127.0.0.1:3080` (default: $NETDOJO_GNS3_URL).
    #[arg(long)]
    #[serde(default)]
    pub gns3_url: Option<String>,
    /// gns3: a node mapping file (`{"R1": {"template": "c7200", "dialect": "ios"}}`).
    #[arg(long)]
    #[serde(default)]
    pub gns3_nodes: Option<PathBuf>,
    /// netconf: take routers from a warm pool (namespaces with their daemons running; between
    /// episodes reset and checked against their fresh state, see docs/netconf.md) instead of
    /// starting every episode's routers fresh.
    #[arg(long)]
    #[serde(default)]
    pub warm_pool: bool,
    /// random agent: calls per episode before it finishes.
    #[arg(long, default_value_t = 5)]
    pub random_steps: usize,
    /// openai, ollama: the model and how to prompt it.
    #[command(flatten)]
    #[serde(default)]
    pub llm: apps::LlmArgs,
    /// mcp: where the agent server is.
    #[command(flatten)]
    #[serde(default)]
    pub mcp: apps::McpAgentArgs,
    /// netconf, gns3: the reasoning score's judge.
    #[command(flatten)]
    #[serde(default)]
    pub judge: apps::JudgeArgs,
    /// Run directory (default: runs/ENV-AGENT-sSEED-TIME).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue an interrupted run: its configuration is read from DIR/config.json.
    #[arg(long, value_name = "DIR")]
    #[serde(skip)]
    pub resume: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    #[serde(skip)]
    pub quiet: bool,
}

/// `cargo xtask generate`.
#[derive(Debug, Clone, clap::Args)]
pub struct GenerateArgs {
    /// Environment whose generator makes the tasks: dcgraph, routing, netconf, k8s.
    #[arg(long, default_value = "dcgraph")]
    pub env: String,
    /// Number of tasks.
    #[arg(long, default_value_t = 120)]
    pub queries: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// dcgraph: a MALT text-protobuf model instead of the generated fabric.
    #[arg(long)]
    pub graph: Option<PathBuf>,
    /// Output file (JSON lines); `-` for standard output.
    #[arg(long)]
    pub out: PathBuf,
    /// netconf: do not run each task's ground truth on real FRR before writing it (by default
    /// a task whose oracle fails a testcase is not emitted: the command fails).
    #[arg(long)]
    pub no_validate: bool,
}

struct Bar {
    bar: ProgressBar,
    correct: AtomicUsize,
    errored: AtomicUsize,
}

impl Progress for Bar {
    fn started(&self, total: Option<usize>, already_done: usize) {
        if let Some(total) = total {
            self.bar.set_length(total as u64);
        }
        self.bar.set_position(already_done as u64);
    }

    fn finished(&self, record: &EpisodeRecord) {
        if record.metric("correct") == Some(MetricValue::Pass(true)) {
            self.correct.fetch_add(1, Ordering::Relaxed);
        }
        if record.error.is_some() {
            self.errored.fetch_add(1, Ordering::Relaxed);
        }
        self.bar.set_message(format!(
            "correct {} errored {}",
            self.correct.load(Ordering::Relaxed),
            self.errored.load(Ordering::Relaxed)
        ));
        self.bar.inc(1);
    }
}

pub fn eval(args: EvalArgs) -> Result<ExitCode> {
    let (args, mut store) = match &args.resume {
        Some(dir) => {
            let store = RunDir::open(dir).with_context(|| format!("--resume {}", dir.display()))?;
            let config = store.config()?;
            let mut saved: EvalArgs = serde_json::from_value(config["cli"].clone()).with_context(|| {
                format!("{}: `cli` is not an eval configuration", dir.join("config.json").display())
            })?;
            saved.quiet = args.quiet;
            saved.resume = Some(dir.clone());
            (saved, Some(store))
        }
        None => (args, None),
    };

    let judge = apps::Judge::new(&args.judge, args.llm.base_url.as_deref())?.map(Arc::new);
    let app = apps::app(
        &args.env,
        &EnvOptions {
            graph: args.graph.clone(),
            gns3_url: args.gns3_url.clone(),
            gns3_nodes: args.gns3_nodes.clone(),
            judge,
            warm_pool: args.warm_pool,
        },
    )?;
    let agent = match args.agent.as_str() {
        "openai" | "ollama" => apps::llm_agent(&args.agent, args.seed, &args.llm, &app)?,
        "mcp" => apps::mcp_agent(&args.mcp)?,
        name => apps::agent(name, args.seed, args.random_steps)?,
    };
    let source: Box<dyn TaskSource> = match &args.suite {
        Some(path) => {
            Box::new(StaticSuite::load(path).with_context(|| format!("--suite {}", path.display()))?)
        }
        None => Box::new(GeneratedSuite {
            generator: app.generator.clone(),
            seed: args.seed,
            count: args.queries,
        }),
    };
    let filter = TaskFilter {
        domains: args.domains.clone(),
        levels: args.levels.clone(),
        labels: args.labels.clone(),
    };
    if let Some(bad) = filter.domains.iter().find(|d| !netdojo::core::task::DOMAINS.contains(&d.as_str())) {
        bail!("--domain {bad}: unknown domain (domains: {})", netdojo::core::task::DOMAINS.join(", "));
    }
    let source = Filtered { source, filter };
    if !source.filter.is_empty() && !source.tasks().any(|t| t.is_ok()) {
        bail!(
            "no task of {} matches the filter (--domain {:?} --level {:?} --label {:?})",
            args.suite
                .as_ref()
                .map_or_else(|| format!("{} generated queries", args.queries), |p| p.display().to_string()),
            args.domains,
            args.levels,
            args.labels
        );
    }
    let runner = Runner {
        env: app.factory,
        agent,
        scorers: Arc::new(app.scorers),
        budget: Budget {
            max_steps: args.max_steps,
            episode_timeout: Duration::from_secs(args.episode_timeout_s),
            ..Budget::default()
        },
        concurrency: args.concurrency,
    };

    let mut store = match store.take() {
        Some(store) => store,
        None => {
            let dir = args.out.clone().unwrap_or_else(|| default_run_dir(&args));
            let config = json!({
                "cli": args,
                "source": source.describe(),
                "runner": runner.describe(),
                "netdojo_version": env!("CARGO_PKG_VERSION"),
            });
            RunDir::create(&dir, &config)
                .with_context(|| format!("creating the run directory {}", dir.display()))?
        }
    };
    eprintln!("run directory: {}", store.path().display());

    let bar = ProgressBar::new(source.len_hint().unwrap_or(0) as u64);
    if args.quiet {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let progress = Bar { bar, correct: AtomicUsize::new(0), errored: AtomicUsize::new(0) };

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let stats = runtime.block_on(async {
        let (stop_tx, stop_rx) = watch::channel(false);
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\nstopping: letting the episodes in flight finish (Ctrl-C again to abort)");
                let _ = stop_tx.send(true);
                if tokio::signal::ctrl_c().await.is_ok() {
                    std::process::exit(130);
                }
            }
        });
        runner.run(&source, &mut store, &progress, stop_rx).await
    })?;
    progress.bar.finish_and_clear();

    let summary = summarise(&store)?;
    print!("{}", summary.render());
    println!("run directory: {}", store.path().display());
    if stats.interrupted {
        eprintln!("interrupted; continue with: cargo xtask eval --resume {}", store.path().display());
        return Ok(ExitCode::from(130));
    }
    if stats.errored > 0 {
        eprintln!(
            "{} episode(s) errored (see `error` in episodes.jsonl); `--resume {}` retries them",
            stats.errored,
            store.path().display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn default_run_dir(args: &EvalArgs) -> PathBuf {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    PathBuf::from("runs").join(format!("{}-{}-s{}-{now}", args.env, args.agent, args.seed))
}

/// Summarises the latest record of each task and writes summary.json and summary.txt.
fn summarise(store: &RunDir) -> Result<Summary> {
    let latest = store.latest()?;
    let summary = Summary::from_records(latest.values());
    store.write_summary(&serde_json::to_value(&summary)?, &summary.render())?;
    Ok(summary)
}

pub fn report(dir: &Path) -> Result<()> {
    // inspect, not open: a report on a run still in progress must not cut its last line.
    let store = RunDir::inspect(dir).with_context(|| format!("report {}", dir.display()))?;
    let summary = summarise(&store)?;
    print!("{}", summary.render());
    Ok(())
}

pub fn generate(args: GenerateArgs) -> Result<()> {
    if args.queries == 0 {
        bail!("--queries 0: nothing to generate");
    }
    let app = apps::app(&args.env, &EnvOptions { graph: args.graph.clone(), ..Default::default() })?;
    let out: Box<dyn Write> = if args.out.as_os_str() == "-" {
        Box::new(std::io::stdout().lock())
    } else {
        let file = File::create(&args.out).with_context(|| format!("--out {}", args.out.display()))?;
        Box::new(file)
    };
    let mut out = BufWriter::new(out);
    // Tasks whose ground truth is checked on a live network before they are written: the
    // oracle plays it and every testcase must pass (no scorer needed for that).
    let validator = if args.env == "netconf" && !args.no_validate {
        let oracle = Runner {
            env: app.factory.clone(),
            agent: apps::agent("oracle", args.seed, 0)?,
            scorers: Arc::new(Vec::new()),
            budget: Budget::default(),
            concurrency: 1,
        };
        Some((tokio::runtime::Runtime::new().context("tokio runtime")?, oracle))
    } else {
        None
    };
    for index in 0..args.queries {
        let task = app.generator.generate(args.seed, index)?;
        if let Some((runtime, oracle)) = &validator {
            let (record, trajectory) = runtime.block_on(oracle.run_episode(&task));
            let failed: Vec<String> = trajectory
                .outcome
                .as_ref()
                .map(|o| o.checks.iter().filter(|c| !c.passed).map(|c| c.name.clone()).collect())
                .unwrap_or_else(|| vec![format!("the episode did not complete: {:?}", record.status)]);
            if !failed.is_empty() {
                bail!(
                    "generated task {} (seed {}, index {index}): its ground truth fails on FRR: {}",
                    task.id,
                    args.seed,
                    failed.join("; ")
                );
            }
        }
        serde_json::to_writer(&mut out, &task)?;
        out.write_all(b"\n")?;
    }
    out.flush().with_context(|| format!("writing {}", args.out.display()))?;
    Ok(())
}
