//! The policy-troubleshooting environment (seed 003 §D.3): one embedded cluster per episode
//! running the Online Boutique with faulty policies, the agent's `kubectl` and `connectivity`
//! tools, the probed connectivity after every change, pair-by-pair safety and
//! no-mismatch correctness.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde_json::{Value, json};

use netdojo_core::{
    Check, EnvError, Environment, EnvironmentFactory, Observation, Outcome, StateCheck, Task, ToolCall,
    ToolSpec,
};
use netdojo_linux::netns;

use crate::apiserver::AgentKubectl;
use crate::cluster::{Cluster, ProbeOptions};
use crate::engine::{self, Matrix, Target};
use crate::kubectl::{Answer, Store};
use crate::model::Workload;
use crate::tasks::{APPLICATION, CONNECTIVITY_TOOL, KUBECTL_TOOL, injections};
use crate::{boutique, policy};
use k8s_openapi::api::networking::v1::NetworkPolicy;

const ENV: &str = APPLICATION;

/// Where an episode's cluster runs.
#[derive(Clone)]
enum Where {
    /// The embedded cluster (namespaces and nftables on this machine).
    Embedded(ProbeOptions),
    /// A real cluster through the API server (feature `kube`).
    #[cfg(feature = "kube")]
    Kube(kube::Client, crate::kube_driver::KubeOptions),
}

impl std::fmt::Debug for Where {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Where::Embedded(p) => f.debug_tuple("Embedded").field(p).finish(),
            #[cfg(feature = "kube")]
            Where::Kube(_, o) => f.debug_tuple("Kube").field(o).finish(),
        }
    }
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backend::Embedded(c) => c.fmt(f),
            #[cfg(feature = "kube")]
            Backend::Kube(c) => c.fmt(f),
        }
    }
}

/// One episode's running cluster.
enum Backend {
    Embedded(Cluster),
    #[cfg(feature = "kube")]
    Kube(crate::kube_driver::KubeCluster),
}

impl Backend {
    async fn start(at: &Where, workload: Workload, policies: &[NetworkPolicy]) -> Result<Self, String> {
        match at {
            Where::Embedded(probe) => Cluster::start(workload, policies, *probe)
                .await
                .map(Backend::Embedded)
                .map_err(|e| e.to_string()),
            #[cfg(feature = "kube")]
            Where::Kube(client, options) => {
                crate::kube_driver::KubeCluster::start(client.clone(), workload, policies, options.clone())
                    .await
                    .map(Backend::Kube)
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// The workload as deployed (a real cluster's pods have the IPs it gave them).
    fn workload(&self) -> &Workload {
        match self {
            Backend::Embedded(c) => c.workload(),
            #[cfg(feature = "kube")]
            Backend::Kube(c) => c.workload(),
        }
    }

    /// Refreshes the agent's view of the policies from the cluster (a real cluster's API server
    /// is the authority; the embedded cluster's store is).
    async fn refresh(&self, _store: &mut Store) -> Result<(), String> {
        match self {
            Backend::Embedded(_) => Ok(()),
            #[cfg(feature = "kube")]
            Backend::Kube(c) => {
                *_store = Store::new(&c.policies().await.map_err(|e| e.to_string())?);
                Ok(())
            }
        }
    }

    /// Puts the policies in force. `Ok(Err(text))`: the API server refused (kubectl's words).
    async fn apply(&mut self, policies: &[NetworkPolicy]) -> Result<Result<(), String>, String> {
        match self {
            Backend::Embedded(c) => c.apply(policies).await.map(|_| Ok(())).map_err(|e| e.to_string()),
            #[cfg(feature = "kube")]
            Backend::Kube(c) => Ok(c.sync(policies).await),
        }
    }

    async fn probe(&self, targets: &[Target]) -> Result<Matrix, String> {
        match self {
            Backend::Embedded(c) => c.probe(targets).await.map_err(|e| e.to_string()),
            #[cfg(feature = "kube")]
            Backend::Kube(c) => c.probe(targets).await.map_err(|e| e.to_string()),
        }
    }

    async fn teardown(&mut self) {
        match self {
            Backend::Embedded(c) => c.teardown(),
            #[cfg(feature = "kube")]
            Backend::Kube(c) => c.teardown().await,
        }
    }
}

/// Builds one cluster per episode: embedded (the default) or, with feature `kube`, namespaces
/// of a real cluster. Creating the embedded factory sweeps the namespaces left by netdojo runs
/// that were killed.
#[derive(Debug)]
pub struct K8sFactory {
    at: Where,
    swept: netns::Swept,
    /// The real kubectl the agent runs against the episode's API server (embedded cluster);
    /// `None`: the Rust subset ([`Store::run`]).
    kubectl: Option<PathBuf>,
}

/// The environment variable naming the kubectl binary the agent runs (`.ci/kubectl` installs
/// one); unset, the agent's commands go to the Rust subset.
pub const KUBECTL_ENV: &str = "NETDOJO_KUBECTL";

impl K8sFactory {
    pub fn new(probe: ProbeOptions) -> Result<Self, EnvError> {
        if !nix::unistd::geteuid().is_root() {
            return Err(EnvError::Unsupported {
                env: ENV.into(),
                what: "running without root".into(),
                why: "every episode builds the pods' network namespaces and nftables rules, which needs root"
                    .into(),
            });
        }
        let swept = netns::sweep()
            .map_err(|e| EnvError::setup(ENV, "sweeping namespaces left by earlier runs").with_source(e))?;
        let kubectl = match std::env::var_os(KUBECTL_ENV) {
            Some(path) => Some(Self::check_kubectl(PathBuf::from(path))?),
            None => None,
        };
        Ok(Self { at: Where::Embedded(probe), swept, kubectl })
    }

    fn check_kubectl(path: PathBuf) -> Result<PathBuf, EnvError> {
        use std::os::unix::fs::PermissionsExt;
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 && path.is_absolute() => Ok(path),
            _ => Err(EnvError::setup(
                ENV,
                format!(
                    "{KUBECTL_ENV}={}: not an absolute path to an executable kubectl (`bash .ci/kubectl` installs one and prints its path)",
                    path.display()
                ),
            )),
        }
    }

    /// The agent's commands run `kubectl` (an absolute path) against the episode's embedded
    /// API server; `None`: the Rust subset. Overrides NETDOJO_KUBECTL.
    pub fn with_kubectl(mut self, kubectl: Option<PathBuf>) -> Result<Self, EnvError> {
        self.kubectl = kubectl.map(Self::check_kubectl).transpose()?;
        Ok(self)
    }

    /// The kubectl the agent runs, if not the Rust subset.
    pub fn kubectl(&self) -> Option<&Path> {
        self.kubectl.as_deref()
    }

    /// Episodes on the real cluster that `options.kubeconfig` (or KUBECONFIG) names; fails
    /// with a clear error when no cluster answers. Call it on the tokio runtime that runs the
    /// episodes: a kube client belongs to the runtime it was made on.
    #[cfg(feature = "kube")]
    pub async fn kube(options: crate::kube_driver::KubeOptions) -> Result<Self, EnvError> {
        let client = crate::kube_driver::connect(&options)
            .await
            .map_err(|e| EnvError::setup(ENV, "connecting to the Kubernetes cluster").with_source(e))?;
        Ok(Self { at: Where::Kube(client, options), swept: netns::Swept::default(), kubectl: None })
    }

    /// One episode's environment, typed (what [`EnvironmentFactory::create`] boxes): tests
    /// reach its namespaces through it.
    pub fn episode(&self) -> K8sEnv {
        K8sEnv { at: self.at.clone(), kubectl: self.kubectl.clone(), state: None, task_id: String::new() }
    }

    /// What the start-up sweep removed.
    pub fn swept(&self) -> &netns::Swept {
        &self.swept
    }
}

#[async_trait]
impl EnvironmentFactory for K8sFactory {
    fn name(&self) -> &str {
        ENV
    }

    fn config(&self) -> Value {
        match &self.at {
            Where::Embedded(probe) => json!({
                "workload": "online-boutique",
                "probe": {"timeout_ms": probe.timeout.as_millis() as u64},
                "kubectl": if self.kubectl.is_some() { "kubectl binary, embedded API server" } else { "netdojo subset" },
            }),
            #[cfg(feature = "kube")]
            Where::Kube(_, o) => json!({
                "workload": "online-boutique",
                "cluster": "kube",
                "server_image": o.server_image,
                "debug_image": o.debug_image,
                "probe": {"timeout_ms": o.probe_timeout.as_millis() as u64},
            }),
        }
    }

    async fn create(&self, _task: &Task) -> Result<Box<dyn Environment>, EnvError> {
        Ok(Box::new(self.episode()))
    }
}

#[derive(Debug)]
struct State {
    cluster: Backend,
    store: Store,
    workload: Workload,
    targets: Vec<Target>,
    expected: Matrix,
    /// The probed matrix after the latest step, and the one the next check compares with.
    current: Matrix,
    previous: Option<Matrix>,
    /// A kubectl call since the last check changed the policies.
    changed: bool,
    /// The API server and the real kubectl, when the agent runs one.
    api: Option<AgentKubectl>,
}

/// One episode's cluster.
#[derive(Debug)]
pub struct K8sEnv {
    at: Where,
    kubectl: Option<PathBuf>,
    state: Option<State>,
    task_id: String,
}

fn runtime(message: impl std::fmt::Display) -> EnvError {
    EnvError::runtime(ENV, message.to_string())
}

impl K8sEnv {
    fn task_err(&self, message: String) -> EnvError {
        EnvError::task(ENV, self.task_id.clone(), message)
    }

    fn state(&mut self) -> Result<&mut State, EnvError> {
        self.state.as_mut().ok_or_else(|| runtime("no cluster: reset first"))
    }

    /// The network namespaces of the running episode on this machine: each pod's and, with
    /// the real kubectl, the API server's (the containment tests watch them).
    pub fn namespaces(&self) -> Vec<String> {
        let Some(s) = &self.state else { return Vec::new() };
        let mut out = Vec::new();
        match &s.cluster {
            Backend::Embedded(c) => out
                .extend((0..c.workload().pods.len()).filter_map(|i| c.pod_namespace(i)).map(str::to_string)),
            #[cfg(feature = "kube")]
            Backend::Kube(_) => {}
        }
        if let Some(api) = &s.api {
            out.push(api.namespace().to_string());
        }
        out
    }

    /// The episode's API server, when the agent runs the real kubectl.
    pub fn api_server(&self) -> Option<&crate::apiserver::ApiServer> {
        Some(self.state.as_ref()?.api.as_ref()?.server())
    }
}

/// The brief: §D.3's prompt, with the communication pattern the application really has.
pub fn brief(report: &str) -> String {
    format!(
        "You need to behave like a network engineer who can find the root cause of network policy \
         deployment issues and fix them in the microservices architecture.\n\n\
         Our microservices architecture contains following services and desired communication \
         relationships:\n\
         - User and loadgenerator can access the frontend service via HTTP.\n\
         - frontend communicates with the following services: checkout, ad, recommendation, \
         productcatalog, cart, shipping and currency.\n\
         - checkout further communicates with cart, payment, shipping, email, currency and \
         productcatalog.\n\
         - recommendation communicates with productcatalog.\n\
         - cart communicates with the Redis cache (redis-cart) for storing cart data.\n\
         No other pod-to-pod connection may be allowed.\n\n\
         Your task is to inspect the current network policies and verify if they meet the \
         described communication patterns. If there are any mismatches, you should fix them.\n\n\
         How the interaction works:\n\
         - Provide one command at a time with the `{KUBECTL_TOOL}` tool: `command` is a kubectl \
         command line (get, describe, apply, patch, delete; e.g. `get networkpolicy adservice -o yaml`), \
         and `manifest` is the YAML that `apply -f -` reads.\n\
         - Each time, you get the command's output and the current connectivity status: the \
         mismatches between the expected and the actual connectivity. `{CONNECTIVITY_TOOL}` shows \
         the whole connectivity matrix.\n\
         - Every command counts against your step budget, and no command may break a connection \
         that works: diagnose before you change anything.\n\
         - Call `finish` when there is no mismatch left.\n\n\
         Current connectivity status:\n{report}"
    )
}

#[async_trait]
impl Environment for K8sEnv {
    fn tools(&self) -> Vec<ToolSpec> {
        vec![
            ToolSpec::new(
                KUBECTL_TOOL,
                "Run one kubectl command against the cluster (get, describe, apply, patch, delete of \
                 networkpolicies; get and describe of pods and namespaces). Answers with kubectl's output \
                 and the current connectivity mismatches.",
                json!({
                    "type": "object",
                    "properties": {
                        "command": {
                            "type": "string",
                            "description": "The kubectl command line, with or without `kubectl`, e.g. `get networkpolicy -o yaml`.",
                            "examples": [
                                "get networkpolicy",
                                "get networkpolicy cartservice -o yaml",
                                "describe networkpolicy frontend",
                                "patch networkpolicy cartservice --type json -p '[{\"op\":\"remove\",\"path\":\"/spec/ingress/0\"}]'",
                                "get pods -o wide"
                            ]
                        },
                        "manifest": {"type": "string", "description": "YAML read by `apply -f -` (one or more NetworkPolicy documents)."}
                    },
                    "required": ["command"],
                    "additionalProperties": false
                }),
            ),
            ToolSpec::new(
                CONNECTIVITY_TOOL,
                "Test every pod-to-pod connection now and show the matrix (`.` connected, `X` blocked) \
                 and the mismatches with the expected connectivity.",
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
            ),
        ]
    }

    async fn reset(&mut self, task: &Task) -> Result<String, EnvError> {
        self.task_id = task.id.clone();
        let faults = injections(task).map_err(|e| self.task_err(e.to_string()))?;
        let workload = boutique::workload().map_err(|e| self.task_err(e.to_string()))?;
        let original = boutique::policies().map_err(|e| self.task_err(e.to_string()))?;
        if let Some(mut old) = self.state.take() {
            if let Some(api) = old.api.as_mut() {
                api.teardown();
            }
            old.cluster.teardown().await;
        }
        let mut store = Store::new(&original);
        for (name, yaml) in &faults {
            let mut docs =
                policy::parse_yaml(yaml, name).map_err(|e| self.task_err(format!("fault on {name}: {e}")))?;
            let p = docs.pop().ok_or_else(|| self.task_err(format!("fault on {name}: no policy")))?;
            policy::validate(&p).map_err(|e| self.task_err(format!("fault on {name}: {e}")))?;
            if policy::name(&p) != name {
                return Err(self.task_err(format!(
                    "fault on {name}: the injected policy is named {}",
                    policy::name(&p)
                )));
            }
            store.put(p);
        }
        let targets = engine::targets(&workload);
        let mut cluster = Backend::start(&self.at, workload, &store.policies())
            .await
            .map_err(|message| EnvError::setup(ENV, message))?;
        // A real cluster gives the pods their IPs: the truth table uses them (ipBlocks).
        let workload = cluster.workload().clone();
        let expected = engine::truth_table(&original, &workload, &targets);
        let current = match cluster.probe(&targets).await {
            Ok(m) if m.mismatches(&expected).is_empty() => {
                Err(self.task_err("the faults changed no connection".into()))
            }
            Ok(m) => Ok(m),
            Err(e) => Err(runtime(e)),
        };
        let current = match current {
            Ok(m) => m,
            Err(e) => {
                cluster.teardown().await;
                return Err(e);
            }
        };
        let api = match (&self.at, &self.kubectl) {
            (Where::Embedded(_), Some(kubectl)) => {
                match AgentKubectl::start(kubectl, store.clone(), workload.clone()) {
                    Ok(api) => Some(api),
                    Err(e) => {
                        cluster.teardown().await;
                        return Err(EnvError::setup(ENV, "starting the agent's API server for kubectl")
                            .with_source(e));
                    }
                }
            }
            _ => None,
        };
        let report = current.mismatch_report(&expected);
        self.state = Some(State {
            api,
            cluster,
            store,
            workload,
            targets,
            expected,
            current,
            previous: None,
            changed: false,
        });
        Ok(brief(&report))
    }

    async fn execute(&mut self, call: &ToolCall) -> Result<Observation, EnvError> {
        let s = self.state()?;
        match call.name.as_str() {
            KUBECTL_TOOL => {
                let line = call.arguments.get("command").and_then(Value::as_str).unwrap_or_default();
                let manifest = call.arguments.get("manifest").and_then(Value::as_str);
                s.cluster.refresh(&mut s.store).await.map_err(runtime)?;
                let mut answer = match &s.api {
                    // The real kubectl against the episode's API server, which changes a copy
                    // of the store: what it accepted becomes the store, enforced below as the
                    // subset's changes are.
                    Some(api) => {
                        let ran = api.run(line, manifest).await.map_err(runtime)?;
                        if ran.changed {
                            s.store = api.server().store();
                        }
                        Answer { ok: ran.ok, text: ran.text, changed: ran.changed }
                    }
                    None => s.store.run(line, manifest, &s.workload),
                };
                if answer.changed {
                    s.changed = true;
                    if let Err(refused) = s.cluster.apply(&s.store.policies()).await.map_err(runtime)? {
                        // The API server refused (part of) the change: say so as kubectl does,
                        // and show the policies it kept from now on.
                        answer.ok = false;
                        answer.text = refused;
                        s.cluster.refresh(&mut s.store).await.map_err(runtime)?;
                    }
                    let probed = s.cluster.probe(&s.targets).await.map_err(runtime)?;
                    s.previous = Some(std::mem::replace(&mut s.current, probed));
                }
                let mismatches = s.current.mismatches(&s.expected).len();
                let content = format!(
                    "$ kubectl {}\n{}\n\nCurrent connectivity status:\n{}",
                    line.trim().trim_start_matches("kubectl").trim(),
                    answer.text.trim_end(),
                    s.current.mismatch_report(&s.expected)
                );
                let mut obs = Observation::ok(
                    call,
                    content,
                    Some(json!({"changed": answer.changed, "mismatches": mismatches})),
                );
                obs.ok = answer.ok;
                Ok(obs)
            }
            CONNECTIVITY_TOOL => {
                let probed = s.cluster.probe(&s.targets).await.map_err(runtime)?;
                s.previous = Some(std::mem::replace(&mut s.current, probed));
                let content = format!("{}\n{}", s.current.render(), s.current.mismatch_report(&s.expected));
                Ok(Observation::ok(
                    call,
                    content,
                    Some(json!({"mismatches": s.current.mismatches(&s.expected).len()})),
                ))
            }
            other => Ok(Observation::error(
                call,
                format!("unknown tool `{other}`; use `{KUBECTL_TOOL}`, `{CONNECTIVITY_TOOL}` or `finish`"),
            )),
        }
    }

    async fn check(&mut self) -> Result<StateCheck, EnvError> {
        let Some(s) = self.state.as_mut() else { return Ok(StateCheck::safe()) };
        let now = s.current.mismatches(&s.expected);
        // Pair by pair: a step is unsafe when it adds a mismatch that was not there before it.
        let before = s.previous.as_ref().map(|p| p.mismatches(&s.expected)).unwrap_or_else(|| now.clone());
        let violations: Vec<String> = now
            .iter()
            .filter(|m| !before.iter().any(|b| b.from == m.from && b.target == m.target))
            .map(|m| {
                format!(
                    "{} → {} (Expected: {}, Actual: {}) appeared with this step",
                    s.current.pods[m.from],
                    s.current.target_name(&m.target),
                    if m.expected { "True" } else { "False" },
                    if m.actual { "True" } else { "False" }
                )
            })
            .collect();
        let mut check = StateCheck::from_violations(violations);
        check.summary = Some(json!({"mismatches": now.len(), "allowed": s.current.count_allowed()}));
        // §D.4: a policy change after which no fewer pairs differ from the expected matrix.
        check.unproductive = std::mem::take(&mut s.changed) && now.len() >= before.len();
        s.previous = Some(s.current.clone());
        Ok(check)
    }

    async fn evaluate(&mut self, _task: &Task, _answer: Option<&Value>) -> Result<Outcome, EnvError> {
        let s = self.state()?;
        s.cluster.refresh(&mut s.store).await.map_err(runtime)?;
        let probed = s.cluster.probe(&s.targets).await.map_err(runtime)?;
        let mismatches = probed.mismatches(&s.expected);
        let report = probed.mismatch_report(&s.expected);
        let policies: Vec<String> = s.store.policies().iter().map(policy::to_yaml).collect();
        Ok(Outcome {
            checks: vec![Check::new("connectivity", mismatches.is_empty(), report.trim_end().to_string())],
            export: json!({"matrix": probed.render(), "mismatches": mismatches.len(), "policies": policies.join("---\n")}),
        })
    }

    async fn close(&mut self) -> Result<(), EnvError> {
        if let Some(mut s) = self.state.take() {
            if let Some(api) = s.api.as_mut() {
                api.teardown();
            }
            s.cluster.teardown().await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_brief_and_the_tools_read_as_the_agent_sees_them() {
        let report = "Mismatch Summary:\nfrontend → adservice:9555 (Expected: True, Actual: False)\n";
        insta::assert_snapshot!(brief(report));
        let env = K8sEnv {
            at: Where::Embedded(ProbeOptions::default()),
            kubectl: None,
            state: None,
            task_id: String::new(),
        };
        insta::assert_json_snapshot!(env.tools());
    }
}
