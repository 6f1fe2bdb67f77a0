"""`mcpx serve`: a stdio MCP server for hosts that spawn processes, relaying to the daemon.

The shim holds no MCP state: each stdin line goes to the daemon over one websocket and each frame
from the daemon becomes one stdout line, so calls (and later tasks) outlive the host process.
"""

from __future__ import annotations

import os
import sys
import threading

import anyio
import websockets
from anyio.from_thread import BlockingPortal
from anyio.streams.memory import MemoryObjectSendStream
from websockets.asyncio.client import connect

from ..connections import naming


def _pump_stdin(portal: BlockingPortal, send: MemoryObjectSendStream[bytes]) -> None:
    """Blocking stdin reads, in a daemon thread feeding the relay one line at a time.

    Not anyio.to_thread: its worker threads are not daemon threads, so one blocked in readline()
    kept the process alive after the daemon had gone, until the host closed stdin (a host waiting
    for a reply never does, so it hung until its own timeout). And os.read on the fd, not
    sys.stdin.buffer: a daemon thread blocked inside the buffered reader holds its lock, and the
    interpreter aborts at exit when it cannot take that lock to close stdin.
    """
    fd = sys.stdin.fileno()
    buf = b""
    try:
        while chunk := os.read(fd, 65536):
            *lines, buf = (buf + chunk).split(b"\n")
            for line in lines:
                portal.call(send.send, line)
        if buf:
            portal.call(send.send, buf)
        portal.call(send.close)  # EOF from the host
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, RuntimeError, OSError):
        return  # the relay is over (RuntimeError: its portal has stopped)


async def relay(port: int, token: str) -> int:
    url = f"ws://127.0.0.1:{port}/v1/stdio"
    headers = {"Authorization": f"Bearer {token}", "X-Mcpx-Shim-Pid": str(os.getpid())}
    # Who the operator sees: the host that spawned this shim, or the name it was given.
    label, process = os.environ.get(naming.LABEL_ENV), naming.parent_label()
    if label:
        headers[naming.LABEL_HEADER] = naming.to_header(label)
    if process:
        headers[naming.PROCESS_HEADER] = naming.to_header(process)
    out = sys.stdout.buffer
    try:
        ws = await connect(url, additional_headers=headers, max_size=None, ping_interval=20, open_timeout=10)
    except (OSError, websockets.WebSocketException) as exc:
        print(f"mcpx serve: cannot reach the daemon at {url}: {exc}", file=sys.stderr)
        return 1
    code = 0
    lines_tx, lines_rx = anyio.create_memory_object_stream[bytes](16)
    async with ws, BlockingPortal() as portal, anyio.create_task_group() as tg:

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
        threading.Thread(target=_pump_stdin, args=(portal, lines_tx), name="mcpx-serve-stdin", daemon=True).start()
        async with lines_rx:  # closed on the way out, so a pump blocked in send() gets out
            async for line in lines_rx:
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
