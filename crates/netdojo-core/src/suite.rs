//! Frozen suites: what `cargo xtask generate` writes beside a suite's tasks, and the content
//! hashes that tell whether two runs ran the same tasks.
//!
//! A task's hash is the SHA-256 of its JSON as netdojo writes it (the bytes of its line in a
//! `.jsonl` suite; a task read from any other layout is written that way first, so spacing and
//! key order in a hand-written file do not count). A suite's hash is the SHA-256 of its tasks'
//! `id hash` lines in suite order: it changes when a task is added, removed, reordered or
//! edited. A run records the hash of the tasks it ran (`config.json`, `suite`).

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::TaskError;
use crate::task::Task;
// Defined where a directory suite skips manifests while it reads its tasks.
pub use crate::task::MANIFEST_SUFFIX;

/// The manifest of a frozen suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The suite's name (`generate --name`).
    pub suite: String,
    /// The suite's version (`generate --suite-version`): bump it when the suite is regenerated.
    pub version: String,
    pub generator: GeneratorInfo,
    pub seed: u64,
    pub count: usize,
    /// The suite's hash ([`suite_hash`]).
    pub hash: String,
    pub tasks: Vec<TaskHash>,
}

/// What made the tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeneratorInfo {
    pub name: String,
    /// netdojo's version: a generator's output may change from one to the next, and the
    /// hashes say whether it did.
    pub version: String,
    #[serde(default)]
    pub params: Value,
}

/// One task's id and content hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskHash {
    pub id: String,
    pub hash: String,
}

impl TaskHash {
    pub fn of(task: &Task) -> Self {
        Self { id: task.id.clone(), hash: task_hash(task) }
    }
}

/// `sha256:` and the hex digest of `bytes`.
fn sha256(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in digest.iter() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The content hash of a task: SHA-256 of its JSON as netdojo writes it.
pub fn task_hash(task: &Task) -> String {
    // A Task is plain data (strings, numbers, JSON values): serialising it cannot fail.
    let bytes = serde_json::to_vec(task).unwrap_or_default();
    sha256(&bytes)
}

/// The hash of a suite whose tasks, in order, have these hashes.
pub fn suite_hash(tasks: &[TaskHash]) -> String {
    let mut text = String::new();
    for t in tasks {
        text.push_str(&t.id);
        text.push(' ');
        text.push_str(&t.hash);
        text.push('\n');
    }
    sha256(text.as_bytes())
}

/// Where the manifest of the suite at `suite` is: `DIR/NAME.manifest.json` beside a file
/// `DIR/NAME.jsonl` (or `.json`), `DIR/suite.manifest.json` inside a directory suite.
pub fn manifest_path(suite: &Path) -> PathBuf {
    if suite.is_dir() {
        return suite.join(format!("suite{MANIFEST_SUFFIX}"));
    }
    let stem = suite.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    suite.with_file_name(format!("{stem}{MANIFEST_SUFFIX}"))
}

impl Manifest {
    /// The manifest of the suite at `suite`, if it has one.
    pub fn find(suite: &Path) -> Result<Option<Self>, TaskError> {
        let path = manifest_path(suite);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(TaskError::Io { path, source }),
        };
        serde_json::from_str(&text).map(Some).map_err(|e| TaskError::Parse {
            path,
            line: Some(e.line()),
            message: e.to_string(),
        })
    }

    /// Writes the manifest to `path`.
    pub fn write(&self, path: &Path) -> Result<(), TaskError> {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        fs::write(path, text).map_err(|source| TaskError::Io { path: path.to_path_buf(), source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::TaskKind;

    fn task(id: &str, query: &str) -> Task {
        Task {
            id: id.into(),
            application: "dcgraph".into(),
            level: 1,
            label: "add".into(),
            domain: None,
            seed: Some(3),
            query: query.into(),
            setup: serde_json::json!({"b": 1, "a": [1.5, "x"]}),
            kind: TaskKind::Constructive { actions: vec![], answer: None, goal: None },
        }
    }

    #[test]
    fn hashes_change_with_content_and_order_and_survive_a_round_trip() {
        let (a, b) = (task("a", "add a node"), task("b", "count nodes"));
        let ha = task_hash(&a);
        assert!(ha.starts_with("sha256:") && ha.len() == 7 + 64, "{ha}");
        let line = serde_json::to_string(&a).expect("json");
        let back: Task = serde_json::from_str(&line).expect("parse");
        assert_eq!(task_hash(&back), ha, "read back, same hash");
        assert_ne!(task_hash(&task("a", "add a nodes")), ha);
        let suite = suite_hash(&[TaskHash::of(&a), TaskHash::of(&b)]);
        assert_ne!(suite, suite_hash(&[TaskHash::of(&b), TaskHash::of(&a)]), "order counts");
        assert_ne!(suite, suite_hash(&[TaskHash::of(&a)]));
        // An empty input's SHA-256, so the digest is the standard one.
        assert_eq!(
            suite_hash(&[]),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn the_manifest_sits_beside_a_file_suite_and_inside_a_directory_suite() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(manifest_path(&dir.path().join("s.jsonl")), dir.path().join("s.manifest.json"));
        assert_eq!(manifest_path(dir.path()), dir.path().join("suite.manifest.json"));
        assert_eq!(Manifest::find(&dir.path().join("s.jsonl")).expect("no manifest"), None);
        std::fs::write(dir.path().join("s.manifest.json"), "{").expect("write");
        let err = Manifest::find(&dir.path().join("s.jsonl")).expect_err("bad").to_string();
        assert!(err.contains("s.manifest.json"), "{err}");

        // A directory suite reads its tasks, not its manifest.
        let line = serde_json::to_string(&task("a", "add a node")).expect("json");
        std::fs::write(dir.path().join("s.jsonl"), format!("{line}\n")).expect("write");
        let tasks = [TaskHash::of(&task("a", "add a node"))];
        let manifest = Manifest {
            suite: "s".into(),
            version: "1".into(),
            generator: GeneratorInfo { name: "dcgraph".into(), version: "0".into(), params: Value::Null },
            seed: 3,
            count: 1,
            hash: suite_hash(&tasks),
            tasks: tasks.to_vec(),
        };
        manifest.write(&manifest_path(dir.path())).expect("write");
        std::fs::remove_file(dir.path().join("s.manifest.json")).expect("rm");
        let suite = crate::task::StaticSuite::load(dir.path()).expect("loads");
        assert_eq!(crate::task::TaskSource::len_hint(&suite), Some(1));
        assert_eq!(Manifest::find(dir.path()).expect("read"), Some(manifest));
    }
}
