"""What one call costs in the official Python MCP SDK client, which validates
every structured result against the tool's outputSchema: `process_list` with
five processes against `process_write`, interleaved, medians of ROUNDS each.
Prints one JSON object; the Rust test that runs this file checks the ratio.

Usage: python cost.py /path/to/portal-shim   (PORTAL_SOCKET etc. in the environment)
"""

import json
import os
import statistics
import sys
import time

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

# Enough calls for a stable median on a busy 2-core machine, few enough to
# take about a second.
ROUNDS = 60


async def main(shim: str) -> None:
    # The SDK passes a server only a few variables of its own (HOME, PATH…):
    # the socket to use, and that none may be started, are handed on, or the
    # shim would start a daemon of its own at HOME's default socket.
    env = {k: v for k, v in os.environ.items() if k.startswith("PORTAL_")}
    params = StdioServerParameters(command=shim, env={**env, "PORTAL_LOG": "warn"})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        ids = []
        for i in range(5):
            r = await session.call_tool("process_start", {"command": "cat", "name": f"cost-{i}"})
            assert not r.is_error, r
            ids.append(r.structured_content["process"]["id"])
        times = {"process_list": [], "process_write": []}
        for _ in range(ROUNDS):
            for name, args in (("process_list", {}), ("process_write", {"id": ids[0], "content": "x\n"})):
                t = time.perf_counter()
                r = await session.call_tool(name, args)
                times[name].append(time.perf_counter() - t)
                assert not r.is_error, r
        r = await session.call_tool("process_list", {})
        listed = len(r.structured_content["processes"])
        for i in ids:
            await session.call_tool("process_kill", {"id": i})
        list_ms = statistics.median(times["process_list"]) * 1000
        write_ms = statistics.median(times["process_write"]) * 1000
        print(json.dumps({"processes": listed, "rounds": ROUNDS, "list_ms": list_ms, "write_ms": write_ms, "ratio": list_ms / write_ms}))


anyio.run(main, sys.argv[1])
