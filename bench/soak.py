"""Soak: many hosts at once for a while, against a mix of quick calls, tasks and questions that an
operator script answers; then: was every call answered, did every task end, and is the daemon's
memory back where it was.

    python bench/soak.py [--hosts 200] [--seconds 60] [--rounds 2] [--think 0.5]

Half the hosts are 2025-11-25 sessions, half stateless 2026-07-28 hosts. Each loops, with a random
think time around `--think` s between steps, over: a quick `echo` (60 %), a slow tool as a task
(25 %: a legacy `params.task` then `tasks/result`, or a 2026 call that becomes a task, polled), and a
task whose upstream asks a question (15 %: the conformance fixture's `test_elicitation`; the hosts
declare no elicitation, so an attached operator answers it through /v1). The daemon's RSS is read
after a warm-up (the same mix for `--warmup` s), during the run, and after each of `--rounds` runs
of `--seconds`, once the daemon has been idle past `--idle-close-s` (its `connections.idleCloseS`,
10 s here instead of the default 10 minutes, so the round's hosts, which never come back, are closed
and let go: what stays is what a leak would keep).

Memory: the daemon keeps bounded caches that fill with use (the raw frames of the last 2,000 tasks
for `/v1/tasks/{id}/frames`, `frames.budgetBytes`, 16 MB by default, reported by /v1/status and
printed here after each round; the last poll of 10,000 tasks for pacing), so RSS climbs until they
are full. `--frame-budget-mb 1` fills the frame log within the warm-up: then growth from one round
to the next is what a leak would show.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from harness import SQLITE, Api, Daemon, FeedClient, RawHost, conformance_server, reply_of, stdio_server

EXT: dict[str, Any] = {
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
}
ASKER: dict[str, Any] = {
    "io.modelcontextprotocol/clientCapabilities": {
        "elicitation": {},
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }
}


def answer_for(schema: dict[str, Any]) -> dict[str, Any]:
    """What the operator script fills in: something valid for each field the question asks."""
    out: dict[str, Any] = {}
    for key, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type")
        if kind == "boolean":
            out[key] = True
        elif kind in ("number", "integer"):
            out[key] = prop.get("minimum", 1)
        elif prop.get("enum"):
            out[key] = prop["enum"][0]
        else:
            out[key] = "soak@example.com" if prop.get("format") == "email" else "soak"
    return out


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.failures: list[str] = []
        self.latency_ms: list[float] = []

    def add(self, what: str, ms: float | None = None) -> None:
        with self.lock:
            self.counts[what] += 1
            if ms is not None:
                self.latency_ms.append(ms)

    def fail(self, what: str) -> None:
        with self.lock:
            self.counts["failed"] += 1
            if len(self.failures) < 20:
                self.failures.append(what[:300])


def _poll_modern(host: RawHost, tid: str, meta: dict[str, Any], deadline: float) -> dict[str, Any]:
    while time.monotonic() < deadline:
        reply = host.modern("tasks/get", {"taskId": tid}, meta=meta, headers={"Mcp-Name": tid}).json()
        assert "result" in reply, reply
        task = reply["result"]
        if task["status"] in ("completed", "failed", "cancelled"):
            return dict(task)
        time.sleep(0.25)
    raise TimeoutError(f"task {tid} did not end")


def host_loop(url: str, era: str, stop: threading.Event, tally: Tally, think: float, seed: int) -> None:
    rnd = random.Random(seed)
    with RawHost(url) as host:
        if era == "legacy":
            host.initialize()
        while not stop.is_set():
            time.sleep(rnd.uniform(0.5, 1.5) * think)
            pick = rnd.random()
            started = time.monotonic()
            try:
                if pick < 0.60:
                    text = f"{era}-{seed}-{rnd.random()}"
                    call = {"name": "fx__echo", "arguments": {"text": text}}
                    frame = reply_of(
                        host.legacy("tools/call", call) if era == "legacy" else host.modern("tools/call", call)
                    )
                    assert frame["result"]["content"][0]["text"] == text, frame
                    tally.add("quick", (time.monotonic() - started) * 1000)
                    continue
                question = pick >= 0.85
                name, args = "fx__slow", dict[str, Any]({"seconds": rnd.uniform(0.2, 2), "steps": 1})
                if question:  # a 2026 host must declare elicitation to be asked; it leaves the answer to the operator
                    q = ("test_elicitation", {"message": "soak?"})
                    name, args = q if era == "legacy" else ("confirm_delete", {"filename": f"f{seed}"})
                if era == "legacy":
                    frame = host.legacy("tools/call", {"name": name, "arguments": args, "task": {}}).json()
                    tid = frame["result"]["task"]["taskId"]
                    result = reply_of(host.legacy("tasks/result", {"taskId": tid}))["result"]
                else:
                    meta = ASKER if question else EXT
                    reply = reply_of(host.modern("tools/call", {"name": name, "arguments": args}, meta=meta))
                    assert "result" in reply, reply
                    handle = reply["result"]
                    if handle.get("resultType") == "task":
                        result = _poll_modern(host, handle["taskId"], meta, time.monotonic() + 120)["result"]
                    else:
                        result = handle  # answered inside taskAfterMs
                text = result["content"][0]["text"]
                want = ("action=accept" if era == "legacy" else "Deleted") if question else "slept"
                assert want in text, result
                tally.add("question" if question else "task")
            except Exception as exc:
                tally.fail(f"{era} {pick:.2f}: {type(exc).__name__}: {exc}")


def operator_loop(d: Daemon, stop: threading.Event, tally: Tally) -> None:
    with Api(d) as api:
        while not stop.is_set():
            try:
                for q in api.open_questions():
                    content = answer_for(q["params"].get("requestedSchema") or {})
                    r = api.answer(q["id"], "accept", by="soak-operator", content=content)
                    tally.add("answered" if r.status_code == 200 else f"answer {r.status_code}")
            except httpx.HTTPError as exc:  # counted, and the operator goes on: hosts wait on its answers
                tally.add(f"operator {type(exc).__name__}")
            time.sleep(0.05)


def run_phase(d: Daemon, hosts: int, seconds: float, think: float, tally: Tally, seed: int) -> int:
    """The mix for `seconds`; returns the daemon's highest RSS seen meanwhile (kB)."""
    stop, done = threading.Event(), threading.Event()
    threads = [
        threading.Thread(target=host_loop, args=(d.url, "legacy" if i % 2 else "modern", stop, tally, think, seed + i))
        for i in range(hosts)
    ]
    operator = threading.Thread(target=operator_loop, args=(d, done, tally))
    operator.start()
    for t in threads:
        t.start()
    assert d.proc is not None
    peak, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        peak = max(peak, rss_kb(d.proc.pid))
        time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join(180)
    done.set()  # the operator answers until the last host is done: a host may wait on its question
    operator.join(10)
    return peak


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=2, help="runs of --seconds each, RSS read after each")
    ap.add_argument(
        "--idle-close-s",
        type=float,
        default=10,
        help="the daemon's connections.idleCloseS: a round's hosts are closed and let go this long after it",
    )
    ap.add_argument("--frame-budget-mb", type=float, help="the daemon's frames.budgetBytes (default: its own)")
    ap.add_argument("--think", type=float, default=0.5, help="mean seconds between a host's steps")
    opts = ap.parse_args()
    config: dict[str, Any] = {
        "mcpServers": {"up": conformance_server()},
        "tasks": {"taskAfterMs": 200, "pollIntervalMs": 250},
        "connections": {"idleCloseS": opts.idle_close_s},
    }
    if opts.frame_budget_mb is not None:
        config["frames"] = {"budgetBytes": int(opts.frame_budget_mb * 2**20)}
    with tempfile.TemporaryDirectory(prefix="mcpx-soak-") as folder:
        tmp = Path(folder)
        config["mcpServers"]["fx"] = stdio_server(tmp)
        d = Daemon(tmp, config, name="soak", extra_args=[], store=SQLITE).start()
        feed = FeedClient(d, operator="soak-operator", kinds=["connection.closed"])  # questions wait for it
        try:
            assert d.proc is not None
            start_rss = rss_kb(d.proc.pid)
            warm = Tally()
            run_phase(d, opts.hosts, opts.warmup, opts.think, warm, seed=1)
            idle_s = max(5.0, opts.idle_close_s + 5)
            time.sleep(idle_s)
            baseline = rss_kb(d.proc.pid)
            tally = Tally()
            started = time.monotonic()
            peak, after_rounds, frames = 0, [], []
            for r in range(opts.rounds):
                peak = max(peak, run_phase(d, opts.hosts, opts.seconds, opts.think, tally, seed=1000 * (r + 1)))
                time.sleep(idle_s)  # idle: what the round left behind, its hosts closed
                after_rounds.append(rss_kb(d.proc.pid))
                with Api(d) as api:
                    frames.append(api.get("/v1/status").json()["frames"])
            elapsed = time.monotonic() - started - idle_s * opts.rounds
            after = after_rounds[-1]
            with Api(d) as api:
                working = api.get("/v1/tasks", params={"status": ["working", "input_required"], "limit": 500}).json()
                open_questions = len(api.open_questions())
            alive = d.proc.poll() is None
        finally:
            feed.close()
            d.stop()
            d.kill_keepers()
    lat = sorted(tally.latency_ms) or [0.0]
    c = tally.counts
    calls = c["quick"] + c["task"] + c["question"] + c["failed"]
    print(f"{opts.hosts} hosts for {elapsed:.0f} s: {calls} host steps ({calls / elapsed:.0f}/s)")
    print(
        f"  quick calls {c['quick']} (p50 {statistics.median(lat):.1f} ms, p99 {lat[int(len(lat) * 0.99)]:.1f} ms),"
        f" tasks {c['task']}, questions answered by the operator {c['question']} ({c['answered']} answers sent),"
        f" failures {c['failed']}"
    )
    for f in tally.failures[:5]:
        print("  failure:", f)
    print(f"  tasks still open after the run: {len(working['tasks'])}; open questions: {open_questions}")
    rounds = ", ".join(f"{kb / 1024:.1f}" for kb in after_rounds)
    growth = (after - after_rounds[0]) / 1024
    kept = ", ".join(f"{f['bytes'] / 2**20:.1f}" for f in frames)
    print(
        f"  daemon RSS: start {start_rss / 1024:.1f} MB, after warm-up {baseline / 1024:.1f} MB,"
        f" peak {peak / 1024:.1f} MB, idle after each round {rounds} MB"
        f" (last vs first round {growth:+.1f} MB; first round vs warm-up {(after_rounds[0] - baseline) / 1024:+.1f} MB)"
    )
    print(f"  frame log after each round: {kept} MB of {frames[-1]['budgetBytes'] / 2**20:.0f} MB (a bounded cache)")
    result = {
        "bench": "soak",
        "hosts": opts.hosts,
        "seconds": round(elapsed, 1),
        "steps": calls,
        "failures": c["failed"],
        "tasks": c["task"],
        "questions": c["question"],
        "open_after": len(working["tasks"]),
        "rss_baseline_mb": round(baseline / 1024, 1),
        "rss_peak_mb": round(peak / 1024, 1),
        "rss_after_rounds_mb": [round(kb / 1024, 1) for kb in after_rounds],
        "rss_growth_between_rounds_mb": round(growth, 1),
        "frames_mb_after_rounds": [round(f["bytes"] / 2**20, 1) for f in frames],
        "daemon_alive": alive,
    }
    print("RESULT " + json.dumps(result))
    ok = alive and not c["failed"] and not working["tasks"] and not open_questions
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
