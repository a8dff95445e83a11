//! The CLI dialects of GNS3 nodes: what their prompts look like, which commands only read,
//! how an error shows in a command's output, and how the running configuration is read.
//! Pure text functions, unit-tested on recorded console transcripts (`testdata/`).

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// A device's command language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CliDialect {
    /// Cisco IOS (dynamips, IOU, IOSv): `R1>`, `R1#`, `R1(config-if)#`.
    Ios,
    /// GNS3's Virtual PC Simulator: `PC1>`.
    Vpcs,
}

static IOS_PROMPT: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    Regex::new(r"^[A-Za-z0-9][\w.\-/]*(\([\w.\-/ ]+\))?[>#] ?$").expect("static regex")
});
static VPCS_PROMPT: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    Regex::new(r"^[\w.\-\[\]]+> ?$").expect("static regex")
});

/// IOS error lines and what they mean (the `%` messages the parser prints under a command).
const IOS_ERRORS: [&str; 6] = [
    "% Invalid input detected",
    "% Incomplete command",
    "% Ambiguous command",
    "% Unknown command",
    "% Invalid ",
    "% Bad ",
];

/// VPCS messages that say a command was not accepted.
const VPCS_ERRORS: [&str; 8] = [
    "Bad command",
    "Invalid ",
    "Incomplete command",
    "Usage:",
    "Unknown ",
    "not reachable",
    "Cannot ",
    "Wrong ",
];

impl CliDialect {
    pub fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "ios" | "cisco" | "cisco-ios" => Some(Self::Ios),
            "vpcs" => Some(Self::Vpcs),
            _ => None,
        }
    }

    /// The dialect a node type speaks by default; none for nodes without a CLI (switches).
    pub fn for_node_type(node_type: &str) -> Option<Self> {
        match node_type {
            "vpcs" => Some(Self::Vpcs),
            "dynamips" | "iou" => Some(Self::Ios),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Ios => "ios",
            Self::Vpcs => "vpcs",
        }
    }

    /// A regular expression matching the prompt line (the last line of any output).
    pub fn prompt(self) -> &'static Regex {
        match self {
            Self::Ios => &IOS_PROMPT,
            Self::Vpcs => &VPCS_PROMPT,
        }
    }

    /// Commands sent once after login: pagination and line wrapping off.
    pub fn session_setup(self) -> &'static [&'static str] {
        match self {
            Self::Ios => &["terminal length 0", "terminal width 0"],
            Self::Vpcs => &[],
        }
    }

    /// Lines that frame a configuration session on a terminal; update-cfg accepts them and
    /// sends nothing, as the device is put in configuration mode anyway.
    pub fn is_framing(self, command: &str) -> bool {
        match self {
            Self::Ios => matches!(
                command.trim().to_ascii_lowercase().as_str(),
                "configure terminal" | "conf t" | "config t" | "configure" | "end"
            ),
            Self::Vpcs => false,
        }
    }

    /// Why `command` may not be run by `execute-cmd` (which must not change the device), or
    /// `None` when it only reads.
    pub fn refuse_exec(self, command: &str) -> Option<String> {
        let c = command.trim();
        if c.contains(['\n', '\r']) {
            return Some("one command at a time, without line breaks".into());
        }
        let first = c.split_whitespace().next().unwrap_or_default().to_ascii_lowercase();
        let ok = match self {
            // `| redirect`, `| tee` and `| append` write files on the device.
            Self::Ios => {
                let piped_write = c.split('|').skip(1).any(|p| {
                    let w = p.split_whitespace().next().unwrap_or_default().to_ascii_lowercase();
                    ["redirect", "tee", "append"].iter().any(|k| k.starts_with(&w) && !w.is_empty())
                });
                ["show", "sh", "ping", "traceroute"].contains(&first.as_str()) && !piped_write
            }
            Self::Vpcs => ["show", "ping", "trace", "arp", "version"].contains(&first.as_str()),
        };
        (!ok).then(|| match self {
            Self::Ios => "execute-cmd runs read-only commands (show, ping, traceroute); use update-cfg to change the configuration".into(),
            Self::Vpcs => "execute-cmd runs read-only commands (show, ping, trace, arp); use update-cfg to change the configuration".into(),
        })
    }

    /// Why `command` may not be sent by `update-cfg`, or `None`. In IOS configuration mode
    /// every command configures the device (the prompt is checked afterwards); VPCS commands
    /// outside the allow-list touch the server's files (`save`, `load`) or the process.
    pub fn refuse_config(self, command: &str) -> Option<String> {
        let c = command.trim();
        if c.contains(['\n', '\r']) {
            return Some("one command a line, without line breaks".into());
        }
        let words: Vec<String> = c.split_whitespace().map(str::to_ascii_lowercase).collect();
        let first = words.first().map(String::as_str).unwrap_or_default();
        match self {
            Self::Ios => {
                if first == "do" && !matches!(words.get(1).map(String::as_str), Some("show" | "sh" | "ping"))
                {
                    return Some("`do` runs only show and ping from configuration mode".into());
                }
                None
            }
            Self::Vpcs => {
                let ok = match first {
                    "ip" | "clear" => true,
                    "set" => matches!(words.get(1).map(String::as_str), Some("pcname" | "mtu")),
                    _ => false,
                };
                (!ok).then(|| {
                    "VPCS accepts `ip ...`, `clear ip|ipv6|...`, `set pcname NAME` and `set mtu N` here"
                        .into()
                })
            }
        }
    }

    /// The device's error message in a command's output, if the command was refused.
    pub fn error_in(self, output: &str) -> Option<String> {
        let lines: Vec<&str> = output.lines().map(str::trim_end).collect();
        let markers: &[&str] = match self {
            Self::Ios => &IOS_ERRORS,
            Self::Vpcs => &VPCS_ERRORS,
        };
        let hit = lines.iter().position(|l| markers.iter().any(|m| l.trim_start().starts_with(m)))?;
        // IOS points at the fault with a `^` on the line above: keep it with the message.
        let from = if hit > 0 && lines[hit - 1].trim() == "^" { hit - 1 } else { hit };
        Some(lines[from..=hit].join("\n").trim().to_string())
    }

    /// Whether a prompt shows configuration mode (`R1(config-if)#`).
    pub fn in_config_mode(self, prompt: &str) -> bool {
        match self {
            Self::Ios => prompt.contains("(config"),
            Self::Vpcs => true,
        }
    }

    /// Whether a prompt shows the unprivileged IOS mode (`R1>`), where `enable` is needed.
    pub fn needs_enable(self, prompt: &str) -> bool {
        self == Self::Ios && prompt.trim_end().ends_with('>')
    }

    /// The command whose output [`CliDialect::running_config`] turns into the configuration.
    pub fn running_config_command(self) -> &'static str {
        match self {
            Self::Ios => "show running-config",
            Self::Vpcs => "show ip",
        }
    }

    /// The running configuration from the output of [`CliDialect::running_config_command`]:
    /// IOS's text without the "Building configuration..." header; for VPCS, which keeps no
    /// configuration text, the commands that rebuild its address (`ip A.B.C.D/M [GW]`).
    pub fn running_config(self, output: &str) -> String {
        match self {
            Self::Ios => {
                let mut lines: Vec<&str> = output
                    .lines()
                    .filter(|l| {
                        !l.starts_with("Building configuration") && !l.starts_with("Current configuration")
                    })
                    .collect();
                while lines.first().is_some_and(|l| l.trim().is_empty()) {
                    lines.remove(0);
                }
                lines.join("\n").trim_end().to_string() + "\n"
            }
            Self::Vpcs => {
                let field = |name: &str| {
                    output.lines().find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        (k.trim() == name).then(|| v.trim().to_string())
                    })
                };
                let mut out = String::new();
                if let Some(addr) = field("IP/MASK").filter(|a| !a.starts_with("0.0.0.0")) {
                    out.push_str("ip ");
                    out.push_str(&addr);
                    if let Some(gw) = field("GATEWAY").filter(|g| !g.is_empty() && g != "0.0.0.0") {
                        out.push(' ');
                        out.push_str(&gw);
                    }
                    out.push('\n');
                }
                out
            }
        }
    }
}

impl CliDialect {
    /// The configuration commands that take a device whose running configuration is `from`
    /// back to `to` (both as [`CliDialect::running_config`] gives them): what a rollback
    /// sends. VPCS keeps one address: `to`'s `ip` command, or `clear ip` when `to` has none.
    /// IOS: the hierarchical diff of the two (netdojo-config), each edit typed under its
    /// sections (`interface f0/0`, ` no ip address ...`, `exit`).
    pub fn restore_commands(self, from: &str, to: &str) -> Result<Vec<String>, String> {
        match self {
            Self::Vpcs => {
                let lines: Vec<String> =
                    to.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect();
                Ok(if lines.is_empty() { vec!["clear ip".into()] } else { lines })
            }
            Self::Ios => {
                use netdojo_config::config::{Config, Dialect};
                let parse = |text: &str, which: &str| {
                    Config::parse(text, Dialect::Ios).map_err(|e| format!("the {which} configuration: {e}"))
                };
                let edits = netdojo_config::diff::diff(&parse(from, "current")?, &parse(to, "restored")?);
                let mut commands = Vec::new();
                for edit in edits {
                    if matches!(edit.line.as_str(), "end" | "exit") || edit.line.starts_with("version ") {
                        continue;
                    }
                    commands.extend(edit.context.iter().map(|c| ios_form(c)));
                    commands.push(ios_form(&edit.command()));
                    commands.extend(edit.context.iter().map(|_| "exit".to_string()));
                }
                Ok(commands)
            }
        }
    }
}

/// A line of netdojo-config's normal form as IOS takes it: the prefix forms it writes for
/// `ip address A M`, `ip route A M ...` and `network A WILDCARD area N` turned back into masks.
fn ios_form(line: &str) -> String {
    // netdojo-config holds a banner as `banner TYPE ^CBODY^C`, its lines joined: typed back
    // with a delimiter its body does not hold (IOS reads `^` as the delimiter, not `^C`).
    if let Some((head, body)) = line.split_once(" ^C")
        && head.split(' ').find(|w| *w != "no") == Some("banner")
    {
        if head.starts_with("no ") {
            return head.to_string();
        }
        let body = body.strip_suffix("^C").unwrap_or(body);
        let delimiter =
            ['#', '%', '&', '$', '@', '~'].into_iter().find(|c| !body.contains(*c)).unwrap_or('#');
        return format!("{head} {delimiter}{body}{delimiter}");
    }
    let mut words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let start = usize::from(words.first().is_some_and(|w| w == "no"));
    let rest: Vec<&str> = words[start..].iter().map(String::as_str).collect();
    let (at, wildcard) = match rest.as_slice() {
        ["ip", "address" | "route", ..] => (start + 2, false),
        ["network", _, "area", ..] => (start + 1, true),
        _ => return words.join(" "),
    };
    let Some((addr, len)) = words.get(at).and_then(|w| w.split_once('/')) else { return words.join(" ") };
    let (Ok(_), Ok(len)) = (addr.parse::<std::net::Ipv4Addr>(), len.parse::<u32>()) else {
        return words.join(" ");
    };
    if len > 32 {
        return words.join(" ");
    }
    let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
    let mask = std::net::Ipv4Addr::from(if wildcard { !mask } else { mask });
    let addr = addr.to_string();
    words.splice(at..=at, [addr, mask.to_string()]);
    words.join(" ")
}

/// A command's output as a person reads it: line ends normalised, the echoed command and the
/// closing prompt removed.
pub fn clean_output(raw: &str, command: &str) -> String {
    let text = raw.replace("\r\n", "\n").replace('\r', "\n");
    let mut lines: Vec<&str> = text.lines().collect();
    if let Some(first) = lines.iter().position(|l| !l.trim().is_empty())
        && lines[first].trim_end().ends_with(command.trim())
    {
        lines.drain(..=first);
    }
    // The closing prompt is the last line.
    lines.pop();
    while lines.first().is_some_and(|l| l.trim().is_empty()) {
        lines.remove(0);
    }
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    lines.join("\n")
}

/// The prompt that ends a raw output: its last non-blank line.
pub fn last_prompt(raw: &str) -> &str {
    raw.trim_end_matches([' ', '\t']).rsplit(['\n', '\r']).next().unwrap_or_default()
}
