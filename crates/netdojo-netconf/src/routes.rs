//! §4.1 testcases (`expected_result`) against FRR's routing table as `show ip route json` prints
//! it: `{"PREFIX": [route, ...]}`, one route per source of a prefix, inactive ones included
//! (so a floating static route that lost to a better one can still be checked).

use std::net::IpAddr;

use netdojo_core::testcase::RouteCheck;
use serde_json::Value;

/// The vtysh command that prints the table the checks need: IPv6's when one names an IPv6
/// address.
pub fn show_command(checks: &[RouteCheck]) -> &'static str {
    let v6 = checks.iter().any(|c| match c {
        RouteCheck::NextHop(ip) => ip.is_ipv6(),
        RouteCheck::Destination(d) => d.addr.is_ipv6(),
        _ => false,
    });
    if v6 { "show ipv6 route json" } else { "show ip route json" }
}

/// Every route of the table, in its order.
fn routes(table: &Value) -> impl Iterator<Item = &Value> {
    table.as_object().into_iter().flat_map(|m| m.values()).filter_map(Value::as_array).flatten()
}

fn nexthops(route: &Value) -> impl Iterator<Item = &Value> {
    route.get("nexthops").and_then(Value::as_array).into_iter().flatten()
}

fn holds(route: &Value, check: &RouteCheck) -> bool {
    let text = |key: &str| route.get(key).and_then(Value::as_str);
    let number = |key: &str| route.get(key).and_then(Value::as_u64);
    // FRR leaves a false flag out rather than printing it.
    let flag = |key: &str| route.get(key).and_then(Value::as_bool).unwrap_or(false);
    match check {
        RouteCheck::Protocol(p) => text("protocol") == Some(p.as_str()),
        RouteCheck::NextHop(ip) => nexthops(route).any(|nh| {
            nh.get("ip").and_then(Value::as_str).and_then(|s| s.parse::<IpAddr>().ok()) == Some(*ip)
        }),
        RouteCheck::Destination(d) => text("prefix").is_some_and(|p| d.matches(p)),
        RouteCheck::Interface(name) => {
            nexthops(route).any(|nh| nh.get("interfaceName").and_then(Value::as_str) == Some(name.as_str()))
        }
        RouteCheck::Distance(n) => number("distance") == Some(*n),
        RouteCheck::Metric(n) => number("metric") == Some(*n),
        RouteCheck::Installed(b) => flag("installed") == *b,
        RouteCheck::Selected(b) => flag("selected") == *b,
    }
}

/// One line per route, as the testcase's output: what the checks were held against.
fn describe(route: &Value) -> String {
    let text = |key: &str| route.get(key).and_then(Value::as_str).unwrap_or("?");
    let number = |key: &str| route.get(key).and_then(Value::as_u64).map_or("?".into(), |n| n.to_string());
    let via: Vec<String> = nexthops(route)
        .map(|nh| {
            let ip = nh.get("ip").and_then(Value::as_str);
            let dev = nh.get("interfaceName").and_then(Value::as_str);
            match (ip, dev) {
                (Some(ip), Some(dev)) => format!("via {ip} {dev}"),
                (Some(ip), None) => format!("via {ip}"),
                (None, Some(dev)) => format!("dev {dev}"),
                (None, None) => "?".into(),
            }
        })
        .collect();
    let flag = |key: &str| route.get(key).and_then(Value::as_bool).unwrap_or(false);
    format!(
        "{} {} [{}/{}] {}{}{}",
        text("prefix"),
        text("protocol"),
        number("distance"),
        number("metric"),
        via.join(", "),
        if flag("selected") { " selected" } else { "" },
        if flag("installed") { " installed" } else { "" },
    )
}

/// Whether one route of `table` meets every check, and the testcase's output: the matching
/// route, or the table it was looked for in.
pub fn check(table: &Value, checks: &[RouteCheck]) -> (bool, String) {
    if let Some(route) = routes(table).find(|r| checks.iter().all(|c| holds(r, c))) {
        return (true, format!("matching route: {}\n", describe(route)));
    }
    let all: Vec<String> = routes(table).map(describe).collect();
    let wanted: Vec<String> = checks.iter().map(|c| format!("{}={}", c.key(), shown(c))).collect();
    (false, format!("no route has {}; routes:\n{}\n", wanted.join(" "), all.join("\n")))
}

fn shown(check: &RouteCheck) -> String {
    match check {
        RouteCheck::Protocol(s) | RouteCheck::Interface(s) => s.clone(),
        RouteCheck::NextHop(ip) => ip.to_string(),
        RouteCheck::Destination(d) => d.len.map_or(d.addr.to_string(), |l| format!("{}/{l}", d.addr)),
        RouteCheck::Distance(n) | RouteCheck::Metric(n) => n.to_string(),
        RouteCheck::Installed(b) | RouteCheck::Selected(b) => b.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netdojo_core::testcase::route_checks;
    use serde_json::json;

    /// Two static routes to 2.2.2.0/30 as FRR 8.4 prints them: the primary, and the floating
    /// backup at distance 100 that lost to it.
    fn table() -> Value {
        json!({
            "2.2.2.0/30": [
                {"prefix": "2.2.2.0/30", "protocol": "static", "selected": true, "destSelected": true,
                 "distance": 1, "metric": 0, "installed": true,
                 "nexthops": [{"fib": true, "ip": "192.168.1.2", "afi": "ipv4", "interfaceIndex": 2,
                               "interfaceName": "eth0", "active": true}]},
                {"prefix": "2.2.2.0/30", "protocol": "static", "distance": 100, "metric": 0,
                 "nexthops": [{"ip": "192.168.2.2", "afi": "ipv4", "interfaceIndex": 3,
                               "interfaceName": "eth1", "active": true}]}
            ],
            "192.168.1.0/30": [
                {"prefix": "192.168.1.0/30", "protocol": "connected", "selected": true, "distance": 0,
                 "metric": 0, "installed": true,
                 "nexthops": [{"fib": true, "directlyConnected": true, "interfaceName": "eth0", "active": true}]}
            ]
        })
    }

    fn run(expected: Value) -> (bool, String) {
        check(&table(), &route_checks(&expected).expect("valid"))
    }

    #[test]
    fn every_key_must_hold_for_one_and_the_same_route() {
        assert!(run(json!({"protocol": "static", "next_hop": "192.168.1.2"})).0);
        assert!(
            run(json!({"protocol": "static", "next_hop": "192.168.2.2", "distance": 100})).0,
            "the backup"
        );
        assert!(
            run(json!({"destination": "2.2.2.0 255.255.255.252", "installed": false, "selected": false})).0
        );
        assert!(run(json!({"prefix": "192.168.1.0/30", "protocol": "C", "interface": "eth0"})).0);
        assert!(run(json!({"prefix": "2.2.2.0", "metric": 0, "interface": "eth1"})).0);
        // Each key holds for some route, never all of them for the same one.
        let (pass, output) = run(json!({"next_hop": "192.168.2.2", "installed": true}));
        assert!(!pass);
        assert!(output.starts_with("no route has next_hop=192.168.2.2 installed=true"), "{output}");
        assert!(output.contains("2.2.2.0/30 static [100/0] via 192.168.2.2 eth1\n"), "{output}");
        assert!(!run(json!({"protocol": "ospf"})).0);
        assert!(!run(json!({"prefix": "2.2.2.0/24"})).0);
        assert!(!check(&json!({}), &route_checks(&json!({"protocol": "static"})).expect("valid")).0);
    }

    #[test]
    fn ipv6_checks_read_the_ipv6_table() {
        let checks = route_checks(&json!({"prefix": "2001:db8::/64"})).expect("valid");
        assert_eq!(show_command(&checks), "show ipv6 route json");
        let checks = route_checks(&json!({"protocol": "static"})).expect("valid");
        assert_eq!(show_command(&checks), "show ip route json");
    }
}
