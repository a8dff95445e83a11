//! What netdojo's tests share. A dev-dependency only (docs/ARCHITECTURE.md's "test kit" layer;
//! xtask's workspace test refuses it as a normal dependency).
//!
//! **Skip, or fail under CI.** A test that needs root, a server or a downloaded file runs
//! where those are; elsewhere it may skip, but only with a printed reason, and never under CI
//! (`CI` set, as `.ci/run` sets it): CI provides everything, so a missing piece there is a
//! broken CI machine and the test fails. [`skip_or_fail_under_ci`] is that policy;
//! [`root_or_skip`] and [`env_or_skip`] are its two common cases. `netdojo-linux`'s
//! `preflight::ready_or_skip` applies the same policy to its `Need`s (root, FRR) from the
//! library, which cannot depend on this crate.
//!
//! **Fixtures.** [`testdata`] finds the workspace's `testdata/` from any crate;
//! [`static_task`] loads a one-task file from it; [`constructive_task`] is a task with no
//! setup and no ground truth, for tests of agents and protocols.

use std::fmt::Display;
use std::path::PathBuf;

use netdojo_core::{StaticSuite, Task, TaskKind, TaskSource};

/// True when the tests run under CI (`CI` set, as `.ci/run` sets it).
pub fn under_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// Call when the test `what` cannot run here, for `why`: under CI it panics (CI provides
/// everything a test needs); elsewhere it prints `skipping WHAT: WHY` and returns, and the
/// caller returns from the test.
#[track_caller]
pub fn skip_or_fail_under_ci(what: &str, why: impl Display) {
    skip_or_fail(under_ci(), what, why);
}

#[track_caller]
fn skip_or_fail(ci: bool, what: &str, why: impl Display) {
    assert!(!ci, "{what}: {why}, and CI must provide it");
    eprintln!("skipping {what}: {why}");
}

/// True when this process runs as root.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// True when this process is root; otherwise [`skip_or_fail_under_ci`] and false. `needs` says
/// what root is for ("network namespaces, nftables").
#[track_caller]
pub fn root_or_skip(what: &str, needs: &str) -> bool {
    if is_root() {
        return true;
    }
    skip_or_fail_under_ci(what, format!("needs root ({needs})"));
    false
}

/// The value of the environment variable `var` when it is set and not blank; otherwise
/// [`skip_or_fail_under_ci`] (saying `how` to set it) and `None`.
#[track_caller]
pub fn env_or_skip(var: &str, what: &str, how: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(value) if !value.trim().is_empty() => Some(value),
        _ => {
            skip_or_fail_under_ci(what, format!("{var} is not set ({how})"));
            None
        }
    }
}

/// The workspace's `testdata/` folder joined with `rel`.
pub fn testdata(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata").join(rel)
}

/// The one task of the file `testdata/REL` (a task file, e.g. `netconf/static-route.json`).
#[track_caller]
pub fn static_task(rel: &str) -> Task {
    let path = testdata(rel);
    let suite = StaticSuite::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut tasks = suite.tasks();
    let task = tasks.next().unwrap_or_else(|| panic!("{}: no task", path.display()));
    task.unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A task with no setup and no ground truth: what tests of agents and protocols need.
pub fn constructive_task(id: &str, application: &str, query: &str) -> Task {
    Task {
        id: id.into(),
        application: application.into(),
        level: 1,
        label: "test".into(),
        domain: None,
        seed: None,
        query: query.into(),
        setup: serde_json::Value::Null,
        kind: TaskKind::Constructive { actions: vec![], answer: None, goal: None },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_skips_outside_ci_and_fails_under_it() {
        let under = std::panic::catch_unwind(|| skip_or_fail(true, "x", "needs y"));
        let message = under.expect_err("under CI a missing piece fails the test");
        assert_eq!(
            message.downcast_ref::<String>().map(String::as_str),
            Some("x: needs y, and CI must provide it")
        );
        assert!(std::panic::catch_unwind(|| skip_or_fail(false, "x", "needs y")).is_ok());
        let unset = std::panic::catch_unwind(|| env_or_skip("NETDOJO_TESTKIT_NEVER_SET", "x", "never"));
        assert_eq!(unset.is_err(), under_ci(), "an unset variable skips, or fails under CI");
        if let Ok(value) = unset {
            assert_eq!(value, None);
        }
    }

    #[test]
    fn fixtures_load_from_the_workspace_testdata() {
        let task = static_task("netconf/static-route.json");
        assert_eq!(task.id, "static-route");
        assert!(testdata("netconf").is_dir());
        assert_eq!(constructive_task("t1", "routing", "q").query, "q");
    }
}
