"""Store scale: `tasks/get` latency (p50, p99) and the daemon's RSS with 1k, 10k and 100k stored tasks.

One daemon per size runs at the same time (each its own state folder and SQLite file, each with a
stdio fixture upstream), and rounds of `tasks/get` go to each in turn, so machine noise falls on
every size alike. Each `tasks/get` asks for a random one of that daemon's stored tasks, over one
2025-11-25 session (the session that owns them), with call_latency.py's keep-alive raw client.

How the tasks get there (the honest fast way): populating 100k through the wire would take minutes,
so each store is filled before its daemon starts for the measurement, with mcpx's own store code:

1. the daemon starts on an empty state folder; a 2025-11-25 host opens a session and creates one
   real `echo` task through the wire (`tools/call` + `task`), collects its result (`tasks/result`),
   and the daemon stops (SIGTERM). That task row is the template: real owner (the session), real
   connection record, real result body, real TTL.
2. `mcpx.store.sqlite.SqliteStore` opens that file (the real schema and migrations) and
   `put_task` writes size-1 copies of the template, each with a fresh `new_task_id()`, its own
   arguments/result text and an earlier `created_ms`, together with the events a real task leaves
   (`changes.transition`: `task.created` and `task.status` working -> completed), through the
   store's single batching writer, many writes in flight at once (as many hosts would).
3. the daemon restarts on that folder; the same session (stored in the `sessions` table) reads.

So the rows, indexes and events table are what the daemon itself writes; only the upstream round
trip of each copy is skipped. RSS is VmRSS (and the peak, VmHWM) from /proc/<pid>/status of each
daemon after its reads.

    python bench/store_scale.py [--sizes 1000,10000,100000] [--gets 300] [--rounds 3]

Targets: p50 at each size within +-20 % of 1k's; RSS at 100k <= 120 MB.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from call_latency import RawClient
from harness import LEGACY, SQLITE, Daemon, RawHost, stdio_server

from mcpx.records.task import COMPLETED, WORKING, new_task_id
from mcpx.store.sqlite import SqliteStore
from mcpx.tasks import changes


def rss_kb(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def template(daemon: Daemon) -> tuple[str, str]:
    """One real task through the wire; returns (session id, task id)."""
    host = RawHost(daemon.url)
    host.initialize()
    frame = host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "template"}, "task": {}}).json()
    task_id = frame["result"]["task"]["taskId"]
    done = host.legacy("tasks/result", {"taskId": task_id}).json()
    assert "result" in done, done
    host.close()
    assert host.session_id
    return host.session_id, task_id


async def populate(db: Path, template_id: str, count: int, inflight: int = 512) -> list[str]:
    """`count` copies of the template task through SqliteStore.put_task, with their events."""
    store = SqliteStore(db)
    await store.open()
    ids: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.run_writer)
        base = await store.get_task(template_id)
        assert base is not None and base.status == COMPLETED, base
        limiter = anyio.CapacityLimiter(inflight)

        async def put(i: int) -> None:
            async with limiter:
                text = f"copy {i}"
                created = base.created_ms - (count - i)  # older than the template, one ms apart
                result = {"content": [{"type": "text", "text": text}], "isError": False}
                working = replace(
                    base,
                    id=new_task_id(),
                    status=WORKING,
                    created_ms=created,
                    updated_ms=created,
                    arguments={"text": text},
                    result=None,
                    status_message=None,
                )
                done = working.move(COMPLETED, created + 1, result=result)
                events = [*changes.transition(None, working), *changes.transition(working, done)]
                await store.put_task(done, events)
                ids.append(done.id)

        async with anyio.create_task_group() as puts:
            for i in range(count):
                puts.start_soon(put, i)
        await store.close()
        tg.cancel_scope.cancel()
    return ids


def gets(client: RawClient, ids: list[str], n: int, rng: random.Random) -> list[float]:
    times = []
    for i in range(n):
        task_id = rng.choice(ids)
        msg = {"jsonrpc": "2.0", "id": i, "method": "tasks/get", "params": {"taskId": task_id}}
        started = time.perf_counter()
        reply = client.post(msg, {})
        times.append(time.perf_counter() - started)
        assert reply.get("result", {}).get("taskId") == task_id, reply
    return times


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000", help="stored task counts, comma-separated")
    ap.add_argument("--gets", type=int, default=300, help="tasks/get per size per round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rng = random.Random(7)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="mcpx-store-bench-") as folder:
        tmp = Path(folder)
        daemons: dict[int, Daemon] = {}
        clients: dict[int, RawClient] = {}
        ids: dict[int, list[str]] = {}
        try:
            for size in sizes:
                config = {"mcpServers": {"fx": stdio_server(tmp, name=f"fx{size}")}}
                d = Daemon(tmp, config, name=f"d{size}", store=SQLITE, wire_log=False)
                d.start()
                session, first = template(d)
                d.stop()
                started = time.perf_counter()
                ids[size] = [first, *anyio.run(populate, d.state_dir / "mcpx.db", first, size - 1)]
                took = time.perf_counter() - started
                print(f"{size} tasks stored ({size - 1} through SqliteStore.put_task in {took:.1f} s)", flush=True)
                d.start()
                daemons[size] = d
                clients[size] = RawClient(d.port, {"Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY})
            times: dict[int, list[float]] = {s: [] for s in sizes}
            for s in sizes:  # warm
                gets(clients[s], ids[s], 30, rng)
            for r in range(args.rounds):
                for s in sizes if r % 2 == 0 else reversed(sizes):
                    times[s] += gets(clients[s], ids[s], args.gets, rng)
            for s in sizes:
                q = statistics.quantiles(times[s], n=100)
                mem = rss_kb(daemons[s].proc.pid)  # type: ignore[union-attr]  # started above
                results.append(
                    {
                        "tasks": s,
                        "gets": len(times[s]),
                        "p50_ms": round(statistics.median(times[s]) * 1000, 3),
                        "p99_ms": round(q[98] * 1000, 3),
                        "rss_mb": round(mem["VmRSS"] / 1024, 1),
                        "peak_rss_mb": round(mem["VmHWM"] / 1024, 1),
                        "db_mb": round((daemons[s].state_dir / "mcpx.db").stat().st_size / 2**20, 1),
                    }
                )
        finally:
            for c in clients.values():
                c.close()
            for d in daemons.values():
                d.stop()
    base = results[0]["p50_ms"]
    print(f"tasks/get on a 2025-11-25 session, random stored task, {args.rounds} interleaved rounds:")
    print("| stored tasks | p50 ms | p99 ms | p50 vs first | RSS MB (peak) | db MB |")
    print("|---|---|---|---|---|---|")
    for row in results:
        row["p50_ratio"] = round(row["p50_ms"] / base, 2)
        print(
            f"| {row['tasks']} | {row['p50_ms']:.2f} | {row['p99_ms']:.2f} | {row['p50_ratio']:.2f}x"
            f" | {row['rss_mb']:.1f} ({row['peak_rss_mb']:.1f}) | {row['db_mb']:.1f} |"
        )
    biggest = results[-1]
    flat = all(0.8 <= row["p50_ratio"] <= 1.2 for r in results)
    print(
        f"targets: p50 within +-20 % of {results[0]['tasks']}'s: {'yes' if flat else 'NO'};"
        f" RSS at {biggest['tasks']} <= 120 MB: {'yes' if biggest['rss_mb'] <= 120 else 'NO'} ({biggest['rss_mb']} MB)"
    )
    print("RESULT " + json.dumps({"bench": "store_scale", "rows": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
