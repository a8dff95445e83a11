"""Replays plans through openenv-core's MCPToolClient (unmodified) against `cargo xtask serve-env`.

usage: python openenv_client.py URL PLANS.json WORKERS

PLANS.json: [{"task_id": ID, "calls": [{"name": TOOL, "arguments": {...}}, ...]}, ...]. Each of
WORKERS clients (one WebSocket session each) plays its share of the plans, one episode per reset.
Prints one JSON line per episode: its rewards, done, the info of its last step and the state.
"""

import asyncio
import json
import sys

from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.mcp_client import MCPToolClient


async def episode(env, plan):
    reset = await env.reset(task_id=plan["task_id"])
    meta = reset.observation.metadata
    assert meta["task_id"] == plan["task_id"], meta
    assert not reset.done and reset.reward is None, reset
    tools = {t.name for t in await env.list_tools(use_cache=False)}
    assert "finish" in tools, tools
    rewards, last = [], None
    for i, call in enumerate(plan["calls"]):
        assert call["name"] in tools, (call["name"], tools)
        if i == 0 and call["name"] != "finish" and "name" not in call["arguments"]:
            # The client's convenience path: returns the tool result's text. (Its own first
            # parameter is `name`: a tool argument of that name needs `step`.)
            text = await env.call_tool(call["name"], **call["arguments"])
            assert isinstance(text, str), text
            state = await env.state()
            assert state.step_count == 1, state
            continue
        last = await env.step(CallToolAction(tool_name=call["name"], arguments=call["arguments"]))
        assert isinstance(last.observation, CallToolObservation), last
        rewards.append(last.reward)
        if last.done:
            break
    state = await env.state()
    return {
        "task_id": plan["task_id"],
        "episode_id": meta["episode_id"],
        "rewards": rewards,
        "reward": last.reward if last else None,
        "done": bool(last and last.done),
        "info": last.observation.metadata if last else None,
        "state": {"episode_id": state.episode_id, "step_count": state.step_count},
    }


async def worker(url, plans, out):
    async with MCPToolClient(base_url=url) as env:
        for plan in plans:
            out.append(await episode(env, plan))


async def main(url, plans, workers):
    out = []
    shares = [plans[i::workers] for i in range(workers)]
    await asyncio.gather(*(worker(url, share, out) for share in shares if share))
    for line in out:
        print(json.dumps(line))


if __name__ == "__main__":
    url, path, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(path) as f:
        asyncio.run(main(url, json.load(f), workers))
