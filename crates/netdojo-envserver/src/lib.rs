//! Any netdojo environment as an RL environment, over OpenEnv's protocol as openenv-core 0.3.0
//! defines it: a WebSocket at `/ws` on 127.0.0.1 taking `reset`, `step` (an MCP tool call, or
//! the tool list) and `state`, one episode per session, many sessions at once. openenv-core's
//! `MCPToolClient` talks to it unmodified. docs/training.md has the protocol, the rewards and a
//! training loop.
//!
//! Each episode is run by netdojo-core's runner with an agent whose turns are the client's
//! calls ([`episode`]): validated, executed, checked and scored as in `eval`, and recorded to a
//! run directory when asked.

pub mod client;
pub mod episode;
pub mod protocol;
pub mod reward;
pub mod server;

pub use reward::{CORRECTNESS_METRIC, Shaping};
pub use server::{EnvServer, Options, ServeError, bind, router, serve};
