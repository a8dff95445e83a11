//! Run directories as people read them: a static HTML report and exports for other tools.
//!
//! - [`html::render`]: a self-contained site (one `index.html` with the overview, inline SVG
//!   plots and the filterable episode list, and one page per episode); no server, no CDN, no
//!   script but the list's filter. [`Site::write`] puts it in a folder; [`serve`] serves it on
//!   127.0.0.1 (`cargo xtask view`).
//! - [`overview::Overview`]: the numbers behind the overview, per run and per level, label and
//!   domain; rates are `netdojo_score`'s [`Proportion`](netdojo_score::Proportion)s.
//! - [`export`]: an inspect_ai eval log (`inspect view` opens it) and JSON lines for pandas.
//!
//! Everything that comes from a trajectory is the agent's text, hence hostile: every string is
//! escaped where it is written ([`html::esc`]).

mod escape;
pub mod export;
pub mod html;
pub mod overview;
pub mod serve;
mod svg;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use netdojo_core::store::RunDir;
use netdojo_core::{EpisodeRecord, StoreError, Trajectory};
use netdojo_score::Summary;
use serde_json::Value;

pub use overview::Overview;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Invalid(String),
}

/// The metric a priced run records per episode, in US dollars (`eval --prices`): the report
/// shows cost only where some episode has it.
pub use netdojo_core::runner::COST_METRIC;

/// One run directory, read without changing it (a run in progress can be reported on).
#[derive(Debug)]
pub struct Run {
    /// The name shown for the run: its directory's name, made unique among the runs reported
    /// together.
    pub name: String,
    pub store: RunDir,
    pub config: Value,
    /// The latest record of each episode, by task id and epoch (`eval --epochs K`).
    pub records: Vec<EpisodeRecord>,
    pub summary: Summary,
}

impl Run {
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ReportError> {
        let path = path.as_ref();
        let store = RunDir::inspect(path)?;
        let config = store.config()?;
        let records: Vec<EpisodeRecord> = store.episodes()?.into_values().collect();
        let summary = Summary::from_records(&records);
        let name = path
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| path.display().to_string());
        Ok(Self { name, store, config, records, summary })
    }

    /// Several runs, their names made unique (`run`, `run (2)`).
    pub fn load_all(paths: &[impl AsRef<Path>]) -> Result<Vec<Self>, ReportError> {
        Ok(Self::dedupe_names(paths.iter().map(Run::load).collect::<Result<Vec<_>, _>>()?))
    }

    /// The runs, each name that repeats one before it numbered (`run`, `run (2)`).
    pub fn dedupe_names(mut runs: Vec<Run>) -> Vec<Run> {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for run in &mut runs {
            let count = seen.entry(run.name.clone()).or_default();
            *count += 1;
            if *count > 1 {
                run.name = format!("{} ({count})", run.name);
            }
        }
        runs
    }

    /// An episode's trajectory: one epoch of a task.
    pub fn trajectory(&self, record: &EpisodeRecord) -> Result<Trajectory, ReportError> {
        Ok(self.store.trajectory_of(&record.task_id, record.epoch)?)
    }

    /// The agent's name: the runner's configuration, else the records'.
    pub fn agent(&self) -> String {
        self.config["runner"]["agent"]["name"]
            .as_str()
            .map(str::to_string)
            .or_else(|| self.records.first().map(|r| r.agent.clone()))
            .unwrap_or_default()
    }

    /// The environment (`cargo xtask eval --env`), when the configuration says.
    pub fn env(&self) -> Option<String> {
        self.config["cli"]["env"]
            .as_str()
            .or_else(|| self.config["runner"]["env"]["name"].as_str())
            .map(str::to_string)
    }

    /// The model an LLM agent ran, when the configuration says.
    pub fn model(&self) -> Option<String> {
        let cli = &self.config["cli"];
        cli["llm"]["model"]
            .as_str()
            .or_else(|| cli["model"].as_str())
            .filter(|m| !m.is_empty())
            .map(str::to_string)
    }
}

/// A rendered site held in memory: relative paths (with `/`) and their bytes.
#[derive(Debug, Default)]
pub struct Site {
    pub files: BTreeMap<String, Vec<u8>>,
}

impl Site {
    /// Writes every file under `dir` (created if needed); files of an earlier report there are
    /// overwritten, others left alone.
    pub fn write(&self, dir: &Path) -> Result<(), ReportError> {
        for (rel, bytes) in &self.files {
            let path = dir.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|source| ReportError::Io { path: parent.to_path_buf(), source })?;
            }
            std::fs::write(&path, bytes).map_err(|source| ReportError::Io { path, source })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
