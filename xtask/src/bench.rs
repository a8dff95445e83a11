//! `cargo xtask bench`: figures printed side by side with the targets the issues set.
//! Benchmarks always run an optimised build: a debug build re-runs itself with `--release`.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use netdojo::TaskGenerator;

use crate::apps::{self, EnvOptions};
use crate::eval::PREPARE_AHEAD;

#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// What to measure: dcgraph (query generation), linux (network build, pingmesh, teardown),
    /// netconf (a 4-router OSPF episode on FRR, and the configuration diff), k8s, incident (a
    /// 6-router lab's setup phase by phase, and the oracle's episodes an hour on the default suite), gns3, exec
    /// (one agent command in the jail, spawn to exit, beside a bare `ip netns exec`), or config
    /// (parse and diff of 100,000-line configurations of the shapes that were quadratic), or
    /// serve-env (the oracle's steps per second through OpenEnv's protocol beside in-process:
    /// dcgraph with 32 sessions, routing with 2 when root).
    pub target: String,
    /// Queries to generate.
    #[arg(long, default_value_t = 1_000_000)]
    pub queries: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// linux, netconf, k8s, incident, gns3, exec, config: runs to take the median of (default 20
    /// for linux and k8s, 10 for netconf and incident, 5 for gns3 and config, 1,000 for exec);
    /// serve-env: the episodes of each environment (default 640 for dcgraph, 20 for routing).
    #[arg(long)]
    pub runs: Option<usize>,
    /// gns3: the GNS3 controller, `http://127.0.0.1:3080` (default: $NETDOJO_GNS3_URL).
    #[arg(long)]
    pub gns3_url: Option<String>,
}

pub fn bench(args: BenchArgs) -> Result<()> {
    if cfg!(debug_assertions) {
        eprintln!("benchmarks need an optimised build: re-running with --release");
        let mut cmd = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.args(["run", "--quiet", "--release", "--package", "xtask", "--"])
            .args(std::env::args_os().skip(1));
        let status = cmd.status().context("running cargo")?;
        if !status.success() {
            bail!("the release build of the benchmark failed ({status})");
        }
        return Ok(());
    }
    match args.target.as_str() {
        "dcgraph" => dcgraph(&args),
        "linux" => linux(&args),
        "netconf" => netconf(&args),
        "k8s" => k8s(&args),
        "incident" => incident(&args),
        "gns3" => gns3(&args),
        "exec" => exec(&args),
        "config" => config(&args),
        "serve-env" => serve_env(&args),
        other => {
            bail!(
                "unknown benchmark `{other}` (known: dcgraph, linux, netconf, k8s, incident, gns3, exec, config, serve-env)"
            )
        }
    }
}

fn dcgraph(args: &BenchArgs) -> Result<()> {
    let threads =
        args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let rss_before = peak_rss_kib();
    let t0 = Instant::now();
    let app = apps::app("dcgraph", &EnvOptions::default())?;
    let setup_s = t0.elapsed().as_secs_f64();

    let generator = &app.generator;
    let (n, seed) = (args.queries, args.seed);
    let t1 = Instant::now();
    let bytes: Result<Vec<u64>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads as u64)
            .map(|w| {
                scope.spawn(move || -> Result<u64> {
                    let mut bytes = 0u64;
                    let mut index = w;
                    while index < n {
                        let task = generator.generate(seed, index)?;
                        // Serialised as `generate` writes it, so the figure includes making the
                        // task shareable, and the optimiser cannot drop the work.
                        bytes += serde_json::to_vec(&task)?.len() as u64;
                        index += threads as u64;
                    }
                    Ok(bytes)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().map_err(|_| anyhow::anyhow!("a worker panicked"))?).collect()
    });
    let bytes: u64 = bytes?.iter().sum();
    let elapsed = t1.elapsed().as_secs_f64();
    let rate = n as f64 / elapsed;
    let target_s = 60.0;
    let projected_1m = 1_000_000.0 / rate;

    println!("dcgraph: query generation with ground truth (release build, {threads} thread(s))");
    println!("  {:<34} {:>16}   {:<}", "", "measured", "target");
    println!("  {:<34} {:>16}", "graph setup (default fabric)", format!("{setup_s:.3} s"));
    println!("  {:<34} {:>16}", "queries", n);
    println!("  {:<34} {:>16}", "elapsed", format!("{elapsed:.2} s"));
    println!(
        "  {:<34} {:>16}   {:<}",
        "throughput",
        format!("{rate:.0} q/s"),
        format!("{:.0} q/s", 1_000_000.0 / target_s)
    );
    println!(
        "  {:<34} {:>16}   {:<}",
        "time for 1,000,000 queries",
        format!("{projected_1m:.1} s"),
        format!("< {target_s:.0} s  ({})", if projected_1m < target_s { "met" } else { "NOT met" })
    );
    println!("  {:<34} {:>16}", "JSON written", format!("{:.1} MiB", bytes as f64 / 1048576.0));
    match (rss_before, peak_rss_kib()) {
        (Some(before), Some(after)) => println!(
            "  {:<34} {:>16}   (before setup: {:.1} MiB)",
            "peak memory (VmHWM)",
            format!("{:.1} MiB", after as f64 / 1024.0),
            before as f64 / 1024.0
        ),
        _ => println!("  peak memory: /proc/self/status not readable here"),
    }
    Ok(())
}

/// Peak resident set size of this process, from Linux's /proc/self/status.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// One episode's network life: build + ready, one full pingmesh, teardown.
#[derive(Debug, Clone, Copy)]
struct Lap {
    build: f64,
    mesh: f64,
    teardown: f64,
    /// Inside `build`: namespaces, then links/addresses/routes, then waiting for carrier.
    phases: [f64; 3],
}

fn linux(args: &BenchArgs) -> Result<()> {
    use netdojo::linux::network::Network;
    use netdojo::linux::pingmesh::Options;
    use netdojo::linux::routing::layout::Layout;
    use netdojo::score::stats::median;

    let runs = args.runs.unwrap_or(20).max(1);
    let runtime = tokio::runtime::Runtime::new().context("tokio runtime")?;
    // Back to back, as episodes follow one another in a run. The kernel frees a deleted
    // namespace later, on a work queue that takes the same locks as building one, so each
    // build pays for the previous teardown; the second series pauses to show that share.
    let series = |pause: Duration| -> Result<Vec<Lap>> {
        runtime.block_on(async {
            let mut laps = Vec::with_capacity(runs);
            for run in 0..runs {
                let t = Instant::now();
                let (mut net, phases) = Network::build(Layout::new(4, 4).topology())
                    .await
                    .context("building the network (the linux benchmark needs root)")?;
                let build = t.elapsed().as_secs_f64();
                let t = Instant::now();
                let mesh = net.pingmesh(&Options::default()).await;
                let mesh_s = t.elapsed().as_secs_f64();
                if !mesh.full() {
                    bail!("run {run}: the healthy network is not fully reachable:\n{}", mesh.render());
                }
                let t = Instant::now();
                net.teardown();
                drop(net);
                let phases = [phases.namespaces, phases.links, phases.ready].map(|d| d.as_secs_f64());
                laps.push(Lap { build, mesh: mesh_s, teardown: t.elapsed().as_secs_f64(), phases });
                tokio::time::sleep(pause).await;
            }
            Ok(laps)
        })
    };
    let laps = series(Duration::ZERO)?;
    let paused = series(Duration::from_millis(1000))?;
    let med = |laps: &[Lap], f: fn(&Lap) -> f64| median(laps.iter().map(f).collect());
    let ours = Lap {
        build: med(&laps, |l| l.build),
        mesh: med(&laps, |l| l.mesh),
        teardown: med(&laps, |l| l.teardown),
        phases: [0, 1, 2].map(|i| median(laps.iter().map(|l| l.phases[i]).collect())),
    };
    let isolated_phases = [0, 1, 2].map(|i| median(paused.iter().map(|l| l.phases[i]).collect()));
    let total = med(&laps, |l| l.build + l.mesh + l.teardown);
    let total_paused = med(&paused, |l| l.build + l.mesh + l.teardown);

    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/mininet_routing.py");
    let mininet = if std::path::Path::new("/usr/bin/mnexec").exists() {
        eprintln!("measuring Mininet ({runs} runs of {})...", script.display());
        let out = std::process::Command::new("python3")
            .arg(&script)
            .args(["--runs", &runs.to_string()])
            .output()
            .context("running python3")?;
        if !out.status.success() {
            bail!("{}: {}", script.display(), String::from_utf8_lossy(&out.stderr).trim());
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .with_context(|| format!("{}: output is not JSON", script.display()))?;
        let series = |key: &str| -> Result<f64> {
            let xs: Option<Vec<f64>> =
                v[key].as_array().map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect());
            xs.filter(|x| !x.is_empty())
                .map(median)
                .with_context(|| format!("{}: no `{key}`", script.display()))
        };
        Some((series("build_start_s")?, series("pingall_s")?, series("stop_s")?, series("total_s")?))
    } else {
        None
    };

    let target = 0.125;
    println!("linux: 1 router, 4 subnets, 16 hosts (21 namespaces); median of {runs} runs (release build)");
    println!("  {:<28} {:>12} {:>14}   {:<}", "", "netdojo", "Mininet 2.3", "target");
    let ms = |s: f64| format!("{:.1} ms", s * 1000.0);
    let mn = |x: Option<f64>| x.map_or_else(|| "-".to_string(), ms);
    println!("  {:<28} {:>12} {:>14}", "build + links up", ms(ours.build), mn(mininet.map(|m| m.0)));
    // Where a build's time goes, back to back and isolated: the previous network's deferred
    // cleanup shows up in the phases that take the kernel's locks.
    for (i, phase) in ["  namespaces", "  links, addresses, routes", "  carrier up"].iter().enumerate() {
        println!(
            "  {:<28} {:>12} {:>14}   isolated {}",
            phase,
            ms(ours.phases[i]),
            "",
            ms(isolated_phases[i])
        );
    }
    println!("  {:<28} {:>12} {:>14}", "pingmesh / pingAll (272)", ms(ours.mesh), mn(mininet.map(|m| m.1)));
    println!("  {:<28} {:>12} {:>14}", "teardown / stop", ms(ours.teardown), mn(mininet.map(|m| m.2)));
    println!(
        "  {:<28} {:>12} {:>14}   < {} ({})",
        "episode total",
        ms(total),
        mn(mininet.map(|m| m.3)),
        ms(target),
        if total < target { "met" } else { "NOT met" }
    );
    println!(
        "  {:<28} {:>12}   (1 s pause between runs: the kernel has freed the previous network)",
        "episode total, isolated",
        ms(total_paused)
    );
    match mininet {
        Some(m) => println!("  speed-up over Mininet: {:.1}x back to back (target 20x)", m.3 / total),
        None => println!(
            "  Mininet: not installed (/usr/bin/mnexec missing), so not measured; FACTS.md's figure for \
             this topology is 2.5 s (install with `apt-get install mininet bridge-utils`)"
        ),
    }
    Ok(())
}

/// A 4-router OSPF task on real FRR, episode by episode (start routers, apply the ground
/// truth, converge, run the testcases, tear down), with fresh routers and with routers from the
/// warm pool, side by side; each phase of an episode; the episode rate at concurrency 1 and 2;
/// and the command-score diff on a large configuration.
fn netconf(args: &BenchArgs) -> Result<()> {
    use netdojo::config::config::{Config, Dialect};
    use netdojo::config::diff::diff;
    use netdojo::core::runner::{Budget, Runner};
    use netdojo::netconf::{NetconfFactory, Phases};
    use netdojo::score::stats::median;
    use netdojo::{Environment, TaskGenerator, TaskKind};

    let app = apps::app("netconf", &EnvOptions::default())?;
    let generator = netdojo::netconf::NetconfGenerator;
    let task = (0..1000)
        .filter_map(|i| generator.generate(args.seed, i).ok())
        .find(|t| t.label == "ospf" && matches!(&t.kind, TaskKind::Config(c) if c.topology.nodes.len() == 4))
        .context("no 4-router OSPF task among the first 1000 generated")?;
    let TaskKind::Config(config) = &task.kind else { bail!("{} is not a configuration task", task.id) };
    // The oracle's calls, for the episodes driven phase by phase.
    let mut calls = Vec::new();
    for (device, commands) in &config.ground_truth_configs {
        calls.push(serde_json::from_value::<netdojo::ToolCall>(serde_json::json!({
            "name": "update-cfg", "arguments": {"device": device, "commands": commands}
        }))?);
    }
    let runs = args.runs.unwrap_or(10).max(1);
    let runtime = tokio::runtime::Runtime::new().context("tokio runtime")?;
    let scorers = std::sync::Arc::new(app.scorers);

    struct Mode {
        walls: Vec<f64>,
        /// The runner's whole call: the episode and then its scoring (the reasoning score's
        /// sentence embedding), which pooled runs do while the pool resets the routers.
        scored: Vec<f64>,
        phases: Vec<(Phases, f64)>,
        rate: [f64; 2],
        stats: Option<netdojo::linux::pool::PoolStats>,
        /// The no-op agent's episodes (the task fails): wall time, and whether the verdict
        /// came early (crate::quiet) or after the whole convergence time.
        failing: Vec<(f64, Phases)>,
        /// The load average when the mode started and when it ended.
        load: [String; 2],
    }
    let loadavg = || {
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    };
    let mut modes = Vec::new();
    for pooled in [false, true] {
        let load_start = loadavg();
        let factory =
            std::sync::Arc::new(if pooled { NetconfFactory::pooled() } else { NetconfFactory::new() }?);
        let runner = Runner {
            env: factory.clone(),
            agent: apps::agent("oracle", args.seed, 0)?,
            scorers: scorers.clone(),
            budget: Budget::default(),
            concurrency: 1,
            prepare_ahead: 0,
        };
        // A pooled episode's latency is measured with its routers idle: the background resets
        // of the previous episode's routers done (what a pool offers an agent that takes more
        // than a moment between episodes). The rates below run episodes back to back, resets
        // competing for the cores.
        let settle = || {
            if let Some(pool) = factory.pool() {
                pool.settle(std::time::Duration::from_secs(30));
            }
        };
        let episode = |run: usize| {
            settle();
            let t = Instant::now();
            let (record, trajectory) = runtime.block_on(runner.run_episode(&task));
            if !trajectory.outcome.as_ref().is_some_and(|o| o.solved()) {
                let failed: Vec<String> = trajectory
                    .outcome
                    .iter()
                    .flat_map(|o| {
                        o.checks.iter().filter(|c| !c.passed).map(|c| format!("{}: {}", c.name, c.detail))
                    })
                    .collect();
                bail!(
                    "run {run} ({}): {} was not solved by its ground truth ({:?}): {}",
                    if pooled { "pooled" } else { "fresh" },
                    task.id,
                    record.status,
                    failed.join("; ")
                );
            }
            // The episode is the runner's from the environment's creation to its close (start,
            // configure, converge, test, stop); the scorers come after it.
            Ok((trajectory.wall_ms as f64 / 1000.0, t.elapsed().as_secs_f64()))
        };
        // Warm-up, not measured: the pool grows to its working set (the routers of one episode
        // in use, those of the previous one being reset).
        for run in 0..2 {
            episode(run)?;
        }
        let mut walls = Vec::new();
        let mut scored = Vec::new();
        let mut phases = Vec::new();
        for run in 0..runs {
            let (wall, with_scoring) = episode(run)?;
            walls.push(wall);
            scored.push(with_scoring);
            // The same episode driven phase by phase (the oracle's calls, no scorers).
            settle();
            let mut env = factory.env();
            let phase = runtime.block_on(async {
                env.reset(&task).await?;
                let c = Instant::now();
                for call in &calls {
                    env.execute(call).await?;
                }
                let configure = c.elapsed().as_secs_f64();
                let outcome = env.evaluate(&task, None).await?;
                env.close().await?;
                anyhow::ensure!(
                    outcome.solved(),
                    "{} not solved phase by phase (pooled {pooled}): {:?} {}",
                    task.id,
                    outcome.checks,
                    outcome.export
                );
                Ok::<_, anyhow::Error>((env.phases(), configure))
            })?;
            phases.push(phase);
        }
        // Episodes per second, one and two at a time.
        let mut rate = [0.0; 2];
        for (i, concurrency) in [1usize, 2].into_iter().enumerate() {
            let per_lane = runs.div_ceil(concurrency);
            let t = Instant::now();
            let lane = || async {
                for _ in 0..per_lane {
                    let (record, trajectory) = runner.run_episode(&task).await;
                    if !trajectory.outcome.as_ref().is_some_and(|o| o.solved()) {
                        let failed: Vec<String> = trajectory
                            .outcome
                            .iter()
                            .flat_map(|o| {
                                o.checks
                                    .iter()
                                    .filter(|c| !c.passed)
                                    .map(|c| format!("{}: {}", c.name, c.detail))
                            })
                            .collect();
                        bail!(
                            "{} was not solved at concurrency {concurrency}, pooled {pooled} ({:?}): {}",
                            task.id,
                            record.status,
                            failed.join("; ")
                        );
                    }
                }
                Ok(())
            };
            runtime.block_on(async {
                if concurrency == 1 {
                    lane().await
                } else {
                    let (a, b) = tokio::join!(lane(), lane());
                    a.and(b)
                }
            })?;
            rate[i] = (per_lane * concurrency) as f64 / t.elapsed().as_secs_f64();
        }
        // A failing episode: the no-op agent's (reset, no call, evaluate, close).
        let mut failing = Vec::new();
        for _ in 0..runs {
            settle();
            let mut env = factory.env();
            let t = Instant::now();
            let phases = runtime.block_on(async {
                env.reset(&task).await?;
                let outcome = env.evaluate(&task, None).await?;
                env.close().await?;
                anyhow::ensure!(!outcome.solved(), "{}: the no-op agent solved it", task.id);
                Ok::<_, anyhow::Error>(env.phases())
            })?;
            failing.push((t.elapsed().as_secs_f64(), phases));
        }
        let stats = factory.pool().map(|p| p.handle().stats());
        drop(runner);
        drop(factory);
        modes.push(Mode { walls, scored, phases, rate, stats, failing, load: [load_start, loadavg()] });
    }

    // The diff: a 50,000-line configuration against itself plus a few changes.
    let lines = 50_000;
    let before: String =
        (0..lines).map(|i| format!("ip route 10.{}.{}.0/24 10.0.0.1\n", i / 256 % 256, i % 256)).collect();
    let after = format!("{before}router ospf\n network 10.0.0.0/30 area 0\nexit\n");
    let t = Instant::now();
    let edits = diff(&Config::parse(&before, Dialect::Frr)?, &Config::parse(&after, Dialect::Frr)?);
    let diff_s = t.elapsed().as_secs_f64();
    if edits.len() != 2 {
        bail!("the diff found {} edits instead of 2", edits.len());
    }
    let total_lines = (2 * lines + 3) as f64;

    println!(
        "netconf: {} (4 FRR routers, OSPF); median of {runs} episodes each way after 2 warm-up \
         episodes, pooled ones with the pool's background resets done ({} build; load average {})",
        task.id,
        if cfg!(debug_assertions) { "debug" } else { "release" },
        loadavg()
    );
    let ms = |d: Vec<f64>| format!("{:.0} ms", median(d) * 1000.0);
    println!("  {:<44} {:>14} {:>14} {:>10}", "", "fresh", "pooled", "target");
    let (fresh, pooled) = (&modes[0], &modes[1]);
    let row = |label: &str, f: String, p: String, target: &str| {
        println!("  {label:<44} {f:>14} {p:>14} {target:>10}");
    };
    row(
        "episode (fresh) / episode (pooled)",
        format!("{:.2} s", median(fresh.walls.clone())),
        format!("{:.2} s", median(pooled.walls.clone())),
        "1.2 / 0.5 s",
    );
    println!("  episode (fresh)   {:.2} s", median(fresh.walls.clone()));
    println!("  episode (pooled)  {:.2} s", median(pooled.walls.clone()));
    row(
        "  the runner's call, scoring included",
        format!("{:.2} s", median(fresh.scored.clone())),
        format!("{:.2} s", median(pooled.scored.clone())),
        "",
    );
    row(
        "fastest / slowest episode",
        format!(
            "{:.2} / {:.2}",
            fresh.walls.iter().copied().fold(f64::INFINITY, f64::min),
            fresh.walls.iter().copied().fold(0.0, f64::max)
        ),
        format!(
            "{:.2} / {:.2}",
            pooled.walls.iter().copied().fold(f64::INFINITY, f64::min),
            pooled.walls.iter().copied().fold(0.0, f64::max)
        ),
        "",
    );
    println!("  phases (medians of the episodes driven phase by phase):");
    type Pick = fn(&(Phases, f64)) -> f64;
    let picks: [(&str, Pick); 10] = [
        ("namespaces (pooled: routers taken)", |p| p.0.namespaces.as_secs_f64()),
        ("links up", |p| p.0.links.as_secs_f64()),
        ("daemons + startup config (pooled: config)", |p| p.0.routers.as_secs_f64()),
        ("  the same, per router", |p| p.0.per_router.as_secs_f64()),
        ("task setup + initial export", |p| p.0.setup.as_secs_f64()),
        ("config apply (the oracle's update-cfg)", |p| p.1),
        ("final export", |p| p.0.export.as_secs_f64()),
        ("convergence (testcases until all pass)", |p| p.0.testcases.as_secs_f64()),
        ("stop (pooled: hand-back; reset in background)", |p| p.0.stop.as_secs_f64()),
        ("sum of the phases", |p| {
            let q = p.0;
            (q.namespaces + q.links + q.routers + q.setup + q.export + q.testcases + q.stop).as_secs_f64()
                + p.1
        }),
    ];
    for (label, pick) in picks {
        row(
            &format!("  {label}"),
            ms(fresh.phases.iter().map(pick).collect()),
            ms(pooled.phases.iter().map(pick).collect()),
            "",
        );
    }
    let failing = |m: &Mode| {
        let early = m.failing.iter().filter(|(_, p)| p.early_verdict).count();
        (
            format!("{:.2} s", median(m.failing.iter().map(|(w, _)| *w).collect())),
            format!("{:.2} s", median(m.failing.iter().map(|(_, p)| p.testcases.as_secs_f64()).collect())),
            format!("{early}/{}", m.failing.len()),
        )
    };
    let (ff, fp) = (failing(fresh), failing(pooled));
    row("failing episode (no-op agent)", ff.0, fp.0, "");
    row("  its verdict after (10 s without early verdict)", ff.1, fp.1, "");
    row("  early verdicts", ff.2, fp.2, "");
    row(
        "episode rate, concurrency 1 (back to back)",
        format!("{:.2}/s", fresh.rate[0]),
        format!("{:.2}/s", pooled.rate[0]),
        "",
    );
    row(
        "episode rate, concurrency 2 (back to back)",
        format!("{:.2}/s", fresh.rate[1]),
        format!("{:.2}/s", pooled.rate[1]),
        "",
    );
    row("load average at the start of each side", fresh.load[0].clone(), pooled.load[0].clone(), "");
    row("load average at its end", fresh.load[1].clone(), pooled.load[1].clone(), "");
    if let Some(stats) = pooled.stats {
        println!(
            "  pool: {} routers started, {} reused after a checked reset, {} discarded",
            stats.created, stats.reused, stats.discarded
        );
    }
    println!(
        "  {:<44} {:>14}",
        "config diff, 2 x 50,000 lines",
        format!("{:.0} ms ({:.2} M lines/s)", diff_s * 1000.0, total_lines / diff_s / 1e6)
    );
    Ok(())
}

/// A 3-node VPCS topology on a real GNS3 server: build and start (project, nodes, switch,
/// links, consoles), configure (three `update-cfg`), test (two pings) and delete, each timed.
fn gns3(args: &BenchArgs) -> Result<()> {
    use netdojo::ToolCall;
    use netdojo::score::stats::median;

    let options = EnvOptions { gns3_url: args.gns3_url.clone(), ..Default::default() };
    let app = apps::app("gns3", &options)?;
    let task: netdojo::Task = serde_json::from_value(serde_json::json!({
        "id": "bench-three-vpcs", "application": "netconf", "level": 1, "label": "bench",
        "query": "address three hosts",
        "setup": {"gns3": {"nodes": {
            "PC1": {"template": "VPCS"}, "PC2": {"template": "VPCS"}, "PC3": {"template": "VPCS"},
            "SW1": {"template": "Ethernet switch"}}}},
        "kind": "config", "task_name": "bench", "intents": ["address three hosts"],
        "topology": {"nodes": ["PC1", "PC2", "PC3", "SW1"],
                     "links": ["PC1 e0 <-> SW1 e0", "PC2 e0 <-> SW1 e1", "PC3 e0 <-> SW1 e2"]},
        "ground_truth_configs": {"PC1": ["ip 10.0.0.1/24"], "PC2": ["ip 10.0.0.2/24"], "PC3": ["ip 10.0.0.3/24"]},
        "testcases": [
            {"name": "PC1 pings PC2", "device": "PC1", "commands": ["ping 10.0.0.2 -c 1"], "expected_output": "icmp_seq=1 ttl=64"},
            {"name": "PC1 pings PC3", "device": "PC1", "commands": ["ping 10.0.0.3 -c 1"], "expected_output": "icmp_seq=1 ttl=64"}
        ]
    }))
    .context("the benchmark's task")?;
    let runs = args.runs.unwrap_or(5).max(1);
    let runtime = tokio::runtime::Runtime::new().context("tokio runtime")?;
    let phases = ["build + start", "configure", "test", "delete"];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); phases.len() + 1];
    for run in 0..runs {
        let result: Result<[f64; 4]> = runtime.block_on(async {
            let t = Instant::now();
            let mut env = app.factory.create(&task).await?;
            env.reset(&task).await?;
            let build = t.elapsed().as_secs_f64();
            let t = Instant::now();
            for (device, ip) in [("PC1", "10.0.0.1/24"), ("PC2", "10.0.0.2/24"), ("PC3", "10.0.0.3/24")] {
                let call = ToolCall::new(
                    "update-cfg",
                    serde_json::json!({"device": device, "commands": [format!("ip {ip}")]}),
                );
                let obs = env.execute(&call).await?;
                if !obs.ok {
                    bail!("update-cfg on {device}: {}", obs.content);
                }
            }
            let configure = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let outcome = env.evaluate(&task, None).await?;
            let test = t.elapsed().as_secs_f64();
            if !outcome.solved() {
                bail!("the testcases failed: {:?}", outcome.checks);
            }
            let t = Instant::now();
            env.close().await?;
            Ok([build, configure, test, t.elapsed().as_secs_f64()])
        });
        let phase_times = result.with_context(|| format!("run {run}"))?;
        for (i, s) in phase_times.iter().enumerate() {
            times[i].push(*s);
        }
        times[phases.len()].push(phase_times.iter().sum());
    }
    println!("gns3: 3 VPCS hosts on an Ethernet switch; median of {runs} episodes (release build)");
    println!("  {:<44} {:>12}", "", "measured");
    for (i, name) in phases.iter().enumerate() {
        println!("  {:<44} {:>12}", name, format!("{:.2} s", median(times[i].clone())));
    }
    let total = &times[phases.len()];
    println!(
        "  {:<44} {:>12}",
        "total (fastest / slowest)",
        format!(
            "{:.2} s ({:.2} / {:.2})",
            median(total.clone()),
            total.iter().copied().fold(f64::INFINITY, f64::min),
            total.iter().copied().fold(0.0, f64::max)
        )
    );
    println!("  (no reference figure is set for these; they are tracked from run to run)");
    Ok(())
}

/// The Online Boutique on the embedded cluster: resetting the policies between episodes (after a
/// fault: the pods whose rules changed; and every pod's table rewritten, as NetPress's
/// `kubectl apply` of all policies does) and a full probe of the matrix (11 targets from 11
/// other pods, real TCP connections), median of `runs`.
/// The incident application: the setup of a 6-router lab (namespaces, FRR, convergence until
/// every health check passes, then a task's fault injected and its symptom seen; or, for a task
/// whose faults go in as the lab starts, convergence until exactly its symptom shows) against the
/// issue's 1 s median, each phase's median beside it, teardown apart; and the oracle's episodes
/// an hour at concurrency 2 on the default suite against 3,600, as `eval` runs it by default
/// ([`PREPARE_AHEAD`] more labs prepared ahead), then with each lab set up as its episode begins.
fn incident(args: &BenchArgs) -> Result<()> {
    use netdojo::score::stats::median;
    use netdojo::{Environment, StaticSuite, TaskSource};

    let (factory, _) = apps::incident()?;
    let factory = std::sync::Arc::new(factory);
    let suite_path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/incident/suite/default.jsonl");
    let suite = StaticSuite::load(&suite_path)
        .with_context(|| format!("the default suite {}", suite_path.display()))?;
    let tasks: Vec<netdojo::Task> = suite.tasks().collect::<Result<_, _>>()?;
    let routers = |t: &netdojo::Task| -> usize {
        netdojo::incident::task::setup_of(t)
            .ok()
            .and_then(|s| factory.lab(&s.lab).map(|l| l.routers().len()))
            .unwrap_or(0)
    };
    // A one-fault task on a 6-router lab (the issue's yardstick), else the lab nearest 6.
    let task = tasks
        .iter()
        .filter(|t| t.level == 1 && t.label != netdojo::incident::task::HEALTHY)
        .min_by_key(|t| (routers(t) as i64 - 6).abs())
        .context("the default suite has no one-fault task")?
        .clone();
    // Every one-fault task on a lab of the yardstick's size: faults differ in how soon they
    // show (an adjacency that must time out takes the dead interval), so their median is the
    // fairer figure; each is set up once.
    let size = routers(&task);
    let same_size: Vec<netdojo::Task> = tasks
        .iter()
        .filter(|t| t.level == 1 && t.label != netdojo::incident::task::HEALTHY && routers(t) == size)
        .cloned()
        .collect();
    let runs = args.runs.unwrap_or(10).max(1);
    let runtime = tokio::runtime::Runtime::new().context("tokio runtime")?;
    const PHASES: [&str; 9] = [
        "namespaces, links, pool checkout",
        "FRR (routers renamed, their daemons started)",
        "the lab's linux lines",
        "configuration applied (vty sockets)",
        "services started",
        "convergence wait (to healthy, or to the symptom)",
        "  of which the last, passing round",
        "fault actions applied",
        "symptom seen (verified injection)",
    ];
    let at_start = |t: &netdojo::Task| netdojo::incident::task::setup_of(t).is_ok_and(|s| s.inject_at_start);
    // One setup of `task`: its phases, the lab up, the setup with verified injection and the
    // teardown (seconds).
    let setup_once = |task: &netdojo::Task| -> Result<([f64; 9], f64, f64, f64)> {
        let mut env = factory.env();
        let (p, stop) = runtime.block_on(async {
            env.reset(task).await?;
            let phases = env.phases();
            let t = Instant::now();
            // What close spawns, awaited here to time it (an episode does not wait for it).
            if let Some(live) = env.take_live() {
                live.stop().await;
            }
            Ok::<_, anyhow::Error>((phases, t.elapsed()))
        })?;
        let l = p.lab;
        let n = l.network;
        let phases = [
            n.namespaces + n.links + n.ready,
            n.frr,
            l.linux,
            l.config,
            l.services,
            l.converge,
            l.health,
            p.apply,
            p.symptom,
        ]
        .map(|d| d.as_secs_f64());
        Ok((phases, p.start.as_secs_f64(), (p.start + p.inject).as_secs_f64(), stop.as_secs_f64()))
    };
    // Per phase, one sample a setup.
    #[derive(Default)]
    struct Samples {
        phases: [Vec<f64>; 9],
        start: Vec<f64>,
        setup: Vec<f64>,
        teardown: Vec<f64>,
    }
    let add = |s: &mut Samples, (phases, start, setup, teardown): ([f64; 9], f64, f64, f64)| {
        for (i, d) in phases.into_iter().enumerate() {
            s.phases[i].push(d);
        }
        s.start.push(start);
        s.setup.push(setup);
        s.teardown.push(teardown);
    };
    // The first setup fills the pool and the page cache (FRR's binaries); not measured.
    setup_once(&task)?;
    let mut one = Samples::default();
    for _ in 0..runs {
        add(&mut one, setup_once(&task)?);
    }
    let mut all = Samples::default();
    for t in &same_size {
        add(&mut all, setup_once(t).with_context(|| format!("setting up {}", t.id))?);
    }
    // The oracle on the suite's first `runs * 6` tasks, two episodes at a time, through the
    // runner `eval` uses: with `eval`'s default labs prepared ahead, then with each lab set up
    // as its episode begins (`eval --prepare-ahead 0`).
    let sample: Vec<netdojo::Task> = tasks.iter().take(runs * 6).cloned().collect();
    let mut per_hour = Vec::new();
    for ahead in [PREPARE_AHEAD, 0] {
        per_hour.push(runtime.block_on(oracle_per_hour(factory.clone(), &sample, args.seed, ahead))?);
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let lab = netdojo::incident::task::setup_of(&task).map(|s| s.lab).unwrap_or_default();
    println!(
        "incident: ({} build; load average {})",
        if cfg!(debug_assertions) { "debug" } else { "release" },
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    println!(
        "  one task: {} ({}) on lab {lab} ({size} routers), median of {runs} setups after a warm-up",
        task.id, task.label,
    );
    println!(
        "  all: the {} one-fault tasks of the default suite on {size}-router labs, each set up once, median",
        same_size.len()
    );
    let met = |ok: bool| if ok { "met" } else { "not met" };
    let ms = |v: &[f64]| format!("{:.0} ms", median(v.to_vec()) * 1000.0);
    println!("  {:<48} {:>10} {:>10}   {:<}", "", "one task", "all", "target");
    for (i, name) in PHASES.iter().enumerate() {
        println!("  {name:<48} {:>10} {:>10}", ms(&one.phases[i]), ms(&all.phases[i]));
    }
    println!(
        "  {:<48} {:>10} {:>10}",
        "faults injected as the lab starts (tasks)",
        if at_start(&task) { "yes" } else { "no" },
        format!("{} of {}", same_size.iter().filter(|t| at_start(t)).count(), same_size.len())
    );
    println!(
        "  {:<48} {:>10} {:>10}",
        "lab up (healthy, or converged with its faults)",
        ms(&one.start),
        ms(&all.start)
    );
    let (one_s, all_s) = (median(one.setup.clone()), median(all.setup.clone()));
    println!(
        "  {:<48} {:>10} {:>10}   <= 1000 ms  (one task: {}; all: {})",
        "setup with verified injection",
        ms(&one.setup),
        ms(&all.setup),
        met(one_s <= 1.0),
        met(all_s <= 1.0)
    );
    println!("  {:<48}   (the issue's target line: one task, its yardstick since the bench began)", "");
    println!(
        "  {:<48} {:>10} {:>10}   (off the critical path)",
        "teardown (routers back to the pool)",
        ms(&one.teardown),
        ms(&all.teardown)
    );
    for (ahead, per_hour) in [PREPARE_AHEAD, 0].into_iter().zip(per_hour) {
        let label = if ahead == 0 {
            "  the same, no lab prepared ahead"
        } else {
            "oracle episodes an hour, concurrency 2"
        };
        println!(
            "  {:<48} {:>21}   {:<}",
            label,
            format!("{per_hour:.0}"),
            format!(">= 3600  ({})", met(per_hour >= 3600.0))
        );
    }
    println!(
        "  {:<48}   (the suite's first {} tasks; the first line as `eval` runs by default, {PREPARE_AHEAD} labs prepared ahead)",
        "",
        sample.len()
    );
    Ok(())
}

/// The oracle's episodes an hour on `sample`, two at a time, `ahead` labs prepared beyond them;
/// an error if it leaves one unsolved.
async fn oracle_per_hour(
    factory: std::sync::Arc<netdojo::incident::IncidentFactory>,
    sample: &[netdojo::Task],
    seed: u64,
    ahead: usize,
) -> Result<f64> {
    use netdojo::core::runner::{Budget, Runner, Silent};

    struct Sample<'a>(&'a [netdojo::Task]);
    impl netdojo::TaskSource for Sample<'_> {
        fn describe(&self) -> serde_json::Value {
            serde_json::Value::Null
        }
        fn len_hint(&self) -> Option<usize> {
            Some(self.0.len())
        }
        fn tasks(&self) -> Box<dyn Iterator<Item = Result<netdojo::Task, netdojo::TaskError>> + Send + '_> {
            Box::new(self.0.iter().cloned().map(Ok))
        }
    }
    let runner = Runner {
        env: factory,
        agent: apps::agent("oracle", seed, 0)?,
        scorers: std::sync::Arc::new(Vec::new()),
        budget: Budget::default(),
        concurrency: 2,
        prepare_ahead: ahead,
    };
    let dir = tempfile::tempdir().context("a run directory for the oracle's episodes")?;
    let mut store = netdojo::core::store::RunDir::create(dir.path(), &runner.describe())?;
    let (_running, stop) = tokio::sync::watch::channel(false);
    let t = Instant::now();
    runner.run(&Sample(sample), &mut store, &Silent, stop).await?;
    let elapsed = t.elapsed();
    for task in sample {
        let trajectory = store.trajectory(&task.id)?;
        if !trajectory.outcome.as_ref().is_some_and(|o| o.solved()) {
            let record = store.records()?.into_iter().find(|r| r.task_id == task.id);
            bail!(
                "the oracle did not solve {} with {ahead} labs prepared ahead ({:?})",
                task.id,
                record.map(|r| (r.status, r.error))
            );
        }
    }
    Ok(sample.len() as f64 / elapsed.as_secs_f64() * 3600.0)
}

fn k8s(args: &BenchArgs) -> Result<()> {
    use netdojo::k8s::cluster::{Cluster, ProbeOptions};
    use netdojo::k8s::{boutique, engine, policy, tasks};
    use netdojo::score::stats::median;

    let runs = args.runs.unwrap_or(20).max(1);
    let workload = boutique::workload()?;
    let original = boutique::policies()?;
    let targets = engine::targets(&workload);
    let expected = engine::truth_table(&original, &workload, &targets);
    let runtime = tokio::runtime::Runtime::new().context("tokio runtime")?;
    let (reset, reset_all, probe, pairs) = runtime.block_on(async {
        let t = Instant::now();
        let mut cluster = Cluster::start(workload.clone(), &original, ProbeOptions::default())
            .await
            .context("starting the embedded cluster (the k8s benchmark needs root)")?;
        eprintln!(
            "cluster of {} pods up in {:.0} ms",
            workload.pods.len(),
            t.elapsed().as_secs_f64() * 1000.0
        );
        let (mut reset, mut reset_all, mut probe) = (Vec::new(), Vec::new(), Vec::new());
        let mut pairs = 0;
        for run in 0..runs {
            // A task's faulty policies, as an episode starts with.
            let task = tasks::K8sGenerator.generate(args.seed, run as u64)?;
            let mut faulty = original.clone();
            for (name, yaml) in tasks::injections(&task)? {
                let p = policy::parse_yaml(&yaml, &name).map_err(anyhow::Error::msg)?.remove(0);
                if let Some(slot) = faulty.iter_mut().find(|q| policy::name(q) == name) {
                    *slot = p;
                }
            }
            cluster.apply(&faulty).await?;
            let t = Instant::now();
            cluster.apply(&original).await?;
            reset.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            cluster.apply_all(&original).await?;
            reset_all.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            let matrix = cluster.probe(&targets).await?;
            probe.push(t.elapsed().as_secs_f64());
            let wrong = matrix.mismatches(&expected);
            if !wrong.is_empty() {
                bail!(
                    "run {run}: the probe disagrees with the truth table:\n{}",
                    matrix.mismatch_report(&expected)
                );
            }
            pairs = matrix.allowed.iter().flatten().flatten().count();
        }
        cluster.teardown();
        Ok::<_, anyhow::Error>((median(reset), median(reset_all), median(probe), pairs))
    })?;
    let ms = |s: f64| format!("{:.1} ms", s * 1000.0);
    let verdict = |x: f64, target: f64| if x < target { "met" } else { "NOT met" };
    println!(
        "k8s: Online Boutique, {} pods, {} policies, {pairs} probed pairs; median of {runs} runs (release build)",
        workload.pods.len(),
        original.len()
    );
    println!("  {:<34} {:>10} {:>22}   target", "", "netdojo", "NetPress (kind)");
    let reference = "not measurable here";
    // A reset rewrites the tables whose rules differ, as `kubectl apply` of every policy changes
    // only the objects that differ (the others are "unchanged") and a CNI only their rules.
    println!(
        "  {:<34} {:>10} {:>22}   < 50 ms ({})",
        "reset after a fault",
        ms(reset),
        reference,
        verdict(reset, 0.050)
    );
    println!("  {:<34} {:>10} {:>22}", "every pod's table rewritten", ms(reset_all), reference);
    println!(
        "  {:<34} {:>10} {:>22}   < 500 ms ({})",
        "full probe of the matrix",
        ms(probe),
        reference,
        verdict(probe, 0.5)
    );
    println!(
        "  NetPress resets with `kubectl apply` of every policy on a kind cluster and probes with nc in debug \
         containers; neither can run here (no Kubernetes API server can be had on this machine, FACTS.md), \
         so its figures are not measured here (docs/k8s.md)."
    );
    Ok(())
}

/// One agent command (`ip -br link`) from spawn to exit: through the sandbox and its jail
/// (`exec::run`), and the same program under a bare `ip netns exec`, alternating, in one
/// throwaway namespace.
fn exec(args: &BenchArgs) -> Result<()> {
    use netdojo::linux::exec::{self, Policy};
    use netdojo::linux::netns::Episode;
    use netdojo::score::stats::median;

    let runs = args.runs.unwrap_or(1000).max(1);
    let runtime = tokio::runtime::Runtime::new().context("tokio runtime")?;
    let mut episode = Episode::new().context("a namespace (the exec benchmark needs root)")?;
    let ns = episode.create("h1").context("a namespace")?;
    let command = exec::parse("ip -br link").map_err(|r| anyhow::anyhow!("{r}"))?;
    let policy = Policy::default();
    // The probe of per-namespace sysctls runs once per process: not part of a command's cost.
    netdojo::linux::sysctl::probe().map_err(|e| anyhow::anyhow!(e))?;
    let (jailed, bare) = runtime.block_on(async {
        let mut jailed = Vec::with_capacity(runs);
        let mut bare = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            let out = exec::run(&ns, &command, &policy).await.context("jailed command")?;
            jailed.push(t.elapsed().as_secs_f64());
            if out.status != Some(0) {
                bail!("`ip -br link` in the jail failed: {}", out.text);
            }
            let t = Instant::now();
            let out = tokio::process::Command::new("ip")
                .args(["netns", "exec", &ns, "/usr/sbin/ip", "-br", "link"])
                .env_clear()
                .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
                .stdin(std::process::Stdio::null())
                .output()
                .await
                .context("ip netns exec")?;
            bare.push(t.elapsed().as_secs_f64());
            if !out.status.success() {
                bail!("ip netns exec failed: {}", String::from_utf8_lossy(&out.stderr));
            }
        }
        Ok((jailed, bare))
    })?;
    let pct = |xs: &[f64], p: f64| {
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        v[((v.len() - 1) as f64 * p).round() as usize]
    };
    let ms = |s: f64| format!("{:.2} ms", s * 1000.0);
    println!(
        "exec: `ip -br link` in one namespace, spawn to exit, {runs} runs each, alternating (release build)"
    );
    println!("  {:<34} {:>10} {:>10} {:>10}", "", "median", "p90", "p99");
    for (name, xs) in [("exec::run (parser + jail)", &jailed), ("bare `ip netns exec`", &bare)] {
        println!(
            "  {:<34} {:>10} {:>10} {:>10}",
            name,
            ms(median(xs.clone())),
            ms(pct(xs, 0.9)),
            ms(pct(xs, 0.99))
        );
    }
    println!(
        "  the jail's cost per command: {} (median difference)",
        ms(median(jailed.clone()) - median(bare.clone()))
    );
    Ok(())
}

/// Parse and diff of 100,000-line configurations of each shape that took quadratic time
/// (netdojo-config's `shapes`), beside the 1 s target of issue 16. Figures from before the fix
/// cannot be run here; the issue's own were 52 s for 20,000 nft lines under an open brace and
/// 7.6 s for 40,000 one-entry prefix-lists.
fn config(args: &BenchArgs) -> Result<()> {
    use netdojo::config::config::Config;
    use netdojo::config::diff::diff;
    use netdojo::config::shapes::{Expected, shapes};
    use netdojo::score::stats::median;

    const LINES: usize = 100_000;
    const TARGET_S: f64 = 1.0;
    let runs = args.runs.unwrap_or(5).max(1);
    println!("config: parse both texts + diff, {LINES}-line inputs, median of {runs} runs (release build)");
    println!(
        "  {:<16} {:>8} {:>12} {:>12} {:>12} {:>8}  result",
        "shape", "lines", "parse (2x)", "diff", "total", "target"
    );
    for shape in shapes(LINES) {
        let (mut parse_s, mut diff_s, mut total_s) = (Vec::new(), Vec::new(), Vec::new());
        let mut result = String::new();
        for _ in 0..runs {
            let t = Instant::now();
            let before = Config::parse(&shape.before, shape.dialect);
            let after = Config::parse(&shape.after, shape.dialect);
            let parsed = t.elapsed().as_secs_f64();
            let d = Instant::now();
            result = match (before, after, shape.expected) {
                (Ok(b), Ok(a), Expected::Edits(n)) => {
                    let edits = diff(&b, &a).len();
                    if edits != n {
                        bail!("{}: {edits} edits, expected {n}", shape.name);
                    }
                    format!("{edits} edits")
                }
                (Err(e), Err(_), Expected::Unclosed) => format!("refused: {e}"),
                (b, a, want) => {
                    bail!("{}: expected {want:?}, read {:?} / {:?}", shape.name, b.err(), a.err())
                }
            };
            let diffed = d.elapsed().as_secs_f64();
            parse_s.push(parsed);
            diff_s.push(diffed);
            total_s.push(parsed + diffed);
        }
        let ms = |xs: &[f64]| format!("{:.1} ms", median(xs.to_vec()) * 1000.0);
        let total = median(total_s.clone());
        println!(
            "  {:<16} {:>8} {:>12} {:>12} {:>12} {:>8}  {result}{}",
            shape.name,
            shape.lines,
            ms(&parse_s),
            ms(&diff_s),
            ms(&total_s),
            format!("{TARGET_S:.0} s"),
            if total <= TARGET_S { "" } else { "  OVER TARGET" }
        );
    }
    Ok(())
}

/// Steps per second of the oracle's episodes through OpenEnv's protocol (`serve-env` in this
/// process, one Rust WebSocket client per session) beside the same episodes run in-process by
/// the runner at the same concurrency: dcgraph with 32 sessions, routing (root) with 2. A step
/// is one tool call, `finish` included.
fn serve_env(args: &BenchArgs) -> Result<()> {
    use netdojo::linux::preflight::Need;
    let dcgraph_episodes = args.runs.unwrap_or(640).max(1);
    serve_env_one("dcgraph", 32, dcgraph_episodes)?;
    match netdojo::linux::preflight::unmet(&[Need::Root]) {
        None => serve_env_one("routing", 2, args.runs.unwrap_or(20).max(1)),
        Some(need) => {
            println!("serve-env routing: skipped ({})", need.reason());
            Ok(())
        }
    }
}

fn serve_env_one(env: &str, sessions: usize, episodes: usize) -> Result<()> {
    use std::sync::Arc;

    use netdojo::core::runner::{Budget, Runner};
    use netdojo::scripted::{OracleFactory, oracle_plan};
    use netdojo::{EndReason, GeneratedSuite, Task, TaskSource};
    use netdojo_envserver::client::Client;
    use netdojo_envserver::{EnvServer, Options};
    use serde_json::json;

    let app = apps::app(env, &EnvOptions::default())?;
    let source = GeneratedSuite { generator: app.generator.clone(), seed: 1, count: episodes as u64 };
    let tasks: Vec<Task> = source.tasks().collect::<Result<_, _>>()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;

    // In-process: the runner and the oracle, `sessions` episodes at once.
    let runner = Runner {
        env: app.factory,
        agent: Arc::new(OracleFactory),
        scorers: Arc::new(app.scorers),
        budget: Budget::default(),
        concurrency: sessions,
        prepare_ahead: 0,
    };
    let t0 = Instant::now();
    let local_steps: usize = runtime.block_on(async {
        let mut steps = 0;
        let mut set = tokio::task::JoinSet::new();
        for task in &tasks {
            if set.len() >= sessions
                && let Some(done) = set.join_next().await
            {
                steps += done?;
            }
            let (runner, task) = (runner.clone(), task.clone());
            set.spawn(async move {
                let (_, t) = runner.run_episode(&task).await;
                t.steps.len() + usize::from(t.end == EndReason::Finished)
            });
        }
        while let Some(done) = set.join_next().await {
            steps += done?;
        }
        anyhow::Ok(steps)
    })?;
    let local_s = t0.elapsed().as_secs_f64();

    // Through the protocol: the server in this process, a client per session.
    let app = apps::app(env, &EnvOptions::default())?;
    let options = Options { max_sessions: sessions, ..Options::default() };
    let server =
        Arc::new(EnvServer::new(app.factory, app.scorers, tasks.clone(), options, json!({"bench": env}))?);
    let plans: Arc<Vec<(String, Vec<netdojo::ToolCall>)>> =
        Arc::new(tasks.iter().map(|t| (t.id.clone(), oracle_plan(t))).collect());
    let (served_steps, solved, served_s) = runtime.block_on(async {
        let listener = netdojo_envserver::bind(([127, 0, 0, 1], 0).into()).await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(netdojo_envserver::serve(server, listener, async {
            let _ = stop_rx.await;
        }));
        let t1 = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for worker in 0..sessions {
            let (plans, url) = (plans.clone(), url.clone());
            set.spawn(async move {
                let mut client = Client::connect(&url).await?;
                let (mut steps, mut solved) = (0usize, 0usize);
                for (task_id, plan) in plans.iter().skip(worker).step_by(sessions) {
                    client.reset(json!({"task_id": task_id})).await?;
                    for call in plan {
                        let answer = client.call(&call.name, call.arguments.clone()).await?;
                        steps += 1;
                        if answer["done"] == json!(true) {
                            solved += usize::from(answer["reward"] == json!(1.0));
                            break;
                        }
                    }
                }
                client.close().await;
                anyhow::Ok((steps, solved))
            });
        }
        let (mut steps, mut solved) = (0, 0);
        while let Some(done) = set.join_next().await {
            let (s, k) = done??;
            steps += s;
            solved += k;
        }
        let elapsed = t1.elapsed().as_secs_f64();
        let _ = stop_tx.send(());
        serving.await??;
        anyhow::Ok((steps, solved, elapsed))
    })?;

    let local_rate = local_steps as f64 / local_s;
    let served_rate = served_steps as f64 / served_s;
    println!("serve-env {env}: {episodes} oracle episodes, {sessions} at once");
    println!("  in-process (runner):      {local_steps} steps in {local_s:.2} s = {local_rate:.0} steps/s");
    println!(
        "  through OpenEnv's /ws:    {served_steps} steps in {served_s:.2} s = {served_rate:.0} steps/s ({:.0}% of in-process); reward 1.0 in {solved}/{episodes} episodes",
        100.0 * served_rate / local_rate
    );
    if solved != episodes {
        bail!("serve-env {env}: {} of the oracle's episodes earned less than 1", episodes - solved);
    }
    Ok(())
}
