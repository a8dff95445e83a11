//! The results store: one directory per run.
//!
//! ```text
//! RUN/config.json          the resolved configuration (task source, env, agent, budgets)
//! RUN/episodes.jsonl       one EpisodeRecord per finished episode, appended and synced
//! RUN/trajectories/ID.cbor the full Trajectory of each episode (ID~E.cbor: epoch E > 0)
//! RUN/summary.json, summary.txt  written at the end of a run
//! ```
//!
//! A line in `episodes.jsonl` is the commit point of an episode: its trajectory is written
//! (atomically, by rename) before it. A run killed at any point therefore loses at most the
//! episodes in flight, and [`RunDir::open`] cuts a torn last line, so a resumed run redoes
//! exactly the episodes that have no complete record. An episode is a (task, epoch): a run with
//! `--epochs K` runs each task K times, and its records say which attempt each is.
//!
//! config.json and every record carry the run format's version, `"format": "MAJOR.MINOR"`
//! ([`FORMAT`]). A new minor version only adds fields, which older readers ignore; a new major
//! version changes or removes one, and every reader ([`RunDir::open`] for `--resume`,
//! [`RunDir::inspect`] and [`RunDir::records`] for reports and exports) refuses a major it does
//! not know, naming the file. A run written before the field is format 1.0 and reads as such.

use std::collections::{BTreeMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::StoreError;
use crate::trajectory::{EpisodeRecord, EpisodeStatus, Trajectory};

const CONFIG: &str = "config.json";
const EPISODES: &str = "episodes.jsonl";
const TRAJECTORIES: &str = "trajectories";

/// The run format this netdojo writes (see the module's documentation).
pub const FORMAT: &str = "1.0";
/// The major version of [`FORMAT`]: the only one this netdojo reads.
const FORMAT_MAJOR: u64 = 1;
const FORMAT_FIELD: &str = "format";

/// The `format` field of a config.json or a record, whatever else is there.
#[derive(serde::Deserialize)]
struct Versioned {
    format: Option<Value>,
}

/// Refuses a major version other than [`FORMAT_MAJOR`]; no version at all is a run written
/// before the field (format 1.0).
fn check_format(found: Option<&Value>, path: &Path, what: &str) -> Result<(), StoreError> {
    let Some(found) = found else { return Ok(()) };
    let text = found.as_str().map_or_else(|| found.to_string(), str::to_string);
    let major = found.as_str().and_then(|v| v.split('.').next()).and_then(|m| m.parse::<u64>().ok());
    if major == Some(FORMAT_MAJOR) {
        return Ok(());
    }
    Err(StoreError::Format {
        path: path.to_path_buf(),
        message: format!(
            "{what} is in run format {text}, which this netdojo cannot read: it reads format \
             {FORMAT_MAJOR}.x ({FORMAT} and older minors) and runs written before the `format` field; \
             read this run with the netdojo that wrote it"
        ),
    })
}

/// `fields` as a JSON object that starts with this netdojo's `format`.
fn versioned(fields: Value, path: &Path) -> Result<serde_json::Map<String, Value>, StoreError> {
    let Value::Object(fields) = fields else {
        return Err(StoreError::Format { path: path.to_path_buf(), message: "not a JSON object".into() });
    };
    let mut out = serde_json::Map::with_capacity(fields.len() + 1);
    out.insert(FORMAT_FIELD.into(), Value::from(FORMAT));
    out.extend(fields.into_iter().filter(|(k, _)| k != FORMAT_FIELD));
    Ok(out)
}

#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
    /// The append handle; `None` when opened with [`RunDir::inspect`].
    episodes: Option<File>,
}

impl RunDir {
    /// Starts a new run in `path` (created if needed; it must not hold a run already).
    pub fn create(path: impl AsRef<Path>, config: &Value) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        fs::create_dir_all(path.join(TRAJECTORIES)).map_err(StoreError::io(&path))?;
        let config_path = path.join(CONFIG);
        if config_path.exists() {
            return Err(StoreError::Format {
                path: config_path,
                message: "this directory already holds a run; resume it with --resume".into(),
            });
        }
        let config = versioned(config.clone(), &config_path)?;
        let text = serde_json::to_string_pretty(&config)
            .map_err(|e| StoreError::Format { path: config_path.clone(), message: e.to_string() })?;
        write_atomic(&config_path, text.as_bytes())?;
        Self::open_episodes(path)
    }

    /// Opens an existing run to resume it. A torn last line of `episodes.jsonl` (the process
    /// died while writing it) is cut off.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = existing_run(path.as_ref())?;
        fs::create_dir_all(path.join(TRAJECTORIES)).map_err(StoreError::io(&path))?;
        let episodes = path.join(EPISODES);
        if episodes.exists() {
            let bytes = fs::read(&episodes).map_err(StoreError::io(&episodes))?;
            let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            if keep < bytes.len() {
                tracing::warn!(
                    path = %episodes.display(),
                    bytes = bytes.len() - keep,
                    "cutting a torn last record; its episode will run again"
                );
                let file =
                    OpenOptions::new().write(true).open(&episodes).map_err(StoreError::io(&episodes))?;
                file.set_len(keep as u64).map_err(StoreError::io(&episodes))?;
            }
        }
        Self::open_episodes(path)
    }

    /// Opens a run to read it, changing nothing: safe while another process is still
    /// writing to it (a line being written is not read).
    pub fn inspect(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = existing_run(path.as_ref())?;
        Ok(Self { path, episodes: None })
    }

    fn open_episodes(path: PathBuf) -> Result<Self, StoreError> {
        let episodes_path = path.join(EPISODES);
        let episodes = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&episodes_path)
            .map_err(StoreError::io(&episodes_path))?;
        Ok(Self { path, episodes: Some(episodes) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn config(&self) -> Result<Value, StoreError> {
        let path = self.path.join(CONFIG);
        let text = fs::read_to_string(&path).map_err(StoreError::io(&path))?;
        serde_json::from_str(&text).map_err(|e| StoreError::Format { path, message: e.to_string() })
    }

    /// Every record in file order (a retried episode appears more than once). A last line
    /// without its newline is still being written (or was torn) and is not read.
    pub fn records(&self) -> Result<Vec<EpisodeRecord>, StoreError> {
        let path = self.path.join(EPISODES);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(StoreError::io(&path)(e)),
        };
        let mut records = Vec::new();
        for (n, line) in text.split_inclusive('\n').enumerate() {
            if !line.ends_with('\n') || line.trim().is_empty() {
                continue;
            }
            let bad = |e: serde_json::Error| StoreError::Format {
                path: path.clone(),
                message: format!("line {}: {e}", n + 1),
            };
            let version: Versioned = serde_json::from_str(line).map_err(bad)?;
            check_format(version.format.as_ref(), &path, &format!("line {}", n + 1))?;
            let record = serde_json::from_str(line).map_err(bad)?;
            records.push(record);
        }
        Ok(records)
    }

    /// The latest record of each task's first epoch, by task id: every task of a run
    /// without epochs.
    pub fn latest(&self) -> Result<BTreeMap<String, EpisodeRecord>, StoreError> {
        Ok(self.records()?.into_iter().filter(|r| r.epoch == 0).map(|r| (r.task_id.clone(), r)).collect())
    }

    /// The latest record of each episode, by (task id, epoch).
    pub fn episodes(&self) -> Result<BTreeMap<(String, u32), EpisodeRecord>, StoreError> {
        Ok(self.records()?.into_iter().map(|r| ((r.task_id.clone(), r.epoch), r)).collect())
    }

    /// Episodes, (task id, epoch), that need no further run: their latest record is completed.
    pub fn completed(&self) -> Result<HashSet<(String, u32)>, StoreError> {
        Ok(self
            .episodes()?
            .into_iter()
            .filter(|(_, r)| r.status == EpisodeStatus::Completed)
            .map(|(key, _)| key)
            .collect())
    }

    /// Commits one finished episode: trajectory first, then its record line.
    pub fn append(&mut self, record: &EpisodeRecord, trajectory: &Trajectory) -> Result<(), StoreError> {
        let traj_path = self.trajectory_path(&record.task_id, record.epoch);
        let episodes_path = self.path.join(EPISODES);
        let Some(episodes) = self.episodes.as_mut() else {
            return Err(StoreError::io(episodes_path)(read_only()));
        };
        let mut bytes = Vec::new();
        ciborium::into_writer(trajectory, &mut bytes)
            .map_err(|e| StoreError::Format { path: traj_path.clone(), message: e.to_string() })?;
        write_atomic(&traj_path, &bytes)?;

        let format_err =
            |e: serde_json::Error| StoreError::Format { path: episodes_path.clone(), message: e.to_string() };
        let record = versioned(serde_json::to_value(record).map_err(format_err)?, &episodes_path)?;
        let mut line = serde_json::to_vec(&record).map_err(format_err)?;
        line.push(b'\n');
        episodes.write_all(&line).map_err(StoreError::io(&episodes_path))?;
        episodes.flush().map_err(StoreError::io(&episodes_path))?;
        episodes.sync_data().map_err(StoreError::io(&episodes_path))?;
        Ok(())
    }

    /// The trajectory of a task's first epoch.
    pub fn trajectory(&self, task_id: &str) -> Result<Trajectory, StoreError> {
        self.trajectory_of(task_id, 0)
    }

    /// The trajectory of one epoch of a task.
    pub fn trajectory_of(&self, task_id: &str, epoch: u32) -> Result<Trajectory, StoreError> {
        let path = self.trajectory_path(task_id, epoch);
        let file = File::open(&path).map_err(StoreError::io(&path))?;
        ciborium::from_reader(BufReader::new(file))
            .map_err(|e| StoreError::Format { path, message: e.to_string() })
    }

    pub fn write_summary(&self, json: &Value, text: &str) -> Result<(), StoreError> {
        let json_path = self.path.join("summary.json");
        let pretty = serde_json::to_string_pretty(json)
            .map_err(|e| StoreError::Format { path: json_path.clone(), message: e.to_string() })?;
        write_atomic(&json_path, pretty.as_bytes())?;
        write_atomic(&self.path.join("summary.txt"), text.as_bytes())
    }

    /// `ID.cbor` for epoch 0 (as before epochs existed), `ID~E.cbor` for epoch E: `~` never
    /// appears in a [`file_stem`], so no task's name can collide with another's epoch.
    fn trajectory_path(&self, task_id: &str, epoch: u32) -> PathBuf {
        let name = match epoch {
            0 => format!("{}.cbor", file_stem(task_id)),
            e => format!("{}~{e}.cbor", file_stem(task_id)),
        };
        self.path.join(TRAJECTORIES).join(name)
    }
}

/// A task id made safe as a file name: characters other than `[A-Za-z0-9._-]` become `%XX`.
pub fn file_stem(task_id: &str) -> String {
    let mut out = String::with_capacity(task_id.len());
    for b in task_id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-') || (b == b'.' && !out.is_empty()) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `path` if it holds a run (its config.json) in a format this netdojo reads, else an error
/// saying why not.
fn existing_run(path: &Path) -> Result<PathBuf, StoreError> {
    let config_path = path.join(CONFIG);
    if !config_path.is_file() {
        return Err(StoreError::Format {
            path: config_path,
            message: "no run here (config.json is missing)".into(),
        });
    }
    let text = fs::read_to_string(&config_path).map_err(StoreError::io(&config_path))?;
    let version: Versioned = serde_json::from_str(&text)
        .map_err(|e| StoreError::Format { path: config_path.clone(), message: e.to_string() })?;
    check_format(version.format.as_ref(), &config_path, "this run")?;
    Ok(path.to_path_buf())
}

fn read_only() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::PermissionDenied, "run opened read-only (RunDir::inspect)")
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = path.with_extension("tmp");
    let mut file = File::create(&tmp).map_err(StoreError::io(&tmp))?;
    file.write_all(bytes).map_err(StoreError::io(&tmp))?;
    file.sync_data().map_err(StoreError::io(&tmp))?;
    fs::rename(&tmp, path).map_err(StoreError::io(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::StateCheck;
    use crate::trajectory::EndReason;
    use serde_json::json;

    fn record(id: &str, status: EpisodeStatus) -> EpisodeRecord {
        EpisodeRecord {
            task_id: id.into(),
            epoch: 0,
            application: "dcgraph".into(),
            level: 1,
            label: "add".into(),
            domain: None,
            agent: "noop".into(),
            status,
            error: None,
            cause: None,
            end: EndReason::Finished,
            steps: 0,
            invalid_steps: 0,
            wall_ms: 1,
            timing: Default::default(),
            class: None,
            tokens: Default::default(),
            metrics: vec![],
        }
    }

    fn trajectory(id: &str) -> Trajectory {
        Trajectory {
            task_id: id.into(),
            agent: "noop".into(),
            brief: "b".into(),
            tools: vec![],
            initial_check: StateCheck::safe(),
            steps: vec![],
            answer: Some(json!(3)),
            end: EndReason::Finished,
            outcome: None,
            wall_ms: 1,
            timing: Default::default(),
            usage: Default::default(),
            end_detail: None,
            transcript: vec![],
        }
    }

    #[test]
    fn file_stems_are_safe_and_distinct() {
        assert_eq!(file_stem("dcgraph-7-000001"), "dcgraph-7-000001");
        assert_eq!(file_stem("../etc/passwd"), "%2E.%2Fetc%2Fpasswd");
        assert_ne!(file_stem("a/b"), file_stem("a%2Fb"));
    }

    #[test]
    fn torn_last_line_is_cut_and_errored_episodes_are_not_completed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut run = RunDir::create(dir.path(), &json!({"seed": 1})).expect("create");
        run.append(&record("a", EpisodeStatus::Completed), &trajectory("a")).expect("append");
        run.append(&record("b", EpisodeStatus::Errored), &trajectory("b")).expect("append");
        drop(run);
        // A process killed while writing leaves half a line.
        let mut f = OpenOptions::new().append(true).open(dir.path().join(EPISODES)).expect("open");
        f.write_all(b"{\"task_id\":\"c\",\"appl").expect("write");
        drop(f);

        let len_before = fs::metadata(dir.path().join(EPISODES)).expect("stat").len();
        let mut view = RunDir::inspect(dir.path()).expect("inspect");
        assert_eq!(view.records().expect("records").len(), 2, "the line being written is not read");
        assert!(view.append(&record("d", EpisodeStatus::Completed), &trajectory("d")).is_err());
        assert_eq!(
            fs::metadata(dir.path().join(EPISODES)).expect("stat").len(),
            len_before,
            "inspect changes nothing"
        );
        assert!(!dir.path().join(TRAJECTORIES).join("d.cbor").exists());

        assert!(RunDir::create(dir.path(), &json!({})).is_err(), "a second create must refuse");
        let run = RunDir::open(dir.path()).expect("open");
        assert_eq!(run.config().expect("config"), json!({"format": FORMAT, "seed": 1}));
        assert_eq!(run.records().expect("records").len(), 2);
        let done = run.completed().expect("completed");
        let key = |id: &str| (id.to_string(), 0);
        assert!(done.contains(&key("a")) && !done.contains(&key("b")) && !done.contains(&key("c")));
        assert_eq!(run.trajectory("a").expect("cbor"), trajectory("a"));
    }

    #[test]
    fn epochs_of_a_task_are_separate_episodes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut run = RunDir::create(dir.path(), &json!({})).expect("create");
        let at = |id: &str, epoch, status| EpisodeRecord { epoch, ..record(id, status) };
        let mut second = trajectory("a");
        second.answer = Some(json!(4));
        run.append(&at("a", 0, EpisodeStatus::Completed), &trajectory("a")).expect("append");
        run.append(&at("a", 1, EpisodeStatus::Errored), &second).expect("append");
        run.append(&at("a", 1, EpisodeStatus::Completed), &second).expect("retry");
        run.append(&at("a", 2, EpisodeStatus::Errored), &trajectory("a")).expect("append");
        let done = run.completed().expect("completed");
        assert_eq!(done, HashSet::from([("a".to_string(), 0), ("a".to_string(), 1)]));
        assert_eq!(run.episodes().expect("episodes").len(), 3);
        assert_eq!(run.latest().expect("latest").len(), 1, "latest is the first epoch's");
        assert_eq!(run.trajectory("a").expect("epoch 0"), trajectory("a"));
        assert_eq!(run.trajectory_of("a", 1).expect("epoch 1"), second);
        assert!(dir.path().join(TRAJECTORIES).join("a~1.cbor").is_file());
    }

    #[test]
    fn config_and_records_carry_the_format_and_an_unknown_major_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut run = RunDir::create(dir.path(), &json!({"format": "0.1", "seed": 1})).expect("create");
        run.append(&record("a", EpisodeStatus::Completed), &trajectory("a")).expect("append");
        drop(run);
        let config: Value =
            serde_json::from_str(&fs::read_to_string(dir.path().join(CONFIG)).expect("config"))
                .expect("json");
        assert_eq!(config["format"], FORMAT, "the run's own format replaces any given");
        let episodes = fs::read_to_string(dir.path().join(EPISODES)).expect("episodes");
        assert!(episodes.starts_with(&format!("{{\"format\":\"{FORMAT}\",\"task_id\":\"a\"")), "{episodes}");

        // A later minor version only adds fields: read, the unknown field ignored.
        let newer_minor = episodes.replace("\"format\":\"1.0\"", "\"format\":\"1.7\",\"new\":1");
        let mut f = OpenOptions::new().append(true).open(dir.path().join(EPISODES)).expect("open");
        f.write_all(newer_minor.replace("\"a\"", "\"b\"").as_bytes()).expect("write");
        drop(f);
        assert_eq!(RunDir::inspect(dir.path()).expect("inspect").records().expect("records").len(), 2);

        // A record of another major version: refused, naming the file and line.
        let mut f = OpenOptions::new().append(true).open(dir.path().join(EPISODES)).expect("open");
        f.write_all(episodes.replace("\"format\":\"1.0\"", "\"format\":\"2.0\"").as_bytes()).expect("write");
        drop(f);
        let err = RunDir::inspect(dir.path()).expect("inspect").records().expect_err("major 2");
        let message = err.to_string();
        assert!(message.contains("episodes.jsonl: line 3 is in run format 2.0"), "{message}");
        assert!(message.contains("reads format 1.x"), "{message}");

        // A config.json of another major version: neither report nor resume opens the run.
        fs::write(dir.path().join(CONFIG), r#"{"format": "3.2", "seed": 1}"#).expect("write");
        for err in
            [RunDir::inspect(dir.path()).expect_err("inspect"), RunDir::open(dir.path()).expect_err("open")]
        {
            let message = err.to_string();
            assert!(message.contains("config.json: this run is in run format 3.2"), "{message}");
        }
        fs::write(dir.path().join(CONFIG), r#"{"format": 1, "seed": 1}"#).expect("write");
        assert!(RunDir::inspect(dir.path()).is_err(), "a format that is not MAJOR.MINOR is refused");
    }

    #[test]
    fn a_run_written_before_the_format_field_reads_and_resumes() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/runs/before-format");
        let config = fs::read_to_string(fixture.join(CONFIG)).expect("the fixture's config.json");
        assert!(!config.contains("\"format\""), "the fixture predates the field");
        let view = RunDir::inspect(&fixture).expect("inspect");
        assert_eq!(view.records().expect("records").len(), 3);
        assert_eq!(view.trajectory("dcgraph-s1-0000000").expect("cbor").task_id, "dcgraph-s1-0000000");

        // Resuming appends records of this format to it.
        let dir = tempfile::tempdir().expect("tempdir");
        fs::create_dir_all(dir.path().join(TRAJECTORIES)).expect("mkdir");
        for name in [CONFIG, EPISODES] {
            fs::copy(fixture.join(name), dir.path().join(name)).expect("copy");
        }
        let mut run = RunDir::open(dir.path()).expect("open");
        assert_eq!(run.completed().expect("completed").len(), 3);
        run.append(&record("dcgraph-s1-0000003", EpisodeStatus::Completed), &trajectory("x"))
            .expect("append");
        assert_eq!(run.records().expect("records").len(), 4);
    }
}
