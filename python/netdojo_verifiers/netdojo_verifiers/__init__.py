"""netdojo's environments as a verifiers taskset: each task is an episode of a running
`cargo xtask serve-env`, played over its WebSocket (OpenEnv's protocol, docs/training.md).

    vf-eval netdojo-verifiers --env.taskset.base-url http://127.0.0.1:8000 \
        --env.taskset.resets '[{"index": 0}, {"index": 1}]' -m MODEL --client.base-url URL

The model reads the brief and the tools, and answers each turn with one JSON action
`{"tool_name": NAME, "arguments": {...}}`; the observation comes back as the next user turn, and
the episode's rewards (the final one: the episode's correctness) are summed into
`netdojo_reward`. It speaks the WebSocket directly rather than through `openenv`'s client
(verifiers' own OpenEnv taskset): `openenv` >= 0.4.1 and verifiers 0.4.0 pin incompatible `mcp`
versions.
"""

import json
from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf
from pydantic import Field
from websockets.asyncio.client import connect

__all__ = ["NetdojoConfig", "NetdojoData", "NetdojoEnv", "NetdojoEnvConfig", "NetdojoTask", "NetdojoTaskset"]


class NetdojoData(vf.TaskData):
    base_url: str
    reset: dict[str, Any]


class NetdojoConfig(vf.TasksetConfig):
    base_url: str = "http://127.0.0.1:8000"
    """The `serve-env` server (its printed URL)."""
    resets: list[dict[str, Any]] = Field(default_factory=lambda: [{"index": i} for i in range(5)])
    """One task per reset: `{"task_id": ...}`, `{"index": N}` or `{"seed": N}`."""


class NetdojoTask(vf.Task[NetdojoData]):
    pass


class NetdojoEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


class ServerError(RuntimeError):
    pass


async def request(ws, message: dict[str, Any]) -> dict[str, Any]:
    await ws.send(json.dumps(message))
    answer = json.loads(await ws.recv())
    if answer.get("type") == "error":
        data = answer.get("data", {})
        raise ServerError(f"{data.get('code')}: {data.get('message')}")
    return answer.get("data", {})


def parse_action(reply: str) -> dict[str, Any]:
    """The model's reply as a tool call: a JSON object (fenced or not) with `tool_name` and
    `arguments`. Anything else is sent as a call of a tool named by the reply, which the server
    refuses as a failed step (the model's error, never the episode's)."""
    text = reply.strip()
    if text.startswith("```") and text.endswith("```"):
        text = "\n".join(text.splitlines()[1:-1]).strip()
    try:
        action = json.loads(text)
    except json.JSONDecodeError:
        action = None
    if isinstance(action, dict) and isinstance(action.get("tool_name"), str):
        arguments = action.get("arguments")
        return {"tool_name": action["tool_name"], "arguments": arguments if isinstance(arguments, dict) else {}}
    return {"tool_name": text[:200] or "(empty)", "arguments": {}}


INSTRUCTIONS = (
    'Answer each turn with exactly one JSON object: {"tool_name": NAME, "arguments": {...}}. '
    "Call `finish` when the task is done."
)


def schema_text(schema: dict[str, Any]) -> str:
    """A JSON Schema as a short type expression: `integer 1..200`, `string|boolean`,
    `[{tool: string, ...}, ...]`. A construct it does not shorten is given as JSON."""
    if "enum" in schema:
        return "|".join(json.dumps(value) for value in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list) and all(isinstance(k, str) for k in kind):
        text = "|".join(kind)
    elif kind == "array" and isinstance(schema.get("items"), dict):
        text = f"[{schema_text(schema['items'])}, ...]"
    elif kind == "object" and isinstance(schema.get("properties"), dict):
        text = "{" + arguments_text(schema) + "}"
    elif isinstance(kind, str):
        text = kind
    else:
        return json.dumps(schema, ensure_ascii=False)
    low, high = schema.get("minimum", schema.get("minItems")), schema.get("maximum", schema.get("maxItems"))
    if low is not None or high is not None:
        text += f" {'' if low is None else low}..{'' if high is None else high}"
    return text


def arguments_text(schema: dict[str, Any]) -> str:
    required = set(schema.get("required") or [])
    parts = []
    for name, prop in (schema.get("properties") or {}).items():
        prop = prop if isinstance(prop, dict) else {}
        part = f"{name}{'' if name in required else '?'}: {schema_text(prop)}"
        description = prop.get("description")
        parts.append(f"{part} ({description})" if description else part)
    return ", ".join(parts)


def tools_text(tools: list[dict[str, Any]]) -> str:
    """The task's tools, one line each: `- name(argument: type (description), optional?: type):
    description`. Not their JSON Schemas: the `chatml-function-calling` chat format of
    llama-cpp-python 0.3.36 (CI's model server) HTML-escapes messages, each quote becomes `&#34;`,
    and the JSON of dcgraph's 13 tools reads to SmolLM2 as 4,971 tokens; these lines as 1,349."""
    lines = []
    for tool in tools:
        schema = tool.get("input_schema")
        arguments = arguments_text(schema) if isinstance(schema, dict) else ""
        lines.append(f"- {tool.get('name')}({arguments}): {tool.get('description', '')}")
    return "\n".join(lines)


def first_turn(info: dict[str, Any]) -> str:
    """The instructions and the tools before the brief: what every task of a server shares comes
    first, so a server that caches its last prompt (llama.cpp) reads only the rest again."""
    tools = tools_text(info.get("tools", []))
    return (
        f"{INSTRUCTIONS}\n\nTools (`?`: optional argument):\n{tools}\n\n{info.get('brief', '')}"
    )


def next_turn(step: dict[str, Any]) -> str:
    """The call's result as eval's text protocol gives it (netdojo-llm's `[TOOL ok|failed]`
    header, then the text the environment answered)."""
    observation = step.get("observation", {})
    result = observation.get("result") or {}
    status = "failed" if result.get("is_error") else "ok"
    return f"[{observation.get('tool_name', '')} {status}]\n{result.get('data', '')}"


class NetdojoEnv(vf.Env[NetdojoEnvConfig]):
    async def run(self, task, agents):
        data = task.data
        url = data.base_url.rstrip("/").replace("http://", "ws://", 1) + "/ws"
        total = 0.0
        async with connect(url, max_size=16 << 20) as ws:
            reset = await request(ws, {"type": "reset", "data": data.reset})
            info = reset.get("observation", {}).get("metadata", {})
            done = False
            async with agents.player.interaction(task) as interaction:
                segment = await interaction.turn(first_turn(info))
                while not segment.terminated and not done:
                    reply = segment.last_reply.strip()
                    if not reply:
                        interaction.trace.stop("empty_action")
                        break
                    step = await request(ws, {"type": "step", "data": {"type": "call_tool", **parse_action(reply)}})
                    total += step.get("reward") or 0.0
                    done = bool(step.get("done"))
                    if done:
                        break
                    # Past verifiers' own cap (`--env.player.max-turns`) the segment comes back
                    # terminated: the session's close below ends the episode, and the server
                    # scores it as the model left it.
                    segment = await interaction.turn(next_turn(step))
            await ws.send(json.dumps({"type": "close"}))
        interaction.trace.record_reward("netdojo_reward", total)


class NetdojoTaskset(vf.Taskset[NetdojoTask, NetdojoConfig]):
    def load(self) -> Iterator[NetdojoTask]:
        for idx, reset in enumerate(self.config.resets):
            yield NetdojoTask(
                NetdojoData(
                    name=f"netdojo#{idx}",
                    prompt=None,
                    base_url=self.config.base_url,
                    reset=reset,
                ),
                self.config.task,
            )
