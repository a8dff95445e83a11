//! `cargo xtask eval`, `generate`, `report` and `compare`.

use std::collections::BTreeMap;
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
use netdojo::core::suite::{self, GeneratorInfo, Manifest, TaskHash};
use netdojo::core::{Filtered, TaskFilter};
use netdojo::core::{Price, PriceTable};
use netdojo::score::{CompareOptions, Comparison, Summary};
use netdojo::{EpisodeRecord, GeneratedSuite, MetricValue, StaticSuite, TaskGenerator, TaskKind, TaskSource};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::watch;

use crate::apps::{self, EnvOptions};

/// `cargo xtask eval`: with no flags, the oracle on 120 generated datacenter-planning queries.
#[derive(Debug, Clone, clap::Args, Serialize, Deserialize)]
pub struct EvalArgs {
    /// Environment: dcgraph (datacenter planning), routing (misconfigured routers, root), netconf
    /// (NetConfBench on FRR, root), k8s (NetworkPolicies, root), incident (diagnosis and repair
    /// on multi-router FRR labs, root), gns3 (NetConfBench on a GNS3 server).
    #[arg(long, default_value = "dcgraph")]
    pub env: String,
    /// Agent: oracle, noop, random, openai, ollama, mcp.
    #[arg(long, default_value = "oracle")]
    pub agent: String,
    /// How the agent works: `tools` (netdojo's tools, every environment) or, for dcgraph,
    /// `code` (NetPress §B.3: the agent writes Python `process_graph(graph_data)` over the
    /// networkx graph, run in the jail by the venv of `cargo xtask setup python`; the oracle
    /// plays testdata/netpress-code, the LLM agents answer with a ```python block).
    #[arg(long, default_value = "tools")]
    #[serde(default = "tools_interaction")]
    pub interaction: String,
    /// dcgraph --interaction code: how the networkx graph is keyed: `name` (NetPress's: kinds
    /// that share a name are one node) or `kind-name` (one node per entity).
    #[arg(long, default_value = "name")]
    #[serde(default = "name_keying")]
    pub keying: String,
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
    /// Run each task K times (K ≥ 1): pass@K and pass^K per label and overall, intervals
    /// clustered by task.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    #[serde(default = "one_epoch")]
    pub epochs: u32,
    /// Episodes run in parallel.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Set up this many more episodes' environments ahead of those running, so that their
    /// setup overlaps the running episodes' waits (still at most --concurrency episodes at
    /// once). Only environments that can prepare use it (incident: each lab started and its
    /// injection verified in the background; checked again when its episode begins). The
    /// episode whose environment is ready first starts first, else the next in order. 0 sets
    /// each environment up as its episode begins.
    #[arg(long, value_name = "N", default_value_t = PREPARE_AHEAD)]
    // A run recorded before this option existed prepared nothing: it resumes that way.
    #[serde(default)]
    pub prepare_ahead: usize,
    /// Tool calls an agent may make per episode.
    #[arg(long, default_value_t = 10)]
    pub max_steps: usize,
    /// Time limit of the agent's part of one episode, in seconds: from the environment set up
    /// to its last turn (model calls, tool calls, state checks).
    #[arg(long, visible_alias = "time-limit", value_name = "SECONDS", default_value_t = 300)]
    pub episode_timeout_s: u64,
    /// End an episode once its turns used more tokens (prompt + completion) than this.
    #[arg(long, value_name = "TOKENS")]
    #[serde(default)]
    pub max_tokens_per_episode: Option<u64>,
    /// End an episode once its turns cost more than this, in US dollars (needs --prices).
    #[arg(long, value_name = "USD", requires = "prices")]
    #[serde(default)]
    pub max_cost_per_episode: Option<f64>,
    /// Price table: a JSON file of model → {"input", "output", "cached_input"?} in US dollars
    /// per million tokens (docs/results.md). Each episode records its cost (`cost_usd`) at the
    /// price of --model; a model the table lacks is an error.
    #[arg(long, value_name = "FILE")]
    #[serde(default)]
    pub prices: Option<PathBuf>,
    /// dcgraph: a MALT text-protobuf model instead of the generated fabric.
    #[arg(long)]
    pub graph: Option<PathBuf>,
    /// dcgraph: how count, list and rank queries pick their node: `netpress` (counts and ranks
    /// about aggregation blocks and control domains, ranks whose children differ; lists over
    /// blocks, domains, racks and switches) or `uniform` (any node with children).
    #[arg(long, default_value = "netpress", value_parser = ["netpress", "uniform"])]
    #[serde(default = "default_targets")]
    pub targets: String,
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

fn tools_interaction() -> String {
    "tools".into()
}

fn name_keying() -> String {
    "name".into()
}

/// `cargo xtask generate`.
#[derive(Debug, Clone, clap::Args)]
pub struct GenerateArgs {
    /// Environment whose generator makes the tasks: dcgraph, routing, netconf, k8s, incident.
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
    /// dcgraph: how count, list and rank queries pick their node (`netpress` or `uniform`; see
    /// `eval --help`).
    #[arg(long, default_value = "netpress", value_parser = ["netpress", "uniform"])]
    pub targets: String,
    /// Print the generated suite's answer distribution on standard error: per label, the
    /// answers of counts, the sizes of lists, the rank queries whose children all tie, and the
    /// kinds of node the queries are about.
    #[arg(long)]
    pub stats: bool,
    /// Output file (JSON lines); `-` for standard output. A file gets its manifest beside it
    /// (`NAME.manifest.json`: suite name and version, generator, seed, count, content hashes).
    #[arg(long)]
    pub out: PathBuf,
    /// The suite's name in its manifest (default: ENV-sSEED-nQUERIES).
    #[arg(long)]
    pub name: Option<String>,
    /// The suite's version in its manifest.
    #[arg(long, default_value = "1")]
    pub suite_version: String,
    /// netconf: do not run each task's ground truth on real FRR before writing it (by default
    /// a task whose oracle fails a testcase is not emitted: the command fails). incident: do not
    /// verify the injection on the live lab (by default each fault is injected on its lab, a
    /// fault that breaks no health check is replaced by the next candidate, and the measured
    /// symptom is recorded in the task).
    #[arg(long)]
    pub no_validate: bool,
    /// Also run the oracle on the tasks (its run directory: FILE.run) and write its solved
    /// episodes to FILE as chat fine-tuning data (`export --format chat`, docs/training.md).
    #[arg(long, value_name = "FILE")]
    pub with_oracle_trajectories: Option<PathBuf>,
    /// incident: tasks verified at once, each on its own lab (the verification mostly waits on
    /// protocol timers).
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
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

    // Before any server is contacted: a price or limit that is wrong is one line, at once.
    let price = price(&args)?;
    let judge = apps::Judge::new(&args.judge, args.llm.base_url.as_deref())?.map(Arc::new);
    let app = apps::app(
        &args.env,
        &EnvOptions {
            graph: args.graph.clone(),
            targets: args.targets.clone(),
            gns3_url: args.gns3_url.clone(),
            gns3_nodes: args.gns3_nodes.clone(),
            judge,
            warm_pool: args.warm_pool,
            interaction: apps::Interaction::parse(&args.interaction, &args.keying)?,
        },
    )?;
    let code = app.interaction.code();
    let agent = match args.agent.as_str() {
        "openai" | "ollama" => apps::llm_agent(&args.agent, args.seed, &args.llm, &app)?,
        "mcp" => apps::mcp_agent(&args.mcp)?,
        "oracle" if code.is_some() => apps::code_oracle(code)?,
        name => apps::agent(name, args.seed, args.random_steps)?,
    };
    let source = task_source(args.suite.as_deref(), args.seed, args.queries, &app)?;
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
            max_tokens: args.max_tokens_per_episode,
            max_cost_usd: args.max_cost_per_episode,
            price,
            ..Budget::default()
        },
        concurrency: args.concurrency,
        prepare_ahead: args.prepare_ahead,
    };

    let mut store = match store.take() {
        Some(store) => store,
        None => {
            let dir = args.out.clone().unwrap_or_else(|| default_run_dir(&args));
            let config = json!({
                "cli": args,
                "source": source.describe(),
                "suite": fingerprint(&source, args.suite.as_deref())?,
                "runner": runner.describe(),
                "netdojo_version": env!("CARGO_PKG_VERSION"),
            });
            RunDir::create(&dir, &config)
                .with_context(|| format!("creating the run directory {}", dir.display()))?
        }
    };
    eprintln!("run directory: {}", store.path().display());

    let bar = ProgressBar::new(source.len_hint().unwrap_or(0) as u64 * u64::from(args.epochs));
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
        runner.run_epochs(&source, &mut store, &progress, stop_rx, args.epochs).await
    })?;
    progress.bar.finish_and_clear();

    let summary = summarise(&store)?;
    println!("{}", suite_line(&store.config()?));
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

/// The price of the agent's model from `--prices`, after the limits are checked.
fn price(args: &EvalArgs) -> Result<Option<Price>> {
    if args.max_tokens_per_episode == Some(0) {
        bail!("--max-tokens-per-episode 0: no turn could be played; give a positive count");
    }
    if let Some(usd) = args.max_cost_per_episode
        && !(usd.is_finite() && usd > 0.0)
    {
        bail!("--max-cost-per-episode {usd}: give a positive number of US dollars");
    }
    let Some(path) = &args.prices else { return Ok(None) };
    let table = PriceTable::load(path).context("--prices")?;
    let model = match (args.agent.as_str(), args.llm.model.as_deref()) {
        ("openai" | "ollama" | "mcp", Some(model)) => model,
        ("mcp", None) => {
            bail!("--prices {}: give --model, the table's name for the agent's model", path.display())
        }
        (agent, _) => {
            bail!("--prices {}: agent `{agent}` calls no model: there is nothing to price", path.display())
        }
    };
    Ok(Some(table.price(model).context("--prices")?))
}

fn default_run_dir(args: &EvalArgs) -> PathBuf {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    PathBuf::from("runs").join(format!("{}-{}-s{}-{now}", args.env, args.agent, args.seed))
}

/// `--prepare-ahead`'s default: at concurrency 2 on two cores, 2 labs prepared ahead took the
/// incident oracle on the default suite from about 3,500 to about 4,100 episodes an hour
/// (docs/incident.md, "`eval` prepares 2 labs ahead by default"); a prepared lab costs its
/// memory and its protocols' timers while it waits. Environments that cannot prepare ignore it.
pub const PREPARE_AHEAD: usize = 2;

fn one_epoch() -> u32 {
    1
}

/// Summarises the latest record of each episode (task, epoch) and writes summary.json and
/// summary.txt.
fn summarise(store: &RunDir) -> Result<Summary> {
    let episodes = store.episodes()?;
    let summary = Summary::from_records(episodes.values());
    store.write_summary(&serde_json::to_value(&summary)?, &summary.render())?;
    Ok(summary)
}

/// What a run records of its tasks (config.json's `suite`): the content hash of the tasks it
/// runs (after the filters) and, for a frozen suite, its manifest's name, version and hash. A
/// suite that no longer matches its manifest is run all the same, with a warning.
fn fingerprint(source: &Filtered, suite: Option<&Path>) -> Result<serde_json::Value> {
    let hashes = |tasks: &dyn TaskSource| -> Result<Vec<TaskHash>> {
        tasks.tasks().map(|t| Ok(TaskHash::of(&t?))).collect()
    };
    let run = hashes(source)?;
    let mut out = json!({ "hash": suite::suite_hash(&run), "tasks": run.len() });
    let Some(path) = suite else { return Ok(out) };
    let Some(manifest) = Manifest::find(path).with_context(|| format!("--suite {}", path.display()))? else {
        return Ok(out);
    };
    let whole = if source.filter.is_empty() { run } else { hashes(source.source.as_ref())? };
    let now = suite::suite_hash(&whole);
    if now != manifest.hash {
        eprintln!(
            "warning: {} has changed since it was frozen: its manifest says {}, its tasks hash to {now}",
            path.display(),
            manifest.hash
        );
    }
    out["name"] = json!(manifest.suite);
    out["version"] = json!(manifest.version);
    out["manifest_hash"] = json!(manifest.hash);
    out["frozen"] = json!(now == manifest.hash);
    Ok(out)
}

/// `suite: NAME vVERSION, N tasks, sha256:…` from a run's configuration.
fn suite_line(config: &serde_json::Value) -> String {
    let s = &config["suite"];
    let Some(hash) = s["hash"].as_str() else {
        return "suite: not recorded (a run made before suite hashes)".into();
    };
    let short = hash.get(.."sha256:".len() + 16).unwrap_or(hash);
    let mut line = "suite: ".to_string();
    if let (Some(name), Some(version)) = (s["name"].as_str(), s["version"].as_str()) {
        line.push_str(&format!("{name} v{version}, "));
    }
    line.push_str(&format!("{} tasks, {short}", s["tasks"]));
    match s["frozen"].as_bool() {
        Some(true) => {}
        Some(false) => line.push_str(" (changed since it was frozen)"),
        None => line.push_str(" (not a frozen suite)"),
    }
    if let Some(k) = config["cli"]["epochs"].as_u64().filter(|k| *k > 1) {
        line.push_str(&format!("; {k} epochs"));
    }
    line
}

pub fn report(dir: &Path) -> Result<()> {
    // inspect, not open: a report on a run still in progress must not cut its last line.
    let store = RunDir::inspect(dir).with_context(|| format!("report {}", dir.display()))?;
    let summary = summarise(&store)?;
    println!("{}", suite_line(&store.config()?));
    print!("{}", summary.render());
    Ok(())
}

/// `cargo xtask compare`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    /// The baseline run directory.
    pub run_a: PathBuf,
    /// The run compared with it: differences are B - A.
    pub run_b: PathBuf,
    /// Compare runs whose suites differ (by content hash), pairing the episodes whose task ids
    /// match.
    #[arg(long)]
    pub allow_different_suites: bool,
    /// Bootstrap resamples and randomisation draws.
    #[arg(long, default_value_t = 10_000)]
    pub resamples: usize,
    /// Seed of the bootstrap and the randomisation test.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Also write the comparison as JSON (every flipped episode included) to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn compare(args: &CompareArgs) -> Result<()> {
    let open = |dir: &Path| RunDir::inspect(dir).with_context(|| format!("compare {}", dir.display()));
    let (a, b) = (open(&args.run_a)?, open(&args.run_b)?);
    let (config_a, config_b) = (a.config()?, b.config()?);
    println!("A: {}\n   {}", args.run_a.display(), suite_line(&config_a));
    println!("B: {}\n   {}", args.run_b.display(), suite_line(&config_b));
    match (config_a["suite"]["hash"].as_str(), config_b["suite"]["hash"].as_str()) {
        (Some(ha), Some(hb)) if ha != hb => {
            if !args.allow_different_suites {
                bail!(
                    "the runs ran different suites ({ha} and {hb}): their differences would mix the \
                     agents' with the tasks'; --allow-different-suites pairs the tasks whose ids match"
                );
            }
            eprintln!("warning: the runs ran different suites; pairing the tasks whose ids match");
        }
        (Some(_), Some(_)) => {}
        _ => eprintln!("warning: a run records no suite hash: cannot tell whether the suites are the same"),
    }
    let epochs = |c: &serde_json::Value| c["cli"]["epochs"].as_u64().unwrap_or(1);
    if epochs(&config_a) != epochs(&config_b) {
        eprintln!(
            "warning: the runs have {} and {} epochs: only the epochs both ran are paired",
            epochs(&config_a),
            epochs(&config_b)
        );
    }
    let options = CompareOptions { resamples: args.resamples, seed: args.seed };
    let comparison = Comparison::paired(&a.episodes()?, &b.episodes()?, options);
    if comparison.pairs == 0 {
        bail!("no episode completed in both runs: nothing to pair");
    }
    print!("{}", comparison.render());
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&comparison)?;
        std::fs::write(path, text).with_context(|| format!("--json {}", path.display()))?;
    }
    Ok(())
}

pub fn generate(args: GenerateArgs) -> Result<()> {
    if args.queries == 0 {
        bail!("--queries 0: nothing to generate");
    }
    let app = apps::app(
        &args.env,
        &EnvOptions { graph: args.graph.clone(), targets: args.targets.clone(), ..Default::default() },
    )?;
    let mut stats = args.stats.then(SuiteStats::default);
    let out: Box<dyn Write> = if args.out.as_os_str() == "-" {
        Box::new(std::io::stdout().lock())
    } else {
        let file = File::create(&args.out).with_context(|| format!("--out {}", args.out.display()))?;
        Box::new(file)
    };
    let mut out = BufWriter::new(out);
    let mut hashes = Vec::new();
    // Tasks whose ground truth is checked on a live network before they are written: the
    // oracle plays it and every testcase must pass (no scorer needed for that).
    let validator = if args.env == "netconf" && !args.no_validate {
        let oracle = Runner {
            env: app.factory.clone(),
            agent: apps::agent("oracle", args.seed, 0)?,
            scorers: Arc::new(Vec::new()),
            budget: Budget::default(),
            concurrency: 1,
            prepare_ahead: 0,
        };
        Some((tokio::runtime::Runtime::new().context("tokio runtime")?, oracle))
    } else {
        None
    };
    // Incident tasks: the faults' symptoms measured on the live lab (verified injection),
    // `--jobs` at a time, written in index order.
    let mut verified = if args.env == "incident" && !args.no_validate {
        Some(incident_tasks(&args)?.into_iter())
    } else {
        None
    };
    for index in 0..args.queries {
        let task = match &mut verified {
            Some(tasks) => tasks.next().context("a verified task is missing")?,
            None => app.generator.generate(args.seed, index)?,
        };
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
        hashes.push(TaskHash::of(&task));
        if let Some(stats) = &mut stats {
            stats.add(&task);
        }
    }
    if let Some(stats) = &stats {
        eprint!("{}", stats.render());
    }
    out.flush().with_context(|| format!("writing {}", args.out.display()))?;
    if args.out.as_os_str() != "-" {
        let manifest = Manifest {
            suite: args
                .name
                .clone()
                .unwrap_or_else(|| format!("{}-s{}-n{}", args.env, args.seed, args.queries)),
            version: args.suite_version.clone(),
            generator: GeneratorInfo {
                name: app.generator.name().to_string(),
                version: env!("CARGO_PKG_VERSION").to_string(),
                params: app.generator.params(),
            },
            seed: args.seed,
            count: hashes.len(),
            hash: suite::suite_hash(&hashes),
            tasks: hashes,
        };
        let path = suite::manifest_path(&args.out);
        manifest.write(&path).with_context(|| format!("writing the manifest {}", path.display()))?;
    }
    if let Some(file) = &args.with_oracle_trajectories {
        let source =
            GeneratedSuite { generator: app.generator.clone(), seed: args.seed, count: args.queries };
        oracle_trajectories(app.factory, app.scorers, &source, file)?;
    }
    Ok(())
}

/// `generate --env incident`: every task verified on its live lab (docs/incident.md), `--jobs`
/// at a time; what was redrawn is printed on standard error.
fn incident_tasks(args: &GenerateArgs) -> Result<Vec<netdojo::Task>> {
    let (_, generator) = apps::incident()?;
    let generator = Arc::new(generator);
    let runtime = tokio::runtime::Runtime::new().context("tokio runtime")?;
    let jobs = Arc::new(tokio::sync::Semaphore::new(args.jobs.max(1)));
    runtime.block_on(async {
        let mut handles = Vec::new();
        for index in 0..args.queries {
            let (generator, jobs, seed) = (generator.clone(), jobs.clone(), args.seed);
            handles.push(tokio::spawn(async move {
                let _permit = jobs.acquire_owned().await.map_err(|e| anyhow::anyhow!("{e}"))?;
                let patience = netdojo::incident::verify::Patience::default();
                let (task, report) = generator.verified(seed, index, patience).await?;
                let mut line =
                    format!("{} ({}): verified in {:.1} s", task.id, task.label, report.took.as_secs_f64());
                for why in &report.redrawn {
                    line.push_str(&format!("\n  redrawn: {why}"));
                }
                if let Some(why) = &report.at_start {
                    line.push_str(&format!("\n  faults injected after convergence: {why}"));
                }
                eprintln!("{line}");
                Ok::<_, anyhow::Error>(task)
            }));
        }
        let mut tasks = Vec::new();
        for handle in handles {
            tasks.push(handle.await.context("a verification panicked")??);
        }
        Ok(tasks)
    })
}

fn default_targets() -> String {
    "netpress".into()
}

/// `generate --stats`: what a generated suite's queries are about and what they answer.
#[derive(Debug, Default)]
struct SuiteStats {
    labels: BTreeMap<String, LabelStats>,
}

/// One label's tasks, answers (a count's value, a list's size as `N items`, a rank's `full
/// tie` or `ordered`) and the kinds of node queried.
#[derive(Debug, Default)]
struct LabelStats(usize, BTreeMap<String, usize>, BTreeMap<String, usize>);

impl SuiteStats {
    fn add(&mut self, task: &netdojo::Task) {
        let entry = self.labels.entry(task.label.clone()).or_default();
        entry.0 += 1;
        let TaskKind::Constructive { actions, answer: Some(answer), .. } = &task.kind else { return };
        let shown = match answer {
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Array(items) if task.label.ends_with("rank") => {
                let caps: Vec<&serde_json::Value> = items.iter().map(|i| &i["capacity_bps"]).collect();
                if caps.windows(2).all(|w| w[0] == w[1]) { "full tie".into() } else { "ordered".into() }
            }
            serde_json::Value::Array(items) => format!("{} items", items.len()),
            other => other.to_string(),
        };
        *entry.1.entry(shown).or_default() += 1;
        if let Some(kind) = actions.last().and_then(|a| a.arguments["kind"].as_str()) {
            *entry.2.entry(kind.to_string()).or_default() += 1;
        }
    }

    fn render(&self) -> String {
        let mut out = String::from("label          n  answers (most frequent first) | kinds queried\n");
        let top = |m: &BTreeMap<String, usize>| {
            let mut v: Vec<(&String, &usize)> = m.iter().collect();
            v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            v.iter().take(6).map(|(k, n)| format!("{k}: {n}")).collect::<Vec<_>>().join(", ")
        };
        for (label, LabelStats(n, answers, kinds)) in &self.labels {
            out.push_str(&format!("{label:<12} {n:>3}  {} | {}\n", top(answers), top(kinds)));
        }
        out
    }
}

/// `generate --with-oracle-trajectories FILE`: the oracle's episodes on `source` in the run
/// directory FILE.run (concurrency 4), then their chat export, solved ones only, in FILE.
pub fn oracle_trajectories(
    factory: std::sync::Arc<dyn netdojo::EnvironmentFactory>,
    scorers: Vec<Box<dyn netdojo::Scorer>>,
    source: &dyn netdojo::TaskSource,
    file: &Path,
) -> Result<()> {
    use netdojo::core::runner::{Budget, Runner, Silent};
    let runner = Runner {
        env: factory,
        agent: std::sync::Arc::new(netdojo::scripted::OracleFactory),
        scorers: std::sync::Arc::new(scorers),
        budget: Budget::default(),
        concurrency: 4,
        prepare_ahead: 0,
    };
    let mut dir = file.as_os_str().to_owned();
    dir.push(".run");
    let dir = PathBuf::from(dir);
    let config =
        serde_json::json!({"runner": runner.describe(), "source": "generate --with-oracle-trajectories"});
    let mut store = netdojo::core::store::RunDir::create(&dir, &config)
        .with_context(|| format!("--with-oracle-trajectories: the run directory {}", dir.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let (_stop, stop) = tokio::sync::watch::channel(false);
    let stats = runtime.block_on(runner.run(source, &mut store, &Silent, stop))?;
    let run =
        netdojo_report::Run::load(&dir).with_context(|| format!("reading the run in {}", dir.display()))?;
    let text = netdojo_report::export::chat(&run, true)?;
    std::fs::write(file, &text).with_context(|| format!("writing {}", file.display()))?;
    eprintln!(
        "oracle trajectories: {} solved of {} episodes ({} errored) in {}; run directory {}",
        text.lines().count(),
        stats.completed + stats.errored,
        stats.errored,
        file.display(),
        dir.display()
    );
    Ok(())
}

/// The tasks `--suite PATH` names, or else the application's generator's `queries` tasks from
/// `seed`: what eval and serve-env run.
pub fn task_source(
    suite: Option<&std::path::Path>,
    seed: u64,
    queries: u64,
    app: &apps::App,
) -> Result<Box<dyn TaskSource>> {
    Ok(match suite {
        Some(path) => {
            Box::new(StaticSuite::load(path).with_context(|| format!("--suite {}", path.display()))?)
        }
        None => Box::new(GeneratedSuite { generator: app.generator.clone(), seed, count: queries }),
    })
}
