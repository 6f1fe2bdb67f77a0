"""mcpx's HTTP/1.1 client (`mcpx/upstream/h1.py`) against httpx and aiohttp: wall time and CPU per
request, on the loop the daemon uses (uvloop when installed).

Each client sends the same keep-alive loop of JSON-RPC POSTs (a `tools/call` of `echo`, as the
daemon sends an upstream) to the fixture upstream over HTTP, in interleaved rounds; CPU is this
process's own (`time.process_time`), so the upstream's work is not counted. aiohttp is not one of
mcpx's dependencies: it is installed once into a cached virtual environment that sees this one's
packages (`~/.cache/mcpx-bench/aiohttp-<version>`), and the aiohttp rounds run from there.

    python bench/http_clients.py [--requests 2000] [--rounds 3]

h1.py stays only while it beats aiohttp (the next best) on CPU per request; the RESULT line says so.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
AIOHTTP = "aiohttp==3.12.15"
CACHE = Path.home() / ".cache" / "mcpx-bench" / AIOHTTP.replace("==", "-")
BODY = json.dumps(
    {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hello"}}}
).encode()
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-11-25",
}


async def _h1(url: str, n: int) -> list[float]:
    from mcpx.upstream.http import h1

    client = h1.Client(url)
    times = []
    try:
        for _ in range(n):
            t = time.perf_counter()
            async with client.stream("POST", HEADERS, BODY) as resp:
                await resp.aread()
            times.append(time.perf_counter() - t)
    finally:
        await client.aclose()
    return times


async def _httpx(url: str, n: int) -> list[float]:
    import httpx

    times = []
    async with httpx.AsyncClient() as client:
        for _ in range(n):
            t = time.perf_counter()
            resp = await client.post(url, content=BODY, headers=HEADERS)
            await resp.aread()
            times.append(time.perf_counter() - t)
    return times


async def _aiohttp(url: str, n: int) -> list[float]:
    import aiohttp

    times = []
    async with aiohttp.ClientSession() as session:
        for _ in range(n):
            t = time.perf_counter()
            async with session.post(url, data=BODY, headers=HEADERS) as resp:
                await resp.read()
            times.append(time.perf_counter() - t)
    return times


CLIENTS = {"h1": _h1, "httpx": _httpx, "aiohttp": _aiohttp}


def one_round(client: str, url: str, n: int) -> dict[str, float]:
    """Run in a child process (`--child`): wall median and CPU per request of `n` requests."""
    import asyncio

    try:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass
    asyncio.run(CLIENTS[client](url, 50))  # warm: connection, imports
    cpu = time.process_time()
    times = asyncio.run(CLIENTS[client](url, n))
    cpu = time.process_time() - cpu
    return {"median_ms": statistics.median(times) * 1000, "cpu_ms": cpu / n * 1000}


def aiohttp_python() -> str | None:
    """A python that has aiohttp (this one, or the cached venv built for it)."""
    try:
        import aiohttp  # noqa: F401 - only whether it is installed

        return sys.executable
    except ImportError:
        pass
    py = CACHE / "bin" / "python"
    if not (CACHE / ".complete").exists():
        try:
            subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(CACHE)], check=True)
            subprocess.run([str(py), "-m", "pip", "install", "-q", AIOHTTP], check=True)
        except subprocess.CalledProcessError:
            return None
        (CACHE / ".complete").touch()
    return str(py)


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(one_round(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    opts = ap.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from harness import FixtureHttp

    pythons = {"h1": sys.executable, "httpx": sys.executable, "aiohttp": aiohttp_python()}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, py in pythons.items() if py}
    with tempfile.TemporaryDirectory() as folder:
        server = FixtureHttp(Path(folder))
        try:
            for _ in range(opts.rounds):
                for name in runs:
                    cmd = [str(pythons[name]), __file__, "--child", name, server.url, str(opts.requests)]
                    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
                    runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
        finally:
            server.stop()
    result: dict[str, Any] = {"bench": "http_clients", "requests": opts.requests, "rounds": opts.rounds}
    print(f"{opts.requests} keep-alive POSTs per round x {opts.rounds} rounds, interleaved (median of rounds)")
    for name, rs in runs.items():
        wall = statistics.median(r["median_ms"] for r in rs)
        cpu = statistics.median(r["cpu_ms"] for r in rs)
        print(f"  {name:8} wall p50 {wall:.3f} ms   CPU {cpu:.3f} ms per request")
        result[name] = {"wall_ms": round(wall, 3), "cpu_ms": round(cpu, 3)}
    if "aiohttp" in result:
        lead = result["aiohttp"]["cpu_ms"] / result["h1"]["cpu_ms"]
        print(
            f"  aiohttp / h1 CPU per request: {lead:.2f}x ({'h1 keeps its place' if lead > 1 else 'aiohttp is ahead'})"
        )
        result["aiohttp_over_h1_cpu"] = round(lead, 2)
    else:
        print("  aiohttp: could not be installed here; not measured")
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
