//! netdojo-netconf: NetConfBench (seed 001) on FRRouting routers.
//!
//! - [`env`]: the environment: routers from a task's topology and startup configurations, the
//!   Agent-Network Interface (§4.2) as tools, the Task Evaluation Interface (§4.3).
//! - [`generate`]: a seeded generator of static-routing and OSPF tasks in the seed's schema.

pub mod env;
pub mod generate;

pub use env::{NetconfEnv, NetconfFactory};
pub use generate::NetconfGenerator;
