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
writer). Two daemons run side by side, one per `store.durability`: `power-loss` (the default: each
commit fsync'd before any handle it holds is given out) and `process-crash` (the opt-out; the
figures before durability became the default), each with both eras. Each round, `--workers`
connections each create their share of the round's tasks one after another, then poll them until
every one is terminal (a task still working goes to the back of the line; polls honour the
server's pace). The client is the same raw HTTP client for all sides; on this 2-core machine it
shares the CPU with the servers, the same for each side.

Beside tasks/s: CPU time per task, end to end (create, poll, complete), from /proc/<pid>/stat
(utime + stime) before and after each round, for the daemon and, apart, for the stdio upstream's
keeper and the fixture server it keeps.

    python bench/tasks_throughput.py [--tasks 10000] [--workers 8] [--rounds 3] [--no-fastmcp]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
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
TICK = os.sysconf("SC_CLK_TCK")
DURABILITIES = ("process-crash", "power-loss")


def cpu_s(pid: int) -> float:
    """The process's user + system CPU seconds so far (/proc/<pid>/stat utime, stime)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class Workload:
    """One server, one way to create a task and one way to see it through; `pids` are the processes
    whose CPU is counted: the server's own first, then (mcpx) the keeper and the kept server."""

    def __init__(
        self,
        name: str,
        url: str,
        legacy: bool,
        tool: str,
        args: Callable[[int], dict[str, Any]],
        pids: tuple[int, ...] = (),
    ) -> None:
        self.name, self.url, self.legacy, self.tool, self.args = name, url, legacy, tool, args
        self.pids = pids

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


Round = tuple[float, float, int, tuple[float, ...]]


def run_round(w: Workload, tasks: int, workers: int) -> Round:
    """(created/s, created-and-collected/s, polls, CPU ms per task of each of `w.pids`) for one
    round of `tasks` over `workers`."""
    cpu_before = [cpu_s(pid) for pid in w.pids]
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
    done_s = time.perf_counter() - started
    cpu_ms = tuple((cpu_s(pid) - b) * 1000 / n for pid, b in zip(w.pids, cpu_before, strict=True))
    return n / (max(created_at) - started), n / done_s, sum(polls), cpu_ms


def kept_pids(daemon: Daemon) -> tuple[int, ...]:
    """The keeper and the server it keeps, of the daemon's one stdio upstream."""
    from mcpx.upstream.stdio import keeper_wire

    records = keeper_wire.all_records(daemon.state_dir / keeper_wire.FOLDER)
    return (records[0].keeper_pid, records[0].server_pid) if records else ()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=10_000, help="tasks per side, over all rounds")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-fastmcp", action="store_true", help="leave out the FastMCP-tasks side")
    ap.add_argument("--wire-log", action="store_true", help="keep the harness's test-only frame log on")
    opts = ap.parse_args()
    from peers.venvs import peer_python
    from test_upstream_tasks import PeerHttp

    per_round = opts.tasks // opts.rounds
    with tempfile.TemporaryDirectory(prefix="mcpx-bench-") as folder:
        tmp = Path(folder)
        daemons: dict[str, Daemon] = {}
        fm = None
        try:
            sides: list[Workload] = []
            for durability in DURABILITIES:
                config = {
                    "mcpServers": {"fx": stdio_server(tmp, tools={"echo": {"taskSupport": "required"}})},
                    "store": {"durability": durability},
                }
                # The harness's test-only frame log (a line per frame sent) only with --wire-log.
                d = Daemon(tmp, config, store=SQLITE, name=durability, wire_log=opts.wire_log)
                daemons[durability] = d
                d.start()
                assert d.proc is not None
                pids = (d.proc.pid, *kept_pids(d))
                suffix = "" if durability == "power-loss" else f" ({durability})"
                for era, legacy in (("modern", False), ("legacy", True)):
                    echo = lambda i: {"text": str(i)}  # noqa: E731 - the args of task i
                    sides.append(Workload(f"mcpx {era}{suffix}", d.url, legacy, "fx__echo", echo, pids))
            if not opts.no_fastmcp:
                fm = PeerHttp(
                    peer_python("fastmcp-tasks"),
                    ROOT / "tests/peers/fastmcp_upstream.py",
                    tmp,
                    "fm",
                    "--concurrency",
                    "1000",
                )
                fm_args = lambda i: {"seconds": 0, "text": str(i)}  # noqa: E731 - the args of task i
                sides.append(Workload("fastmcp-tasks", fm.url, False, "slow", fm_args, (fm.proc.pid,)))
            for w in sides:  # warm: connections, imports, the first rows
                run_round(w, opts.workers * 10, opts.workers)
            rates: dict[str, list[Round]] = {w.name: [] for w in sides}
            for _ in range(opts.rounds):
                for w in sides:
                    rates[w.name].append(run_round(w, per_round, opts.workers))
        finally:
            if fm is not None:
                fm.stop()
            for d in daemons.values():
                d.stop()
                d.kill_keepers()

    def med(name: str, i: int) -> float:
        return float(statistics.median(float(r[i]) for r in rates[name]))  # type: ignore[arg-type]  # i picks a number

    def cpu(name: str, k: int) -> float | None:
        ms = [r[3][k] for r in rates[name] if len(r[3]) > k]
        return statistics.median(ms) if ms else None

    result: dict[str, Any] = {"bench": "tasks_throughput", "tasks_per_side": per_round * opts.rounds}
    result |= {"workers": opts.workers, "rounds": opts.rounds}
    print(f"{per_round} tasks per round x {opts.rounds} rounds per side, {opts.workers} connections, interleaved")
    print("  CPU per task (median of rounds): the server process; mcpx also its keeper and the kept server")
    for name, rs in rates.items():
        done = [r[1] for r in rs]
        cpus = [c for k in range(3) if (c := cpu(name, k)) is not None]
        cpu_text = " / ".join(f"{c:.2f}" for c in cpus)
        print(
            f"  {name:28} created {med(name, 0):6.0f}/s   created+polled+completed {med(name, 1):6.0f}/s"
            f" (min {min(done):.0f}, max {max(done):.0f}); {statistics.median(r[2] for r in rs) / per_round:.2f}"
            f" polls/task; CPU ms/task {cpu_text}"
        )
        key = name.replace(" (", "_").replace(")", "").replace(" ", "_").replace("-", "_")
        result[key] = {"created_per_s": round(med(name, 0)), "done_per_s": round(med(name, 1))}
        result[key] |= {"done_min": round(min(done)), "done_max": round(max(done))}
        for k, label in enumerate(("cpu_ms_per_task", "keeper_cpu_ms_per_task", "server_cpu_ms_per_task")):
            if (c := cpu(name, k)) is not None:
                result[key][label] = round(c, 3)
    if "fastmcp-tasks" in rates:
        for name in ("mcpx modern", "mcpx legacy"):
            ratio = med(name, 1) / med("fastmcp-tasks", 1)
            print(f"  {name} / fastmcp-tasks: {ratio:.2f}x")
            result[name.replace(" ", "_") + "_vs_fastmcp"] = round(ratio, 2)
    for era in ("modern", "legacy"):
        ratio = med(f"mcpx {era}", 1) / med(f"mcpx {era} (process-crash)", 1)
        print(f"  mcpx {era}: power-loss / process-crash done/s {ratio:.2f}x")
        result[f"mcpx_{era}_durable_vs_opt_out"] = round(ratio, 2)
    print("RESULT " + json.dumps(result))  # for bench/run_all.py
    return 0


if __name__ == "__main__":
    sys.exit(main())
