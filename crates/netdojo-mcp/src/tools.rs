//! The eight tools of draft 002 §4 as data (name, description, JSON Schema), the `network`
//! capability object of §3, and the dispatch of a call onto a device.

use std::time::Duration;

use netdojo_core::ToolSpec;
use serde_json::{Value, json};

use crate::device::{Device, Devices, Flavor, Settings};
use crate::error::NetError;

// The names live in `model`, below the devices that answer for them.
pub use crate::model::{COMMIT, CONFIGURE, EXEC, PULL, PUSH, ROLLBACK, YANG_EDIT, YANG_GET};

/// The tool an external agent ends its episode with (it becomes the runner's `finish`).
pub const DONE: &str = "done";

/// The eight tool names, in the seed's order.
pub const NETWORK_TOOLS: [&str; 8] = [EXEC, CONFIGURE, YANG_GET, YANG_EDIT, COMMIT, ROLLBACK, PULL, PUSH];

/// Tools that change the device: a read-only role may not call them (§8).
pub const WRITES: [&str; 5] = [CONFIGURE, YANG_EDIT, COMMIT, ROLLBACK, PUSH];

/// Whether a call of `tool` that succeeded changed a device's running state: a commit, a
/// rollback, a pushed file, or an edit sent to `running` (an edit of the candidate changes
/// nothing until its commit).
pub fn changes_running(tool: &str, args: &Value) -> bool {
    match tool {
        COMMIT | ROLLBACK | PUSH => true,
        CONFIGURE | YANG_EDIT => args.get("target").and_then(Value::as_str) == Some("running"),
        _ => false,
    }
}

/// Whether every device of `devices` backs a tool. FRR 8.4's northbound reads YANG data and
/// edits none; a Linux device has no YANG. With no device known yet, FRR's.
pub fn available(tool: &str, devices: &[&Device]) -> bool {
    if devices.is_empty() {
        return tool != YANG_EDIT;
    }
    devices.iter().all(|d| d.offers(tool))
}

/// The tools of `scope` with the descriptions of the devices' CLI family: FRR's, a Linux
/// node's (see [`crate::linux`]) or a GNS3 node's console (see [`crate::gns3`]).
pub fn tool_specs_for(scope: &Scope, settings: &Settings, flavor: Flavor) -> Vec<ToolSpec> {
    let mut specs = tool_specs(scope, settings);
    match flavor {
        Flavor::Frr => return specs,
        Flavor::Console => {
            console_texts(&mut specs, settings);
            return specs;
        }
        Flavor::Linux => {}
    }
    for spec in &mut specs {
        let text = match spec.name.as_str() {
            EXEC => "Run one read-only command on a Linux node (iproute2 and friends) and return its \
                 output: ip addr|link|route|neigh|rule show/list/get (also `ip -j ...`), bridge \
                 fdb|link show, tc qdisc|class|filter show, nft list ..., iptables -S/-L, \
                 iptables-save, sysctl KEY, ethtool IFACE, arp -n, route -n, ss, netstat. No \
                 shell: no pipes, `;` or redirections. Anything that changes state is refused."
                .to_string(),
            CONFIGURE => "Send commands that change a Linux node (e.g. `ip route add 10.0.2.0/24 via \
                 10.0.1.2`, `ip link set r0-eth1 up`, `iptables -D FORWARD 1`, `sysctl -w \
                 net.ipv4.ip_forward=1`), one per item, no shell. target `candidate` (the \
                 default) checks each one and stages the accepted ones for network.commit; target \
                 `running` runs them at once, in order, stopping at the first that fails. Answers \
                 each command with `success` or its error."
                .to_string(),
            YANG_GET => "Not available on this device (a Linux node has no YANG datastore): use \
                 network.cli.exec."
                .to_string(),
            YANG_EDIT => "Not available on this device (a Linux node has no YANG datastore): use \
                 network.cli.configure."
                .to_string(),
            COMMIT => format!(
                "Run the staged candidate on the node, in order, all or nothing: when a command \
                 fails, the node's state from before the commit is put back. With `confirmed`, \
                 the commit rolls back on its own unless a later network.commit confirms it \
                 within `timeout_s` (at most and by default {} s).",
                settings.rollback_timeout.as_secs()
            ),
            ROLLBACK => "Roll back to before a previous commit (default: the last one): the node's \
                 links (up/down, MTU), addresses, routes of every table, rules, permanent \
                 neighbours, net.* sysctls, iptables/nftables and qdiscs are put back and \
                 compared with what they were."
                .to_string(),
            PULL => "Read a file: running-config (a report of the node's addresses, links, rules, \
                 routes of every table, neighbours, sysctls, iptables, nftables and qdiscs), \
                 startup-config (the same report at the start of the episode) or candidate-config \
                 (the staged commands)."
                .to_string(),
            PUSH => "Replace the candidate (candidate-config: commands, one a line). running-config \
                 is a report, not a script: it cannot be pushed (use network.rollback)."
                .to_string(),
            _ => continue,
        };
        spec.description = text;
        if spec.name == EXEC {
            spec.parameters["properties"]["command"]["description"] = json!("e.g. `ip route`");
        }
    }
    specs
}

/// The texts of the tools on a GNS3 node's console.
fn console_texts(specs: &mut [ToolSpec], settings: &Settings) {
    for spec in specs {
        let text = match spec.name.as_str() {
            EXEC => "Run one read-only command on the device's console and return its output: on \
                 Cisco IOS `show ...`, `ping ...`, `traceroute ...` (no `| redirect|tee|append`); on \
                 VPCS `show ...`, `ping ...`, `trace ...`, `arp`. Anything else is refused."
                .to_string(),
            CONFIGURE => "Send configuration commands in the device's own CLI, one per item: Cisco IOS \
                 configuration mode (sub-mode commands after their `interface ...`/`router ...` \
                 line), or VPCS commands (`ip 10.0.0.1/24 10.0.0.254`, `clear ip`, `set pcname`). \
                 target `candidate` (the default) checks each one and stages the accepted ones for \
                 network.commit; target `running` sends them at once. Answers each command with \
                 `success` or the device's error."
                .to_string(),
            YANG_GET => "Not available on this device (a console has no YANG datastore): use \
                 network.cli.exec."
                .to_string(),
            YANG_EDIT => "Not available on this device (a console has no YANG datastore): use \
                 network.cli.configure."
                .to_string(),
            COMMIT => format!(
                "Send the staged candidate to the device in configuration mode, all or nothing: \
                 when the device refuses a command, the configuration from before the commit is \
                 put back. With `confirmed`, the commit rolls back on its own unless a later \
                 network.commit confirms it within `timeout_s` (at most and by default {} s).",
                settings.rollback_timeout.as_secs()
            ),
            ROLLBACK => "Roll back to before a previous commit (default: the last one): the commands \
                 that take the running configuration back to what it was are sent, and the result \
                 is compared with it."
                .to_string(),
            PUSH => "Replace the candidate (candidate-config: commands, one a line), or take the \
                 device to a whole configuration (running-config: the commands that get there \
                 are sent, recorded as a commit that network.rollback undoes)."
                .to_string(),
            _ => continue,
        };
        spec.description = text;
        if spec.name == EXEC {
            spec.parameters["properties"]["command"]["description"] =
                json!("e.g. `show ip route`, `show ip`");
        }
    }
}

/// Which devices a server answers for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The whole network: every tool takes a `device` argument.
    Network(Vec<String>),
    /// One device (the seed's one server per device): no `device` argument.
    Device(String),
}

fn object(mut properties: Value, required: &[&str], scope: &Scope) -> Value {
    let mut required: Vec<&str> = required.to_vec();
    if let Scope::Network(devices) = scope {
        properties["device"] =
            json!({"type": "string", "enum": devices, "description": "The device to act on."});
        required.insert(0, "device");
    }
    ToolSpec::object_schema(properties, &required)
}

/// The eight tools for `scope`.
pub fn tool_specs(scope: &Scope, settings: &Settings) -> Vec<ToolSpec> {
    let rollback = settings.rollback_timeout.as_secs();
    vec![
        ToolSpec::new(
            EXEC,
            "Execute an operational CLI show command (FRRouting vtysh) and return its output. Only \
             read-only `show ...` commands run; anything else is refused.",
            object(
                json!({
                    "command": {"type": "string", "description": "e.g. `show ip route`"},
                    "timeout_s": {"type": "number", "minimum": 0.1, "description": "at most the server's limit"}
                }),
                &["command"],
                scope,
            ),
        ),
        ToolSpec::new(
            CONFIGURE,
            "Enter configuration mode and send commands (vtysh syntax, one per item, sub-mode \
             commands after their `router ...`/`interface ...` line). target `candidate` (the \
             default) checks each command and stages the accepted ones for network.commit; \
             target `running` applies them at once. Answers each command with `success` or the \
             device's error.",
            object(
                json!({
                    "commands": {"type": "array", "items": {"type": "string"}, "maxItems": settings.max_bulk_edit},
                    "target": {"type": "string", "enum": ["candidate", "running"]}
                }),
                &["commands"],
                scope,
            ),
        ),
        ToolSpec::new(
            YANG_GET,
            "Retrieve a YANG data node from FRR's northbound, as JSON: `operational` state of a \
             path (e.g. /frr-interface:lib), or the `running` configuration of the daemon that \
             owns it.",
            object(
                json!({
                    "path": {"type": "string"},
                    "datastore": {"enum": ["running", "operational"]}
                }),
                &["path"],
                scope,
            ),
        ),
        ToolSpec::new(
            YANG_EDIT,
            "Edit the candidate datastore through YANG. Not available on this device (FRR 8.4's \
             northbound offers no YANG edit): use network.cli.configure.",
            object(
                json!({
                    "path": {"type": "string"},
                    "value": {},
                    "operation": {"enum": ["merge", "replace", "delete"]}
                }),
                &["path"],
                scope,
            ),
        ),
        ToolSpec::new(
            COMMIT,
            format!(
                "Commit the candidate to running. With `confirmed`, the commit rolls back on its \
                 own unless a later network.commit confirms it within `timeout_s` (at most and by \
                 default {rollback} s). A candidate the device refuses is not applied at all."
            ),
            object(
                json!({
                    "confirmed": {"type": "boolean"},
                    "timeout_s": {"type": "number", "minimum": 0.1, "maximum": rollback},
                    "comment": {"type": "string"}
                }),
                &[],
                scope,
            ),
        ),
        ToolSpec::new(
            ROLLBACK,
            "Roll back to before a previous commit (default: the last one), undoing it and every \
             commit after it.",
            object(json!({"commit": {"type": "integer", "minimum": 1}}), &[], scope),
        ),
        ToolSpec::new(
            PULL,
            "Back up a configuration file: running-config, startup-config or candidate-config.",
            object(
                json!({"file": {"enum": ["running-config", "startup-config", "candidate-config"]}}),
                &["file"],
                scope,
            ),
        ),
        ToolSpec::new(
            PUSH,
            "Restore a configuration file: running-config replaces the running configuration \
             (only the difference is applied, and it is recorded as a commit), candidate-config \
             the candidate. Content the device does not accept is refused whole.",
            object(
                json!({
                    "file": {"enum": ["running-config", "candidate-config"]},
                    "content": {"type": "string"}
                }),
                &["file", "content"],
                scope,
            ),
        ),
    ]
}

/// The `done` tool of an episode.
pub fn done_spec() -> ToolSpec {
    ToolSpec::new(
        DONE,
        "End the episode: the network is evaluated (testcases, configuration score) and the \
         scores come back. No tool call is accepted after it.",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
    )
}

/// The `network` capability object of §3, with the values of the devices behind a server.
pub fn capability(devices: &[&Device], settings: &Settings) -> Value {
    let mut modules: Vec<String> = devices.iter().flat_map(|d| d.yang_modules().iter().cloned()).collect();
    modules.sort();
    modules.dedup();
    // The devices of one network are of one kind (an FRR router or a Linux node each task);
    // a network server speaks for its devices together, a device server for its own.
    let dialect = devices.first().map_or("frr-vtysh", |d| d.cli_dialect());
    let datastores = devices.first().map_or(&["running", "candidate", "operational"][..], |d| d.datastores());
    let rollback = devices.iter().all(|d| d.supports_rollback());
    let mut streams: Vec<&str> = vec![crate::device::NETCONF_STREAM];
    for stream in devices.iter().flat_map(|d| d.notification_streams()) {
        if !streams.contains(stream) {
            streams.push(stream);
        }
    }
    json!({
        "yangModules": modules,
        "cliDialect": dialect,
        "configDatastore": datastores,
        // Configuration changes and confirmed-commit events (RFC 6470's, of NETCONF's stream)
        // and FRR's daemon logs, as `notifications/message` (and
        // `notifications/resources/updated`), docs/mcp.md.
        "notificationStream": streams,
        "maxBulkEdit": settings.max_bulk_edit,
        "supportsRollback": rollback,
        "rollbackTimeout": settings.rollback_timeout.as_secs(),
    })
}

fn str_arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, NetError> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| NetError::InvalidParams(format!("missing string `{key}`")))
}

fn secs(args: &Value, key: &str) -> Option<Duration> {
    args.get(key).and_then(Value::as_f64).filter(|s| s.is_finite() && *s > 0.0).map(Duration::from_secs_f64)
}

/// The longest line a tool takes (a command, a line of a file, a YANG path): FRR's vty
/// buffer, longer than any CLI's line (IOS's is 254 characters).
const MAX_LINE: usize = netdojo_linux::vty::MAX_LINE;
/// The largest file `network.file.push` takes.
const MAX_FILE: usize = 4 << 20;

/// Arguments no device could take are the client's invalid input (-32602), refused before a
/// device sees them, the error naming the argument and its size, not quoting it.
fn check_sizes(args: &Value) -> Result<(), NetError> {
    let too_long = |what: String, len: usize, limit: usize| {
        NetError::InvalidParams(format!("refused: `{what}` is {len} bytes long; the limit is {limit} bytes"))
    };
    for key in ["command", "path", "file", "device", "comment"] {
        if let Some(s) = args.get(key).and_then(Value::as_str)
            && s.len() > MAX_LINE
        {
            return Err(too_long(key.to_string(), s.len(), MAX_LINE));
        }
    }
    if let Some(commands) = args.get("commands").and_then(Value::as_array) {
        for (i, c) in commands.iter().enumerate() {
            if let Some(c) = c.as_str().filter(|c| c.len() > MAX_LINE) {
                return Err(too_long(format!("commands[{i}]"), c.len(), MAX_LINE));
            }
        }
    }
    if let Some(content) = args.get("content").and_then(Value::as_str) {
        if content.len() > MAX_FILE {
            return Err(too_long("content".into(), content.len(), MAX_FILE));
        }
        if let Some((n, line)) = content.lines().enumerate().find(|(_, l)| l.len() > MAX_LINE) {
            return Err(too_long(format!("content, line {}", n + 1), line.len(), MAX_LINE));
        }
    }
    Ok(())
}

/// Runs one network tool on `devices`. `args` carries `device`. The answer is JSON; show
/// command output and files are in its `output` / `content` string.
pub async fn dispatch(devices: &Devices, tool: &str, args: &Value) -> Result<Value, NetError> {
    check_sizes(args)?;
    let device = devices.get(str_arg(args, "device")?)?;
    match tool {
        EXEC => {
            let output = device.exec(str_arg(args, "command")?, secs(args, "timeout_s")).await?;
            Ok(json!({"device": device.name(), "output": output}))
        }
        CONFIGURE => {
            let commands: Vec<String> = args
                .get("commands")
                .and_then(Value::as_array)
                .ok_or_else(|| NetError::InvalidParams("missing array `commands`".into()))?
                .iter()
                .map(|c| c.as_str().map(str::to_string))
                .collect::<Option<_>>()
                .ok_or_else(|| NetError::InvalidParams("`commands` holds strings only".into()))?;
            refuse_placeholder(&commands.join("\n"))?;
            let running = args.get("target").and_then(Value::as_str) == Some("running");
            let results = device.configure(&commands, running).await?;
            let ok = results.iter().all(|r| r.status == "success");
            Ok(json!({"device": device.name(), "target": if running { "running" } else { "candidate" },
                "ok": ok, "results": results}))
        }
        YANG_GET => {
            let datastore = args.get("datastore").and_then(Value::as_str).unwrap_or("operational");
            let data = device.yang_get(str_arg(args, "path")?, datastore).await?;
            Ok(json!({"device": device.name(), "datastore": datastore, "data": data}))
        }
        YANG_EDIT => Err(NetError::ConfigIncompatible {
            message: format!(
                "device {}: network.yang.edit is not available ({}); use network.cli.configure",
                device.name(),
                if device.yang_modules().is_empty() {
                    "this device has no YANG datastore"
                } else {
                    "FRR 8.4's northbound offers no YANG edit"
                }
            ),
            details: json!({"available": false, "use": CONFIGURE}),
        }),
        COMMIT => {
            let confirmed = args.get("confirmed").and_then(Value::as_bool).unwrap_or(false);
            let comment = args.get("comment").and_then(Value::as_str).unwrap_or_default();
            device.commit(confirmed, secs(args, "timeout_s"), comment).await
        }
        ROLLBACK => device.rollback(args.get("commit").and_then(Value::as_u64)).await,
        PULL => {
            let file = str_arg(args, "file")?;
            Ok(json!({"device": device.name(), "file": file, "content": device.pull(file).await?}))
        }
        PUSH => {
            let content = str_arg(args, "content")?;
            refuse_placeholder(content)?;
            device.push(str_arg(args, "file")?, content).await
        }
        other => Err(NetError::InvalidParams(format!("unknown tool `{other}`"))),
    }
}

/// Configuration whose secret is the placeholder a redacted read shows: sent back, it would
/// set the password to `<redacted>`.
fn refuse_placeholder(text: &str) -> Result<(), NetError> {
    match crate::redact::placeholder_secret(text) {
        Some(line) => Err(NetError::InvalidParams(format!(
            "`{}`: `{}` stands where a secret was redacted; send the secret itself",
            line.trim(),
            crate::redact::REDACTED
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tools_of_a_device_and_of_the_network() {
        let settings = Settings::default();
        let device = tool_specs(&Scope::Device("R1".into()), &settings);
        assert_eq!(device.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), NETWORK_TOOLS);
        insta::assert_json_snapshot!("tools_device", device);
        let network = tool_specs(&Scope::Network(vec!["R1".into(), "R2".into()]), &settings);
        for t in &network {
            assert_eq!(t.parameters["required"][0], "device", "{}", t.name);
            assert_eq!(t.parameters["properties"]["device"]["enum"], json!(["R1", "R2"]), "{}", t.name);
        }
        insta::assert_json_snapshot!("tools_network_exec", network[0]);
        // A Linux node's (the routing application's): its own descriptions, the same schemas.
        let linux = tool_specs_for(&Scope::Device("r0".into()), &settings, Flavor::Linux);
        for (l, f) in linux.iter().zip(&device) {
            assert_eq!((&l.name, &l.parameters["required"]), (&f.name, &f.parameters["required"]));
        }
        insta::assert_json_snapshot!("tools_linux_device", linux);
    }

    #[test]
    fn the_capability_object_has_the_seeds_fields() {
        let settings = Settings { rollback_timeout: Duration::from_secs(30), ..Settings::default() };
        insta::assert_json_snapshot!("capability_without_devices", capability(&[], &settings));
    }
}
