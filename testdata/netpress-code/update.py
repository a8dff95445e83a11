def process_graph(graph_data):
    G = copy.deepcopy(graph_data)
    apply_mutations(G)
    return {"type": "graph", "data": graph_json(G), "updated_graph": graph_json(G)}
