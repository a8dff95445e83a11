//! netdojo-netconf: NetConfBench (seed 001) on FRRouting routers.
//!
//! - [`env`]: the environment: routers from a task's topology and startup configurations, the
//!   Agent-Network Interface (§4.2) as tools, the Task Evaluation Interface (§4.3).

pub mod env;

pub use env::{NetconfEnv, NetconfFactory};
