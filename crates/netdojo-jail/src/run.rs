//! Running a program in the jail from a caller that has no async runtime to hand (or runs it
//! on a blocking thread): input on stdin, output captured up to a cap, and a wall-clock limit
//! that kills the jail's whole process group.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::{NotFound, Spec};

/// How long a killed group may take to be gone before we stop waiting for it.
const REAP_GRACE: Duration = Duration::from_secs(2);

/// What came back from a contained program.
#[derive(Debug, Clone, Default)]
pub struct Ran {
    /// The exit status; `None` when it was killed or died of a signal.
    pub status: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Bytes of output dropped past the cap (both streams).
    pub dropped: usize,
    /// The wall-clock limit expired and the group was killed.
    pub timed_out: bool,
    pub elapsed: Duration,
}

/// The jail could not be started or waited for (its own setup failures are in [`Ran`]: see
/// [`crate::setup_failure`]).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    NoJail(#[from] NotFound),
    #[error("starting {program}: {source}")]
    Spawn { program: String, source: std::io::Error },
    #[error("waiting for the jail: {0}")]
    Wait(std::io::Error),
}

/// Runs `program args` in the jail `spec` with an empty environment but `env`, `input` on its
/// stdin, at most `output_cap` bytes kept of each stream, killed with its process group when
/// `timeout` expires.
pub fn run(
    spec: &Spec,
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    input: &[u8],
    timeout: Duration,
    output_cap: usize,
) -> Result<Ran, RunError> {
    let jail = crate::binary()?;
    let mut cmd = Command::new(&jail);
    cmd.args(spec.args(program, args.iter().copied()))
        .env_clear()
        .envs(env.iter().copied())
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own group, so that the time limit kills the jail and everything in it together.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let started = Instant::now();
    let mut child =
        cmd.spawn().map_err(|source| RunError::Spawn { program: jail.display().to_string(), source })?;
    let pgid = i32::try_from(child.id()).ok();
    let stdin = child.stdin.take();
    let input = input.to_vec();
    // A program that never reads its input must not block us: the writer is a thread of its own.
    let writer = thread::spawn(move || {
        if let Some(mut stdin) = stdin {
            let _ = stdin.write_all(&input);
        }
    });
    let readers = [child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>), {
        child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>)
    }]
    .map(|stream| thread::spawn(move || capture(stream, output_cap)));

    let deadline = started + timeout;
    let (status, timed_out) = loop {
        if let Some(status) = child.try_wait().map_err(RunError::Wait)? {
            break (status.code(), false);
        }
        if Instant::now() >= deadline {
            if let Some(pgid) = pgid {
                // The group outlives its leader only while a member is alive, so this cannot
                // hit a recycled group. ESRCH (all gone already) is fine.
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pgid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            let _ = child.kill();
            let _ = child.wait();
            if let Some(pgid) = pgid {
                let until = Instant::now() + REAP_GRACE;
                while group_alive(pgid) && Instant::now() < until {
                    thread::sleep(Duration::from_millis(5));
                }
            }
            break (None, true);
        }
        thread::sleep(Duration::from_millis(2));
    };
    let elapsed = started.elapsed();
    let _ = writer.join();
    let mut ran = Ran { status, timed_out, elapsed, ..Ran::default() };
    for (i, reader) in readers.into_iter().enumerate() {
        let (kept, dropped) = reader.join().unwrap_or_default();
        ran.dropped += dropped;
        if i == 0 {
            ran.stdout = kept;
        } else {
            ran.stderr = kept;
        }
    }
    Ok(ran)
}

/// Reads a stream to its end, keeping the first `cap` bytes.
fn capture(stream: Option<Box<dyn Read + Send>>, cap: usize) -> (Vec<u8>, usize) {
    let Some(mut stream) = stream else { return (Vec::new(), 0) };
    let mut kept = Vec::new();
    let mut dropped = 0;
    let mut buf = [0u8; 16384];
    while let Ok(n) = stream.read(&mut buf) {
        if n == 0 {
            break;
        }
        let room = cap.saturating_sub(kept.len()).min(n);
        kept.extend_from_slice(&buf[..room]);
        dropped += n - room;
    }
    (kept, dropped)
}

/// Whether a process of group `pgid` is alive (a zombie is not): `/proc/PID/stat` holds
/// `PID (COMM) STATE PPID PGRP ...`.
pub fn group_alive(pgid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else { return false };
    let pgid = pgid.to_string();
    entries.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { return false };
        let Some((_, rest)) = stat.rsplit_once(')') else { return false };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        fields.first().is_some_and(|state| *state != "Z") && fields.get(2) == Some(&pgid.as_str())
    })
}
