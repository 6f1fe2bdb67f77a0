"""Durable tasks/s with 1, 2 and 3 mcpx instances sharing one PostgreSQL database, beside
PostgreSQL's own commit rate on the same cluster.

A throwaway PostgreSQL 15 cluster (`tests/pgcluster.py`, fsync on: `durable=True`) on 127.0.0.1;
for each N in 1..3, N daemons on a fresh database (`store.url`, each its own instance name), each
with its own fixture upstream over stdio; 2026-07-28 hosts (8 connections) spread round-robin over
the instances create `fx__echo` tasks (`taskSupport: required`) and poll each until completed, as
`bench/tasks_throughput.py` does. PostgreSQL's commit rate: one connection committing one-row
INSERTs as fast as it can (`psql`-free: asyncpg, the driver the store uses). And one daemon on
the embedded SQLite store, the same workload: what one daemon pays for PostgreSQL.

    python bench/scale_out.py [--tasks 2000] [--workers 8]

On one 2-core machine every instance, every upstream, the hosts and PostgreSQL share two cores, so
the ratio shows what the shared store costs and allows, not what N machines would give.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pgcluster
from harness import SQLITE, Daemon, stdio_server
from tasks_throughput import Workload, run_round


async def _commit_rate(url: str, seconds: float) -> float:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute("CREATE TABLE IF NOT EXISTS bench_commits (id bigserial PRIMARY KEY, body text)")
        n, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            await conn.execute("INSERT INTO bench_commits (body) VALUES ('x')")  # autocommit: one commit each
            n += 1
        return n / seconds
    finally:
        await conn.close()


class _Spread(Workload):
    """The same workload, each connection sent to the next instance in turn."""

    def __init__(self, urls: list[str]) -> None:
        super().__init__("mcpx modern", urls[0], False, "fx__echo", lambda i: {"text": str(i)})
        self.urls, self._next = urls, 0

    def host(self) -> Any:
        self.url = self.urls[self._next % len(self.urls)]
        self._next += 1
        return super().host()


def _rate(tmp: Path, label: str, stores: list[dict[str, str] | None], opts: argparse.Namespace) -> float:
    """Tasks/s done by one daemon per entry of `stores` (None: the SQLite file in its state folder)."""
    daemons = []
    try:
        for k, store in enumerate(stores):
            config: dict[str, Any] = {
                "mcpServers": {
                    "fx": stdio_server(tmp, name=f"fx-{label}-{k}", tools={"echo": {"taskSupport": "required"}})
                }
            }
            if store is not None:
                config["store"] = store  # wins over the harness store: every instance on the one database
            d = Daemon(tmp, config, name=f"{label}-{k}", store=SQLITE, wire_log=False)
            daemons.append(d.start())
        w = _Spread([d.url for d in daemons])
        run_round(w, opts.workers * 10, opts.workers)  # warm
        _, done, _, _ = run_round(w, opts.tasks, opts.workers)
        return float(done)
    finally:
        for d in daemons:
            d.stop()
            d.kill_keepers()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=8)
    opts = ap.parse_args()
    if not pgcluster.available():
        print("PostgreSQL (initdb, pg_ctl and a postgres user) is not available here")
        return 1
    rates: dict[int, float] = {}
    with pgcluster.running(durable=True) as cluster, tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        commit_rate = asyncio.run(_commit_rate(cluster.database(), 5))
        # The embedded default beside it: what one daemon gives up by moving to PostgreSQL.
        sqlite_rate = _rate(tmp, "sqlite", [None], opts)
        print(f"  1 daemon on SQLite: {sqlite_rate:.0f} tasks/s created, polled, completed")
        for n in (1, 2, 3):
            url = cluster.database()
            rates[n] = _rate(tmp, f"pg{n}", [{"url": url, "instance": f"i{k}"} for k in range(n)], opts)
            print(f"  {n} instance(s) on PostgreSQL: {rates[n]:.0f} tasks/s created, polled, completed")
    print(f"PostgreSQL alone: {commit_rate:.0f} single-row commits/s on one connection (fsync on)")
    print(f"  1 instance on PostgreSQL / 1 daemon on SQLite: {rates[1] / sqlite_rate:.2f}x")
    for n in (2, 3):
        print(f"  {n} instances / 1: {rates[n] / rates[1]:.2f}x")
    result = {"bench": "scale_out", "tasks": opts.tasks, "pg_commits_per_s": round(commit_rate)}
    result |= {"sqlite_per_s": round(sqlite_rate), "ratio_pg_to_sqlite": round(rates[1] / sqlite_rate, 2)}
    result |= {f"instances_{n}_per_s": round(r) for n, r in rates.items()}
    result |= {f"ratio_{n}_to_1": round(rates[n] / rates[1], 2) for n in (2, 3)}
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
