//! A fault as drawn for one task: its type, the device it is on, the operator commands that
//! inject it and the ones that repair it, and the health checks it breaks. A task's JSON keeps
//! this whole; the agent sees none of it (ground truth travels in the task).

use serde::{Deserialize, Serialize};

use crate::catalogue::FaultType;

/// One change to the lab, as an operator would make it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "via", rename_all = "lowercase", deny_unknown_fields)]
pub enum Action {
    /// Lines typed in vtysh's configuration mode on a router, in order (`router ospf`,
    /// ` area 0.0.0.1 stub`...).
    Vtysh { device: String, lines: Vec<String> },
    /// One command of netdojo-linux's `linux` dialect (`ip`, `nft`, `sysctl`...) run in a node's
    /// namespace through the exec sandbox.
    Linux { device: String, line: String },
    /// A service of the lab: `start`, `stop`, or `set KEY VALUE` (`set port 8080`,
    /// `set record www.campus.lab 10.5.5.11`).
    Service { device: String, service: String, op: String },
}

impl Action {
    pub fn device(&self) -> &str {
        match self {
            Action::Vtysh { device, .. } | Action::Linux { device, .. } | Action::Service { device, .. } => {
                device
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    #[serde(rename = "type")]
    pub fault_type: FaultType,
    /// Where the root cause is: the device a correct diagnosis names.
    pub device: String,
    /// What was broken, for people (`r2 eth1 in area 0.0.0.1 instead of 0`).
    pub detail: String,
    pub inject: Vec<Action>,
    pub repair: Vec<Action>,
    /// Names ([`crate::Check::name`]) of the health checks that fail once it is injected,
    /// as measured on the live lab when the task was generated.
    #[serde(default)]
    pub symptom: Vec<String>,
}
