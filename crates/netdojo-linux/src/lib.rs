//! netdojo-linux: emulated routed networks made of real kernel namespaces, and NetPress's
//! routing-misconfiguration application on them (seed 003 §C).
//!
//! - [`topology`]: the containerlab-like description of a network (YAML or JSON).
//! - [`netns`]: creating, marking, deleting and sweeping netdojo's own namespaces.
//! - [`network`]: building a topology with rtnetlink, readiness, teardown.
//! - [`pingmesh`]: every host pings every other, in parallel; Mininet's pingall rendering.
//! - [`frr`]: FRRouting instances for `frr` routers (one per namespace, vtysh inside it).
//! - [`conntrack`]: flushing a namespace's connection tracking after its rules change.
//! - [`exec`]: the sandbox that runs an agent's command in one node's namespace.
//! - [`hostcheck`]: what the host looks like, for the containment tests (snapshot and diff).
//! - [`containment`]: the hostile corpus and the judge of the containment suite (tests).
//! - [`preflight`]: what the machine must offer (root, FRRouting), asked in one place.
//! - [`routing`]: the routing application: topology from a seed, fault catalogue, tasks, env.

pub mod conntrack;
pub mod containment;
pub mod exec;
pub mod frr;
pub mod hostcheck;
pub mod netns;
pub mod network;
pub mod pingmesh;
pub mod preflight;
pub mod routing;
pub mod topology;
