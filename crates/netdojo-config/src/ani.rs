//! The Agent-Network Interface of seed 001 (§4.2): the four tools every NetConfBench backend
//! offers an agent, with the same names and arguments whatever runs the devices. Only the
//! descriptions of the device-facing tools differ, since they name the device's own CLI.

use netdojo_core::ToolSpec;
use serde_json::json;

pub const GET_TOPOLOGY: &str = "get-topology";
pub const GET_RUNNING_CFG: &str = "get-running-cfg";
pub const UPDATE_CFG: &str = "update-cfg";
pub const EXECUTE_CMD: &str = "execute-cmd";

/// What a backend says about its devices in the tool descriptions.
#[derive(Debug, Clone, Copy)]
pub struct Texts<'a> {
    /// How a link end reads, e.g. `A eth0 <-> B eth0`.
    pub link_example: &'a str,
    /// `update-cfg`'s description: the configuration languages it takes.
    pub update_cfg: &'a str,
    /// `execute-cmd`'s description: the read-only commands it runs.
    pub execute_cmd: &'a str,
    /// The values of the optional `dialect` argument of `update-cfg` and `execute-cmd`; empty:
    /// no such argument. Both take it: a state an agent can change in a dialect must be
    /// readable in it too.
    pub dialects: &'a [&'a str],
}

/// The four tools, in the seed's order.
pub fn tool_specs(texts: &Texts) -> Vec<ToolSpec> {
    let mut update = json!({
        "device": {"type": "string"},
        "commands": {"type": "array", "items": {"type": "string"}},
    });
    let mut execute = json!({"device": {"type": "string"}, "command": {"type": "string"}});
    if !texts.dialects.is_empty() {
        update["dialect"] = json!({"type": "string", "enum": texts.dialects});
        execute["dialect"] = json!({"type": "string", "enum": texts.dialects});
    }
    vec![
        ToolSpec::new(
            GET_TOPOLOGY,
            format!(
                "The network's devices and links (`{}`), for the given devices or all.",
                texts.link_example
            ),
            ToolSpec::object_schema(json!({"devices": {"type": "array", "items": {"type": "string"}}}), &[]),
        ),
        ToolSpec::new(
            GET_RUNNING_CFG,
            "The running configuration of one device.",
            ToolSpec::object_schema(json!({"device": {"type": "string"}}), &["device"]),
        ),
        ToolSpec::new(UPDATE_CFG, texts.update_cfg, ToolSpec::object_schema(update, &["device", "commands"])),
        ToolSpec::new(
            EXECUTE_CMD,
            texts.execute_cmd,
            ToolSpec::object_schema(execute, &["device", "command"]),
        ),
    ]
}
