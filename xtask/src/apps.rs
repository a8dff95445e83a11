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

pub const ENVIRONMENTS: &[&str] = &["dcgraph", "routing", "netconf", "k8s"];
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
        "k8s" => {
            let factory = netdojo::k8s::K8sFactory::new(Default::default()).context(
                "environment `k8s`: it builds the pods' network namespaces and nftables rules, so it needs root (run as root)",
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
                generator: Arc::new(netdojo::k8s::K8sGenerator),
                scorers: netdojo::score::netpress_scorers(),
            })
        }
        other => bail!("unknown environment `{other}` (known: {})", ENVIRONMENTS.join(", ")),
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
