"""`mcpx serve`: a stdio MCP server for hosts that spawn processes, relaying to the daemon.

The shim holds no MCP state: each stdin line goes to the daemon over one websocket and each frame
from the daemon becomes one stdout line, so calls (and later tasks) outlive the host process.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
import websockets
from websockets.asyncio.client import connect


async def relay(port: int, token: str) -> int:
    url = f"ws://127.0.0.1:{port}/v1/stdio"
    headers = {"Authorization": f"Bearer {token}", "X-Mcpx-Shim-Pid": str(os.getpid())}
    out = sys.stdout.buffer
    try:
        ws = await connect(url, additional_headers=headers, max_size=None, ping_interval=20, open_timeout=10)
    except (OSError, websockets.WebSocketException) as exc:
        print(f"mcpx serve: cannot reach the daemon at {url}: {exc}", file=sys.stderr)
        return 1
    code = 0
    async with ws, anyio.create_task_group() as tg:

        async def downstream() -> None:
            nonlocal code
            try:
                async for frame in ws:
                    text = frame if isinstance(frame, str) else frame.decode()
                    out.write(text.encode() + b"\n")
                    out.flush()
            except websockets.ConnectionClosed:
                pass
            if not stdin_done:
                print("mcpx serve: the daemon closed the connection", file=sys.stderr)
                code = 1
            tg.cancel_scope.cancel()

        stdin_done = False
        tg.start_soon(downstream)
        while True:
            line: bytes = await anyio.to_thread.run_sync(sys.stdin.buffer.readline, abandon_on_cancel=True)
            if not line:
                break
            text = line.decode("utf-8", errors="replace").strip()
            if not text:
                continue
            try:
                await ws.send(text)
            except websockets.ConnectionClosed:
                break
        stdin_done = True
        # EOF from the host: give in-flight replies a moment, then close.
        with anyio.move_on_after(0.5):
            await anyio.sleep(0.5)
        await ws.close()
        tg.cancel_scope.cancel()
    return code


