def process_graph(graph_data):
    G = copy.deepcopy(graph_data)
    apply_mutations(G)
    q = query("list_children")
    return {"type": "table", "data": rank_children(G, q["name"], q["kind"]), "updated_graph": graph_json(G)}
