//! What the reads of a wait cost: `cargo run --release -p netdojo-incident --example roundcost
//! -- [-s SECONDS] LAB...` (as root) starts each lab (a name of testdata/incident/labs or a
//! path), lets it settle, and then runs, back to back for SECONDS (default 3) each, the state
//! round a wait makes every few tens of milliseconds (`health::run_state`: the adjacency,
//! session and route checks, on the daemons' vty sockets), the round of every check it makes
//! every 200 ms or so (`health::run_all`, probes included), and the stale-neighbour pass that
//! begins each such round. It prints the CPU each costs: all of the machine's (from
//! `/proc/stat`, less what the idle lab spent in as long before) and netdojo's own (this
//! process). Run it on an otherwise idle machine; docs/incident.md, "Speed", has its figures.

use std::time::{Duration, Instant};

use netdojo_incident::health::{self, Patience};
use netdojo_incident::lab::Lab;
use netdojo_incident::live::LiveLab;

mod common;

/// The machine's busy time, in clock ticks: user, nice, system, irq and softirq.
fn machine_busy() -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let line = stat.lines().next().unwrap_or_default();
    let ticks: Vec<u64> = line.split_whitespace().skip(1).map(str::parse).collect::<Result<_, _>>()?;
    anyhow::ensure!(ticks.len() >= 7, "/proc/stat: a short cpu line: {line}");
    Ok(ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6])
}

/// This process's CPU time (all its threads), in clock ticks.
fn own_busy() -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let after = stat.rsplit(')').next().unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    anyhow::ensure!(fields.len() > 12, "/proc/self/stat: too few fields");
    Ok(fields[11].parse::<u64>()? + fields[12].parse::<u64>()?)
}

/// Milliseconds in `ticks` clock ticks (100 a second on Linux).
fn ms(ticks: u64) -> f64 {
    ticks as f64 * 10.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut seconds = 3u64;
    if let Some(i) = args.iter().position(|a| a == "-s") {
        seconds = args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(seconds);
        args.drain(i..(i + 2).min(args.len()));
    }
    let span = Duration::from_secs(seconds);
    for name in &args {
        let lab = Lab::load(common::lab_path(name))?;
        let live = LiveLab::start(&lab).await?;
        // Past the start's own traffic (the first SPF runs, the BGP updates).
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (network, book) = (live.network(), live.addresses());
        let before = machine_busy()?;
        tokio::time::sleep(span).await;
        let idle_lab = machine_busy()?.saturating_sub(before);
        for kind in ["state round", "round of every check", "stale-neighbour pass"] {
            let (machine, own, start) = (machine_busy()?, own_busy()?, Instant::now());
            let mut rounds = 0u32;
            while start.elapsed() < span {
                match kind {
                    "state round" => drop(health::run_state(network, &lab, book).await),
                    "round of every check" => {
                        drop(health::run_all(network, &lab, book, Patience::POLL).await)
                    }
                    _ => drop(network.forget_stale_neighbours().await),
                }
                rounds += 1;
            }
            let machine = machine_busy()?.saturating_sub(machine).saturating_sub(idle_lab);
            let own = own_busy()?.saturating_sub(own);
            let rounds_f = f64::from(rounds.max(1));
            println!(
                "{}: {kind}: {rounds} in {seconds} s, {:.2} ms of CPU each ({:.2} ms of it netdojo's)",
                lab.name,
                ms(machine) / rounds_f,
                ms(own) / rounds_f
            );
        }
        live.stop().await;
    }
    Ok(())
}
