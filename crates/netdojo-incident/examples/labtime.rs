//! How long labs take to come up: `cargo run -p netdojo-incident --example labtime -- [--pool]
//! [-n RUNS] LAB...` (as root) starts each lab RUNS times (a lab name of testdata/incident/labs
//! or a path) and prints each start's phases and the median. With `--pool`, routers come from a
//! warm FRR pool (netdojo-linux's `FrrPool`) that is filled by a first, unmeasured start.
//! Teardown is off the measured path, as in an episode. The target (a 6-router lab
//! up in at most 1 s, median) is checked by `cargo xtask bench incident`; this is for finding
//! where the time goes.

use std::time::{Duration, Instant};

use netdojo_incident::{Lab, LiveLab, live};
use netdojo_linux::pool::FrrPool;

mod common;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    // RUST_LOG=netdojo_incident=debug shows each health round while a lab converges.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let pooled = args.iter().any(|a| a == "--pool");
    args.retain(|a| a != "--pool");
    let back_to_back = args.iter().any(|a| a == "--no-settle");
    args.retain(|a| a != "--no-settle");
    let mut runs = 5usize;
    if let Some(i) = args.iter().position(|a| a == "-n") {
        runs = args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(runs);
        args.drain(i..(i + 2).min(args.len()));
    }
    for name in &args {
        let lab = Lab::load(common::lab_path(name))?;
        let pool = if pooled { Some(FrrPool::new(live::router_spec(lab.ipv6))?) } else { None };
        let handle = pool.as_ref().map(FrrPool::handle);
        if let Some(pool) = &pool {
            // Fills the pool: the routers come back reset, ready for the measured starts.
            let warm = LiveLab::start_with(&lab, handle.as_ref(), Duration::from_secs(20)).await?;
            warm.stop().await;
            pool.settle(Duration::from_secs(20));
        }
        let mut totals = Vec::new();
        for i in 0..runs {
            let t = Instant::now();
            let lab_up = LiveLab::start_with(&lab, handle.as_ref(), Duration::from_secs(20)).await?;
            let total = t.elapsed();
            let p = lab_up.times();
            println!(
                "{} run {i}: {} ms (namespaces {} links {} ready {} frr {} linux {} config {} services {} converge {})",
                lab.name,
                total.as_millis(),
                p.network.namespaces.as_millis(),
                p.network.links.as_millis(),
                p.network.ready.as_millis(),
                p.network.frr.as_millis(),
                p.linux.as_millis(),
                p.config.as_millis(),
                p.services.as_millis(),
                p.converge.as_millis()
            );
            totals.push(total);
            lab_up.stop().await;
            if let Some(pool) = pool.as_ref().filter(|_| !back_to_back) {
                pool.settle(Duration::from_secs(20));
            }
        }
        totals.sort();
        let median = totals[totals.len() / 2];
        println!(
            "{}: {} routers, median {} ms over {runs} starts{}",
            lab.name,
            lab.routers().len(),
            median.as_millis(),
            if pooled { " (warm pool)" } else { "" }
        );
        if let Some(handle) = &handle {
            println!("{}: pool {:?}", lab.name, handle.stats());
        }
    }
    Ok(())
}
