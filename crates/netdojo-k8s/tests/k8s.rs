//! Integration tests of netdojo-k8s: the embedded cluster on real namespaces and nftables.
//! One test crate (link time dominates CI); modules by subject.

mod cluster {
    use netdojo_k8s::cluster::{Cluster, ProbeOptions};
    use netdojo_k8s::{engine, random};
    use rand::SeedableRng;

    /// True when the test can run. Without root it skips with a printed reason, unless `CI` is
    /// set: CI runs as root, so a missing privilege there is a failure, not a skip.
    pub fn root_or_skip(what: &str) -> bool {
        if nix::unistd::geteuid().is_root() {
            return true;
        }
        assert!(std::env::var_os("CI").is_none(), "{what}: needs root, and CI must run these tests as root");
        eprintln!("skipping {what}: needs root (network namespaces, nftables)");
        false
    }

    /// The probed matrix equals the truth table on random workloads and policy sets, on the
    /// real network: 100 sets (5 clusters, 20 policy sets each, re-applied in place), so that the
    /// real-network half stays within a few seconds of CI; the in-memory half of the property
    /// (compiled rules vs truth table) covers 3000 sets in the unit tests.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn probed_matrix_equals_the_truth_table_on_random_sets() {
        if !root_or_skip("probed_matrix_equals_the_truth_table_on_random_sets") {
            return;
        }
        let mut compared = 0;
        let mut denied = 0;
        for cluster_seed in 0..5u64 {
            let mut rng = random::R::seed_from_u64(1000 + cluster_seed);
            let workload = random::workload(&mut rng);
            let targets = engine::targets(&workload);
            let mut cluster =
                Cluster::start(workload.clone(), &[], ProbeOptions::default()).await.expect("cluster");
            for set in 0..20 {
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
        }
        assert!(compared > 200 && denied > 50, "compared {compared}, denied {denied}");
    }
}
