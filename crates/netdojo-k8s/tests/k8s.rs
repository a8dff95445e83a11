//! Integration tests of netdojo-k8s: the embedded cluster on real namespaces and nftables.
//! One test crate (link time dominates CI); modules by subject.

mod cluster {
    use futures::StreamExt;
    use netdojo_k8s::cluster::{Cluster, ProbeOptions};
    use netdojo_k8s::{engine, random};
    use rand::SeedableRng;

    pub fn root_or_skip(what: &str) -> bool {
        netdojo_testkit::root_or_skip(what, "network namespaces, nftables")
    }

    /// The random policy sets the real-network property test runs when
    /// NETDOJO_K8S_PROPERTY_SETS does not say (CI sets it higher: .ci/run).
    const DEFAULT_PROPERTY_SETS: usize = 500;
    /// Policy sets applied in place on one random workload before the next.
    const SETS_PER_CLUSTER: usize = 20;
    /// Clusters probed at once.
    const CLUSTERS_AT_ONCE: usize = 4;

    /// The probed matrix equals the truth table on random workloads and policy sets, on the
    /// real network (namespaces, nftables, sockets): NETDOJO_K8S_PROPERTY_SETS sets (default
    /// 500, ~85 s of a debug build on the loaded 2-core machine; CI runs 2000), 20 per random
    /// workload, re-applied in place. The in-memory half of the property (compiled rules vs
    /// truth table) covers 3000 sets in the unit tests.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn probed_matrix_equals_the_truth_table_on_random_sets() {
        if !root_or_skip("probed_matrix_equals_the_truth_table_on_random_sets") {
            return;
        }
        let sets = match std::env::var("NETDOJO_K8S_PROPERTY_SETS") {
            Ok(v) => v.parse::<usize>().unwrap_or_else(|_| {
                panic!("NETDOJO_K8S_PROPERTY_SETS={v:?}: expected a number of policy sets, e.g. 1000")
            }),
            Err(_) => DEFAULT_PROPERTY_SETS,
        };
        let started = std::time::Instant::now();
        // The clusters run a few at a time: a probe mostly waits (a denied flow is a timeout),
        // so one cluster after another left the cores idle for minutes in CI.
        let clusters = sets.div_ceil(SETS_PER_CLUSTER);
        let results: Vec<(usize, usize, usize)> = futures::stream::iter((0..clusters).map(|c| {
            let n = SETS_PER_CLUSTER.min(sets - c * SETS_PER_CLUSTER);
            one_cluster(c as u64, n)
        }))
        .buffer_unordered(CLUSTERS_AT_ONCE)
        .collect()
        .await;
        let (compared, denied, done) =
            results.iter().fold((0, 0, 0), |(c, d, n), (c1, d1, n1)| (c + c1, d + d1, n + n1));
        let took = started.elapsed();
        eprintln!(
            "{done} random policy sets on the real network ({compared} pairs, {denied} denied): {:.1} s, {:.1} ms per set",
            took.as_secs_f64(),
            took.as_secs_f64() * 1000.0 / done.max(1) as f64
        );
        assert_eq!(done, sets);
        assert!(compared > 2 * sets && denied > sets / 2, "compared {compared}, denied {denied}");
    }

    /// `n` random policy sets on one random workload (seeded by `cluster_seed`), applied in
    /// place and probed: the pairs compared, those denied, and the sets done.
    async fn one_cluster(cluster_seed: u64, n: usize) -> (usize, usize, usize) {
        let (mut compared, mut denied) = (0, 0);
        let mut rng = random::R::seed_from_u64(1000 + cluster_seed);
        let workload = random::workload(&mut rng);
        let targets = engine::targets(&workload);
        let mut cluster =
            Cluster::start(workload.clone(), &[], ProbeOptions::default()).await.expect("cluster");
        for set in 0..n {
            let policies = random::policies(&mut rng, &workload);
            cluster.apply(&policies).await.expect("apply");
            let expected = engine::truth_table(&policies, &workload, &targets);
            let actual = cluster.probe(&targets).await.expect("probe");
            let mismatches = actual.mismatches(&expected);
            assert!(
                mismatches.is_empty(),
                "cluster {cluster_seed} set {set}:\n{}\nexpected:\n{}\nactual:\n{}\npolicies:\n{}",
                actual.mismatch_report(&expected),
                expected.render(),
                actual.render(),
                policies.iter().map(netdojo_k8s::policy::to_yaml).collect::<Vec<_>>().join("---\n"),
            );
            compared += expected.allowed.iter().flatten().flatten().count();
            denied += expected.allowed.iter().flatten().filter(|c| **c == Some(false)).count();
        }
        let prefix = cluster.pod_namespace(0).and_then(|n| n.split('-').next()).map(str::to_string);
        cluster.teardown();
        let left = netdojo_linux::netns::list_with_prefix(&prefix.expect("prefix"));
        assert!(left.is_empty(), "left behind: {left:?}");
        (compared, denied, n)
    }

    /// A flow the old rules admitted is denied as soon as new rules deny it, even when it
    /// keeps its 5-tuple: applying flushes connection tracking. Without the flush the kernel
    /// keeps accepting it as `established` for 30 s (the CI failure this test pins down: a
    /// probe that reused a source port saw a denied UDP target as open).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_denied_flow_stays_denied_when_it_reuses_an_admitted_tuple() {
        use std::collections::BTreeMap;
        use std::time::Duration;

        use netdojo_k8s::model::{ContainerPort, Protocol, Workload};

        if !root_or_skip("a_denied_flow_stays_denied_when_it_reuses_an_admitted_tuple") {
            return;
        }
        let mut workload = Workload::default();
        let port = ContainerPort { name: None, port: 5353, protocol: Protocol::Udp };
        workload.add_pod("a", "server", BTreeMap::new(), vec![port]).expect("pod");
        workload.add_pod("a", "client", BTreeMap::new(), vec![]).expect("pod");
        let server = std::net::SocketAddr::from((workload.pods[0].ip, 5353));
        let policy = |spec: &str| {
            let text = format!(
                "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: p, namespace: a}}\nspec: {spec}\n"
            );
            netdojo_k8s::policy::parse_yaml(&text, "test policy").expect("policy")
        };
        // Allowed by a policy rather than by no policy: a namespace tracks connections only
        // once a rule asks for `ct state`, and the point is an entry made under the old rules.
        let allow = policy("{podSelector: {}, policyTypes: [Ingress], ingress: [{}]}");
        let deny = policy("{podSelector: {}, policyTypes: [Ingress]}");
        let mut cluster = Cluster::start(workload, &allow, ProbeOptions::default()).await.expect("cluster");
        let client_ns = cluster.pod_namespace(1).expect("client").to_string();
        let socket =
            netdojo_linux::netns::in_netns(&client_ns, || std::net::UdpSocket::bind("0.0.0.0:40001"))
                .expect("netns")
                .expect("bind");
        socket.set_read_timeout(Some(Duration::from_millis(500))).expect("timeout");
        let exchange = |socket: &std::net::UdpSocket| {
            socket.send_to(b"netdojo-probe", server).expect("send");
            let mut buf = [0u8; 64];
            socket.recv_from(&mut buf).is_ok()
        };
        assert!(exchange(&socket), "allowed: the echo answers");

        cluster.apply(&deny).await.expect("apply");
        assert!(!exchange(&socket), "the same tuple got through a deny-all ingress policy");
        cluster.teardown();
    }
}

mod episodes {
    use std::sync::Arc;

    use netdojo_core::{Budget, Runner, TaskGenerator};
    use netdojo_k8s::cluster::ProbeOptions;
    use netdojo_k8s::{K8sFactory, K8sGenerator};
    use netdojo_scripted::{NoopFactory, OracleFactory};

    fn runner(agent: Arc<dyn netdojo_core::AgentFactory>) -> Runner {
        Runner {
            // The Rust subset (the fallback), whatever NETDOJO_KUBECTL says: the real kubectl
            // has its own episode test (`apiserver`).
            env: Arc::new(
                K8sFactory::new(ProbeOptions::default())
                    .expect("factory")
                    .with_kubectl(None)
                    .expect("subset"),
            ),
            agent,
            scorers: Arc::new(netdojo_score::repair_scorers()),
            budget: Budget::default(),
            concurrency: 1,
            prepare_ahead: 0,
        }
    }

    fn metric(record: &netdojo_core::EpisodeRecord, name: &str) -> f64 {
        record.metrics.iter().find(|m| m.name == name).map(|m| m.value.as_f64()).unwrap_or(f64::NAN)
    }

    /// The oracle repairs one task of each level (correct and safe, nothing left behind); the
    /// no-op agent repairs none.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_oracle_repairs_and_the_noop_agent_does_not() {
        if !super::cluster::root_or_skip("the_oracle_repairs_and_the_noop_agent_does_not") {
            return;
        }
        let oracle = runner(Arc::new(OracleFactory));
        let noop = runner(Arc::new(NoopFactory));
        for index in [0u64, 5, 14] {
            let task = K8sGenerator.generate(11, index).expect("task");
            let (record, trajectory) = oracle.run_episode(&task).await;
            assert!(record.error.is_none(), "{:?}", record.error);
            assert_eq!(metric(&record, "correct"), 1.0, "{}: {:?}", task.label, trajectory.outcome);
            assert_eq!(metric(&record, "safe"), 1.0, "{}: {:?}", task.label, trajectory.steps);
            // Each of the oracle's changes takes the matrix closer to the expected one.
            assert_eq!(metric(&record, "safe_c4"), 1.0, "{}: {:?}", task.label, trajectory.steps);
            assert_eq!(metric(&record, "unproductive_changes"), 0.0, "{}", task.label);
            assert!(trajectory.brief.contains("(Expected: "), "{}", trajectory.brief);
            let (record, _) = noop.run_episode(&task).await;
            assert_eq!(metric(&record, "correct"), 0.0, "{}", task.label);
        }
        // The random baseline runs real kubectl commands (from the tool's examples, with the
        // names it has seen), so it does what the no-op agent does not.
        let random = Runner {
            budget: Budget { max_steps: 30, ..Budget::default() },
            ..runner(Arc::new(netdojo_scripted::RandomFactory { seed: 7, steps: 30 }))
        };
        let task = K8sGenerator.generate(11, 0).expect("task");
        let (record, trajectory) = random.run_episode(&task).await;
        assert!(record.error.is_none(), "{:?}", record.error);
        let kubectl: Vec<&netdojo_core::Step> =
            trajectory.steps.iter().filter(|s| s.call.name == "kubectl").collect();
        let verbs = kubectl
            .iter()
            .filter(|s| {
                let command = s.call.arguments["command"].as_str().unwrap_or_default();
                ["get ", "describe ", "patch "].iter().any(|v| command.starts_with(v))
            })
            .count();
        let ran = kubectl.iter().filter(|s| s.observation.ok).count();
        let seen: Vec<&str> = kubectl.iter().map(|s| s.observation.content.as_str()).collect();
        assert!(verbs >= 3 && ran >= 1, "{seen:?}");
    }
}

mod safety {
    use netdojo_core::{EnvironmentFactory, TaskGenerator, ToolCall};
    use netdojo_k8s::cluster::ProbeOptions;
    use netdojo_k8s::{K8sFactory, K8sGenerator};
    use serde_json::json;

    /// A step that breaks a working connection (or opens a forbidden one) is unsafe, pair by
    /// pair; a refused command changes nothing and stays safe: with the Rust subset, and with
    /// the real kubectl against the episode's API server.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_step_that_adds_a_mismatch_is_unsafe_and_a_refused_one_is_not() {
        let what = "a_step_that_adds_a_mismatch_is_unsafe_and_a_refused_one_is_not";
        if !super::cluster::root_or_skip(what) {
            return;
        }
        let factory = K8sFactory::new(ProbeOptions::default()).expect("factory");
        steps_are_judged(factory.with_kubectl(None).expect("subset")).await;
        if let Some(bin) = super::apiserver::kubectl_or_skip(what) {
            let factory = K8sFactory::new(ProbeOptions::default()).expect("factory");
            steps_are_judged(factory.with_kubectl(Some(bin)).expect("kubectl")).await;
        }
    }

    async fn steps_are_judged(factory: K8sFactory) {
        // A remove_ingress task: the faulty policy is not adservice's (checked below).
        let task = K8sGenerator.generate(2, 0).expect("task");
        let mut env = factory.create(&task).await.expect("env");
        let brief = env.reset(&task).await.expect("reset");
        assert!(brief.contains("Mismatch Summary:"), "{brief}");
        assert!(env.check().await.expect("check").safe, "the initial state is the reference");

        let bad = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: adservice}\nspec:\n  podSelector: {}\n  ingress: [{ports: [{port: 0}]}]\n";
        let obs = env
            .execute(&ToolCall::new("kubectl", json!({"command": "apply -f -", "manifest": bad})))
            .await
            .expect("execute");
        assert!(!obs.ok && obs.content.contains("must be between 1 and 65535"), "{}", obs.content);
        let check = env.check().await.expect("check");
        assert!(check.safe && !check.unproductive, "a refused change changed nothing: {check:?}");

        // A change that touches nothing the matrix shows (a label on a policy) is safe by eq. 5
        // and unproductive by §D.4.
        let obs = env
            .execute(&ToolCall::new(
                "kubectl",
                json!({"command": r#"patch networkpolicy adservice --type merge -p '{"metadata":{"labels":{"x":"y"}}}'"#}),
            ))
            .await
            .expect("execute");
        assert!(obs.ok, "{}", obs.content);
        let check = env.check().await.expect("check");
        assert!(check.safe && check.unproductive, "{check:?}");

        // Deleting adservice's policy opens adservice to everyone: new mismatches.
        let obs = env
            .execute(&ToolCall::new("kubectl", json!({"command": "kubectl delete networkpolicy adservice"})))
            .await
            .expect("execute");
        assert!(obs.ok, "{}", obs.content);
        assert!(obs.content.contains("→ adservice:9555 (Expected: False, Actual: True)"), "{}", obs.content);
        let check = env.check().await.expect("check");
        assert!(!check.safe && check.unproductive, "{check:?}");
        assert!(check.violations.iter().all(|v| v.contains("appeared with this step")), "{check:?}");
        // The next step is judged against this state: looking around is safe again, and no change.
        env.execute(&ToolCall::new("connectivity", json!({}))).await.expect("execute");
        let check = env.check().await.expect("check");
        assert!(check.safe && !check.unproductive, "{check:?}");
        let outcome = env.evaluate(&task, None).await.expect("evaluate");
        assert!(!outcome.solved());
        env.close().await.expect("close");
    }
}

/// The driver for real clusters (feature `kube`), live: runs when KUBECONFIG names a reachable
/// cluster (kind, for one: docs/k8s.md), else skips with the reason. No cluster can run on the
/// project's machines (FACTS.md), so under `CI` an unset KUBECONFIG is the expected skip of
/// this test alone; a KUBECONFIG that is set but unreachable fails there.
#[cfg(feature = "kube")]
mod real_cluster {
    use std::sync::Arc;

    use kube::Api;
    use kube::api::ListParams;
    use netdojo_core::{Budget, Runner, TaskGenerator};
    use netdojo_k8s::kube_driver::{self, KubeCluster, KubeOptions};
    use netdojo_k8s::{K8sFactory, K8sGenerator, boutique, engine, policy};
    use netdojo_scripted::OracleFactory;

    async fn cluster_or_skip(what: &str) -> Option<(kube::Client, KubeOptions)> {
        let Some(path) = std::env::var_os("KUBECONFIG") else {
            eprintln!(
                "skipping {what}: KUBECONFIG is not set; this test needs a real cluster (e.g. `kind create cluster`, see docs/k8s.md), and none can run on the project's machines"
            );
            return None;
        };
        let options = KubeOptions { kubeconfig: Some(path.into()), ..Default::default() };
        match kube_driver::connect(&options).await {
            Ok(client) => Some((client, options)),
            Err(e) => {
                netdojo_testkit::skip_or_fail_under_ci(what, format!("KUBECONFIG is set but: {e}"));
                None
            }
        }
    }

    /// The Online Boutique deployed with its policies, then with a fault: the matrix the debug
    /// containers probe equals the truth table each time; the namespaces go at teardown.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_probed_matrix_equals_the_truth_table_and_nothing_is_left() {
        let what = "the_probed_matrix_equals_the_truth_table_and_nothing_is_left";
        let Some((client, options)) = cluster_or_skip(what).await else { return };
        let workload = boutique::workload().expect("workload");
        let original = boutique::policies().expect("policies");
        let targets = engine::targets(&workload);
        let mut cluster =
            KubeCluster::start(client.clone(), workload, &original, options).await.expect("start");
        let w = cluster.workload().clone();
        let expected = engine::truth_table(&original, &w, &targets);
        let actual = cluster.probe(&targets).await.expect("probe");
        assert!(actual.mismatches(&expected).is_empty(), "{}", actual.mismatch_report(&expected));
        assert_eq!(cluster.policies().await.expect("list").len(), original.len());

        // A fault, sent through the API server: the new truth table holds too.
        let task = K8sGenerator.generate(3, 0).expect("task");
        let mut faulty = original.clone();
        for (name, yaml) in netdojo_k8s::tasks::injections(&task).expect("faults") {
            let p = policy::parse_yaml(&yaml, &name).expect("yaml").remove(0);
            faulty.retain(|o| policy::name(o) != name);
            faulty.push(p);
        }
        cluster.sync(&faulty).await.expect("sync");
        let expected = engine::truth_table(&faulty, &w, &targets);
        let actual = cluster.probe(&targets).await.expect("probe");
        assert!(actual.mismatches(&expected).is_empty(), "{}", actual.mismatch_report(&expected));

        // The API server's refusal comes back in kubectl's words.
        let mut bad = original[0].clone();
        bad.metadata.name = Some("Not_A_Name".into());
        let refused = cluster.sync(&[bad]).await.expect_err("an invalid name");
        assert!(refused.contains("is invalid"), "{refused}");

        let base = cluster.namespaces().base.clone();
        cluster.teardown().await;
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
        let left = namespaces.list(&ListParams::default()).await.expect("list");
        for ns in left.items {
            let name = ns.metadata.name.unwrap_or_default();
            if name.starts_with(&base) {
                assert!(ns.metadata.deletion_timestamp.is_some(), "{name} is not being deleted");
            }
        }
    }

    /// A whole episode through the environment: the oracle repairs a task on the real cluster.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_oracle_repairs_a_task_on_a_real_cluster() {
        let what = "the_oracle_repairs_a_task_on_a_real_cluster";
        let Some((_, options)) = cluster_or_skip(what).await else { return };
        let runner = Runner {
            env: Arc::new(K8sFactory::kube(options).await.expect("factory")),
            agent: Arc::new(OracleFactory),
            scorers: Arc::new(netdojo_score::netpress_scorers()),
            budget: Budget::default(),
            concurrency: 1,
            prepare_ahead: 0,
        };
        let task = K8sGenerator.generate(11, 5).expect("task");
        let (record, trajectory) = runner.run_episode(&task).await;
        assert!(record.error.is_none(), "{:?}", record.error);
        let correct = record.metrics.iter().find(|m| m.name == "correct").map(|m| m.value.as_f64());
        assert_eq!(correct, Some(1.0), "{:?}", trajectory.outcome);
    }
}

/// The embedded API server driven by the real kubectl (NETDOJO_KUBECTL; `.ci/kubectl` installs
/// the pinned one): kubectl's own output and errors for the NetPress §D commands.
mod apiserver {
    use std::path::PathBuf;
    use std::process::Command;

    use netdojo_k8s::apiserver::ApiServer;
    use netdojo_k8s::boutique;
    use netdojo_k8s::kubectl::Store;

    /// The kubectl binary, or `None` with a printed reason (never under CI, where .ci/run
    /// installs it).
    pub fn kubectl_or_skip(what: &str) -> Option<PathBuf> {
        netdojo_testkit::env_or_skip(
            "NETDOJO_KUBECTL",
            what,
            "`export NETDOJO_KUBECTL=$(bash .ci/kubectl)`; .ci/run sets it",
        )
        .map(PathBuf::from)
    }

    pub struct Kubectl {
        bin: PathBuf,
        dir: tempfile::TempDir,
        kubeconfig: PathBuf,
    }

    impl Kubectl {
        pub fn new(bin: PathBuf, server: &ApiServer) -> Self {
            let dir = tempfile::tempdir().expect("tempdir");
            let kubeconfig = server.write_kubeconfig(dir.path()).expect("kubeconfig");
            Self { bin, dir, kubeconfig }
        }

        /// Runs `kubectl ARGS` with `stdin`: (exit 0, stdout, stderr).
        pub fn run(&self, args: &str, stdin: &str) -> (bool, String, String) {
            use std::io::Write;
            let words = shlex::split(args).expect("args");
            let mut child = Command::new(&self.bin)
                .args(&words)
                .env_clear()
                .env("KUBECONFIG", &self.kubeconfig)
                .env("HOME", self.dir.path())
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("kubectl");
            child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write");
            let out = child.wait_with_output().expect("wait");
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
    }

    fn server() -> ApiServer {
        let store = Store::new(&boutique::policies().expect("policies"));
        ApiServer::bind_local(store, boutique::workload().expect("workload")).expect("server")
    }

    const TEST: &str = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: test\nspec:\n  podSelector:\n    matchLabels: {app: frontend}\n  ingress:\n  - ports:\n    - port: 80\n";

    fn port(server: &ApiServer, name: &str) -> Option<String> {
        let p = server.store().policy("default", name)?.clone();
        let port = p.spec?.ingress?.first()?.ports.as_ref()?.first()?.port.clone()?;
        Some(match port {
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n) => n.to_string(),
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s) => s,
        })
    }

    /// NetPress §D's commands through the real kubectl: its tables, YAML and describe output;
    /// apply (create, unchanged, configured), the three patch types, delete, dry runs; the API
    /// server's refusals as kubectl prints them; every change in the server's store.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn kubectl_reads_and_changes_policies_with_its_own_output() {
        let Some(bin) = kubectl_or_skip("kubectl_reads_and_changes_policies_with_its_own_output") else {
            return;
        };
        // Not beside the containment run: the host check watches /tmp, where this writes.
        let _one = netdojo_linux::containment::exclusive().await;
        let server = server();
        let k = Kubectl::new(bin, &server);
        let ok = |args: &str, stdin: &str| {
            let (ok, out, err) = k.run(args, stdin);
            assert!(ok, "kubectl {args}: {out}{err}");
            out
        };
        let fails = |args: &str, stdin: &str| {
            let (ok, out, err) = k.run(args, stdin);
            assert!(!ok, "kubectl {args} succeeded: {out}");
            err
        };

        let table = ok("get networkpolicy", "");
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            ["NAME", "POD-SELECTOR", "AGE"],
            "{table}"
        );
        assert_eq!(lines.len(), 13, "{table}");
        assert!(lines[1].starts_with("adservice ") && lines[1].contains("app=adservice"), "{table}");
        let yaml = ok("get netpol adservice -o yaml", "");
        assert!(yaml.contains("kind: NetworkPolicy") && yaml.contains("resourceVersion: \"1\""), "{yaml}");
        assert!(yaml.contains("port: 9555"), "{yaml}");
        let described = ok("describe networkpolicy adservice", "");
        assert!(described.contains("PodSelector:     app=adservice"), "{described}");
        assert!(
            described.contains("To Port: 9555/TCP") && described.contains("PodSelector: app=frontend"),
            "{described}"
        );
        let pods = ok("get pods -o wide", "");
        assert!(pods.lines().next().is_some_and(|h| h.contains("READY") && h.contains("IP")), "{pods}");
        assert!(pods.contains("10.244.0.7") && pods.lines().count() == 13, "{pods}");
        let frontend = ok("get pods -l app=frontend --show-labels", "");
        assert_eq!(frontend.lines().count(), 2, "{frontend}");
        // Set-based selectors, as apimachinery parses them.
        let two = ok("get pods -l 'app in (frontend, cartservice)' -o name", "");
        assert_eq!(two, "pod/cartservice\npod/frontend\n", "{two}");
        let others = ok("get pods -l 'app notin (frontend),app' -o name", "");
        assert_eq!(others.lines().count(), 11, "{others}");
        let err = fails("get pods -l 'app in (frontend'", "");
        assert!(err.contains("unable to parse requirement"), "{err}");
        assert_eq!(
            fails("get netpol --as=system:admin", ""),
            "Error from server (Forbidden): users \"system:admin\" is forbidden: User \"agent\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope\n"
        );
        assert!(ok("get namespaces", "").contains("default   Active"));
        assert!(ok("describe pod frontend", "").contains("Port:           8080/TCP"));
        assert_eq!(ok("get services", ""), "");
        assert!(ok("explain networkpolicy.spec.podSelector", "").contains("matchLabels"));

        assert_eq!(ok("apply -f -", TEST), "networkpolicy.networking.k8s.io/test created\n");
        assert_eq!(ok("apply -f -", TEST), "networkpolicy.networking.k8s.io/test unchanged\n");
        assert_eq!(port(&server, "test").as_deref(), Some("80"));
        let merge = r#"patch netpol test --type=merge -p '{"spec":{"ingress":[{"ports":[{"port":81}]}]}}'"#;
        assert_eq!(ok(merge, ""), "networkpolicy.networking.k8s.io/test patched\n");
        assert_eq!(port(&server, "test").as_deref(), Some("81"));
        let json = r#"patch netpol test --type=json -p '[{"op":"replace","path":"/spec/ingress/0/ports/0/port","value":82}]'"#;
        assert_eq!(ok(json, ""), "networkpolicy.networking.k8s.io/test patched\n");
        assert_eq!(port(&server, "test").as_deref(), Some("82"));
        let strategic = r#"patch netpol test -p '{"spec":{"ingress":[{"ports":[{"port":83}]}]}}'"#;
        assert_eq!(ok(strategic, ""), "networkpolicy.networking.k8s.io/test patched\n");
        assert_eq!(port(&server, "test").as_deref(), Some("83"));
        assert_eq!(ok(strategic, ""), "networkpolicy.networking.k8s.io/test patched (no change)\n");
        // apply's three-way merge puts back what the manifest says.
        assert_eq!(ok("apply -f -", TEST), "networkpolicy.networking.k8s.io/test configured\n");
        assert_eq!(port(&server, "test").as_deref(), Some("80"));
        let changed = TEST.replace("port: 80", "port: 90");
        assert_eq!(
            ok("apply --dry-run=server -f -", &changed),
            "networkpolicy.networking.k8s.io/test configured (server dry run)\n"
        );
        assert_eq!(port(&server, "test").as_deref(), Some("80"));

        // Refusals, in the API server's words as kubectl prints them.
        let icmp = TEST.replace("port: 80", "port: 80\n      protocol: ICMP");
        assert_eq!(
            fails("apply -f -", &icmp),
            "The NetworkPolicy \"test\" is invalid: spec.ingress[0].ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"\n"
        );
        let typo = TEST.replace("  ingress:", "  ingres:");
        let err = fails("apply -f -", &typo);
        assert!(err.contains("strict decoding error: unknown field \"spec.ingres\""), "{err}");
        let stale = TEST.replace("  name: test\n", "  name: test\n  resourceVersion: \"1\"\n");
        let err = fails("replace -f -", &stale);
        assert!(
            err.contains("Error from server (Conflict): error when replacing \"STDIN\": Operation cannot be fulfilled on networkpolicies.networking.k8s.io \"test\": the object has been modified"),
            "{err}"
        );
        let err = fails("apply --server-side -f -", TEST);
        assert!(err.contains("server-side apply is not supported"), "{err}");
        let err = fails("delete pod frontend", "");
        assert!(
            err.starts_with("Error from server (MethodNotAllowed)") && err.contains("pods are read-only"),
            "{err}"
        );
        assert_eq!(
            fails("get deployments", ""),
            "error: the server doesn't have a resource type \"deployments\"\n"
        );
        // A watch sees the object, then a change made while it runs.
        let watched = std::thread::scope(|scope| {
            let watcher = scope.spawn(|| k.run("get netpol test --watch --request-timeout=4s", ""));
            std::thread::sleep(std::time::Duration::from_millis(1500));
            ok(r#"patch netpol test --type=merge -p '{"metadata":{"labels":{"seen":"yes"}}}'"#, "");
            watcher.join().expect("watch")
        });
        assert_eq!(watched.1.lines().filter(|l| l.starts_with("test ")).count(), 2, "{watched:?}");

        assert_eq!(
            ok("delete netpol test", ""),
            "networkpolicy.networking.k8s.io \"test\" deleted from default namespace\n"
        );
        assert!(server.store().policy("default", "test").is_none());
        assert_eq!(
            fails("get netpol test", ""),
            "Error from server (NotFound): networkpolicies.networking.k8s.io \"test\" not found\n"
        );
        // --all lists, then deletes one by one (no DELETE on the collection).
        let all = ok("delete netpol --all", "");
        assert_eq!(
            all.lines().filter(|l| l.ends_with("deleted from default namespace")).count(),
            12,
            "{all}"
        );
        assert!(server.store().policies().is_empty());
        let (_, out, err) = k.run("get netpol", "");
        assert_eq!(format!("{out}{err}"), "No resources found in default namespace.\n");
    }

    /// The k8s application with the agent's commands run by the real kubectl in the jail,
    /// against the episode's API server: the oracle repairs (correct, safe), the no-op agent
    /// does not, and the observations are kubectl's own output.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_oracle_and_the_noop_agent_through_the_real_kubectl() {
        use std::sync::Arc;

        use netdojo_core::{Budget, Runner, TaskGenerator};
        use netdojo_k8s::cluster::ProbeOptions;
        use netdojo_k8s::{K8sFactory, K8sGenerator};
        use netdojo_scripted::{NoopFactory, OracleFactory};

        let what = "the_oracle_and_the_noop_agent_through_the_real_kubectl";
        // Not beside the containment run: the host check watches /tmp, where each episode
        // writes its kubeconfig (a CI simulation took one for an escape).
        let _one = netdojo_linux::containment::exclusive().await;
        if !super::cluster::root_or_skip(what) {
            return;
        }
        let Some(bin) = kubectl_or_skip(what) else { return };
        let runner = |agent: Arc<dyn netdojo_core::AgentFactory>| Runner {
            env: Arc::new(
                K8sFactory::new(ProbeOptions::default())
                    .expect("factory")
                    .with_kubectl(Some(bin.clone()))
                    .expect("kubectl"),
            ),
            agent,
            scorers: Arc::new(netdojo_score::repair_scorers()),
            budget: Budget::default(),
            concurrency: 1,
            prepare_ahead: 0,
        };
        let metric = |record: &netdojo_core::EpisodeRecord, name: &str| {
            record.metrics.iter().find(|m| m.name == name).map(|m| m.value.as_f64()).unwrap_or(f64::NAN)
        };
        let (oracle, noop) = (runner(Arc::new(OracleFactory)), runner(Arc::new(NoopFactory)));
        for index in [0u64, 5, 14] {
            let task = K8sGenerator.generate(11, index).expect("task");
            let (record, trajectory) = oracle.run_episode(&task).await;
            assert!(record.error.is_none(), "{:?}", record.error);
            assert_eq!(metric(&record, "correct"), 1.0, "{}: {:?}", task.label, trajectory.steps);
            assert_eq!(metric(&record, "safe"), 1.0, "{}: {:?}", task.label, trajectory.steps);
            let applied: Vec<&str> = trajectory
                .steps
                .iter()
                .filter(|s| s.call.name == "kubectl")
                .map(|s| s.observation.content.as_str())
                .collect();
            assert!(
                !applied.is_empty()
                    && applied
                        .iter()
                        .all(|c| c.contains("networkpolicy.networking.k8s.io/") && c.contains("configured")),
                "{applied:?}"
            );
            let (record, _) = noop.run_episode(&task).await;
            assert!(record.error.is_none(), "{:?}", record.error);
            assert_eq!(metric(&record, "correct"), 0.0, "{}", task.label);
        }
        // One episode by hand: the answers are kubectl's (the server's metadata, kubectl's
        // columns), and kubectl, jailed in the API server's namespace, reaches nothing else.
        use netdojo_core::{EnvironmentFactory, ToolCall};
        let factory = K8sFactory::new(ProbeOptions::default())
            .expect("factory")
            .with_kubectl(Some(bin.clone()))
            .expect("kubectl");
        let task = K8sGenerator.generate(11, 0).expect("task");
        let mut env = factory.create(&task).await.expect("env");
        env.reset(&task).await.expect("reset");
        let call = |command: &str| ToolCall::new("kubectl", serde_json::json!({"command": command}));
        let yaml = env.execute(&call("kubectl get netpol adservice -o yaml")).await.expect("get");
        assert!(
            yaml.ok && yaml.content.contains("uid: ") && yaml.content.contains("resourceVersion: "),
            "{}",
            yaml.content
        );
        let pods = env.execute(&call("get pods -o wide")).await.expect("get pods");
        assert!(pods.ok && pods.content.contains("NOMINATED NODE"), "{}", pods.content);
        let escape = env
            .execute(&call(
                "get pods --server https://10.244.0.7:8080 --insecure-skip-tls-verify --request-timeout 3s",
            ))
            .await
            .expect("escape");
        assert!(!escape.ok && escape.content.contains("unreachable"), "{}", escape.content);
        env.close().await.expect("close");
    }

    /// The containment suite's hostile corpus (`testdata/containment/corpus.txt`: its Linux,
    /// FRR-exec and kubectl lines) as the agent's kubectl commands of an attacking episode, by
    /// `Environment::execute`, while a victim episode of the same task runs beside it with the
    /// real kubectl too: every line is a failed step (never an environment error), and nothing
    /// escapes: the host and the victim's namespaces (its pods' and its API server's) are
    /// checked every `BATCH` lines, the victim's policies, its API server's change count and its
    /// probed matrix stay as they were, and no answer holds the victim's bearer token.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_hostile_corpus_through_the_real_kubectl() {
        use netdojo_core::{Environment, TaskGenerator, ToolCall};
        use netdojo_k8s::cluster::ProbeOptions;
        use netdojo_k8s::{K8sFactory, K8sGenerator};
        use netdojo_linux::containment::{self, Entry, Outcome, Run, Vars};

        const BATCH: usize = 25;
        let what = "containment: kubectl";
        if !super::cluster::root_or_skip(what) {
            return;
        }
        let Some(bin) = kubectl_or_skip(what) else { return };
        let _one = containment::exclusive().await;
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(containment::CORPUS);
        // kubectl answers every Linux and FRR line at its argument parser (`unknown command`):
        // by default those send their namespace, file and exhaustion categories, beside every
        // kubectl line; NETDOJO_CONTAINMENT_FULL=1 sends them all (581 lines in 138 s against
        // 324 in 81 s, on 2 cores at a load average of about 40).
        let full = std::env::var("NETDOJO_CONTAINMENT_FULL").is_ok_and(|v| v == "1");
        let cases: Vec<containment::Case> = containment::load(&path)
            .expect("corpus")
            .into_iter()
            .filter(|c| {
                c.entries.contains(&Entry::Kubectl)
                    || (c.entries.iter().any(|e| matches!(e, Entry::Linux | Entry::FrrExec))
                        && (full || matches!(c.category.as_str(), "namespaces" | "files" | "exhaustion")))
            })
            .collect();
        assert!(cases.iter().any(|c| c.entries.contains(&Entry::Kubectl)), "the corpus has kubectl lines");
        let factory = K8sFactory::new(ProbeOptions::default())
            .expect("factory")
            .with_kubectl(Some(bin))
            .expect("kubectl");
        let task = K8sGenerator.generate(11, 0).expect("task");
        let mut victim = factory.episode();
        victim.reset(&task).await.expect("victim reset");
        let mut attacker = factory.episode();
        attacker.reset(&task).await.expect("attacker reset");
        let matrix = |o: netdojo_core::Outcome| o.export["matrix"].to_string();
        let victim_matrix = matrix(victim.evaluate(&task, None).await.expect("victim evaluates"));
        let victim_api = victim.api_server().expect("the victim's API server");
        let (victim_token, victim_addr) = (victim_api.token().to_string(), victim_api.addr().to_string());
        let victim_policies = || {
            let api = victim.api_server().expect("server");
            (api.store().policies(), api.changes())
        };
        let policies_before = victim_policies();
        let victim_ns = victim.namespaces();
        let victim_api_ns = victim_ns.last().expect("the API server's namespace").clone();
        let self_ns = attacker.namespaces().last().expect("the attacker's API server's namespace").clone();
        let mut resident = containment::resident(&victim_api_ns).expect("a process in the victim");
        let vars = Vars {
            victim_addr,
            victim_prefix: victim_api_ns.rsplit_once('-').map(|(p, _)| p.to_string()).unwrap_or_default(),
            victim_ns: victim_api_ns.clone(),
            victim_pid: resident.id(),
            victim_if: "lo".into(),
            self_ns,
            self_if: "lo".into(),
        };
        // The victim's pods were just made: their IPv6 link-local addresses leave `tentative`
        // (duplicate address detection) within about two seconds, which would read as an escape.
        for _ in 0..100 {
            if !victim_ns.iter().any(|ns| netdojo_linux::hostcheck::namespace_state(ns).contains("tentative"))
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let mut watch = victim_ns.clone();
        watch.extend(attacker.namespaces());
        let mut run = Run::new(what, vars, watch, victim_ns.clone());
        run.per_line(false);
        let irreversible = containment::irreversible_allowed();
        let mut succeeded = Vec::new();
        for (i, case) in cases.iter().enumerate() {
            if case.host_irreversible && !irreversible {
                run.skip(case);
                continue;
            }
            let sent = case.fill(run.vars()).concat();
            let call = ToolCall::new("kubectl", serde_json::json!({"command": sent}));
            let mut own = Vec::new();
            let outcome = match attacker.execute(&call).await {
                Err(e) => Outcome::Errored(e.to_string()),
                Ok(obs) => {
                    if obs.content.contains(&victim_token) {
                        own.push("leak in the answer: the victim's bearer token".to_string());
                    }
                    if obs.ok {
                        succeeded.push(format!("line {}: {}", case.line, case.short()));
                    }
                    Outcome::Ran { ok: obs.ok, text: obs.content }
                }
            };
            if victim_policies() != policies_before {
                own.push("the victim's API server changed".to_string());
            }
            run.judge(case, &sent, outcome, own);
            if (i + 1) % BATCH == 0 {
                run.check_after(case, &sent);
            }
        }
        if let Some(last) = cases.last() {
            run.check_after(last, "(end of the run)");
            let now = matrix(victim.evaluate(&task, None).await.expect("victim evaluates"));
            if now != victim_matrix {
                run.attribute(last, "(end of the run)", vec![format!("the victim's matrix moved: {now}")]);
            }
        }
        let _ = resident.kill();
        let _ = resident.wait();
        attacker.close().await.expect("close");
        victim.close().await.expect("close");
        run.finish();
        assert!(succeeded.is_empty(), "hostile lines that succeeded: {succeeded:#?}");
    }

    /// The recorded answers of real API servers (`testdata/k8s/recorded/answers.json`, each
    /// with its source): the same request sent with kube-rs gets the same status code and body,
    /// field by field (but the fields an answer says a server makes up), and kubectl prints
    /// what it printed.
    #[cfg(feature = "kube")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn kube_rs_and_kubectl_against_recorded_answers() {
        use axum::http::{Method, Request};
        use netdojo_k8s::kube_driver::{self, KubeOptions};
        use serde_json::Value;

        /// Every field of `want` (recursively), but the `ignore`d paths, equals `got`'s; the
        /// differences, by path.
        fn differences(want: &Value, got: &Value, path: &str, ignore: &[String], out: &mut Vec<String>) {
            if ignore.iter().any(|i| i == path) {
                return;
            }
            match (want, got) {
                (Value::Object(w), Value::Object(g)) => {
                    for (k, v) in w {
                        let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                        match g.get(k) {
                            Some(gv) => differences(v, gv, &p, ignore, out),
                            None => out.push(format!("{p}: missing (recorded {v})")),
                        }
                    }
                    for k in g.keys().filter(|k| !w.contains_key(*k)) {
                        let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                        if !ignore.contains(&p) {
                            out.push(format!("{p}: not in the recorded answer ({})", g[k]));
                        }
                    }
                }
                _ if want != got => out.push(format!("{path}: {got}, recorded {want}")),
                _ => {}
            }
        }

        let file =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/k8s/recorded/answers.json");
        let recorded: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).expect("answers.json")).expect("JSON");
        let answers = recorded["answers"].as_array().expect("answers");
        assert!(!answers.is_empty());
        let server = server();
        let dir = tempfile::tempdir().expect("tempdir");
        let options = KubeOptions {
            kubeconfig: Some(server.write_kubeconfig(dir.path()).expect("kubeconfig")),
            ..Default::default()
        };
        let client = kube_driver::connect(&options).await.expect("connect");
        let kubectl = kubectl_or_skip("kube_rs_and_kubectl_against_recorded_answers (its kubectl half)")
            .map(|bin| Kubectl::new(bin, &server));
        for a in answers {
            let name = a["name"].as_str().expect("name");
            assert!(a["source"].as_str().is_some_and(|s| !s.is_empty()), "{name}: no source");
            let req = &a["request"];
            let body = req.get("body").map(|b| serde_json::to_vec(b).expect("body")).unwrap_or_default();
            let mut request = Request::builder()
                .method(
                    Method::from_bytes(req["method"].as_str().expect("method").as_bytes()).expect("method"),
                )
                .uri(req["path"].as_str().expect("path"));
            if let Some(ct) = req.get("content_type").and_then(Value::as_str) {
                request = request.header("Content-Type", ct);
            }
            let response = client
                .send(request.body(kube::client::Body::from(body)).expect("request"))
                .await
                .expect("send");
            let code = response.status().as_u16();
            let bytes = response.into_body().collect_bytes().await.expect("body");
            let got: Value = serde_json::from_slice(&bytes).expect("a JSON answer");
            assert_eq!(u64::from(code), a["code"].as_u64().expect("code"), "{name}: {got}");
            let ignore: Vec<String> = a["ignore"]
                .as_array()
                .map(|i| i.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_default();
            let mut diff = Vec::new();
            differences(&a["body"], &got, "", &ignore, &mut diff);
            assert!(diff.is_empty(), "{name}: {}", diff.join("\n"));
            if let (Some(k), Some(args)) = (&kubectl, a.get("kubectl").and_then(Value::as_str)) {
                let (_, out, err) = k.run(args, "");
                assert_eq!(
                    format!("{out}{err}"),
                    a["kubectl_prints"].as_str().expect("kubectl_prints"),
                    "{name}"
                );
            }
        }
    }

    /// kube-rs and the `kube` driver against the server: typed requests, the Status of each
    /// refusal compared with the recorded answers of a real API server (the same requests,
    /// `kube_driver::tests`), and the driver's policy half (`policies`, `sync`) over the
    /// server's store, which is what the environment enforces.
    #[cfg(feature = "kube")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn kube_rs_and_the_kube_driver_against_the_server() {
        use k8s_openapi::api::core::v1::Pod;
        use k8s_openapi::api::networking::v1::NetworkPolicy;
        use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
        use netdojo_k8s::kube_driver::{self, KubeCluster, KubeOptions, NamespaceMap};
        use netdojo_k8s::policy;

        // The workload in the namespace the driver maps `default` to.
        let map = NamespaceMap::with_nonce(1, 2);
        let real = map.real("default").expect("name");
        let logical = boutique::workload().expect("workload");
        let mut workload = netdojo_k8s::Workload::default();
        workload.add_namespace(&real, Default::default());
        for p in &logical.pods {
            let mut p = p.clone();
            p.namespace = real.clone();
            workload.pods.push(p);
        }
        let originals = boutique::policies().expect("policies");
        let mapped: Vec<NetworkPolicy> =
            originals.iter().map(|p| kube_driver::to_cluster(p, &map, &logical).expect("map")).collect();
        let server = ApiServer::bind_local(Store::new(&mapped), workload).expect("server");
        let dir = tempfile::tempdir().expect("tempdir");
        let options = KubeOptions {
            kubeconfig: Some(server.write_kubeconfig(dir.path()).expect("kubeconfig")),
            // The store is the enforcement: nothing to wait for.
            settle: std::time::Duration::ZERO,
            ..Default::default()
        };
        let client = kube_driver::connect(&options).await.expect("connect");

        let api: Api<NetworkPolicy> = Api::namespaced(client.clone(), &real);
        let list = api.list(&ListParams::default()).await.expect("list");
        assert_eq!(list.items.len(), 12);
        let ad = api.get("adservice").await.expect("get");
        let rv = ad.metadata.resource_version.clone().expect("resourceVersion");
        let selected = api.list(&ListParams::default().labels("nothing=here")).await.expect("list -l");
        assert!(selected.items.is_empty());
        let pods: Api<Pod> = Api::namespaced(client.clone(), &real);
        assert_eq!(pods.list(&ListParams::default()).await.expect("pods").items.len(), 12);

        // Update at the resourceVersion read, then again at the stale one: 409, as recorded.
        let mut changed = ad.clone();
        changed.metadata.labels = Some([("tier".to_string(), "ads".to_string())].into());
        let updated = api.replace("adservice", &PostParams::default(), &changed).await.expect("replace");
        assert_ne!(updated.metadata.resource_version.as_deref(), Some(rv.as_str()));
        let stale = api.replace("adservice", &PostParams::default(), &changed).await.expect_err("stale");
        let kube::Error::Api(s) = &stale else { panic!("{stale}") };
        assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
        assert_eq!(
            s.message,
            "Operation cannot be fulfilled on networkpolicies.networking.k8s.io \"adservice\": the object has been modified; please apply your changes to the latest version and try again"
        );
        // An invalid object: 422 with the recorded message and cause.
        let mut bad = changed.clone();
        bad.metadata = kube::api::ObjectMeta { name: Some("x".into()), ..Default::default() };
        let port = &mut bad.spec.as_mut().expect("spec").ingress.as_mut().expect("ingress")[0]
            .ports
            .as_mut()
            .expect("ports")[0];
        port.protocol = Some("ICMP".into());
        let invalid = api.create(&PostParams::default(), &bad).await.expect_err("invalid");
        let kube::Error::Api(s) = &invalid else { panic!("{invalid}") };
        assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
        assert_eq!(
            s.message,
            "NetworkPolicy.networking.k8s.io \"x\" is invalid: spec.ingress[0].ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\""
        );
        assert_eq!(kube_driver::status_text(s, &map), s.message);
        let missing = api.get("nothing").await.expect_err("missing");
        let kube::Error::Api(s) = &missing else { panic!("{missing}") };
        assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
        assert_eq!(
            kube_driver::status_text(s, &map),
            "Error from server (NotFound): networkpolicies.networking.k8s.io \"nothing\" not found"
        );
        let refused = pods.delete("frontend", &DeleteParams::default()).await.expect_err("read-only");
        let kube::Error::Api(s) = &refused else { panic!("{refused}") };
        assert_eq!((s.code, s.reason.as_str()), (405, "MethodNotAllowed"));

        // Merge and strategic merge patches (kubectl covers the JSON patch).
        let merge = serde_json::json!({"spec": {"ingress": [{"ports": [{"port": 9556}]}]}});
        api.patch("adservice", &PatchParams::default(), &Patch::Merge(&merge)).await.expect("merge");
        let strategic = serde_json::json!({"metadata": {"labels": {"$patch": "replace", "a": "b"}}});
        let p = api
            .patch("adservice", &PatchParams::default(), &Patch::Strategic(&strategic))
            .await
            .expect("strategic");
        assert_eq!(p.metadata.labels, Some([("a".to_string(), "b".to_string())].into()));
        // A watch from the resourceVersion a list gave sees the deletion; one from an older
        // version is told to list again (410).
        use futures::{StreamExt, TryStreamExt};
        use kube::api::{WatchEvent, WatchParams};
        let from =
            api.list(&ListParams::default()).await.expect("list").metadata.resource_version.expect("rv");
        let mut events = api.watch(&WatchParams::default().timeout(10), &from).await.expect("watch").boxed();
        api.delete("adservice", &DeleteParams::default()).await.expect("delete");
        assert!(server.store().policy(&real, "adservice").is_none());
        match events.try_next().await.expect("event") {
            Some(WatchEvent::Deleted(p)) => assert_eq!(p.metadata.name.as_deref(), Some("adservice")),
            other => panic!("{other:?}"),
        }
        let mut old = api.watch(&WatchParams::default().timeout(10), "1").await.expect("watch").boxed();
        match old.try_next().await {
            Ok(Some(WatchEvent::Error(e))) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
            other => panic!("{other:?}"),
        }

        // The driver's policy half: it reads the policies back as the agent sees them, and
        // `sync` makes the server's store what the agent's kubectl decided.
        let driver = KubeCluster::attach(client, logical.clone(), map.clone(), options);
        let seen = driver.policies().await.expect("policies");
        assert_eq!(seen.len(), 11);
        assert!(seen.iter().all(|p| policy::namespace(p) == "default"));
        driver.sync(&originals).await.expect("sync");
        let store = server.store();
        assert_eq!(store.policies().len(), 12);
        for p in &mapped {
            assert_eq!(
                store.policy(&real, policy::name(p)).and_then(|s| s.spec.clone()),
                p.spec.clone(),
                "{}",
                policy::name(p)
            );
        }
        let mut icmp = originals.clone();
        icmp[0].spec.as_mut().expect("spec").ingress.as_mut().expect("ingress")[0]
            .ports
            .as_mut()
            .expect("ports")[0]
            .protocol = Some("ICMP".into());
        let refused = driver.sync(&icmp).await.expect_err("refused");
        assert!(
            refused.starts_with("NetworkPolicy.networking.k8s.io \"adservice\" is invalid: "),
            "{refused}"
        );

        // Collection delete with a set-based selector: a dry run deletes nothing, then the
        // policies it selects go, and the answer lists them.
        let mut labelled = api.get("cartservice").await.expect("get");
        labelled.metadata.labels = Some([("tier".to_string(), "cart".to_string())].into());
        api.replace("cartservice", &PostParams::default(), &labelled).await.expect("label");
        let selector = ListParams::default().labels("tier in (cart, db)");
        let dry = DeleteParams { dry_run: true, ..Default::default() };
        let listed = api.delete_collection(&dry, &selector).await.expect("dry run");
        assert_eq!(listed.left().map(|l| l.items.len()), Some(1));
        assert_eq!(server.store().policies().len(), 12);
        let deleted = api.delete_collection(&DeleteParams::default(), &selector).await.expect("delete -l");
        let names: Vec<String> =
            deleted.left().expect("a list").items.into_iter().filter_map(|p| p.metadata.name).collect();
        assert_eq!(names, ["cartservice"]);
        assert_eq!(server.store().policies().len(), 11);
        let rest = api
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await
            .expect("delete all");
        assert_eq!(rest.left().map(|l| l.items.len()), Some(11));
        assert!(server.store().policies().is_empty());
        let bad = api.list(&ListParams::default().labels("tier in (cart")).await.expect_err("unparsable");
        let kube::Error::Api(s) = &bad else { panic!("{bad}") };
        assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"), "{}", s.message);
        assert!(s.message.starts_with("unable to parse requirement: "), "{}", s.message);
    }

    /// Whole episodes through the `kube` driver against a server with a cluster of its own:
    /// the driver creates its namespace and the workload's pods (run by the embedded cluster),
    /// adds the debug containers, creates the task's policies, probes by exec'ing its probe
    /// script in every pod, and deletes its namespace. The oracle repairs every task, the
    /// no-op agent none, and each episode's brief (the probed mismatches) and verdicts are the
    /// in-process cluster's on the same task.
    #[cfg(feature = "kube")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn kube_rs_driver_runs_whole_episodes_against_the_embedded_server() {
        use std::sync::Arc;
        use std::time::{Duration, Instant};

        use k8s_openapi::api::core::v1::{Namespace, Pod};
        use kube::api::{Api, AttachParams, ListParams, PostParams};
        use netdojo_core::{Budget, Runner, TaskGenerator};
        use netdojo_k8s::cluster::ProbeOptions;
        use netdojo_k8s::kube_driver::{self, KubeOptions};
        use netdojo_k8s::{K8sFactory, K8sGenerator};
        use netdojo_scripted::{NoopFactory, OracleFactory};

        let what = "kube_rs_driver_runs_whole_episodes_against_the_embedded_server";
        if !super::cluster::root_or_skip(what) {
            return;
        }
        let server = ApiServer::bind_local_cluster().expect("server");
        let dir = tempfile::tempdir().expect("tempdir");
        let options = KubeOptions {
            kubeconfig: Some(server.write_kubeconfig(dir.path()).expect("kubeconfig")),
            // The server enforces a change before it answers: nothing to wait for.
            settle: Duration::ZERO,
            ready_timeout: Duration::from_secs(60),
            ..Default::default()
        };
        let client = kube_driver::connect(&options).await.expect("connect");
        let runner = |env: Arc<dyn netdojo_core::EnvironmentFactory>,
                      agent: Arc<dyn netdojo_core::AgentFactory>| Runner {
            env,
            agent,
            scorers: Arc::new(netdojo_score::repair_scorers()),
            budget: Budget::default(),
            concurrency: 1,
            prepare_ahead: 0,
        };
        let kube_env: Arc<dyn netdojo_core::EnvironmentFactory> =
            Arc::new(K8sFactory::kube(options.clone()).await.expect("kube factory"));
        let embedded: Arc<dyn netdojo_core::EnvironmentFactory> = Arc::new(
            K8sFactory::new(ProbeOptions::default()).expect("factory").with_kubectl(None).expect("subset"),
        );
        let metric = |record: &netdojo_core::EpisodeRecord, name: &str| {
            record.metrics.iter().find(|m| m.name == name).map(|m| m.value.as_f64()).unwrap_or(f64::NAN)
        };
        let verdicts = |record: &netdojo_core::EpisodeRecord| {
            ["correct", "safe", "safe_c4", "unproductive_changes"].map(|m| metric(record, m))
        };
        let started = Instant::now();
        // One task of each of the 15 labels (faults::LABELS, by index): 60 episodes in all.
        let tasks: Vec<u64> = (0..15).collect();
        for &index in &tasks {
            let task = K8sGenerator.generate(11, index).expect("task");
            for (agent, correct) in [
                (Arc::new(OracleFactory) as Arc<dyn netdojo_core::AgentFactory>, 1.0),
                (Arc::new(NoopFactory), 0.0),
            ] {
                let (record, trajectory) = runner(kube_env.clone(), agent.clone()).run_episode(&task).await;
                assert!(record.error.is_none(), "{}: {:?}", task.label, record.error);
                assert_eq!(metric(&record, "correct"), correct, "{}: {:?}", task.label, trajectory.outcome);
                let (reference, ref_trajectory) = runner(embedded.clone(), agent).run_episode(&task).await;
                assert!(reference.error.is_none(), "{:?}", reference.error);
                assert_eq!(verdicts(&record), verdicts(&reference), "{}", task.label);
                assert_eq!(trajectory.brief, ref_trajectory.brief, "{}: the probed mismatches", task.label);
            }
        }
        eprintln!(
            "{what}: {} tasks, oracle and no-op, through the kube driver and in process: {:.1} s",
            tasks.len(),
            started.elapsed().as_secs_f64()
        );
        // Every namespace the driver made is gone, and with it the pods.
        let namespaces: Api<Namespace> = Api::all(client.clone());
        assert!(namespaces.list(&ListParams::default()).await.expect("namespaces").items.is_empty());

        // What exec refuses: any command but the probe script, and a container the pod lacks.
        namespaces
            .create(&PostParams::default(), &kube_driver::namespace_object("probe", &Default::default()))
            .await
            .expect("namespace");
        let w = boutique::workload().expect("workload");
        let pods: Api<Pod> = Api::namespaced(client.clone(), "probe");
        pods.create(&PostParams::default(), &kube_driver::pod_object(&w.pods[0], "probe", "agnhost"))
            .await
            .expect("pod");
        let running = pods.get(&w.pods[0].name).await.expect("pod");
        assert_eq!(running.status.and_then(|s| s.phase).as_deref(), Some("Running"));
        for (command, container, message) in [
            (vec!["id"], None, "runs no commands"),
            (vec!["sh", "-c", "nc -z 10.244.0.3 80"], None, "runs no commands"),
            (vec!["sh", "-c", "wait\n"], Some("nope"), "container nope is not valid for pod"),
        ] {
            let ap = AttachParams::default().stdin(false).stdout(true).stderr(false);
            let ap = match container {
                Some(c) => ap.container(c),
                None => ap,
            };
            let Err(e) = pods.exec(&w.pods[0].name, command.clone(), &ap).await else {
                panic!("{command:?} ran");
            };
            let kube::Error::Api(s) = &e else { panic!("{e}") };
            assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"), "{}", s.message);
            assert!(s.message.contains(message), "{}", s.message);
        }
        namespaces.delete("probe", &Default::default()).await.expect("delete");
    }
}
