"""Timed `tools/call` loop on the official `mcp` SDK 2.3 client (`mcp.Client`), for proxy_overhead.py.

Runs with the SDK 2.3 peer venv's python (tests/peers/venvs.py builds it), never mcpx's own:

    <peer python> bench/sdk_client.py --url URL --mode legacy|2026-07-28 --tool NAME [--clients K]
    <peer python> bench/sdk_client.py --mode MODE --tool NAME [--env NAME=VALUE] -- CMD ARGS...   (stdio)

It connects K clients (each its own `mcp.Client` and HTTP connection pool), prints one line
`{"ready": true, "protocolVersion": ...}`, then serves commands from stdin, one a line:

    run N     every client makes N sequential calls, all K at once; prints one JSON line
              {"wall": seconds, "times": [per-call seconds, ...]}
    quit      disconnect and exit

so the caller can interleave rounds of this client with rounds of another without paying the SDK's
import and connect time in the measurement.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import AsyncExitStack

import anyio
from mcp import Client, StdioServerParameters
from mcp_types import Implementation


async def _calls(client: Client, tool: str, n: int, times: list[float]) -> None:
    for i in range(n):
        started = time.perf_counter()
        result = await client.call_tool(tool, {"text": f"t{i}"})
        times.append(time.perf_counter() - started)
        if result.is_error:
            raise RuntimeError(f"{tool} failed: {result}")


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", help="the server's URL (HTTP); without it, the command after -- over stdio")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for the spawned command (stdio)")
    ap.add_argument("command", nargs="*", help="the stdio server's command line (after --)")
    ap.add_argument("--mode", default="legacy")
    ap.add_argument("--tool", default="echo")
    ap.add_argument("--clients", type=int, default=1)
    args = ap.parse_args()
    info = Implementation(name="mcpx-bench", version="0")
    server: str | StdioServerParameters = args.url
    if not args.url:  # spawned by the SDK as IDE hosts do; it passes on only the variables given here
        env = dict(item.split("=", 1) for item in args.env)
        server = StdioServerParameters(command=args.command[0], args=args.command[1:], env=env or None)
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(Client(server, mode=args.mode, client_info=info, cache=None))
            for _ in range(args.clients)
        ]
        print(json.dumps({"ready": True, "protocolVersion": clients[0].protocol_version}), flush=True)
        while True:
            line = (await anyio.to_thread.run_sync(sys.stdin.readline)).split()
            if not line or line[0] == "quit":
                break
            n = int(line[1])
            times: list[float] = []
            started = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for client in clients:
                    tg.start_soon(_calls, client, args.tool, n, times)
            print(json.dumps({"wall": time.perf_counter() - started, "times": times}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
