//! The part of a YANG data tree (RFC 7951 JSON) that a path names, for `network.yang.get` on
//! the `running` datastore: FRR's vtysh answers it with a daemon's whole configuration.
//!
//! Paths are what `network.yang.get` documents: absolute, steps `name` or `module:name`, each
//! with `[key='value']` predicates for list entries (`/frr-ripd:ripd/instance[vrf='default']`).
//! The answer keeps the tree from the root down, like FRR's `operational` answers and a NETCONF
//! subtree filter: the path's containers, the list entries it selects with their leaves (so an
//! entry can be told apart), and the selected node whole. Nothing selected is `{}`.

use serde_json::{Map, Value};

use crate::error::NetError;

#[derive(Debug, PartialEq)]
struct Step {
    module: Option<String>,
    name: String,
    predicates: Vec<(String, String)>,
}

fn invalid(path: &str, why: &str) -> NetError {
    NetError::InvalidParams(format!("path `{path}`: {why}"))
}

fn parse(path: &str) -> Result<Vec<Step>, NetError> {
    let rest = path.strip_prefix('/').ok_or_else(|| invalid(path, "a path starts with `/`"))?;
    let mut steps = Vec::new();
    if rest.is_empty() {
        return Ok(steps);
    }
    let chars: Vec<char> = rest.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let start = i;
        while i < chars.len() && chars[i] != '/' && chars[i] != '[' {
            i += 1;
        }
        let qualified: String = chars[start..i].iter().collect();
        if qualified.is_empty() {
            return Err(invalid(path, "an empty step"));
        }
        let (module, name) = match qualified.split_once(':') {
            Some((m, n)) => (Some(m.to_string()), n.to_string()),
            None => (None, qualified),
        };
        let mut predicates = Vec::new();
        while i < chars.len() && chars[i] == '[' {
            let close = chars[i..]
                .iter()
                .scan(None::<char>, |quote, &c| {
                    let end = quote.is_none() && c == ']';
                    match (*quote, c) {
                        (None, '\'' | '"') => *quote = Some(c),
                        (Some(q), c) if c == q => *quote = None,
                        _ => {}
                    }
                    Some(end)
                })
                .position(|end| end)
                .ok_or_else(|| invalid(path, "an unclosed `[`"))?;
            let inner: String = chars[i + 1..i + close].iter().collect();
            let (key, value) =
                inner.split_once('=').ok_or_else(|| invalid(path, "predicates are `[key='value']`"))?;
            let value = value.trim();
            let value = value
                .strip_prefix('\'')
                .and_then(|v| v.strip_suffix('\''))
                .or_else(|| value.strip_prefix('"').and_then(|v| v.strip_suffix('"')))
                .unwrap_or(value);
            let key = key.trim();
            let key = key.rsplit(':').next().unwrap_or(key);
            predicates.push((key.to_string(), value.to_string()));
            i += close + 1;
        }
        steps.push(Step { module, name, predicates });
        if i < chars.len() {
            if chars[i] != '/' {
                return Err(invalid(path, "a step ends with `/`"));
            }
            i += 1;
            if i == chars.len() {
                return Err(invalid(path, "a path does not end with `/`"));
            }
        }
    }
    Ok(steps)
}

/// Whether a JSON member name (`module:name` or `name`, RFC 7951 §4) is the step's node.
fn names(key: &str, step: &Step) -> bool {
    let (module, name) = match key.split_once(':') {
        Some((m, n)) => (Some(m), n),
        None => (None, key),
    };
    name == step.name
        && match (module, step.module.as_deref()) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        }
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn walk(v: &Value, steps: &[Step]) -> Option<Value> {
    let Some((step, rest)) = steps.split_first() else { return Some(v.clone()) };
    let object = v.as_object()?;
    let mut out = Map::new();
    for (key, child) in object.iter().filter(|(k, _)| names(k, step)) {
        let selected = match child {
            Value::Array(entries) => {
                let kept: Vec<Value> = entries
                    .iter()
                    .filter(|e| {
                        step.predicates
                            .iter()
                            .all(|(k, want)| e.get(k).and_then(scalar).is_some_and(|have| have == *want))
                    })
                    .filter_map(|e| entry(e, rest))
                    .collect();
                (!kept.is_empty()).then_some(Value::Array(kept))
            }
            _ if !step.predicates.is_empty() => None,
            _ => walk(child, rest),
        };
        if let Some(selected) = selected {
            out.insert(key.clone(), selected);
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// A list entry on the path: whole if the path ends at it; else its leaves and what the rest
/// of the path selects in it.
fn entry(e: &Value, rest: &[Step]) -> Option<Value> {
    if rest.is_empty() {
        return Some(e.clone());
    }
    let Value::Object(inner) = walk(e, rest)? else { return None };
    let mut out: Map<String, Value> = e
        .as_object()?
        .iter()
        .filter(|(_, v)| scalar(v).is_some())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    out.extend(inner);
    Some(Value::Object(out))
}

/// What `path` selects in `data`, from the root down; `{}` when nothing.
pub fn select(data: &Value, path: &str) -> Result<Value, NetError> {
    let steps = parse(path)?;
    Ok(walk(data, &steps).unwrap_or_else(|| Value::Object(Map::new())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ripd() -> Value {
        json!({"frr-ripd:ripd": {"instance": [
            {"vrf": "default", "default-metric": 1,
             "interface": [{"interface": "eth0", "split-horizon": "simple"},
                           {"interface": "eth1", "split-horizon": "poison-reverse"}],
             "timers": {"update-interval": 30}},
            {"vrf": "blue", "default-metric": 2}
        ]}})
    }

    #[test]
    fn a_path_selects_its_subtree_and_keeps_the_way_to_it() {
        let d = ripd();
        assert_eq!(select(&d, "/frr-ripd:ripd").expect("ok"), d);
        assert_eq!(select(&d, "/").expect("ok"), d);
        assert_eq!(
            select(&d, "/frr-ripd:ripd/instance[vrf='default']/timers").expect("ok"),
            json!({"frr-ripd:ripd": {"instance": [{"vrf": "default", "default-metric": 1,
                "timers": {"update-interval": 30}}]}})
        );
        assert_eq!(
            select(&d, "/frr-ripd:ripd/instance/interface[interface=\"eth1\"]").expect("ok"),
            json!({"frr-ripd:ripd": {"instance": [{"vrf": "default", "default-metric": 1,
                "interface": [{"interface": "eth1", "split-horizon": "poison-reverse"}]}]}})
        );
        assert_eq!(
            select(&d, "/frr-ripd:ripd/instance[vrf='blue']").expect("ok"),
            json!({"frr-ripd:ripd": {"instance": [{"vrf": "blue", "default-metric": 2}]}})
        );
        // A prefix on a nested step is accepted, a wrong module is not the node.
        assert_eq!(
            select(&d, "/frr-ripd:ripd/frr-ripd:instance[vrf='blue']/default-metric").expect("ok"),
            json!({"frr-ripd:ripd": {"instance": [{"vrf": "blue", "default-metric": 2}]}})
        );
        for nothing in ["/frr-ospfd:ospf", "/frr-bgp:ripd", "/frr-ripd:ripd/instance[vrf='red']"] {
            assert_eq!(select(&d, nothing).expect("ok"), json!({}), "{nothing}");
        }
    }

    #[test]
    fn a_malformed_path_is_invalid_params() {
        for bad in ["frr-ripd:ripd", "/frr-ripd:ripd//instance", "/a[vrf='x'", "/a[1]", "/a/"] {
            let e = select(&ripd(), bad).expect_err(bad);
            assert!(matches!(e, NetError::InvalidParams(_)), "{bad}: {e:?}");
        }
    }
}
