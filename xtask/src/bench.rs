//! `cargo xtask bench`: figures printed side by side with the targets the issues set.
//! Benchmarks always run an optimised build: a debug build re-runs itself with `--release`.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use netdojo::TaskGenerator;

use crate::apps::{self, EnvOptions};

#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// What to measure: dcgraph.
    pub target: String,
    /// Queries to generate.
    #[arg(long, default_value_t = 1_000_000)]
    pub queries: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
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
        other => bail!("unknown benchmark `{other}` (known: dcgraph)"),
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
