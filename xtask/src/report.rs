//! `cargo xtask report --html`, `view` and `export`: run directories as a static HTML report,
//! served on 127.0.0.1, or exported (netdojo-report does the work).

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use netdojo_report::{Run, export, html, serve};

use crate::eval;

/// Prints each run's summary (and rewrites its summary files), then with `--html` writes the
/// report of all of them side by side.
pub fn report(dirs: &[PathBuf], html_out: Option<&Path>) -> Result<()> {
    for (i, dir) in dirs.iter().enumerate() {
        if dirs.len() > 1 {
            println!("{}== {}", if i > 0 { "\n" } else { "" }, dir.display());
        }
        eval::report(dir)?;
    }
    if let Some(out) = html_out {
        let runs = load(dirs)?;
        let site = html::render(&runs).context("rendering the report")?;
        site.write(out).with_context(|| format!("--html {}", out.display()))?;
        println!("report: {}", out.join("index.html").display());
    }
    Ok(())
}

fn load(dirs: &[PathBuf]) -> Result<Vec<Run>> {
    dirs.iter()
        .map(|d| Run::load(d).with_context(|| format!("reading the run in {}", d.display())))
        .collect::<Result<Vec<_>>>()
        .map(Run::dedupe_names)
}

/// Serves the report of `dirs` on 127.0.0.1:`port` (0: any free port) until interrupted.
pub fn view(dirs: &[PathBuf], port: u16) -> Result<()> {
    let runs = load(dirs)?;
    let site = html::render(&runs).context("rendering the report")?;
    let listener = TcpListener::bind(("127.0.0.1", port)).with_context(|| format!("--port {port}"))?;
    let addr = listener.local_addr().context("the listener's address")?;
    println!("serving the report of {} run(s) on http://{addr}/ (Ctrl-C stops)", runs.len());
    std::io::stdout().flush().context("stdout")?;
    serve::serve(&site, &listener).context("serving the report")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// An inspect_ai eval log (JSON): `inspect view --log-dir DIR` opens it.
    Inspect,
    /// One JSON object per episode: `pandas.read_json(PATH, lines=True)`.
    Jsonl,
    /// Chat-completions fine-tuning data, one conversation per episode (docs/training.md).
    Chat,
}

/// Writes the export of the run in `dir` and prints its path: inspect's log goes in the log
/// directory `out` (default `DIR/inspect`) as `TIMESTAMP_netdojo-ENV_RUN.json`; the JSON lines
/// go to the file `out` (default `DIR/episodes.export.jsonl`), the chat data to `out` (default
/// `DIR/chat.jsonl`).
pub fn export(dir: &Path, format: Format, out: Option<&Path>, solved_only: bool) -> Result<()> {
    if solved_only && format != Format::Chat {
        anyhow::bail!("--solved-only: only --format chat filters episodes");
    }
    let run = Run::load(dir).with_context(|| format!("reading the run in {}", dir.display()))?;
    let (path, text) = match format {
        Format::Inspect => {
            // A log directory: inspect lists a JSON log by its name, which must be its own.
            let logs = out.map(Path::to_path_buf).unwrap_or_else(|| dir.join("inspect"));
            let path = logs.join(export::inspect_file_name(&run));
            (path, serde_json::to_string(&export::inspect_log(&run)?)?)
        }
        Format::Jsonl => {
            let path = out.map(Path::to_path_buf).unwrap_or_else(|| dir.join("episodes.export.jsonl"));
            (path, export::jsonl(&run)?)
        }
        Format::Chat => {
            let path = out.map(Path::to_path_buf).unwrap_or_else(|| dir.join("chat.jsonl"));
            (path, export::chat(&run, solved_only)?)
        }
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    println!("{}", path.display());
    Ok(())
}
