//! netdojo-linux: emulated routed networks made of real kernel namespaces, and NetPress's
//! routing-misconfiguration application on them (seed 003 §C).
//!
//! - [`topology`]: the containerlab-like description of a network (YAML or JSON).
//! - [`netns`]: creating, marking, deleting and sweeping netdojo's own namespaces.
//! - [`network`]: building a topology with rtnetlink, readiness, teardown.
//! - [`pingmesh`]: every host pings every other, in parallel; Mininet's pingall rendering.
//! - [`probe`]: a ping, a TTL-limited trace, a DNS query and an HTTP GET from one node's
//!   namespace (a lab's health checks).
//! - [`frr`]: FRRouting instances for `frr` routers (one per namespace, vtysh inside it).
//! - [`pool`]: a warm pool of FRR routers, reset and checked against their fresh state between
//!   episodes.
//! - [`conntrack`]: flushing a namespace's connection tracking after its rules change.
//! - [`exec`]: the sandbox that runs an agent's command in one node's namespace, in the jail.
//! - [`sysctl`]: which `net.*` sysctls are the namespace's own, asked of the kernel.
//! - [`vty`]: what an agent may send to a router's vtysh (configuration lines, show commands).
//! - [`hostcheck`]: what the host looks like, for the containment tests (snapshot and diff).
//! - [`containment`]: the hostile corpus and the judge of the containment suite (tests).
//! - [`preflight`]: what the machine must offer (root, FRRouting), asked in one place.
//! - [`routing`]: the routing application: topology from a seed, fault catalogue, tasks, env.
//! - [`error`]: [`error::NetworkError`], what building a network (fresh or from the pool) fails with.

/// The kernel jail every agent command, vtysh call and FRR daemon runs in.
pub use netdojo_jail as jail;

pub mod conntrack;
pub mod containment;
pub mod error;
pub mod exec;
pub mod frr;
pub mod hostcheck;
pub mod netns;
pub mod network;
pub mod paths;
pub mod pingmesh;
pub mod pool;
pub mod preflight;
pub mod probe;
pub mod routing;
pub mod sysctl;
pub mod topology;
pub mod vty;
