"""Feed latency: from a state change (its event written with the change) to a /v1/events client
having it, at a steady event rate while many tasks are live.

    python bench/feed_latency.py [--live 1000] [--rate 500] [--seconds 10]

`--live` 2025-11-25 tasks are left running (a slow tool), then tasks that finish at once are
created at `--rate / 2` per second (each makes two events: created, completed). Latency is the
client's receipt time minus the event's own `ts` (the daemon's clock, same machine), in ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from harness import SQLITE, Daemon, RawHost, stdio_server
from websockets.sync.client import connect


def _create(url: str, n: int, args: dict[str, object], name: str) -> None:
    with RawHost(url) as host:
        host.initialize()
        for _ in range(n):
            host.legacy("tools/call", {"name": name, "arguments": args, "task": {}})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--live", type=int, default=1000)
    ap.add_argument("--rate", type=int, default=500, help="events per second to produce")
    ap.add_argument("--seconds", type=float, default=10)
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcpx-feed-bench-") as folder:
        tmp = Path(folder)
        d = Daemon(tmp, {"mcpServers": {"fx": stdio_server(tmp)}}, name="bench", store=SQLITE).start()
        try:
            workers = [
                threading.Thread(target=_create, args=(d.url, opts.live // 8, {"seconds": 600}, "fx__slow"))
                for _ in range(8)
            ]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            latencies: list[float] = []
            stop = threading.Event()
            ws = connect(
                f"ws://127.0.0.1:{d.port}/v1/events",
                additional_headers={"Authorization": f"Bearer {d.token}"},
                max_size=None,
            ).__enter__()
            ws.send(json.dumps({"type": "subscribe", "kinds": ["task.created", "task.status"]}))
            snapshot = json.loads(ws.recv())
            live = sum(t["status"] == "working" for t in snapshot["tasks"])

            def read() -> None:
                while not stop.is_set():
                    try:
                        msg = json.loads(ws.recv(timeout=1))
                    except TimeoutError:
                        continue
                    except Exception:  # closed at the end
                        return
                    if msg.get("type") == "event":
                        latencies.append(time.time() * 1000 - msg["ts"])

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            per_s = max(1, opts.rate // 2) / 4  # two events per quick task, four paced producers
            started = time.monotonic()

            def produce() -> None:
                made = 0
                with RawHost(d.url) as host:
                    host.initialize()
                    while time.monotonic() - started < opts.seconds:
                        while made < int((time.monotonic() - started) * per_s):
                            host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "x"}, "task": {}})
                            made += 1
                        time.sleep(0.002)

            producers = [threading.Thread(target=produce) for _ in range(4)]
            for p in producers:
                p.start()
            for p in producers:
                p.join()
            elapsed = time.monotonic() - started
            time.sleep(1.0)  # the last events arrive
            stop.set()
            ws.close()
            reader.join(5)
        finally:
            d.stop()
    if not latencies:
        print("no events received")
        return 1
    q = statistics.quantiles(latencies, n=100)
    rate = len(latencies) / elapsed
    print(f"feed latency with {live} live tasks, {rate:.0f} events/s over {elapsed:.1f} s ({len(latencies)} events):")
    print(f"  p50 {q[49]:.1f} ms   p99 {q[98]:.1f} ms   max {max(latencies):.1f} ms   (target p99 <= 20 ms)")
    result = {"bench": "feed_latency", "live": live, "events_per_s": round(rate), "events": len(latencies)}
    result |= {"p50_ms": round(q[49], 1), "p99_ms": round(q[98], 1), "max_ms": round(max(latencies), 1)}
    print("RESULT " + json.dumps(result))  # for bench/run_all.py
    return 0


if __name__ == "__main__":
    sys.exit(main())
