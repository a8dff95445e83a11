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
    max_turns: int


class NetdojoConfig(vf.TasksetConfig):
    base_url: str = "http://127.0.0.1:8000"
    """The `serve-env` server (its printed URL)."""
    resets: list[dict[str, Any]] = Field(default_factory=lambda: [{"index": i} for i in range(5)])
    """One task per reset: `{"task_id": ...}`, `{"index": N}` or `{"seed": N}`."""
    max_turns: int = Field(10, ge=1)
    """Model turns per episode; an episode still going after them is ended (and scored) by
    closing its session."""


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


def first_turn(info: dict[str, Any]) -> str:
    tools = json.dumps(info.get("tools", []), ensure_ascii=False)
    return (
        f"{info.get('brief', '')}\n\nTools (JSON Schema of each one's arguments): {tools}\n\n"
        'Answer each turn with exactly one JSON object: {"tool_name": NAME, "arguments": {...}}. '
        "Call `finish` when the task is done."
    )


def next_turn(step: dict[str, Any]) -> str:
    observation = step.get("observation", {})
    result = observation.get("result") or {}
    prefix = "error: " if result.get("is_error") else ""
    return f"{prefix}{result.get('data', '')}"


class NetdojoEnv(vf.Env[NetdojoEnvConfig]):
    async def run(self, task, agents):
        data = task.data
        url = data.base_url.rstrip("/").replace("http://", "ws://", 1) + "/ws"
        total = 0.0
        async with connect(url, max_size=16 << 20) as ws:
            reset = await request(ws, {"type": "reset", "data": data.reset})
            info = reset.get("observation", {}).get("metadata", {})
            done, turns = False, 1
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
                    if done or turns >= data.max_turns:
                        break
                    turns += 1
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
                    max_turns=self.config.max_turns,
                ),
                self.config.task,
            )
