//! The names on the command line, wired to the crates behind them. The one place that knows
//! every backend and agent.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use netdojo::config::CommandScore;
use netdojo::dcgraph::code::{self, CodeFactory, CodeOracleFactory, Python};
use netdojo::dcgraph::{DcGraphFactory, GraphSource, Keying, QueryGenerator, Targets};
use netdojo::incident::IncidentGenerator;
use netdojo::incident::env::IncidentFactory;
use netdojo::linux::routing::{RoutingFactory, RoutingGenerator};
use netdojo::llm::{
    ChatModel, CommandReference, LlmAgentFactory, Lookup, RetryPolicy, Sampling, Settings, Strategy, ToolMode,
};
use netdojo::netconf::{NetconfFactory, NetconfGenerator, ReasoningScore};
use netdojo::ollama::{OllamaChat, OllamaConfig};
use netdojo::openai::{OpenAiChat, OpenAiConfig, ToolChoice};
use netdojo::scripted::{NoopFactory, OracleFactory, RandomFactory};
use netdojo::{AgentFactory, EnvironmentFactory, Scorer, TaskGenerator};
use serde::{Deserialize, Serialize};

pub const ENVIRONMENTS: &[&str] = &["dcgraph", "routing", "netconf", "k8s", "incident", "gns3"];
pub const AGENTS: &[&str] = &["oracle", "noop", "random", "openai", "ollama", "mcp"];

/// An environment with what runs it: the factory, the generator of its tasks, its scorers.
pub struct App {
    pub factory: Arc<dyn EnvironmentFactory>,
    pub generator: Arc<dyn TaskGenerator>,
    pub scorers: Vec<Box<dyn Scorer>>,
    pub interaction: Interaction,
}

/// How an agent works on an environment (`--interaction`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Interaction {
    /// netdojo's tools.
    #[default]
    Tools,
    /// NetPress's code (dcgraph only): the graph keyed as given.
    Code(Keying),
}

impl Interaction {
    pub fn parse(interaction: &str, keying: &str) -> Result<Self> {
        let keying: Keying = keying.parse().map_err(anyhow::Error::msg).context("--keying")?;
        match interaction {
            "tools" => Ok(Interaction::Tools),
            "code" => Ok(Interaction::Code(keying)),
            other => bail!("--interaction {other}: unknown interaction (known: tools, code)"),
        }
    }

    /// The keying, in the code interaction.
    pub fn code(self) -> Option<Keying> {
        match self {
            Interaction::Code(keying) => Some(keying),
            Interaction::Tools => None,
        }
    }
}

/// NetConfBench's reasoning judge (seed 001 §3.1): the auxiliary LLM that condenses an agent's
/// trace before the embedding.
#[derive(Debug, Clone, Default, clap::Args, Serialize, Deserialize)]
pub struct JudgeArgs {
    /// netconf, gns3: condense each agent's trace with this model before the reasoning score
    /// (metric `reasoning`; without it, `reasoning_concat`).
    #[arg(long)]
    #[serde(default)]
    pub judge_model: Option<String>,
    /// The judge's OpenAI-compatible endpoint (default: --base-url, then https://api.openai.com/v1).
    #[arg(long)]
    #[serde(default)]
    pub judge_base_url: Option<String>,
    /// The variable holding the judge's API key (default OPENAI_API_KEY when set; only the
    /// name is saved).
    #[arg(long)]
    #[serde(default)]
    pub judge_api_key_env: Option<String>,
}

/// The judge: one chat completion per episode, at temperature 0.
#[derive(Debug)]
pub struct Judge {
    chat: OpenAiChat,
}

/// What the judge is asked (the seed: "condensed by an auxiliary LLM").
const JUDGE_PROMPT: &str = "Below is the trace of an agent that configured network devices: its \
     reasoning at each step and the tool calls it made. Condense it into the reasoning behind its \
     final configuration, in at most five sentences: what the network needed or what was wrong, \
     what the agent changed, and why. Write plain prose, no lists, no commands quoted in full.";

impl Judge {
    pub fn new(args: &JudgeArgs, fallback_base_url: Option<&str>) -> Result<Option<Self>> {
        let Some(model) = args.judge_model.clone() else { return Ok(None) };
        let base =
            args.judge_base_url.as_deref().or(fallback_base_url).unwrap_or("https://api.openai.com/v1");
        let api_key_env = args
            .judge_api_key_env
            .clone()
            .or_else(|| std::env::var_os("OPENAI_API_KEY").is_some().then(|| "OPENAI_API_KEY".to_string()));
        let config = OpenAiConfig {
            api_key_env,
            sampling: Sampling { temperature: Some(0.0), seed: Some(0), max_tokens: Some(256) },
            ..OpenAiConfig::new(base, model)
        };
        let chat = OpenAiChat::new(config).context("--judge-model")?;
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(chat.check_model())
            .context("--judge-model")?;
        Ok(Some(Self { chat }))
    }
}

impl netdojo::netconf::Condenser for Judge {
    fn condense(&self, trace: &str) -> std::result::Result<netdojo::netconf::Condensed, String> {
        use netdojo::llm::{Message, Role};
        let messages = [Message::new(Role::System, JUDGE_PROMPT), Message::new(Role::User, trace)];
        let body = self.chat.request(&messages, None);
        // Scorers are synchronous and may run inside the runner's runtime: the call gets a
        // thread and a runtime of its own.
        let exchange = std::thread::scope(|s| {
            s.spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())?
                    .block_on(self.chat.send(&body))
                    .map_err(|e| e.to_string())
            })
            .join()
            .map_err(|_| "the judge's thread panicked".to_string())?
        })?;
        let tokens = exchange.reply.usage.map_or(0, |u| u.prompt_tokens + u.completion_tokens);
        if exchange.reply.content.trim().is_empty() {
            return Err("the judge answered nothing".into());
        }
        Ok(netdojo::netconf::Condensed { text: exchange.reply.content, tokens })
    }
}

/// Options some environments read.
#[derive(Debug, Clone, Default)]
pub struct EnvOptions {
    /// dcgraph: a MALT text-protobuf model to use instead of the generated fabric.
    pub graph: Option<PathBuf>,
    /// dcgraph: how queries pick their node (`netpress`, `uniform`; empty: `netpress`).
    pub targets: String,
    /// gns3: the GNS3 controller (`http://127.0.0.1:3080`).
    pub gns3_url: Option<String>,
    /// gns3: a node mapping file (`{"R1": {"template": "c7200"}}`) over the tasks' own.
    pub gns3_nodes: Option<PathBuf>,
    /// netconf, gns3: the reasoning score's judge.
    pub judge: Option<Arc<Judge>>,
    /// netconf: routers from a warm pool (reset and checked between episodes) instead of fresh.
    pub warm_pool: bool,
    /// tools, or (dcgraph) code.
    pub interaction: Interaction,
}

pub fn app(name: &str, options: &EnvOptions) -> Result<App> {
    if options.interaction != Interaction::Tools && name != "dcgraph" {
        bail!(
            "--interaction code: only environment `dcgraph` offers it (NetPress's capacity planning); `{name}` has tools only"
        );
    }
    let mut app = tools_app(name, options)?;
    app.interaction = options.interaction;
    Ok(app)
}

fn tools_app(name: &str, options: &EnvOptions) -> Result<App> {
    match name {
        "dcgraph" => {
            let source = match &options.graph {
                Some(path) => GraphSource::Malt(path.clone()),
                None => GraphSource::Generated(Default::default()),
            };
            let factory = DcGraphFactory::new(source.clone())
                .with_context(|| format!("environment `dcgraph`: loading the graph ({source:?})"))?;
            let targets = match options.targets.as_str() {
                "" => Targets::default(),
                name => Targets::from_name(name)
                    .with_context(|| format!("--targets {name}: expected netpress or uniform"))?,
            };
            let generator =
                QueryGenerator::new(factory.graph().clone(), source.clone()).with_targets(targets);
            let factory: Arc<dyn EnvironmentFactory> = match options.interaction {
                Interaction::Tools => Arc::new(factory),
                Interaction::Code(keying) => {
                    let python = Python::from_venv(&code::default_venv())
                        .context("environment `dcgraph`, --interaction code")?;
                    Arc::new(CodeFactory::new(
                        factory.graph().clone(),
                        source,
                        keying,
                        python,
                        code::Limits::default(),
                    ))
                }
            };
            Ok(App {
                factory,
                generator: Arc::new(generator),
                scorers: netdojo::score::netpress_scorers(),
                interaction: Interaction::Tools,
            })
        }
        "routing" => {
            let factory = RoutingFactory::new(Default::default()).context(
                "environment `routing`: it builds real network namespaces, so it needs root (run as root)",
            )?;
            report_sweep(factory.swept());
            Ok(App {
                factory: Arc::new(factory),
                generator: Arc::new(RoutingGenerator),
                scorers: netdojo::score::repair_scorers(),
                interaction: Interaction::Tools,
            })
        }
        "netconf" => {
            let factory = if options.warm_pool { NetconfFactory::pooled() } else { NetconfFactory::new() }
                .context("environment `netconf`: it runs FRRouting routers in network namespaces")?;
            let model = netdojo::embed::default_dir();
            let embedder = netdojo::embed::Embedder::load(&model)
                .context("environment `netconf`: the reasoning score needs its embedding model")?;
            Ok(App {
                factory: Arc::new(factory),
                generator: Arc::new(NetconfGenerator),
                scorers: vec![
                    Box::new(netdojo::score::Correctness),
                    Box::new(netdojo::score::CheckRate),
                    Box::new(CommandScore),
                    Box::new(reasoning(embedder, options)),
                    Box::new(netdojo::score::Latency),
                ],
                interaction: Interaction::Tools,
            })
        }
        "k8s" => {
            let factory = netdojo::k8s::K8sFactory::new(Default::default()).context(
                "environment `k8s`: it builds the pods' network namespaces and nftables rules, so it needs root (run as root)",
            )?;
            report_sweep(factory.swept());
            Ok(App {
                factory: Arc::new(factory),
                generator: Arc::new(netdojo::k8s::K8sGenerator),
                scorers: netdojo::score::repair_scorers(),
                interaction: Interaction::Tools,
            })
        }
        "incident" => {
            let (factory, generator) = incident()?;
            report_sweep(factory.swept());
            let mut scorers = netdojo::score::repair_scorers();
            scorers.push(Box::new(netdojo::incident::IncidentScore));
            Ok(App {
                factory: Arc::new(factory),
                generator: Arc::new(generator),
                scorers,
                interaction: Interaction::Tools,
            })
        }
        "gns3" => gns3(options),
        other => bail!("unknown environment `{other}` (known: {})", ENVIRONMENTS.join(", ")),
    }
}

/// The incident labs (testdata/incident/labs), the environment that runs them and the
/// generator that draws tasks on them from the fault catalogue's candidates.
pub fn incident() -> Result<(IncidentFactory, IncidentGenerator)> {
    let dir = netdojo::incident::task::default_labs_dir();
    let labs = netdojo::incident::task::load_labs(&dir)
        .with_context(|| format!("environment `incident`: loading the labs of {}", dir.display()))?;
    let generator = IncidentGenerator::new(labs.clone(), netdojo::incident::faults::candidates);
    let factory = IncidentFactory::new(labs, Default::default()).context(
        "environment `incident`: it builds FRR labs in network namespaces, so it needs root and FRRouting",
    )?;
    Ok((factory, generator))
}

/// The GNS3 server and node mapping of `options`. The user and password come from
/// NETDOJO_GNS3_USER and NETDOJO_GNS3_PASSWORD (GNS3's default admin / admin), never from the
/// command line, which is saved with the run.
pub fn gns3_options(options: &EnvOptions) -> Result<netdojo::gns3::Gns3Options> {
    use netdojo::gns3::{Credentials, Gns3Options};
    let url = options
        .gns3_url
        .clone()
        .or_else(|| std::env::var("NETDOJO_GNS3_URL").ok())
        .context("environment `gns3`: give the GNS3 server with --gns3-url http://127.0.0.1:PORT (or NETDOJO_GNS3_URL)")?;
    let mut gns3 = Gns3Options::new(url);
    gns3.credentials = Credentials::from_env();
    if let Some(path) = &options.gns3_nodes {
        gns3 = gns3.with_mapping_file(path).with_context(|| format!("--gns3-nodes {}", path.display()))?;
    }
    Ok(gns3)
}

/// NetConfBench's reasoning score, with the judge when one was given.
fn reasoning(embedder: netdojo::embed::Embedder, options: &EnvOptions) -> ReasoningScore {
    let score = ReasoningScore::new(Arc::new(embedder));
    match &options.judge {
        Some(judge) => score.with_judge(judge.clone()),
        None => score,
    }
}

/// NetConfBench tasks on a GNS3 server.
fn gns3(options: &EnvOptions) -> Result<App> {
    use netdojo::gns3::Gns3Factory;
    let gns3 = gns3_options(options)?;
    let mut scorers: Vec<Box<dyn Scorer>> = vec![
        Box::new(netdojo::score::Correctness),
        Box::new(netdojo::score::CheckRate),
        Box::new(CommandScore),
        Box::new(netdojo::score::Latency),
    ];
    match netdojo::embed::Embedder::load(&netdojo::embed::default_dir()) {
        Ok(embedder) => scorers.push(Box::new(reasoning(embedder, options))),
        Err(e) => eprintln!(
            "environment `gns3`: no reasoning score ({e}); `cargo xtask fetch-model` fetches its model"
        ),
    }
    Ok(App {
        factory: Arc::new(Gns3Factory::new(gns3)),
        generator: Arc::new(NoGenerator("gns3")),
        scorers,
        interaction: Interaction::Tools,
    })
}

/// For environments that run only suites.
struct NoGenerator(&'static str);

impl TaskGenerator for NoGenerator {
    fn name(&self) -> &str {
        self.0
    }
    fn generate(&self, _seed: u64, _index: u64) -> Result<netdojo::Task, netdojo::TaskError> {
        Err(netdojo::TaskError::Generate {
            generator: self.0.into(),
            message: format!(
                "environment `{}` has no task generator: run a suite with --suite (testdata/gns3)",
                self.0
            ),
        })
    }
}

pub fn agent(name: &str, seed: u64, random_steps: usize) -> Result<Arc<dyn AgentFactory>> {
    Ok(match name {
        "oracle" => Arc::new(OracleFactory),
        "noop" => Arc::new(NoopFactory),
        "random" => Arc::new(RandomFactory { seed, steps: random_steps }),
        "openai" | "ollama" => {
            bail!("agent `{name}` is built with `llm_agent` (it needs the model's options)")
        }
        "mcp" => bail!("agent `mcp` is built with `mcp_agent` (it needs --agent-command or --agent-url)"),
        other => bail!("unknown agent `{other}` (known: {})", AGENTS.join(", ")),
    })
}

/// The oracle of the code interaction: the ground-truth Python of testdata/netpress-code.
pub fn code_oracle(keying: Option<Keying>) -> Result<Arc<dyn AgentFactory>> {
    let keying = keying.unwrap_or_default();
    let dir = CodeOracleFactory::default_dir();
    let oracle = CodeOracleFactory::load(&dir, keying)
        .map_err(anyhow::Error::msg)
        .context("--agent oracle --interaction code")?;
    Ok(Arc::new(oracle))
}

/// The options of `--agent mcp`: an agent behind an MCP server (the `netdojo.agent` protocol,
/// docs/mcp.md).
#[derive(Debug, Clone, clap::Args, Serialize, Deserialize)]
#[serde(default)]
pub struct McpAgentArgs {
    /// mcp: the agent server to start for each episode, speaking MCP on its stdio, e.g.
    /// "cargo xtask mcp serve-agent --agent oracle --suite S.jsonl". Split into words like a
    /// shell would (quotes, backslashes), but run without a shell.
    #[arg(long, conflicts_with = "agent_url")]
    pub agent_command: Option<String>,
    /// mcp: the agent server's streamable HTTP endpoint, e.g. http://127.0.0.1:8090/mcp.
    #[arg(long)]
    pub agent_url: Option<String>,
    /// mcp: the longest the agent server may take to connect or to answer one request, in
    /// seconds; past it the episode errors.
    #[arg(long, default_value_t = 300.0)]
    pub agent_timeout_s: f64,
}

impl Default for McpAgentArgs {
    fn default() -> Self {
        Self { agent_command: None, agent_url: None, agent_timeout_s: 300.0 }
    }
}

/// `--agent mcp`.
pub fn mcp_agent(args: &McpAgentArgs) -> Result<Arc<dyn AgentFactory>> {
    use netdojo::mcp::agent::McpAgentFactory;
    if !(args.agent_timeout_s.is_finite() && args.agent_timeout_s > 0.0) {
        bail!("--agent-timeout-s {}: a positive number of seconds", args.agent_timeout_s);
    }
    let factory = match (&args.agent_command, &args.agent_url) {
        (Some(command), None) => {
            let words = shlex::split(command)
                .with_context(|| format!("--agent-command {command:?}: unbalanced quotes"))?;
            let Some((program, rest)) = words.split_first() else {
                bail!("--agent-command is empty: give the agent server's command line");
            };
            McpAgentFactory::stdio(program.clone(), rest.to_vec())
        }
        (None, Some(url)) => McpAgentFactory::http(url.clone()).context("--agent-url")?,
        _ => bail!(
            "--agent mcp needs the agent server: --agent-command \"PROGRAM ARGS...\" (stdio) or --agent-url http://127.0.0.1:PORT/mcp"
        ),
    };
    Ok(Arc::new(factory.with_timeout(std::time::Duration::from_secs_f64(args.agent_timeout_s))))
}

/// The options of the LLM agents (`--agent openai|ollama`).
#[derive(Debug, Clone, Default, clap::Args, Serialize, Deserialize)]
#[serde(default)]
pub struct LlmArgs {
    /// openai, ollama: the model name the server knows (`smollm2-135m`, `gpt-4o`, `qwen2.5:7b`).
    /// With --prices (openai, ollama, mcp): the row of the price table.
    #[arg(long)]
    pub model: Option<String>,
    /// openai: the API base up to /v1 (default https://api.openai.com/v1); ollama: the server
    /// (default http://127.0.0.1:11434).
    #[arg(long)]
    pub base_url: Option<String>,
    /// openai: the environment variable holding the API key (default OPENAI_API_KEY when it is
    /// set; none sent otherwise). The key is never logged or written to the run directory.
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Sampling temperature (default: the server's).
    #[arg(long)]
    pub temperature: Option<f64>,
    /// Most tokens a reply may have.
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// Prompting strategy: single-turn, cot, few-shot, react.
    #[arg(long, default_value = "react")]
    pub strategy: String,
    /// How tools reach the model: native (tool calling), text (JSON in the answer) or code (a
    /// ```python block, NetPress §B.3). Default: native; code with --interaction code.
    #[arg(long)]
    pub tool_mode: Option<String>,
    /// few-shot: examples per episode.
    #[arg(long, default_value_t = 3)]
    pub shots: usize,
    /// Retries of a request on 429, 5xx and connection errors before the episode errors.
    #[arg(long, default_value_t = 4)]
    pub max_retries: u32,
    /// ollama: the context window (options.num_ctx).
    #[arg(long)]
    pub num_ctx: Option<u32>,
    /// ollama: ask for whole replies instead of a stream.
    #[arg(long)]
    pub no_stream: bool,
    /// openai: the header the API key goes in: `authorization` (a bearer token, the default)
    /// or a header name such as `api-key` (Azure OpenAI's classic deployment endpoints).
    #[arg(long)]
    pub api_key_header: Option<String>,
    /// openai: the `api-version` query parameter (Azure OpenAI's classic endpoints, e.g.
    /// 2024-10-21).
    #[arg(long)]
    pub api_version: Option<String>,
    /// openai, native tool mode: `tool_choice`: auto (default), required or none.
    #[arg(long, default_value = "auto")]
    pub tool_choice: String,
    /// Offer the `lookup-command` tool: the agent answers it from the command reference of the
    /// devices' dialect (FRR, Linux), not the network.
    #[arg(long)]
    pub lookup_command: bool,
    /// The command reference `--lookup-command` reads (default: testdata/commands).
    #[arg(long)]
    pub command_reference: Option<PathBuf>,
    /// Lookups answered per episode (`--lookup-command`).
    #[arg(long, default_value_t = 5)]
    pub max_lookups: usize,
}

/// The seed of the few-shot examples' tasks: derived from the run's seed, and never equal to
/// it, so an example is never one of the evaluated tasks.
fn shots_seed(seed: u64) -> u64 {
    let s = seed ^ 0x5eed_f00d_0000_0003;
    if s == seed { s.wrapping_add(1) } else { s }
}

/// The `openai` or `ollama` agent. `--seed` also seeds the model's sampling; few-shot examples
/// come from `app`'s generator with another seed.
pub fn llm_agent(name: &str, seed: u64, args: &LlmArgs, app: &App) -> Result<Arc<dyn AgentFactory>> {
    let model = args.model.clone().with_context(|| format!("--agent {name} needs --model"))?;
    let settings = Settings {
        strategy: args.strategy.parse::<Strategy>().map_err(anyhow::Error::msg).context("--strategy")?,
        tools: match (&args.tool_mode, app.interaction) {
            (Some(mode), _) => mode.parse::<ToolMode>().map_err(anyhow::Error::msg).context("--tool-mode")?,
            (None, Interaction::Code(_)) => ToolMode::Code,
            (None, Interaction::Tools) => ToolMode::Native,
        },
        shots: args.shots,
        retry: RetryPolicy { max_retries: args.max_retries, ..RetryPolicy::default() },
        lookup: args.lookup_command.then(|| Lookup { max_lookups: args.max_lookups, ..Lookup::default() }),
        ..Settings::default()
    };
    let api_key_header = match args.api_key_header.as_deref() {
        None => None,
        Some(h) if h.eq_ignore_ascii_case("authorization") => None,
        Some(h) => Some(h.to_string()),
    };
    let sampling = Sampling { temperature: args.temperature, seed: Some(seed), max_tokens: args.max_tokens };
    let chat: Arc<dyn ChatModel> = if name == "openai" {
        let api_key_env = args
            .api_key_env
            .clone()
            .or_else(|| std::env::var_os("OPENAI_API_KEY").is_some().then(|| "OPENAI_API_KEY".to_string()));
        let config = OpenAiConfig {
            api_key_env,
            api_key_header,
            api_version: args.api_version.clone(),
            // Empty in the saved arguments of runs made before the option existed.
            tool_choice: match args.tool_choice.as_str() {
                "" => ToolChoice::Auto,
                choice => {
                    choice.parse::<ToolChoice>().map_err(anyhow::Error::msg).context("--tool-choice")?
                }
            },
            sampling,
            ..OpenAiConfig::new(args.base_url.as_deref().unwrap_or("https://api.openai.com/v1"), model)
        };
        let chat = OpenAiChat::new(config)?;
        // Before any episode: a model the server does not serve is a typo, not N errored episodes.
        tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(chat.check_model())?;
        Arc::new(chat)
    } else {
        let config = OllamaConfig {
            stream: !args.no_stream,
            num_ctx: args.num_ctx,
            sampling,
            ..OllamaConfig::new(args.base_url.as_deref().unwrap_or("http://127.0.0.1:11434"), model)
        };
        Arc::new(OllamaChat::new(config)?)
    };
    let mut factory = LlmAgentFactory::new(chat, settings.clone());
    if args.lookup_command {
        let dir = args
            .command_reference
            .clone()
            .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/commands")));
        let reference = CommandReference::load(&dir).context("--lookup-command")?;
        factory = factory.with_reference(Arc::new(reference));
    } else if args.command_reference.is_some() {
        bail!("--command-reference is read only with --lookup-command");
    }
    if settings.strategy != Strategy::FewShot {
        return Ok(Arc::new(factory));
    }
    // Enough tasks that most labels have an example of their own.
    let pool_seed = shots_seed(seed);
    let count = 48;
    let pool = (0..count)
        .map(|i| app.generator.generate(pool_seed, i))
        .collect::<Result<Vec<_>, _>>()
        .context("generating the few-shot examples")?;
    let source = serde_json::json!({"generator": app.generator.name(), "seed": pool_seed, "count": count});
    Ok(Arc::new(factory.with_examples(pool, source)))
}

/// Says what the start-up sweep of an environment on namespaces removed, if anything.
fn report_sweep(swept: &netdojo::linux::netns::Swept) {
    if !swept.namespaces.is_empty() {
        eprintln!(
            "removed {} namespace(s) left by {} killed run(s) of netdojo",
            swept.namespaces.len(),
            swept.episodes.len()
        );
    }
}
