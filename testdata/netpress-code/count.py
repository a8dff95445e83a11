def process_graph(graph_data):
    G = copy.deepcopy(graph_data)
    apply_mutations(G)
    q = query("count_descendants")
    n = count_below(G, q["name"], q["kind"], q["descendant_kind"])
    return {"type": "text", "data": str(n), "updated_graph": graph_json(G)}
