//! The names on the command line, wired to the crates behind them. The one place that knows
//! every backend and agent.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use netdojo::dcgraph::{DcGraphFactory, GraphSource, QueryGenerator};
use netdojo::linux::routing::{RoutingFactory, RoutingGenerator};
use netdojo::netconf::{CommandScore, NetconfFactory, NetconfGenerator, ReasoningScore};
use netdojo::scripted::{NoopFactory, OracleFactory, RandomFactory};
use netdojo::{AgentFactory, EnvironmentFactory, Scorer, TaskGenerator};

pub const ENVIRONMENTS: &[&str] = &["dcgraph", "routing", "netconf", "gns3"];
pub const AGENTS: &[&str] = &["oracle", "noop", "random"];

/// An environment with what runs it: the factory, the generator of its tasks, its scorers.
pub struct App {
    pub factory: Arc<dyn EnvironmentFactory>,
    pub generator: Arc<dyn TaskGenerator>,
    pub scorers: Vec<Box<dyn Scorer>>,
}

/// Options some environments read.
#[derive(Debug, Clone, Default)]
pub struct EnvOptions {
    /// dcgraph: a MALT text-protobuf model to use instead of the generated fabric.
    pub graph: Option<PathBuf>,
    /// gns3: the GNS3 controller (`http://127.0.0.1:3080`).
    pub gns3_url: Option<String>,
    /// gns3: a node mapping file (`{"R1": {"template": "c7200"}}`) over the tasks' own.
    pub gns3_nodes: Option<PathBuf>,
}

pub fn app(name: &str, options: &EnvOptions) -> Result<App> {
    match name {
        "dcgraph" => {
            let source = match &options.graph {
                Some(path) => GraphSource::Malt(path.clone()),
                None => GraphSource::Generated(Default::default()),
            };
            let factory = DcGraphFactory::new(source.clone())
                .with_context(|| format!("environment `dcgraph`: loading the graph ({source:?})"))?;
            let generator = QueryGenerator::new(factory.graph().clone(), source);
            Ok(App {
                factory: Arc::new(factory),
                generator: Arc::new(generator),
                scorers: netdojo::score::netpress_scorers(),
            })
        }
        "routing" => {
            let factory = RoutingFactory::new(Default::default()).context(
                "environment `routing`: it builds real network namespaces, so it needs root (run as root)",
            )?;
            let swept = factory.swept();
            if !swept.namespaces.is_empty() {
                eprintln!(
                    "removed {} namespace(s) left by {} killed run(s) of netdojo",
                    swept.namespaces.len(),
                    swept.episodes.len()
                );
            }
            Ok(App {
                factory: Arc::new(factory),
                generator: Arc::new(RoutingGenerator),
                scorers: netdojo::score::netpress_scorers(),
            })
        }
        "netconf" => {
            let factory = NetconfFactory::new()
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
                    Box::new(ReasoningScore::new(Arc::new(embedder))),
                    Box::new(netdojo::score::Latency),
                ],
            })
        }
        "gns3" => gns3(options),
        other => bail!("unknown environment `{other}` (known: {})", ENVIRONMENTS.join(", ")),
    }
}

/// NetConfBench tasks on a GNS3 server. The user and password come from NETDOJO_GNS3_USER and
/// NETDOJO_GNS3_PASSWORD (GNS3's default admin / admin), never from the command line, which
/// is saved with the run.
fn gns3(options: &EnvOptions) -> Result<App> {
    use netdojo::gns3::{Credentials, Gns3Factory, Gns3Options};
    let url = options
        .gns3_url
        .clone()
        .or_else(|| std::env::var("NETDOJO_GNS3_URL").ok())
        .context("environment `gns3`: give the GNS3 server with --gns3-url http://127.0.0.1:PORT (or NETDOJO_GNS3_URL)")?;
    let mut gns3 = Gns3Options::new(url);
    let defaults = Credentials::default();
    gns3.credentials = Credentials {
        username: std::env::var("NETDOJO_GNS3_USER").unwrap_or(defaults.username),
        password: std::env::var("NETDOJO_GNS3_PASSWORD").unwrap_or(defaults.password),
    };
    if let Some(path) = &options.gns3_nodes {
        gns3 = gns3.with_mapping_file(path).with_context(|| format!("--gns3-nodes {}", path.display()))?;
    }
    let mut scorers: Vec<Box<dyn Scorer>> = vec![
        Box::new(netdojo::score::Correctness),
        Box::new(netdojo::score::CheckRate),
        Box::new(CommandScore),
        Box::new(netdojo::score::Latency),
    ];
    match netdojo::embed::Embedder::load(&netdojo::embed::default_dir()) {
        Ok(embedder) => scorers.push(Box::new(ReasoningScore::new(Arc::new(embedder)))),
        Err(e) => eprintln!(
            "environment `gns3`: no reasoning score ({e}); `cargo xtask fetch-model` fetches its model"
        ),
    }
    Ok(App { factory: Arc::new(Gns3Factory::new(gns3)), generator: Arc::new(NoGenerator("gns3")), scorers })
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
        other => bail!("unknown agent `{other}` (known: {})", AGENTS.join(", ")),
    })
}
