"""Runs a model's NetPress code (seed 003 §B.3) on one graph and prints what it returned.

netdojo starts this inside netdojo-jail (profile `code`): no network, a read-only filesystem
but a private /tmp, no capabilities, no new processes, CPU and memory limits, and a wall-clock
limit that kills the whole process group. It reads one JSON object on stdin:
  {"graph": <networkx node-link data>, "code": "<python source defining process_graph>"}
and writes one JSON object as the last line of stdout:
  {"latency_s": float, "error": "<traceback>"}                               when the code failed
  {"latency_s": float, "type": ..., "data": ..., "updated_graph": <node-link or null>,
   "printed": "<what the code printed>"}                                   otherwise
Latency is what NetPress measured: exec of the code plus process_graph(copy.deepcopy(G)).
"""

import copy
import io
import json
import sys
import time
import traceback
import warnings

import networkx as nx
from networkx.readwrite import json_graph

# node_link_data without `edges=` warns about a future default; the prompt tells models to
# call it that way, and the key it writes ("links") is the one read back.
warnings.simplefilter("ignore", FutureWarning)

PRINTED_CAP = 4000


def node_link(value):
    """A graph (or node-link data) as node-link data, or None when it is neither."""
    if isinstance(value, nx.Graph):
        return json_graph.node_link_data(value, edges="links")
    if isinstance(value, dict) and "nodes" in value:
        return value
    return None


def jsonable(value):
    """The value as JSON can hold it: graphs as node-link data, tuples and sets as lists,
    anything else as its repr (NetPress logged such outputs with str())."""
    if isinstance(value, nx.Graph):
        return node_link(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return jsonable(value.item())
    return repr(value)


def main():
    request = json.load(sys.stdin)
    graph = json_graph.node_link_graph(request["graph"], directed=True, multigraph=False, edges="links")
    stdout = sys.stdout
    captured = io.StringIO()
    sys.stdout = sys.stderr = captured
    namespace = {"nx": nx, "networkx": nx, "json": json, "copy": copy, "json_graph": json_graph}
    started = time.perf_counter()
    result = {}
    try:
        exec(compile(request["code"], "<model code>", "exec"), namespace)
        process_graph = namespace.get("process_graph")
        if not callable(process_graph):
            raise NameError("the code defines no function process_graph(graph_data)")
        ret = process_graph(copy.deepcopy(graph))
        latency = time.perf_counter() - started
        # NetPress: a string is read as JSON.
        if isinstance(ret, str):
            try:
                ret = json.loads(ret)
            except ValueError:
                raise ValueError("process_graph returned a string that is not JSON") from None
        if not isinstance(ret, dict) or "type" not in ret or "data" not in ret:
            raise TypeError(
                "process_graph must return a dict with the keys 'type', 'data' and 'updated_graph', got "
                + repr(ret)[:300]
            )
        result = {
            "latency_s": latency,
            "type": jsonable(ret["type"]),
            "data": jsonable(ret["data"]),
            "updated_graph": node_link(ret.get("updated_graph")),
        }
        if result["updated_graph"] is None and ret["type"] == "graph":
            result["updated_graph"] = node_link(ret["data"])
    except BaseException:  # SystemExit and KeyboardInterrupt are the code's failures too
        result = {"latency_s": time.perf_counter() - started, "error": traceback.format_exc(limit=-8)}
    sys.stdout = stdout
    printed = captured.getvalue()
    result["printed"] = printed[-PRINTED_CAP:]
    try:
        line = json.dumps(result)
    except (TypeError, ValueError) as e:
        line = json.dumps({"latency_s": result.get("latency_s", 0.0), "error": "the result is not JSON: %s" % e})
    stdout.write("\n" + line + "\n")
    stdout.flush()


if __name__ == "__main__":
    main()
