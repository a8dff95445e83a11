//! What an agent may send to a router's vtysh: one place for every entry point (NetConfBench's
//! `update-cfg` and `execute-cmd`, MCP's `network.cli.configure`, `network.commit`,
//! `network.file.push` and `network.cli.exec` on FRR devices).
//!
//! vtysh accepts any unambiguous prefix of a keyword (`lo fi /tmp/x` is `log file /tmp/x`), so
//! a refused command is a list of keywords and a line is refused when each of its first words
//! is a prefix of the keyword at that place. That refuses ambiguous abbreviations FRR would
//! itself reject, never misses one it accepts. The refused commands, from FRR 8.4's CLI:
//!
//! - those that name or write a file on the host: `log file`, `log filtered-file`,
//!   `log extended-syslog` and its `destination file|unix|fifo|fd ...`, `dump bgp ... PATH`,
//!   `write`, `copy`, `banner motd file`, `output file`, `configuration load`,
//!   `yang module-translator load`, `service integrated-vtysh-config` (how `write` saves);
//! - those that reach past the router: `log syslog` (the host's syslog), `agentx` (the host's
//!   SNMP master agent), `start-shell`, `ssh`, `telnet`, `script`, `terminal`;
//! - `show history`: vtysh's history is shared by every vtysh of the machine and would show
//!   other episodes' commands;
//! - `do` with anything but a `show` command.
//!
//! Allowed on purpose: `hostname` (the router's own name in FRR, not the host's),
//! `password`/`enable password` (vtysh does not ask for them), `frr defaults`, `list`.

use std::collections::BTreeMap;

use crate::frr::Frr;

/// The longest line accepted, in bytes. FRR's own line buffer is 4 KiB (`VTY_BUFSIZ`); a
/// longer line is an agent's mistake, not a configuration.
pub const MAX_LINE: usize = 4096;

/// Why a line was refused; `Display` is the one-line message shown to the agent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VtyRefusal {
    #[error("refused: empty command")]
    Empty,
    #[error("refused: the command is {len} bytes long; the limit is {MAX_LINE} bytes")]
    TooLong { len: usize },
    #[error("refused: the command contains a NUL byte")]
    NulByte,
    #[error("refused: the command contains a line break; send one command per line")]
    LineBreak,
    #[error("refused: the command contains control character U+{code:04X}")]
    ControlChar { code: u32 },
    #[error("refused: `{line}`: {why}")]
    Command { line: String, why: &'static str },
    #[error(
        "refused: `{line}`: only read-only `show` commands run here; use the configuration tool to change the router"
    )]
    NotShow { line: String },
}

const FILES: &str =
    "FRR commands that name or write a file are not available here (logs go to the router's own log)";
const OUTSIDE: &str = "FRR commands that reach past the router are not available here";
const HISTORY: &str = "vtysh's command history is not available here";

/// Refused commands: the keywords a line's first words abbreviate, and why.
const REFUSED: &[(&[&str], &str)] = &[
    (&["log", "file"], FILES),
    (&["log", "filtered-file"], FILES),
    (&["log", "extended-syslog"], FILES),
    (&["log", "syslog"], "the host's syslog is not the router's; logs go to the router's own log"),
    (&["destination"], FILES),
    (&["dump"], FILES),
    (&["write"], FILES),
    (&["copy"], FILES),
    (&["banner", "motd", "file"], FILES),
    (&["output", "file"], FILES),
    (&["configuration", "load"], FILES),
    (&["yang", "module-translator", "load"], FILES),
    (&["service", "integrated-vtysh-config"], FILES),
    (&["agentx"], OUTSIDE),
    (&["start-shell"], OUTSIDE),
    (&["ssh"], OUTSIDE),
    (&["telnet"], OUTSIDE),
    (&["script"], OUTSIDE),
    (&["terminal"], OUTSIDE),
    (&["show", "history"], HISTORY),
];

/// Checks one configuration line before it reaches vtysh. A line starting with `no` is held
/// to the same rules as the command it negates; `do` may only run a `show` command.
pub fn check_config_line(line: &str) -> Result<(), VtyRefusal> {
    let line = check_chars(line)?;
    let words: Vec<&str> = line.split_ascii_whitespace().collect();
    let words = match words.as_slice() {
        ["no", rest @ ..] => rest,
        ["do", ..] => return check_show_command(line).map(|_| ()),
        all => all,
    };
    refused(line, words)
}

/// Checks a command for a read-only front end (`execute-cmd`, `network.cli.exec`): `show ...`
/// (or `do show ...`), never `show history`. Returns the command trimmed, as it should be sent.
pub fn check_show_command(line: &str) -> Result<&str, VtyRefusal> {
    let line = check_chars(line)?;
    let words: Vec<&str> = line.split_ascii_whitespace().collect();
    let words = match words.as_slice() {
        ["do", rest @ ..] => rest,
        all => all,
    };
    if words.first() != Some(&"show") {
        return Err(VtyRefusal::NotShow { line: shown(line) });
    }
    refused(line, words)?;
    Ok(line)
}

fn refused(line: &str, words: &[&str]) -> Result<(), VtyRefusal> {
    let abbreviates = |word: &str, keyword: &str| {
        !word.is_empty() && keyword.starts_with(word.to_ascii_lowercase().as_str())
    };
    for (keywords, why) in REFUSED {
        if words.len() >= keywords.len() && keywords.iter().zip(words).all(|(k, w)| abbreviates(w, k)) {
            return Err(VtyRefusal::Command { line: shown(line), why });
        }
    }
    Ok(())
}

/// The line without surrounding whitespace, once it is one plain line of sane length.
fn check_chars(line: &str) -> Result<&str, VtyRefusal> {
    if line.len() > MAX_LINE {
        return Err(VtyRefusal::TooLong { len: line.len() });
    }
    let line = line.trim_ascii();
    if line.is_empty() {
        return Err(VtyRefusal::Empty);
    }
    for ch in line.chars() {
        match ch {
            '\0' => return Err(VtyRefusal::NulByte),
            '\n' | '\r' => return Err(VtyRefusal::LineBreak),
            '\t' => {}
            c if c.is_control() => return Err(VtyRefusal::ControlChar { code: u32::from(c) }),
            _ => {}
        }
    }
    Ok(line)
}

/// Long lines are elided in messages so they stay readable.
fn shown(line: &str) -> String {
    const SHOWN: usize = 80;
    if line.chars().count() <= SHOWN {
        line.to_string()
    } else {
        format!("{}...", line.chars().take(SHOWN).collect::<String>())
    }
}

/// One command's result in a configuration call (NetConfBench's `update-cfg`, the incident `configure`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CommandResult {
    pub command: String,
    pub status: &'static str,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// Applies `commands` in configuration mode, in order. Every command is tried: a failing one is
/// reported with the device's own error text and the ones after it still apply, as when a
/// configuration is pasted into a router (vtysh `-f`). With `check_only`, vtysh only parses
/// them (`-C`): the same per-command answer, and nothing reaches a daemon.
pub async fn apply_commands(
    frr: &Frr,
    commands: &[String],
    check_only: bool,
) -> Result<Vec<CommandResult>, crate::frr::FrrError> {
    // `configure terminal` and `end` frame a session on a terminal; the file is already in
    // configuration mode, so they are accepted and not sent.
    let framing = |c: &str| matches!(c.trim(), "configure terminal" | "conf t" | "configure" | "end");
    let mut lines = Vec::new();
    let mut line_of = Vec::new();
    // Refused before vtysh sees them (files, the host's logs, history; see `vty`): reported like
    // the device's own errors, and the others still apply.
    let mut refused: BTreeMap<usize, String> = BTreeMap::new();
    for (i, c) in commands.iter().enumerate() {
        if framing(c) {
            continue;
        }
        if !c.trim().is_empty()
            && let Err(refusal) = check_config_line(c)
        {
            refused.insert(i, refusal.to_string());
            continue;
        }
        lines.push(c.trim_ascii_end().to_string());
        line_of.push(i);
    }
    let text_in = lines.join("\n") + "\n";
    let out = if check_only { frr.check_file(&text_in).await? } else { frr.apply_file(&text_in).await? };
    let text = out.text();
    let mut errors: BTreeMap<usize, String> = BTreeMap::new();
    for line in text.lines() {
        // `line 3: % Unknown command[41]:  bogus`
        if let Some(rest) = line.strip_prefix("line ")
            && let Some((n, message)) = rest.split_once(':')
            && let Ok(n) = n.trim().parse::<usize>()
            && let Some(&index) = line_of.get(n.wrapping_sub(1))
        {
            errors.insert(index, message.trim().to_string());
        }
    }
    // A daemon-level refusal without a line number (e.g. `bgpd is not running`) fails the
    // whole batch rather than vanishing.
    let unattributed: Vec<&str> =
        text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with("line ")).collect();
    Ok(commands
        .iter()
        .enumerate()
        .map(|(i, c)| match refused.get(&i).or_else(|| errors.get(&i)) {
            Some(e) => CommandResult { command: c.clone(), status: "error", error: e.clone() },
            None if !out.success() && errors.is_empty() && !unattributed.is_empty() => {
                CommandResult { command: c.clone(), status: "error", error: unattributed.join("\n") }
            }
            None => CommandResult { command: c.clone(), status: "success", error: String::new() },
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frr::daemon_of_show;

    #[test]
    fn configuration_that_names_a_file_is_refused_in_every_spelling() {
        for line in [
            "log file /tmp/x",
            "log fil /tmp/x",
            "lo f /tmp/x",
            "LOG FILE /tmp/x",
            "  log file x informational ",
            "log filtered-file /tmp/x",
            "log filt x",
            "no log file /tmp/x",
            "log syslog",
            "log sys informational",
            "log extended-syslog x",
            "destination file /tmp/x",
            "dump bgp all /tmp/x 1m",
            "du b upd /tmp/x",
            "write memory",
            "wr",
            "write file",
            "copy running-config startup-config",
            "cop /tmp/x running-config",
            "banner motd file /etc/shadow",
            "output file /tmp/x",
            "configuration load file /tmp/x",
            "yang module-translator load /tmp/x",
            "service integrated-vtysh-config",
            "agentx",
            "start-shell bash",
            "ssh x",
            "telnet 10.0.0.1",
            "script x y",
            "terminal monitor",
            "do write memory",
            "do start-shell",
            "do show history",
            "do sh ip route",
        ] {
            let r = check_config_line(line).expect_err(line);
            let text = r.to_string();
            assert!(text.starts_with("refused: ") && !text.contains('\n'), "{line}: {text}");
            assert_eq!(text.matches("refused").count(), 1, "{text}");
        }
        let msg = check_config_line("log file /tmp/x").expect_err("refused").to_string();
        assert!(msg.contains("`log file /tmp/x`") && msg.contains("name or write a file"), "{msg}");
    }

    #[test]
    fn ordinary_configuration_passes() {
        for line in [
            "configure terminal",
            "hostname R1",
            "router bgp 65001",
            " neighbor 10.0.0.2 remote-as 65002",
            " neighbor 10.0.0.2 description to R2",
            "description uplink",
            "interface eth0",
            " ip address 10.0.0.1/24",
            "ip route 9.9.9.0/24 10.0.12.2",
            "ip prefix-list PL seq 5 permit 10.0.0.0/8 le 24",
            "bgp as-path access-list AS permit ^(100|200)$",
            "log commands",
            "log facility local0",
            "frr defaults traditional",
            "password zebra",
            "do show ip route",
            "debug bgp updates",
            "router ospf",
            " network 10.0.0.0/24 area 0",
            "exit",
            "end",
            "list",
        ] {
            assert_eq!(check_config_line(line), Ok(()), "{line}");
        }
    }

    #[test]
    fn shows_of_one_daemon_are_routed_and_the_rest_go_to_vtysh() {
        assert_eq!(daemon_of_show("show ip route 1.1.1.1/32"), Some("zebra"));
        assert_eq!(daemon_of_show("show ipv6 route json"), Some("zebra"));
        assert_eq!(daemon_of_show("show ip ospf neighbor"), Some("ospfd"));
        assert_eq!(daemon_of_show("show ip bgp summary"), Some("bgpd"));
        assert_eq!(daemon_of_show("show bgp ipv4 unicast"), Some("bgpd"));
        assert_eq!(daemon_of_show("show ip rip status"), Some("ripd"));
        for other in [
            "show running-config",
            "sh ip route",
            "show ip ro",
            "show ip route | include 1.1",
            "show ip ripng",
            "show interface",
            "show ip rip  status extra",
        ] {
            assert_eq!(daemon_of_show(other), None, "{other}");
        }
    }

    #[test]
    fn show_commands() {
        // A trailing newline ends the one command; it cannot start a second.
        assert_eq!(check_show_command(" show ip route \n"), Ok("show ip route"));
        assert_eq!(check_show_command(" show ip route "), Ok("show ip route"));
        assert_eq!(check_show_command("do show running-config"), Ok("do show running-config"));
        for line in ["show history", "show hist", "show h", "do show hi", "show History"] {
            let r = check_show_command(line).expect_err(line);
            assert!(r.to_string().contains("history"), "{line}: {r}");
        }
        for line in ["configure terminal", "write memory", "sh ip route", "", "show\0x"] {
            assert!(check_show_command(line).is_err(), "{line}");
        }
        assert_eq!(check_show_command("show ip\0 route"), Err(VtyRefusal::NulByte));
        assert_eq!(check_show_command("show ip\r route"), Err(VtyRefusal::LineBreak));
        assert_eq!(check_show_command("show \x1b[2J"), Err(VtyRefusal::ControlChar { code: 0x1b }));
        let long = format!("show {}", "x".repeat(200 * 1024));
        assert_eq!(check_show_command(&long), Err(VtyRefusal::TooLong { len: long.len() }));
        assert_eq!(check_config_line(&long), Err(VtyRefusal::TooLong { len: long.len() }));
        let msg = check_show_command("configure terminal").expect_err("refused").to_string();
        assert!(msg.starts_with("refused: `configure terminal`: only read-only `show`"), "{msg}");
    }
}
