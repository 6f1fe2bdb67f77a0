"""`mcpx demo`: the daemon with the bundled example upstream, exercised by a modern and a legacy host."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

from ..config.model import parse_config
from ..daemon.root import Daemon
from .host_client import HttpHost


async def _show(url: str) -> None:
    for era in ("modern", "legacy"):
        async with HttpHost(url, era) as host:
            print(f"\n— a {era} host ({host.revision}) —")
            tools = await host.request("tools/list")
            print("tools:", ", ".join(t["name"] for t in tools["tools"]))
            res = await host.request(
                "tools/call", {"name": "demo__echo", "arguments": {"text": f"hello from a {era} host"}}
            )
            print("demo__echo →", res["content"][0]["text"])

            async def progress(note: dict[str, Any]) -> None:
                p = note.get("params", {})
                print(f"  progress {p.get('progress')}/{p.get('total')}: {p.get('message')}")

            res = await host.request(
                "tools/call",
                {"name": "demo__countdown", "arguments": {"n": 3}, "_meta": {"progressToken": "demo"}},
                progress,
            )
            print("demo__countdown →", res["content"][0]["text"])


def run_demo(once: bool, port: int) -> int:
    config = parse_config(
        {"mcpServers": {"demo": {"command": sys.executable, "args": ["-m", "mcpx.demo.upstream"]}}}, "(demo)"
    )
    with tempfile.TemporaryDirectory(prefix="mcpx-demo-") as folder:
        daemon = Daemon(config, None, Path(folder), port)

        async def main() -> None:
            async with anyio.create_task_group() as tg:
                ready = anyio.Event()
                box: dict[str, int] = {}

                def on_ready(p: int) -> None:
                    box["port"] = p
                    ready.set()

                tg.start_soon(daemon.run, on_ready)
                await ready.wait()
                url = f"http://127.0.0.1:{box['port']}/mcp"
                print(f"mcpx daemon on {url} with the bundled example upstream 'demo' (a 2025-11-25 stdio server)")
                await daemon.pool.wait_started()
                await _show(url)
                if once:
                    daemon.stop()
                    return
                print(
                    f"\nServing on {url} — point a host at it (HTTP), or spawn `mcpx serve --state-dir {folder}` (stdio). Ctrl-C stops."
                )

        try:
            anyio.run(main)
        except KeyboardInterrupt:
            pass
    return 0
