//! The tools an agent uses on the graph, and their execution.
//!
//! Tools accept unsafe but well-formed mutations (an unknown `EK_*` kind, an edge between
//! kinds the hierarchy forbids, removing a switch and leaving its ports behind) so that the
//! safety check has something to catch; they refuse malformed ones (unknown node, duplicate
//! node, empty name) with an error the agent can read.

use serde_json::{Map, Value, json};

use netdojo_core::ToolSpec;

use crate::model::{Attrs, EntityKind, Graph, Relation};

/// Lists are cut at this many items (the output says so).
pub const MAX_ITEMS: usize = 200;

fn kind_prop(what: &str) -> Value {
    json!({"type": "string", "description": format!("{what} (EK_*, e.g. EK_PACKET_SWITCH); needed when a name is shared by several kinds")})
}

fn obj(props: Value, required: &[&str]) -> Value {
    ToolSpec::object_schema(props, required)
}

/// The tools, in a stable order.
pub fn tool_specs() -> Vec<ToolSpec> {
    let name = json!({"type": "string", "minLength": 1, "description": "node name, e.g. ju1.a1.m1.s2c1"});
    let edge_args = obj(
        json!({
            "from": name, "from_kind": kind_prop("kind of `from`"),
            "to": name, "to_kind": kind_prop("kind of `to`"),
            "relation": {"type": "string", "description": "RK_CONTAINS or RK_CONTROLS"},
        }),
        &["from", "to", "relation"],
    );
    vec![
        ToolSpec::new(
            "find_nodes",
            "List nodes by kind and/or name prefix, sorted by name, paginated.",
            obj(
                json!({
                    "kind": {"type": "string", "description": "only nodes of this kind (EK_*)"},
                    "name_prefix": {"type": "string", "description": "only names starting with this"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_ITEMS, "description": "page size (default 50)"},
                    "offset": {"type": "integer", "minimum": 0, "description": "items to skip (default 0)"},
                }),
                &[],
            ),
        ),
        ToolSpec::new(
            "get_node",
            "Show one node: kind, attributes, parents (with relation) and number of children.",
            obj(json!({"name": name, "kind": kind_prop("its kind")}), &["name"]),
        ),
        ToolSpec::new(
            "list_children",
            "List the direct children of a node (all relations), with kind and relation.",
            obj(json!({"name": name, "kind": kind_prop("its kind")}), &["name"]),
        ),
        ToolSpec::new(
            "list_parents",
            "List the direct parents of a node (all relations), with kind and relation.",
            obj(json!({"name": name, "kind": kind_prop("its kind")}), &["name"]),
        ),
        ToolSpec::new(
            "count_descendants",
            "Count the nodes of one kind anywhere below a node (following RK_CONTAINS and RK_CONTROLS edges, each node once).",
            obj(
                json!({"name": name, "kind": kind_prop("its kind"), "descendant_kind": {"type": "string", "description": "kind to count (EK_*)"}}),
                &["name", "descendant_kind"],
            ),
        ),
        ToolSpec::new(
            "capacity",
            "Total capacity of a node: the sum of physical_capacity_bps over all EK_PORT nodes below it (RK_CONTAINS and RK_CONTROLS edges), or its own for a port.",
            obj(json!({"name": name, "kind": kind_prop("its kind")}), &["name"]),
        ),
        ToolSpec::new(
            "add_node",
            "Add a node. It has no edges yet: add them with add_edge.",
            obj(
                json!({
                    "name": name,
                    "kind": {"type": "string", "description": "its kind (EK_*)"},
                    "attributes": {"type": "object", "description": "attribute path → value, e.g. {\"physical_capacity_bps\": 1000000000} or {\"switch_loc.stage\": 2}"},
                }),
                &["name", "kind"],
            ),
        ),
        ToolSpec::new(
            "add_edge",
            "Add a directed edge `from` -relation-> `to` (e.g. a packet switch RK_CONTAINS a port).",
            edge_args.clone(),
        ),
        ToolSpec::new(
            "remove_node",
            "Remove one node and its edges. Its children are NOT removed: remove them too when they should go.",
            obj(json!({"name": name, "kind": kind_prop("its kind")}), &["name"]),
        ),
        ToolSpec::new("remove_edge", "Remove the edge `from` -relation-> `to`.", edge_args.clone()),
        ToolSpec::new(
            "update_node",
            "Set one attribute of a node, e.g. physical_capacity_bps of a port.",
            obj(
                json!({
                    "name": name, "kind": kind_prop("its kind"),
                    "attribute": {"type": "string", "minLength": 1, "description": "attribute path, e.g. physical_capacity_bps"},
                    "value": {"type": ["integer", "number", "string", "boolean"], "description": "new value"},
                }),
                &["name", "attribute", "value"],
            ),
        ),
        ToolSpec::new(
            "batch",
            "Run several of the other tools in order as one atomic change: the safety check runs only after the whole batch, \
and if any call fails none of them is applied. Use it when intermediate states would break the constraints \
(e.g. a new switch needs its edge and a port; a removed switch's ports must go with it).",
            obj(
                json!({
                    "calls": {
                        "type": "array", "minItems": 1, "maxItems": MAX_ITEMS,
                        "items": obj(json!({
                            "tool": {"type": "string", "description": "a tool name other than batch"},
                            "arguments": {"type": "object", "description": "that tool's arguments"},
                        }), &["tool", "arguments"]),
                    },
                }),
                &["calls"],
            ),
        ),
    ]
}

/// Runs the calls of a batch; stops at the first failure, leaving the calls before it applied
/// (the caller restores the graph).
pub fn run_batch(g: &mut Graph, calls: &[Value]) -> Result<Vec<String>, String> {
    let specs = tool_specs();
    let mut lines = Vec::with_capacity(calls.len());
    for (i, c) in calls.iter().enumerate() {
        let n = i + 1;
        let tool = c
            .get("tool")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("call {n}: `tool` must be a string"))?;
        if tool == "batch" {
            return Err(format!("call {n}: batches do not nest"));
        }
        let spec = specs
            .iter()
            .find(|s| s.name == tool)
            .ok_or_else(|| format!("call {n}: unknown tool `{tool}`"))?;
        let arguments = c.get("arguments").cloned().unwrap_or(Value::Object(Map::new()));
        netdojo_core::schema::validate(&spec.parameters, &arguments)
            .map_err(|e| format!("call {n} ({tool}): {e}"))?;
        let (text, _) = execute(g, tool, &arguments).map_err(|e| format!("call {n} ({tool}): {e}"))?;
        lines.push(text);
    }
    Ok(lines)
}

fn get_str<'a>(args: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!("`{key}` must be a string, got {other}")),
    }
}

fn req_str<'a>(args: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    get_str(args, key)?.ok_or_else(|| format!("`{key}` is required"))
}

fn get_kind(args: &Map<String, Value>, key: &str) -> Result<Option<EntityKind>, String> {
    get_str(args, key)?
        .map(|k| {
            EntityKind::parse(k).ok_or_else(|| {
                format!("`{key}`: `{k}` is not a kind (expected EK_ followed by capitals, e.g. EK_PORT)")
            })
        })
        .transpose()
}

fn lookup(
    g: &Graph,
    args: &Map<String, Value>,
    name_key: &str,
    kind_key: &str,
) -> Result<petgraph::stable_graph::NodeIndex, String> {
    let name = req_str(args, name_key)?;
    let kind = get_kind(args, kind_key)?;
    g.find(name, kind.as_ref()).map_err(|e| e.to_string())
}

fn get_usize(args: &Map<String, Value>, key: &str, default: usize) -> Result<usize, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => {
            v.as_u64().map(|n| n as usize).ok_or_else(|| format!("`{key}` must be a non-negative integer"))
        }
    }
}

fn label(g: &Graph, ix: petgraph::stable_graph::NodeIndex) -> String {
    let n = g.node(ix);
    format!("{} {}", g.kind_label(&n.kind), n.name)
}

fn edge_list(items: Vec<(String, String, String)>, what: &str) -> (String, Option<Value>) {
    let total = items.len();
    let shown: Vec<Value> =
        items.iter().take(MAX_ITEMS).map(|(k, n, r)| json!({"kind": k, "name": n, "relation": r})).collect();
    let mut text = format!("{total} {what}");
    for (k, n, r) in items.iter().take(MAX_ITEMS) {
        text.push_str(&format!("\n{r} {k} {n}"));
    }
    if total > MAX_ITEMS {
        text.push_str(&format!("\n(truncated: showing {MAX_ITEMS} of {total})"));
    }
    (text, Some(json!({"total": total, "items": shown, "truncated": total > MAX_ITEMS})))
}

/// Calls with each `batch` opened up, as `{"tool", "arguments"}` objects in order.
pub fn flatten(calls: &[netdojo_core::ToolCall]) -> Vec<Value> {
    let mut out = Vec::new();
    for c in calls {
        match c.arguments.get("calls").and_then(Value::as_array) {
            Some(inner) if c.name == "batch" => out.extend(inner.iter().cloned()),
            _ => out.push(serde_json::json!({"tool": c.name, "arguments": c.arguments})),
        }
    }
    out
}

/// Whether a tool changes the graph.
pub fn is_mutating(tool: &str) -> bool {
    matches!(tool, "add_node" | "add_edge" | "remove_node" | "remove_edge" | "update_node" | "batch")
}

/// Text and structured data of a tool's result, or the error shown to the agent.
pub type ToolResult = Result<(String, Option<Value>), String>;

/// Runs a read-only call; `None` for a mutating tool.
pub fn read(g: &Graph, tool: &str, arguments: &Value) -> Option<ToolResult> {
    if is_mutating(tool) {
        return None;
    }
    // Episodes share the base graph until they mutate it, so reads must not need `&mut`.
    Some(execute_read(g, tool, arguments))
}

/// Runs one call on the graph: `Ok((text, data))`, or `Err(message)` for the agent.
pub fn execute(g: &mut Graph, tool: &str, arguments: &Value) -> ToolResult {
    if !is_mutating(tool) {
        return execute_read(g, tool, arguments);
    }
    execute_any(g, tool, arguments)
}

fn execute_read(g: &Graph, tool: &str, arguments: &Value) -> ToolResult {
    let empty = Map::new();
    let args = match arguments {
        Value::Object(m) => m,
        Value::Null => &empty,
        other => return Err(format!("arguments must be an object, got {other}")),
    };
    read_tool(g, tool, args)
}

fn execute_any(g: &mut Graph, tool: &str, arguments: &Value) -> ToolResult {
    let empty = Map::new();
    let args = match arguments {
        Value::Object(m) => m,
        Value::Null => &empty,
        other => return Err(format!("arguments must be an object, got {other}")),
    };
    match tool {
        "add_node" => {
            let name = req_str(args, "name")?;
            let kind = get_kind(args, "kind")?.ok_or("`kind` is required")?;
            let attrs: Attrs = match args.get("attributes") {
                None | Some(Value::Null) => Attrs::new(),
                Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                Some(other) => return Err(format!("`attributes` must be an object, got {other}")),
            };
            let ix = g.add_node(kind, name, attrs).map_err(|e| e.to_string())?;
            Ok((format!("added {}", label(g, ix)), None))
        }
        "add_edge" | "remove_edge" => {
            let a = lookup(g, args, "from", "from_kind")?;
            let z = lookup(g, args, "to", "to_kind")?;
            let r = req_str(args, "relation")?;
            let rel = Relation::parse(r).ok_or_else(|| {
                format!("`relation`: `{r}` is not a relation kind (expected RK_CONTAINS or RK_CONTROLS)")
            })?;
            let text = format!("{} {rel} {}", label(g, a), label(g, z));
            if tool == "add_edge" {
                g.add_edge(a, z, rel).map_err(|e| e.to_string())?;
                Ok((format!("added edge {text}"), None))
            } else {
                let e = g.find_edge(a, z, &rel).ok_or_else(|| format!("there is no edge {text}"))?;
                g.remove_edge(e);
                Ok((format!("removed edge {text}"), None))
            }
        }
        "remove_node" => {
            let ix = lookup(g, args, "name", "kind")?;
            let text = label(g, ix);
            let removed = g.remove_node(ix).ok_or("node vanished")?;
            Ok((format!("removed {text} and its {} edges", removed.edges.len()), None))
        }
        "update_node" => {
            let ix = lookup(g, args, "name", "kind")?;
            let key = req_str(args, "attribute")?;
            if key.is_empty() {
                return Err("`attribute` must not be empty".into());
            }
            let value = args.get("value").filter(|v| !v.is_null()).ok_or("`value` is required")?.clone();
            let old = g.set_attr(ix, key, Some(value.clone()));
            let old = old.map_or_else(|| "unset".to_string(), |v| v.to_string());
            Ok((format!("{}: {key} {old} -> {value}", label(g, ix)), None))
        }
        "batch" => {
            let calls = args.get("calls").and_then(Value::as_array).ok_or("`calls` must be an array")?;
            // Atomic: keep the graph as it was to restore it if a call fails.
            let before = g.clone();
            match run_batch(g, calls) {
                Ok(lines) => {
                    Ok((format!("batch of {} calls applied:\n{}", lines.len(), lines.join("\n")), None))
                }
                Err(e) => {
                    *g = before;
                    Err(format!("{e}; nothing in the batch was applied"))
                }
            }
        }
        other => Err(format!("unknown tool `{other}`")),
    }
}

fn read_tool(g: &Graph, tool: &str, args: &Map<String, Value>) -> ToolResult {
    match tool {
        "find_nodes" => {
            let kind = get_kind(args, "kind")?;
            let prefix = get_str(args, "name_prefix")?.unwrap_or("");
            let limit = get_usize(args, "limit", 50)?.clamp(1, MAX_ITEMS);
            let offset = get_usize(args, "offset", 0)?;
            let mut hits: Vec<(&str, &str)> = g
                .node_indices()
                .map(|ix| g.node(ix))
                .filter(|n| kind.as_ref().is_none_or(|k| &n.kind == k) && n.name.starts_with(prefix))
                .map(|n| (n.name.as_str(), g.kind_label(&n.kind)))
                .collect();
            hits.sort_unstable();
            let total = hits.len();
            let page: Vec<(&str, &str)> = hits.into_iter().skip(offset).take(limit).collect();
            let mut text = format!("{total} nodes match; showing {} from offset {offset}", page.len());
            for (n, k) in &page {
                text.push_str(&format!("\n{k} {n}"));
            }
            if offset + page.len() < total {
                text.push_str(&format!("\n(more: call again with offset {})", offset + page.len()));
            }
            let items: Vec<Value> = page.iter().map(|(n, k)| json!({"name": n, "kind": k})).collect();
            Ok((text, Some(json!({"total": total, "offset": offset, "items": items}))))
        }
        "get_node" => {
            let ix = lookup(g, args, "name", "kind")?;
            let n = g.node(ix);
            let parents: Vec<Value> = g
                .parents(ix)
                .map(|(r, p)| json!({"kind": g.kind_label(&g.node(p).kind), "name": g.node(p).name, "relation": r.as_str()}))
                .collect();
            let children = g.children(ix).count();
            let data = json!({
                "name": n.name, "kind": g.kind_label(&n.kind), "attributes": n.attrs,
                "parents": parents, "children": children,
            });
            let text = serde_json::to_string_pretty(&data).map_err(|e| e.to_string())?;
            Ok((text, Some(data)))
        }
        "list_children" | "list_parents" => {
            let ix = lookup(g, args, "name", "kind")?;
            let mut items: Vec<(String, String, String)> = if tool == "list_children" {
                g.children(ix)
                    .map(|(r, c)| {
                        (g.kind_label(&g.node(c).kind).to_string(), g.node(c).name.clone(), r.to_string())
                    })
                    .collect()
            } else {
                g.parents(ix)
                    .map(|(r, c)| {
                        (g.kind_label(&g.node(c).kind).to_string(), g.node(c).name.clone(), r.to_string())
                    })
                    .collect()
            };
            items.sort_unstable_by(|a, b| (&a.1, &a.0, &a.2).cmp(&(&b.1, &b.0, &b.2)));
            let what = if tool == "list_children" { "children" } else { "parents" };
            Ok(edge_list(items, &format!("{what} of {}", label(g, ix))))
        }
        "count_descendants" => {
            let ix = lookup(g, args, "name", "kind")?;
            let dk = get_kind(args, "descendant_kind")?.ok_or("`descendant_kind` is required")?;
            let n = g.count_descendants(ix, &dk);
            Ok((format!("{n} {} below {}", g.kind_label(&dk), label(g, ix)), Some(json!({"count": n}))))
        }
        "capacity" => {
            let ix = lookup(g, args, "name", "kind")?;
            let c = g.capacity(ix);
            Ok((format!("{}: total capacity {c} bps", label(g, ix)), Some(json!({"capacity_bps": c}))))
        }
        other => Err(format!("unknown tool `{other}`")),
    }
}
