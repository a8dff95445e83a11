//! netdojo-mcp: netdojo's emulated devices as MCP servers with the `network` capability of
//! draft 002 (seed `002_...`), and external MCP agents scored like built-in ones.
//!
//! - [`device`]: one FRRouting router as a network device: show commands, a candidate,
//!   confirmed commits that roll back on their own, rollback, configuration files, YANG reads;
//!   and [`Device`], either kind of device.
//! - [`linux`]: one plain Linux node (iproute2) as a network device, its commands through
//!   netdojo-linux's agent sandbox; [`linux_state`]: its state read, put back and compared,
//!   for rollbacks.
//! - [`model`]: what every device kind shares (settings, events, the confirmed-commit timer,
//!   the tools' names), below them all: the modules import one way, `model`, `datastore`,
//!   the device kinds, [`Device`], `tools`, `server`, `transport` (docs/mcp.md).
//! - [`datastore`]: the candidate, commit history, confirmed-commit timer and rollback of the
//!   devices that roll back by snapshot and restore (Linux, GNS3).
//! - [`gns3`]: one GNS3 node (Cisco IOS, VPCS) as a network device, over the console
//!   netdojo-gns3's environment opened.
//! - [`tools`]: the eight tools of §4 as data, the §3 capability object, the dispatch.
//! - [`server`]: the rmcp `ServerHandler`: tools, `network:///` resources, prompts, roles.
//! - [`episode`]: the runner of netdojo-core drives the episode; its agent's turns are the
//!   MCP client's calls, so they are recorded, checked and scored like any agent's.
//! - [`transport`]: stdio and streamable HTTP (127.0.0.1), with the `network` capability;
//!   [`jsonrpc`]: the JSON-RPC errors and batches both answer before rmcp sees a message.
//! - [`client`]: an MCP client as a netdojo `Environment`.
//! - [`auth`]: bearer tokens of HTTP clients and the role each gives (§8).
//! - [`agent`]: an agent behind an MCP server (the `netdojo.agent` protocol) as a netdojo
//!   `Agent`; [`agent_server`]: any netdojo agent served over that protocol.
//! - [`error`]: the error codes of §7; [`redact`]: secrets out of what the server sends and
//!   logs (§8); [`yang_path`]: the subtree a YANG path selects.

pub mod agent;
pub mod agent_server;
pub mod auth;
pub mod client;
pub mod datastore;
pub mod device;
pub mod episode;
pub mod error;
pub mod gns3;
pub mod jsonrpc;
pub mod linux;
pub mod linux_state;
pub mod model;
pub mod redact;
pub mod serve;
pub mod server;
pub mod tools;
pub mod transport;
pub mod yang_path;

pub use device::{Device, Devices, Flavor, FrrDevice, Kinds};
pub use episode::{Episode, EpisodeLink, Finished, Live};
pub use error::NetError;
pub use gns3::Gns3Device;
pub use linux::LinuxDevice;
pub use model::Settings;
pub use server::{NetworkServer, Role};
