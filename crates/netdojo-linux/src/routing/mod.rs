//! NetPress's routing-misconfiguration application (seed 003 §C, Table 2): a router, 2-4
//! subnets of 2-4 hosts, faults injected on the router, an agent that diagnoses and repairs
//! them one command at a time, judged by the pingmesh.

pub mod env;
pub mod faults;
pub mod layout;
pub mod tasks;

pub use env::{RoutingEnv, RoutingFactory, RoutingOptions};
pub use tasks::RoutingGenerator;
