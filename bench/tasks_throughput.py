"""Durable task throughput: tasks created, polled and completed per second, end to end.

Three sides, each a real server with its own process, measured in interleaved rounds:

- `mcpx modern`: a 2026-07-28 host calls `fx__echo` through mcpx (the fixture upstream over stdio,
  the tool set to `taskSupport: required`, so every call becomes a task); `tasks/get` until it is
  completed (the result comes inline).
- `mcpx legacy`: a 2025-11-25 session calls the same tool with `params.task`; `tasks/get` until it
  is completed, then `tasks/result`.
- `fastmcp-tasks`: the same 2026-07-28 workload against FastMCP 4.1.4 + fastmcp-tasks serving its
  task tool (`slow`, seconds 0: returns its text at once) directly, from its own virtual environment
  (`tests/peers/fastmcp_upstream.py --concurrency 1000`; its task store is in memory).

Every mcpx handle is backed by a committed SQLite row (WAL; commits batched by the store's single
writer). Each round, `--workers` connections each create their share of the round's tasks one
after another, then poll them until every one is terminal (a task still working goes to the back
of the line; polls honour the server's pace). The client is the same raw HTTP client for all
three sides; on this 2-core machine it shares the CPU with the server, the same for each side.

    python bench/tasks_throughput.py [--tasks 10000] [--workers 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from harness import ROOT, SQLITE, Daemon, RawHost, reply_of, stdio_server

EXT: dict[str, Any] = {
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
}
TERMINAL = ("completed", "failed", "cancelled")
Side = Callable[[RawHost, int], str]  # creates task number i, returns its id


class Workload:
    """One server, one way to create a task and one way to see it through."""

    def __init__(self, name: str, url: str, legacy: bool, tool: str, args: Callable[[int], dict[str, Any]]) -> None:
        self.name, self.url, self.legacy, self.tool, self.args = name, url, legacy, tool, args

    def host(self) -> RawHost:
        h = RawHost(self.url)
        if self.legacy:
            h.initialize()
        return h

    def create(self, h: RawHost, i: int) -> str:
        params: dict[str, Any] = {"name": self.tool, "arguments": self.args(i)}
        if self.legacy:
            reply = reply_of(h.legacy("tools/call", {**params, "task": {}}))
            return str(reply["result"]["task"]["taskId"])
        reply = reply_of(h.modern("tools/call", params, meta=EXT))
        assert reply.get("result", {}).get("resultType") == "task", reply
        return str(reply["result"]["taskId"])

    def poll(self, h: RawHost, tid: str) -> bool:
        """One tasks/get; True once the task is terminal and its result collected."""
        if self.legacy:
            task = reply_of(h.legacy("tasks/get", {"taskId": tid}))["result"]
        else:
            task = reply_of(h.modern("tasks/get", {"taskId": tid}, meta=EXT, headers={"Mcp-Name": tid}))["result"]
        if task["status"] not in TERMINAL:
            return False
        assert task["status"] == "completed", task
        if self.legacy:
            result = reply_of(h.legacy("tasks/result", {"taskId": tid}))["result"]
            assert not result.get("isError"), result
        else:
            assert "result" in task, task
        return True


def run_round(w: Workload, tasks: int, workers: int) -> tuple[float, float, int]:
    """(created/s, created-and-collected/s, polls) for one round of `tasks` over `workers`."""
    polls = [0] * workers
    errors: list[BaseException] = []
    barrier = threading.Barrier(workers + 1)
    created_at: list[float] = []
    lock = threading.Lock()

    def work(k: int) -> None:
        try:
            with w.host() as h:
                barrier.wait()
                ids = [w.create(h, k * tasks + i) for i in range(tasks // workers)]
                with lock:
                    created_at.append(time.perf_counter())
                line = collections.deque(ids)
                while line:
                    tid = line.popleft()
                    polls[k] += 1
                    if not w.poll(h, tid):
                        line.append(tid)
                        if len(line) == 1:
                            time.sleep(0.01)
        except BaseException as exc:  # reported after the round: the bench must not hang
            errors.append(exc)
            if barrier.n_waiting:
                barrier.abort()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(workers)]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    n = (tasks // workers) * workers
    return n / (max(created_at) - started), n / (time.perf_counter() - started), sum(polls)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=10_000, help="tasks per side, over all rounds")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    opts = ap.parse_args()
    from peers.venvs import peer_python
    from test_upstream_tasks import PeerHttp

    per_round = opts.tasks // opts.rounds
    with tempfile.TemporaryDirectory(prefix="mcpx-bench-") as folder:
        tmp = Path(folder)
        config = {"mcpServers": {"fx": stdio_server(tmp, tools={"echo": {"taskSupport": "required"}})}}
        daemon = Daemon(tmp, config, store=SQLITE).start()
        fm = PeerHttp(
            peer_python("fastmcp-tasks"), ROOT / "tests/peers/fastmcp_upstream.py", tmp, "fm", "--concurrency", "1000"
        )
        try:
            sides = [
                Workload("mcpx modern", daemon.url, False, "fx__echo", lambda i: {"text": str(i)}),
                Workload("mcpx legacy", daemon.url, True, "fx__echo", lambda i: {"text": str(i)}),
                Workload("fastmcp-tasks", fm.url, False, "slow", lambda i: {"seconds": 0, "text": str(i)}),
            ]
            for w in sides:  # warm: connections, imports, the first rows
                run_round(w, opts.workers * 10, opts.workers)
            rates: dict[str, list[tuple[float, float, int]]] = {w.name: [] for w in sides}
            for _ in range(opts.rounds):
                for w in sides:
                    rates[w.name].append(run_round(w, per_round, opts.workers))
        finally:
            fm.stop()
            daemon.stop()
            daemon.kill_keepers()

    def med(name: str, i: int) -> float:
        return statistics.median(r[i] for r in rates[name])

    result: dict[str, Any] = {"bench": "tasks_throughput", "tasks_per_side": per_round * opts.rounds}
    result |= {"workers": opts.workers, "rounds": opts.rounds}
    print(f"{per_round} tasks per round x {opts.rounds} rounds per side, {opts.workers} connections, interleaved")
    for name, rs in rates.items():
        done = [r[1] for r in rs]
        print(
            f"  {name:14} created {med(name, 0):6.0f}/s   created+polled+completed {med(name, 1):6.0f}/s"
            f" (min {min(done):.0f}, max {max(done):.0f}); {statistics.median(r[2] for r in rs) / per_round:.2f} polls/task"
        )
        key = name.replace(" ", "_").replace("-", "_")
        result[key] = {"created_per_s": round(med(name, 0)), "done_per_s": round(med(name, 1))}
        result[key] |= {"done_min": round(min(done)), "done_max": round(max(done))}
    for name in ("mcpx modern", "mcpx legacy"):
        ratio = med(name, 1) / med("fastmcp-tasks", 1)
        print(f"  {name} / fastmcp-tasks: {ratio:.2f}x")
        result[name.replace(" ", "_") + "_vs_fastmcp"] = round(ratio, 2)
    print("RESULT " + json.dumps(result))  # for bench/run_all.py
    return 0


if __name__ == "__main__":
    sys.exit(main())
