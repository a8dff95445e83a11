//! Tasks written in Cisco IOS style on FRR routers (netdojo-ios does the translating): which
//! tasks are, their topology with Linux interface names, their startup configurations and
//! ground truth as FRR lines and Linux commands, and the names shown back to the agent.

use netdojo_core::ConfigTask;
use netdojo_core::task::parse_link;
use netdojo_ios::{Interface, IosError};

/// Whether a task is written for IOS: an interface of its links is an IOS name (`S0/0`,
/// `Serial0/0`, `GigabitEthernet0/1`, anything with a `/`), or a startup configuration is
/// IOS's (a `version` line, `\r\n` line ends as IOS prints them). FRR-style tasks (`eth0`
/// links, vtysh startup configurations) are not.
pub fn is_ios(task: &ConfigTask) -> bool {
    // `S0/0`, or a type spelled out (`Serial0`, `GigabitEthernet0`): not Linux's `eth0`.
    let ios_name = |name: &str| {
        let kind_len = name.find(|c: char| c.is_ascii_digit()).unwrap_or(name.len());
        name.contains('/') || (kind_len >= 4 && Interface::parse(name).ok().flatten().is_some())
    };
    let links = task
        .topology
        .links
        .iter()
        .filter_map(|l| parse_link(l))
        .any(|((_, a), (_, b))| ios_name(&a) || ios_name(&b));
    // IOS's `version 12.4` is a top-level line; RIP's ` version 2` is indented under `router rip`.
    let startup = task
        .startup_configs
        .values()
        .any(|c| c.contains("\r\n") || c.lines().any(|l| l.starts_with("version ")));
    links || startup
}

/// An IOS interface name's Linux name; a name that is not IOS's stays.
pub fn linux_name(name: &str) -> Result<String, IosError> {
    match Interface::parse(name)? {
        Some(i) => i.linux(),
        None => Ok(name.to_string()),
    }
}

/// The IOS interfaces of a task: its links' and its configurations' (`interface ...` lines),
/// so that what FRR prints can show their IOS names again.
pub fn interfaces(task: &ConfigTask) -> Vec<Interface> {
    let mut out: Vec<Interface> = Vec::new();
    let mut add = |name: &str| {
        if let Ok(Some(i)) = Interface::parse(name)
            && !out.contains(&i)
        {
            out.push(i);
        }
    };
    for ((_, a), (_, b)) in task.topology.links.iter().filter_map(|l| parse_link(l)) {
        add(&a);
        add(&b);
    }
    let configs = task.startup_configs.values().map(String::as_str);
    let truths = task.ground_truth_configs.values().flat_map(|c| c.iter().map(String::as_str));
    for line in configs.flat_map(str::lines).chain(truths) {
        if let Some(name) = line.trim().strip_prefix("interface ") {
            add(name.trim());
        }
    }
    out
}

/// The addresses of a task whose startup configurations address no interface at all (the
/// seed's own example elides them): link `i` (from 0) is numbered `192.168.(i+1).0/30`, `.1` on
/// its first node and `.2` on its second, the numbering the example's ground truth and intents
/// use ("traffic should pass the 192.168.1.0 network", next hops 192.168.1.2 and 192.168.2.2).
/// Empty when any startup configuration has an `ip address`. (node, Linux interface, address).
pub fn link_addresses(task: &ConfigTask) -> Result<Vec<(String, String, String)>, String> {
    let addressed =
        task.startup_configs.values().flat_map(|c| c.lines()).any(|l| l.trim().starts_with("ip address "));
    if addressed {
        return Ok(vec![]);
    }
    let links: Vec<_> = task.topology.links.iter().filter_map(|l| parse_link(l)).collect();
    if links.len() > 254 {
        return Err(format!(
            "{} links to number: at most 254 (192.168.1.0/30 to 192.168.254.0/30)",
            links.len()
        ));
    }
    let mut out = Vec::new();
    for (i, ((a, ai), (b, bi))) in links.into_iter().enumerate() {
        let net = i + 1;
        out.push((a, linux_name(&ai).map_err(|e| e.to_string())?, format!("192.168.{net}.1/30")));
        out.push((b, linux_name(&bi).map_err(|e| e.to_string())?, format!("192.168.{net}.2/30")));
    }
    Ok(out)
}

pub use netdojo_ios::translate_lines as translate;

#[cfg(test)]
mod tests {
    use super::*;
    use netdojo_core::ConfigTopology;

    fn task(links: &[&str], startup: &str) -> ConfigTask {
        ConfigTask {
            task_name: "t".into(),
            intents: vec![],
            topology: ConfigTopology {
                nodes: vec!["A".into(), "B".into()],
                links: links.iter().map(|l| l.to_string()).collect(),
            },
            startup_configs: [("A".to_string(), startup.to_string())].into(),
            ground_truth_configs: Default::default(),
            ground_truth_linux: Default::default(),
            ground_truth_reasoning: String::new(),
            testcases: vec![],
        }
    }

    #[test]
    fn ios_tasks_are_told_from_frr_ones() {
        assert!(is_ios(&task(&["A S0/0 <-> B S0/0 "], "")));
        assert!(is_ios(&task(&["A GigabitEthernet0 <-> B GigabitEthernet0"], "")));
        assert!(is_ios(&task(&["A eth0 <-> B eth0"], "!\r\nversion 12.4\r\n")));
        assert!(!is_ios(&task(&["A eth0 <-> B eth1"], "interface eth0\n ip address 10.0.0.1/30\n")));
        // An FRR task with RIP: its ` version 2` is RIP's, not IOS's `version 12.4`.
        let rip =
            "interface eth0\n ip address 10.0.12.1/30\nexit\nrouter rip\n version 2\n network 10.0.12.0/30\n";
        assert!(!is_ios(&task(&["A eth0 <-> B eth0"], rip)));
        assert_eq!(linux_name("S0/1").expect("ok"), "s0-1");
        let sparse = task(&["A S0/0 <-> B S0/0 ", "A S0/1 <-> B S0/1"], "!\r\nversion 12.4\r\n");
        assert_eq!(
            link_addresses(&sparse).expect("ok"),
            [
                ("A".into(), "s0-0".into(), "192.168.1.1/30".into()),
                ("B".into(), "s0-0".into(), "192.168.1.2/30".into()),
                ("A".into(), "s0-1".into(), "192.168.2.1/30".into()),
                ("B".into(), "s0-1".into(), "192.168.2.2/30".into()),
            ]
        );
        let addressed =
            task(&["A S0/0 <-> B S0/0"], "interface S0/0\r\n ip address 10.0.0.1 255.255.255.252\r\n");
        assert!(link_addresses(&addressed).expect("ok").is_empty());
        assert_eq!(linux_name("eth0").expect("ok"), "e0");
    }
}
