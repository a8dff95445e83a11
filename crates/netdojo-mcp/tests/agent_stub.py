"""A misbehaving `netdojo.agent` server on stdio, for the error paths of tests/agent.rs only
(the protocol's real server is `netdojo-mcp serve-agent`). MODE (argv[1]):

- exit:      answers the handshake and `netdojo.agent.start`, then exits at the first step
- garbage:   its first step answers prose instead of a turn, its second calls `finish`
- hang:      never answers a step
- error:     answers a step with a tool error (isError), as an agent whose model is down
- not-agent: has no `netdojo.agent.*` tools
"""

import json
import sys

MODE = sys.argv[1]
STEPS = 0


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def result(rid, value):
    send({"jsonrpc": "2.0", "id": rid, "result": value})


def text(rid, body, is_error=False, structured=None):
    answer = {"content": [{"type": "text", "text": body}], "isError": is_error}
    if structured is not None:
        answer["structuredContent"] = structured
    result(rid, answer)


for line in sys.stdin:
    if not line.strip():
        continue
    message = json.loads(line)
    rid = message.get("id")
    method = message.get("method")
    if rid is None:
        continue  # a notification
    if method == "initialize":
        result(rid, {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "agent-stub", "version": "0"},
        })
    elif method == "tools/list":
        names = ["other.tool"] if MODE == "not-agent" else [
            "netdojo.agent.start", "netdojo.agent.step", "netdojo.agent.end"]
        result(rid, {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in names]})
    elif method == "tools/call":
        name = message["params"]["name"]
        if name == "netdojo.agent.start":
            text(rid, "{}", structured={"episode": "e1"})
        elif name == "netdojo.agent.end":
            text(rid, "{}", structured={})
        elif name == "netdojo.agent.step":
            STEPS += 1
            if MODE == "exit":
                sys.stderr.write("agent-stub: giving up\n")
                sys.stderr.flush()
                sys.exit(3)
            elif MODE == "hang":
                continue
            elif MODE == "error":
                text(rid, "the model server is unreachable", is_error=True)
            elif MODE == "garbage" and STEPS == 1:
                text(rid, "I would configure the network now.")
            else:
                turn = {"reasoning": "done", "calls": [{"id": "f", "name": "finish", "arguments": {}}]}
                text(rid, json.dumps(turn), structured=turn)
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "unknown tool"}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no such method"}})
