//! The resource layer: rlimits. Processes are bounded another way: an agent's command may not
//! create any (seccomp), and everything in a PID namespace dies with its first process.

use nix::sys::resource::{Resource, setrlimit};

use crate::{Profile, SetupError, Spec};

const MIB: u64 = 1024 * 1024;

/// (resource, limit) for each profile. `None` leaves the inherited limit.
fn table(spec: &Spec) -> Vec<(Resource, &'static str, u64)> {
    let mut limits = vec![(Resource::RLIMIT_CORE, "core", 0)];
    match spec.profile {
        Profile::Agent => limits.extend([
            (Resource::RLIMIT_CPU, "cpu", spec.cpu_seconds.max(1)),
            // Nothing an agent's command writes is a file of the host; this bounds its /tmp.
            (Resource::RLIMIT_FSIZE, "fsize", 16 * MIB),
            (Resource::RLIMIT_NOFILE, "nofile", 256),
            (Resource::RLIMIT_AS, "as", 1024 * MIB),
        ]),
        Profile::Vtysh => limits.extend([
            (Resource::RLIMIT_CPU, "cpu", spec.cpu_seconds.max(1)),
            (Resource::RLIMIT_FSIZE, "fsize", 16 * MIB),
            (Resource::RLIMIT_NOFILE, "nofile", 1024),
            (Resource::RLIMIT_AS, "as", 2048 * MIB),
        ]),
        // A daemon lives as long as its router; its logs and configuration are bounded by size.
        Profile::Daemon => limits.extend([(Resource::RLIMIT_FSIZE, "fsize", 64 * MIB)]),
        // A model's code: an interpreter, a graph and what the code builds from it.
        Profile::Code => limits.extend([
            (Resource::RLIMIT_CPU, "cpu", spec.cpu_seconds.max(1)),
            (Resource::RLIMIT_FSIZE, "fsize", 16 * MIB),
            (Resource::RLIMIT_NOFILE, "nofile", 256),
            (Resource::RLIMIT_AS, "as", 2048 * MIB),
        ]),
    }
    if spec.memory_mib > 0 {
        for limit in limits.iter_mut().filter(|l| l.0 == Resource::RLIMIT_AS) {
            limit.2 = spec.memory_mib * MIB;
        }
    }
    limits
}

pub fn apply(spec: &Spec) -> Result<(), SetupError> {
    for (resource, name, limit) in table(spec) {
        // CPU: the soft limit sends SIGXCPU, the hard one a second later SIGKILL.
        let hard = if resource == Resource::RLIMIT_CPU { limit + 1 } else { limit };
        setrlimit(resource, limit, hard).map_err(|e| SetupError::nix(format!("rlimit {name}"), e))?;
    }
    Ok(())
}
