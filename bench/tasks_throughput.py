"""Durable task throughput: tasks created (row committed before each handle) and completed per second.

A 2025-11-25 host creates N `echo` tasks over W concurrent keep-alive connections against a real
daemon with a stdio fixture upstream, then polls until every one is terminal. Every handle is
backed by a committed SQLite row (WAL); commits are batched by the store's single writer.

    python bench/tasks_throughput.py [--tasks 2000] [--workers 8]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from harness import Daemon, RawHost, stdio_server


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        daemon = Daemon(tmp, {"mcpServers": {"fx": stdio_server(tmp)}})
        daemon.start()
        try:
            owner = RawHost(daemon.url)
            owner.initialize()
            ids: list[str] = []
            lock = threading.Lock()
            per = args.tasks // args.workers

            def create() -> None:
                with RawHost(daemon.url) as h:
                    h.session_id, h.revision = owner.session_id, owner.revision
                    for i in range(per):
                        frame = h.legacy(
                            "tools/call", {"name": "fx__echo", "arguments": {"text": str(i)}, "task": {}}
                        ).json()
                        with lock:
                            ids.append(frame["result"]["task"]["taskId"])

            started = time.perf_counter()
            threads = [threading.Thread(target=create) for _ in range(args.workers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            created_s = time.perf_counter() - started
            # Collect every result (tasks/result blocks until its task is terminal), 8 ways at once.
            chunks = [ids[i :: args.workers] for i in range(args.workers)]

            def collect(chunk: list[str]) -> None:
                with RawHost(daemon.url) as h:
                    h.session_id, h.revision = owner.session_id, owner.revision
                    for task_id in chunk:
                        frame = h.legacy("tasks/result", {"taskId": task_id}).json()
                        assert "result" in frame, frame

            threads = [threading.Thread(target=collect, args=(c,)) for c in chunks]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            done_s = time.perf_counter() - started
            n = len(ids)
            print(
                json.dumps(
                    {
                        "tasks": n,
                        "workers": args.workers,
                        "created_per_s": round(n / created_s),
                        "created_and_collected_per_s": round(n / done_s),
                    }
                )
            )
            print(
                f"{n} durable tasks over {args.workers} connections: {n / created_s:.0f} created/s (handles, rows committed), {n / done_s:.0f} created and collected (tasks/result)/s end to end"
            )
            result = {"bench": "tasks_throughput", "tasks": n, "workers": args.workers}
            result |= {"created_per_s": round(n / created_s), "created_and_collected_per_s": round(n / done_s)}
            print("RESULT " + json.dumps(result))  # for bench/run_all.py
            owner.close()
        finally:
            daemon.stop()


if __name__ == "__main__":
    main()
