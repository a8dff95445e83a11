# netdojo's ground truth for NetPress's capacity-planning labels (seed 003 §B.2), as the code a
# model is asked to write: process_graph(graph_data) over the networkx graph. The oracle of
# `cargo xtask eval --interaction code` prepends PARAMS (the graph's keying and the task's
# ground-truth actions, batches opened up), this file, then one LABEL.py, and runs the result
# through the same jail as a model's code. It must score 100% correct and safe; it is an
# implementation independent of netdojo's Rust ground truth (crates/netdojo-dcgraph/src/ops.rs)
# working on the graph as the model sees it.

BY_NAME = PARAMS["keying"] == "name"
HIERARCHY_EDGES = ("RK_CONTAINS", "RK_CONTROLS")

# (relation, parent kind, child kind) the hierarchy allows, kinds without the optional
# underscore of EK_SUPER_BLOCK / EK_SPINE_BLOCK.
ALLOWED = {
    ("RK_CONTAINS", "EK_JUPITER", "EK_SUPERBLOCK"),
    ("RK_CONTAINS", "EK_JUPITER", "EK_SPINEBLOCK"),
    ("RK_CONTAINS", "EK_SUPERBLOCK", "EK_AGG_BLOCK"),
    ("RK_CONTAINS", "EK_SPINEBLOCK", "EK_AGG_BLOCK"),
    ("RK_CONTAINS", "EK_SPINEBLOCK", "EK_PACKET_SWITCH"),
    ("RK_CONTAINS", "EK_AGG_BLOCK", "EK_PACKET_SWITCH"),
    ("RK_CONTAINS", "EK_RACK", "EK_CHASSIS"),
    ("RK_CONTAINS", "EK_CHASSIS", "EK_CONTROL_POINT"),
    ("RK_CONTAINS", "EK_CHASSIS", "EK_PACKET_SWITCH"),
    ("RK_CONTAINS", "EK_CONTROL_DOMAIN", "EK_CONTROL_POINT"),
    ("RK_CONTAINS", "EK_CONTROL_POINT", "EK_PACKET_SWITCH"),
    ("RK_CONTAINS", "EK_PACKET_SWITCH", "EK_PORT"),
    ("RK_CONTROLS", "EK_CONTROL_POINT", "EK_PACKET_SWITCH"),
}

# The attributes that belong to a kind, which go when that kind leaves a shared node.
KIND_ATTRS = {"EK_PACKET_SWITCH": ["switch_loc"], "EK_PORT": ["physical_capacity_bps"]}


def plain(kind):
    return kind.replace("SUPER_BLOCK", "SUPERBLOCK").replace("SPINE_BLOCK", "SPINEBLOCK")


def allowed(rel, parent, child):
    return (rel, plain(parent), plain(child)) in ALLOWED


def kinds(G, n):
    t = G.nodes[n].get("type", [])
    return t if isinstance(t, list) else [t]


def node_id(name, kind):
    return name if BY_NAME else kind + "/" + name


def find(G, name, kind):
    n = node_id(name, kind)
    if n not in G or G.nodes[n].get("name") != name or kind not in kinds(G, n):
        raise KeyError("no %s named %s" % (kind, name))
    return n


def set_path(attrs, path, value):
    *parents, last = path.split(".")
    for p in parents:
        attrs = attrs.setdefault(p, {})
    attrs[last] = value


def add_node(G, name, kind, attributes=None):
    n = node_id(name, kind)
    if n in G:
        G.nodes[n]["type"].append(kind)
    else:
        G.add_node(n, type=[kind], name=name)
    for path, value in (attributes or {}).items():
        set_path(G.nodes[n], path, value)


def add_edge(G, source, source_kind, target, target_kind, relation):
    G.add_edge(node_id(source, source_kind), node_id(target, target_kind), type=relation)


def update_node(G, name, kind, attribute, value):
    set_path(G.nodes[find(G, name, kind)], attribute, value)


def remove_node(G, name, kind):
    n = find(G, name, kind)
    left = [k for k in kinds(G, n) if k != kind]
    if not left:
        G.remove_node(n)
        return
    # A name shared by other kinds stays for them, without what belonged to this kind: its
    # attributes, and the edges the hierarchy no longer allows between the kinds left.
    G.nodes[n]["type"] = left
    for attr in KIND_ATTRS.get(kind, []):
        G.nodes[n].pop(attr, None)
    for u, v in set(G.in_edges(n)) | set(G.out_edges(n)):
        rels = [
            r
            for r in HIERARCHY_EDGES
            if any(allowed(r, a, b) for a in kinds(G, u) for b in kinds(G, v) if not (u == v and a == b))
        ]
        if not rels:
            G.remove_edge(u, v)
        elif G.edges[u, v]["type"] not in rels:
            G.edges[u, v]["type"] = rels[0]


def call_args(call):
    a = call["arguments"]
    tool = call["tool"]
    if tool == "add_node":
        return (a["name"], a["kind"], a.get("attributes"))
    if tool == "add_edge":
        return (a["from"], a["from_kind"], a["to"], a["to_kind"], a["relation"])
    if tool == "remove_node":
        return (a["name"], a["kind"])
    if tool == "update_node":
        return (a["name"], a["kind"], a["attribute"], a["value"])
    return None


MUTATIONS = {"add_node": add_node, "add_edge": add_edge, "remove_node": remove_node, "update_node": update_node}


def apply_mutations(G):
    """The task's changes, in order."""
    for call in PARAMS["actions"]:
        if call["tool"] in MUTATIONS:
            MUTATIONS[call["tool"]](G, *call_args(call))


def query(tool):
    """The arguments of the task's query call."""
    return next(c["arguments"] for c in PARAMS["actions"] if c["tool"] == tool)


def below(G, start, start_kind):
    """The nodes below `start` (as `start_kind`) in the hierarchy, each once, with the kinds that
    count there. A name shared by kinds under one another (a chassis, its control point, its
    switch) is one node: its own kinds below `start_kind` count as below it."""
    own = {start_kind}
    grew = True
    while grew:
        grew = False
        for k in kinds(G, start):
            if k not in own and any(allowed(r, a, k) for r in HIERARCHY_EDGES for a in own):
                own.add(k)
                grew = True
    found = [(start, [k for k in kinds(G, start) if k in own and k != start_kind])]
    seen = {start}
    stack = [start]
    while stack:
        n = stack.pop()
        for _, child, data in G.out_edges(n, data=True):
            if data.get("type") in HIERARCHY_EDGES and child not in seen:
                seen.add(child)
                found.append((child, kinds(G, child)))
                stack.append(child)
    return found


def count_below(G, name, kind, descendant_kind):
    start = find(G, name, kind)
    return sum(1 for _, ks in below(G, start, kind) if descendant_kind in ks)


def capacity(G, n, kind):
    total = 0
    for node, ks in below(G, n, kind):
        if "EK_PORT" in ks or (node == n and "EK_PORT" in kinds(G, n) and kind == "EK_PORT"):
            total += G.nodes[node].get("physical_capacity_bps", 0)
    return total


def children(G, name, kind):
    """The direct RK_CONTAINS children: (node, the kind it is contained as)."""
    n = find(G, name, kind)
    out = []
    for _, child, data in G.out_edges(n, data=True):
        if data.get("type") != "RK_CONTAINS" or child == n:
            continue
        as_kind = next((k for k in kinds(G, child) if allowed("RK_CONTAINS", kind, k)), kinds(G, child)[0])
        out.append((child, as_kind))
    return out


def list_children(G, name, kind):
    return sorted(G.nodes[c]["name"] for c, _ in children(G, name, kind))


def rank_children(G, name, kind):
    rows = [[G.nodes[c]["name"], capacity(G, c, k)] for c, k in children(G, name, kind)]
    rows.sort(key=lambda r: (-r[1], r[0]))
    return rows


def graph_json(G):
    return nx.readwrite.json_graph.node_link_data(G, edges="links")
