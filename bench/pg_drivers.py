"""asyncpg against psycopg 3 (async) on the store's two hot statements: an upsert committed on its own
(put_task) and a read by key (get_task), sequential on one connection, on a throwaway local cluster.

    python3 bench/pg_drivers.py [--n 2000]

Why: the PostgreSQL store's driver was chosen by this measurement (mcpx/store/postgres.py).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import asyncpg
import psycopg
from pgcluster import running

DDL = "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, status TEXT NOT NULL, body TEXT NOT NULL)"
BODY = '{"id":"x","status":"working","arguments":{"text":"' + "a" * 200 + '"}}'


async def run_asyncpg(url: str, n: int) -> tuple[float, float]:
    conn = await asyncpg.connect(url)
    await conn.execute(DDL)
    upsert = "INSERT INTO t VALUES ($1,$2,$3) ON CONFLICT (id) DO UPDATE SET status=$2, body=$3"
    t0 = time.perf_counter()
    for i in range(n):
        async with conn.transaction():
            await conn.execute(upsert, f"a{i}", "working", BODY)
    put = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for i in range(n):
        await conn.fetchval("SELECT body FROM t WHERE id = $1", f"a{i}")
    get = (time.perf_counter() - t0) / n
    await conn.close()
    return put, get


async def run_psycopg(url: str, n: int) -> tuple[float, float]:
    conn = await psycopg.AsyncConnection.connect(url, prepare_threshold=0)
    await conn.execute(DDL)
    await conn.commit()
    upsert = "INSERT INTO t VALUES (%s,%s,%s) ON CONFLICT (id) DO UPDATE SET status=%s, body=%s"
    t0 = time.perf_counter()
    for i in range(n):
        async with conn.transaction():
            await conn.execute(upsert, (f"p{i}", "working", BODY, "working", BODY))
    put = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for i in range(n):
        cur = await conn.execute("SELECT body FROM t WHERE id = %s", (f"p{i}",))
        await cur.fetchone()
    get = (time.perf_counter() - t0) / n
    await conn.close()
    return put, get


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {"asyncpg": [], "psycopg": []}
    with running(durable=True) as cluster:
        url = cluster.database()
        for _ in range(args.rounds):  # interleaved, so drift on a shared machine hits both alike
            results["asyncpg"].append(asyncio.run(run_asyncpg(url, args.n)))
            results["psycopg"].append(asyncio.run(run_psycopg(url, args.n)))
    for name, rows in results.items():
        put = statistics.median(r[0] for r in rows) * 1e6
        get = statistics.median(r[1] for r in rows) * 1e6
        print(f"{name:8} put_task+commit {put:7.1f} us   get_task {get:6.1f} us   (median of {args.rounds})")


if __name__ == "__main__":
    main()
