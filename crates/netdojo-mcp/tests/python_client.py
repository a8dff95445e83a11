"""The official MCP Python SDK as a client of netdojo-mcp: initialize, list the tools, run a
show command, be refused a change (the server runs with the read-only role). Prints one JSON object for the Rust test to check."""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.shared.exceptions import McpError
from mcp.client.streamable_http import streamablehttp_client


async def main(url: str, command: str) -> None:
    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            caps = init.capabilities.model_dump(by_alias=True, exclude_none=True)
            tools = await session.list_tools()
            result = await session.call_tool("network.cli.exec", {"command": command})
            try:
                await session.call_tool("network.cli.configure", {"commands": ["ip route 9.9.9.0/24 10.0.12.2"]})
                refused_code = None
            except McpError as e:
                refused_code = e.error.code
            print(json.dumps({
                "protocol": init.protocolVersion,
                "server": init.serverInfo.name,
                "network": caps.get("network"),
                "tools": [t.name for t in tools.tools],
                "schemas": {t.name: t.inputSchema for t in tools.tools},
                "exec_is_error": result.isError,
                "exec_text": "".join(c.text for c in result.content if c.type == "text"),
                "configure_refused_code": refused_code,
            }))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
