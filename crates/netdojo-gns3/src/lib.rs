//! netdojo-gns3: NetConfBench's own emulator, GNS3 (seed 001 §3.1 item 2), as a backend.
//!
//! - [`api`]: the GNS3 controller API, v3 (tokens) and v2, chosen by the server's version;
//!   every HTTP error carries the server's own message.
//! - [`telnet`]: a telnet console: negotiation answered, reads that end at a prompt or a
//!   timeout.
//! - [`dialect`]: the Cisco IOS and VPCS CLIs: prompts, read-only commands, errors, the
//!   running configuration.
//! - [`device`]: a logged-in console: one command at a time, configuration mode around a batch.
//! - [`env`]: the environment: a task's topology as a GNS3 project, the Agent-Network
//!   Interface (§4.2) on the consoles, the Task Evaluation Interface (§4.3), scored by
//!   netdojo-netconf's command score. The project is deleted at close, on error and on drop.

pub mod api;
pub mod device;
pub mod dialect;
pub mod env;
pub mod telnet;

pub use api::{ApiVersion, Credentials, Gns3Client, Gns3Error};
pub use dialect::CliDialect;
pub use env::{Gns3Env, Gns3Factory, Gns3Options, NodeSpec};
