//! The candidate, the commit history and the confirmed-commit timer of a device whose rollback
//! is "read what is there before a commit, put it back after": a Linux node (its state, see
//! [`crate::linux_state`]) and a GNS3 node (its running configuration). One implementation for
//! both; each kind says how it runs commands, reads a snapshot and puts one back
//! ([`Backend`]). An FRR router keeps its own (`device.rs`): it records the configuration after
//! each commit too, and restores with frr-reload.py.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use netdojo_netconf::env::CommandResult;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::{Mutex, broadcast};

use crate::error::NetError;
use crate::model::{Changed, Event, NETCONF_STREAM, Pending, Settings, confirm_within, send_event};
use crate::redact::redact;

/// One commit of a device's history.
#[derive(Debug, Clone, Serialize)]
pub struct Commit<S> {
    pub id: u64,
    pub kind: &'static str,
    pub comment: String,
    pub commands: Vec<String>,
    /// Why a rollback cannot undo it all (a command changed something outside the snapshot).
    pub outside: Option<String>,
    /// What was there before it: what a rollback of it puts back.
    #[serde(skip)]
    pub before: S,
}

/// A device's staged commands and what it committed.
#[derive(Debug)]
pub struct Datastore<S> {
    pub candidate: Vec<String>,
    next_id: u64,
    history: Vec<Commit<S>>,
    pending: Option<Pending>,
    /// A confirmed commit expired and was rolled back; told once, to the next commit.
    expired: Option<String>,
}

impl<S> Default for Datastore<S> {
    fn default() -> Self {
        Self { candidate: Vec::new(), next_id: 1, history: Vec::new(), pending: None, expired: None }
    }
}

impl<S> Datastore<S> {
    /// Adds a commit to the history; its id.
    pub fn record(
        &mut self,
        kind: &'static str,
        comment: String,
        commands: Vec<String>,
        before: S,
        outside: Option<String>,
    ) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.history.push(Commit { id, kind, comment, commands, outside, before });
        id
    }

    /// Stops the timer of a confirmed commit waiting for its confirmation, if one is.
    pub fn stop_timer(&mut self) {
        if let Some(pending) = self.pending.take() {
            pending.timer.abort();
        }
    }
}

/// What a device kind does for [`commit`], [`rollback`] and the confirmed-commit timer.
pub trait Backend: Send + Sync + 'static {
    type Snapshot: Clone + Send + Sync + 'static;
    /// What a snapshot is called in messages (`state`, `configuration`).
    const WHAT: &'static str;

    fn name(&self) -> &str;
    fn settings(&self) -> Settings;
    fn events(&self) -> &broadcast::Sender<Event>;
    fn datastore(&self) -> &Mutex<Datastore<Self::Snapshot>>;
    /// What is there now.
    fn snapshot(&self) -> impl Future<Output = Result<Self::Snapshot, NetError>> + Send;
    /// Puts `to` back and checks that it is (-32085 when it is not); the commands it ran.
    fn restore(&self, to: &Self::Snapshot) -> impl Future<Output = Result<Vec<String>, NetError>> + Send;
    /// Runs `commands` in order, each answered with its status.
    fn apply(&self, commands: &[String])
    -> impl Future<Output = Result<Vec<CommandResult>, NetError>> + Send;
    /// Why `command` may not be staged, if it may not (checked without running it).
    fn check(&self, command: &str) -> Result<(), String>;
    /// Why a rollback could not undo `command`, if it could not.
    fn outside(&self, _command: &str) -> Option<String> {
        None
    }
}

/// One command's answer.
pub fn result(command: &str, status: &'static str, error: &str) -> CommandResult {
    CommandResult { command: command.into(), status, error: error.into() }
}

/// -32602 when one call carries more commands than the device takes (`maxBulkEdit`).
pub fn check_bulk(settings: &Settings, count: usize) -> Result<(), NetError> {
    if count > settings.max_bulk_edit {
        return Err(NetError::InvalidParams(format!(
            "{count} commands in one call; this device takes at most {} (maxBulkEdit): send them in chunks",
            settings.max_bulk_edit
        )));
    }
    Ok(())
}

/// Stages `commands` (each checked by [`Backend::check`], only accepted ones staged), or runs
/// them at once (`target: running`, [`Backend::apply`]). Answers each command.
pub async fn configure<D: Backend>(
    d: &D,
    commands: &[String],
    running: bool,
) -> Result<Vec<CommandResult>, NetError> {
    check_bulk(&d.settings(), commands.len())?;
    if running {
        let results = d.apply(commands).await?;
        if results.iter().any(|r| r.status == "success") {
            config_changed(d, Changed::Running, "configure", json!({"commands": commands}));
        }
        return Ok(results);
    }
    let mut store = d.datastore().lock().await;
    let mut results = Vec::new();
    let mut added = Vec::new();
    for line in commands {
        let line = line.trim();
        match d.check(line) {
            Ok(()) => {
                store.candidate.push(line.to_string());
                added.push(line.to_string());
                results.push(result(line, "success", ""));
            }
            Err(why) => results.push(result(line, "error", &why)),
        }
    }
    if !added.is_empty() {
        config_changed(d, Changed::Candidate, "configure", json!({"commands": added}));
    }
    Ok(results)
}

fn emit<D: Backend>(d: &D, event: &'static str, level: &'static str, changed: Option<Changed>, data: Value) {
    send_event(d.events(), d.name(), NETCONF_STREAM, event, level, changed, &data);
}

/// A configuration change (RFC 6470 `netconf-config-change`).
pub fn config_changed<D: Backend>(d: &D, changed: Changed, operation: &str, data: Value) {
    let mut data = data;
    data["operation"] = json!(operation);
    data["datastore"] = json!(if changed == Changed::Running { "running" } else { "candidate" });
    emit(d, "netconf-config-change", "notice", Some(changed), data);
}

/// The staged commands as the `candidate-config` file: one a line.
pub async fn candidate_file<D: Backend>(d: &D) -> String {
    let store = d.datastore().lock().await;
    if store.candidate.is_empty() { String::new() } else { store.candidate.join("\n") + "\n" }
}

/// `network.file.push candidate-config`: `lines` replace the candidate when [`Backend::check`]
/// accepts every one; when it refuses one, nothing changes (-32084).
pub async fn push_candidate<D: Backend>(d: &D, lines: Vec<String>) -> Result<Value, NetError> {
    if let Some((line, why)) = lines.iter().find_map(|l| d.check(l).err().map(|w| (l, w))) {
        return Err(NetError::ConfigIncompatible {
            message: format!(
                "device {}: `{}` of candidate-config: {why}; nothing changed",
                d.name(),
                redact(line)
            ),
            details: json!({}),
        });
    }
    let mut store = d.datastore().lock().await;
    store.candidate = lines;
    let count = store.candidate.len();
    config_changed(d, Changed::Candidate, "push", json!({"lines": count}));
    Ok(json!({"device": d.name(), "file": "candidate-config", "lines": count}))
}

/// Runs the candidate in order, all or nothing: when a command fails, what was there before
/// the commit is put back and the answer (-32084) gives each command's status. A confirmed
/// commit rolls back on its own unless a later commit confirms it within `timeout` (at most
/// `rollbackTimeout`).
pub async fn commit<D: Backend>(
    device: &Arc<D>,
    confirmed: bool,
    timeout: Option<Duration>,
    comment: &str,
) -> Result<Value, NetError> {
    let d = device.as_ref();
    let name = d.name();
    let mut store = d.datastore().lock().await;
    if let Some(message) = store.expired.take() {
        return Err(NetError::ConfirmedCommitTimeout(message));
    }
    let mut confirmed_now = None;
    if let Some(pending) = store.pending.take() {
        pending.timer.abort();
        confirmed_now = Some(pending.commit);
        emit(
            d,
            "netconf-confirmed-commit",
            "info",
            None,
            json!({"confirm-event": "complete", "commit": pending.commit}),
        );
    }
    if store.candidate.is_empty() {
        return Ok(json!({"device": name, "committed": false, "confirmed": confirmed_now,
            "message": if confirmed_now.is_some() { "confirmed" } else { "nothing to commit" }}));
    }
    // A change a rollback cannot put back makes a confirmed commit impossible.
    let outside = store.candidate.iter().find_map(|c| d.outside(c));
    if confirmed && let Some(why) = &outside {
        return Err(NetError::ConfigIncompatible {
            message: format!("device {name}: no confirmed commit: {}", redact(why)),
            details: json!({"rollback": false}),
        });
    }
    let before = d.snapshot().await?;
    let commands = std::mem::take(&mut store.candidate);
    let results = d.apply(&commands).await?;
    if let Some(first) = results.iter().find(|r| r.status == "error") {
        let undone = d.restore(&before).await.map_err(|e| {
            NetError::RollbackFailed(format!(
                "the commit failed at `{}` and undoing it failed too: {e}",
                redact(&first.command)
            ))
        })?;
        // What ran and lies outside the snapshot is still in effect.
        let stuck = results.iter().filter(|r| r.status == "success").find_map(|r| d.outside(&r.command));
        if let Some(why) = stuck {
            return Err(NetError::RollbackFailed(format!(
                "device {name}: `{}` failed; the commit was undone except: {}",
                redact(&first.command),
                redact(&why)
            )));
        }
        return Err(NetError::ConfigIncompatible {
            message: format!(
                "device {name}: `{}` failed: {}; nothing was committed (the {} from before the commit is back)",
                redact(&first.command),
                redact(&first.error),
                D::WHAT
            ),
            details: json!({"results": results, "undone_with": undone}),
        });
    }
    let kind = if confirmed { "commit-confirmed" } else { "commit" };
    let id = store.record(kind, comment.into(), commands, before, outside);
    config_changed(
        d,
        Changed::Running,
        "commit",
        json!({"commit": id, "confirmed": confirmed, "comment": comment}),
    );
    let mut answer = json!({"device": name, "committed": true, "commit": id, "results": results,
        "confirmed": confirmed_now});
    if confirmed {
        let limit = d.settings().rollback_timeout;
        let wait = timeout.unwrap_or(limit).min(limit);
        let device = Arc::clone(device);
        let expire = async move { expire(device.as_ref(), id, wait).await };
        store.pending = Some(confirm_within(d.events(), name, id, wait, expire, &mut answer));
    }
    Ok(answer)
}

/// The confirmed commit `id` was not confirmed in time: back to what was there before it.
async fn expire<D: Backend>(d: &D, id: u64, waited: Duration) {
    let mut store = d.datastore().lock().await;
    if store.pending.as_ref().map(|p| p.commit) != Some(id) {
        return;
    }
    store.pending = None;
    let Some(commit) = store.history.iter().find(|c| c.id == id).cloned() else { return };
    let current = d.snapshot().await;
    let restored = d.restore(&commit.before).await;
    let message = match &restored {
        Ok(_) => {
            if let Ok(current) = current {
                store.record(
                    "rollback-unconfirmed",
                    format!("commit {id} not confirmed"),
                    vec![],
                    current,
                    None,
                );
            }
            format!("commit {id} was not confirmed within {:.0} s and was rolled back", waited.as_secs_f64())
        }
        Err(e) => format!(
            "commit {id} was not confirmed within {:.0} s; rolling it back failed: {e}",
            waited.as_secs_f64()
        ),
    };
    tracing::warn!(device = %d.name(), "{message}");
    emit(
        d,
        "netconf-confirmed-commit",
        if restored.is_ok() { "warning" } else { "error" },
        Some(Changed::Running),
        json!({"confirm-event": "timeout", "commit": id, "rolled_back": restored.is_ok(), "message": message}),
    );
    store.expired = Some(message);
}

/// Undoes commit `id` and every one after it (default: the last one).
pub async fn rollback<D: Backend>(d: &D, id: Option<u64>) -> Result<Value, NetError> {
    let name = d.name();
    let mut store = d.datastore().lock().await;
    let target = match id {
        Some(id) => store.history.iter().find(|c| c.id == id).cloned(),
        None => store.history.last().cloned(),
    };
    let Some(target) = target else {
        let ids: Vec<u64> = store.history.iter().map(|c| c.id).collect();
        return Err(NetError::RollbackFailed(match id {
            Some(id) => format!("device {name}: no commit {id} to roll back to (commits: {ids:?})"),
            None => format!("device {name}: no commit to roll back"),
        }));
    };
    // Refused before anything changes: a commit from the target on changed what a restore
    // cannot put back.
    if let Some(c) = store.history.iter().find(|c| c.id >= target.id && c.outside.is_some()) {
        return Err(NetError::RollbackFailed(format!(
            "device {name}: cannot roll back to before commit {}: commit {} ran {}",
            target.id,
            c.id,
            redact(c.outside.as_deref().unwrap_or_default())
        )));
    }
    store.stop_timer();
    let current = d.snapshot().await?;
    let restored = d.restore(&target.before).await;
    config_changed(
        d,
        Changed::Running,
        "rollback",
        json!({"rolled_back_to_before": target.id, "ok": restored.is_ok()}),
    );
    let ran = restored?;
    let id = store.record("rollback", format!("rollback of commit {}", target.id), vec![], current, None);
    Ok(json!({"device": name, "rolled_back_to_before": target.id, "commit": id, "ran": ran}))
}
