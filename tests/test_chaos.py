"""Chaos: the daemon is SIGKILLed three times while 1,000 tasks run, and a restart loses nothing.

Hosts of both eras (2025-11-25 sessions with `params.task`, 2026-07-28 stateless hosts with
server-decided tasks) start 1,000 slow calls, spread over three kinds of upstream:

- stdio, each under its keeper (issue #15): the official SDK 2.3 server (plain calls: mcpx's task
  runs one plain upstream call, whose reply the keeper holds across the restart), the SDK 1.30
  server (2025-11-25 core tasks upstream) and FastMCP + fastmcp-tasks (the 2026 extension);
- HTTP: the SDK 1.30 and FastMCP-tasks servers as processes of their own (their tasks resume),
  and the SDK 2.3 server (a plain call a kill cuts has lost its response: that task fails, saying
  the daemon restarted).

While they run, the daemon is killed (SIGKILL) three times and restarted on the same port; hosts
retry what a dead daemon did not answer (a call that got no handle was never handed out). Then
every handed-out task id must still answer its owner, every one of those whose work can be
found again must complete with their own result (each call says a text of its own), any other
must end `failed` with a message naming why,
and the event log must hold every task's creation and end in one gap-free sequence.
"""

from __future__ import annotations

import json
import queue
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import UNIT, Api, Daemon, RawHost, reply_of, wait_until
from peers.venvs import peer_python

from mcpx.tasks.engine import RESTARTED

PEERS = Path(__file__).resolve().parent / "peers"
EXT = "io.modelcontextprotocol/tasks"
EXT_META = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}}
TASKS = 1000
KILL_AT = (250, 500, 750)  # handed-out tasks before each SIGKILL
WORKERS = 8
TERMINAL = {"completed", "failed", "cancelled"}
# FastMCP runs 10 tasks at a time by default: 500 tasks of 3 s would take it 150 s however mcpx fares.
FM_CONCURRENCY = ("--concurrency", "1000")

pytestmark = [pytest.mark.timeout(420), pytest.mark.stress, pytest.mark.peers]  # slow tier (tests/conftest.py)


@dataclass
class Plan:
    """One call a host makes: which upstream, which era, and the text its result must carry."""

    index: int
    upstream: str
    era: str
    seconds: float

    @property
    def text(self) -> str:
        return f"chaos-{self.index}"

    def expected(self) -> str:
        # The SDK 2.3 peer counts steps; the task servers name the seconds.
        return f"{self.text} after 2 steps" if self.upstream == "s2" else f"{self.text} after {self.seconds:g} s"


@dataclass
class Handed:
    plan: Plan
    task_id: str
    host: RawHost


@dataclass
class Run:
    """What the hosts got, shared by their threads."""

    handed: list[Handed] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    refused: list[str] = field(default_factory=list)  # calls answered with an error, not a handle
    dropped: int = 0  # calls a dying daemon never answered (retried as new calls)

    def count(self) -> int:
        with self.lock:
            return len(self.handed)


def _plans(upstreams: list[str]) -> list[Plan]:
    # Every upstream gets both eras; 1.5 to 4.5 s each, so every kill cuts hundreds of running calls.
    return [
        Plan(
            i,
            upstreams[i % len(upstreams)],
            "legacy" if (i // len(upstreams)) % 2 == 0 else "modern",
            1.5 + (i % 7) / 2,
        )
        for i in range(TASKS)
    ]


def _create(host: RawHost, plan: Plan) -> str:
    args = {"seconds": plan.seconds, "steps": 2, "text": plan.text}
    name = f"{plan.upstream}__slow"
    if plan.era == "legacy":
        frame = host.legacy("tools/call", {"name": name, "arguments": args, "task": {"ttl": 900000}}).json()
        if "result" not in frame:
            raise RuntimeError(f"legacy call refused: {frame}")
        return str(frame["result"]["task"]["taskId"])
    result = reply_of(host.modern("tools/call", {"name": name, "arguments": args}, meta=EXT_META))
    if result.get("result", {}).get("resultType") != "task":
        raise RuntimeError(f"modern call not a task: {result}")
    return str(result["result"]["taskId"])


def _creator(url: str, work: queue.Queue[Plan], run: Run, deadline: float) -> None:
    legacy, modern = RawHost(url), RawHost(url)  # closed by the test's teardown (OPEN_CLIENTS)
    _retry(lambda: legacy.initialize(), deadline)
    while True:
        try:
            plan = work.get_nowait()
        except queue.Empty:
            return
        host = legacy if plan.era == "legacy" else modern
        while True:
            if time.monotonic() > deadline:
                raise AssertionError("creating the tasks took too long")
            try:
                tid = _create(host, plan)
            except (httpx.TransportError, ValueError):
                # The daemon died before answering (or mid-answer): no handle was handed out.
                with run.lock:
                    run.dropped += 1
                time.sleep(0.05)
                continue
            except RuntimeError as refused:
                with run.lock:
                    run.refused.append(str(refused))
                time.sleep(0.05)
                continue
            with run.lock:
                run.handed.append(Handed(plan, tid, host))
            break


def _retry(call: Any, deadline: float) -> Any:
    while True:
        try:
            return call()
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _get(h: Handed) -> dict[str, Any]:
    if h.plan.era == "legacy":
        return reply_of(h.host.legacy("tasks/get", {"taskId": h.task_id}))
    return reply_of(h.host.modern("tasks/get", {"taskId": h.task_id}, meta=EXT_META, headers={"Mcp-Name": h.task_id}))


def _outcome(h: Handed) -> tuple[str, str]:
    """(status, the result text or the status message), once terminal."""
    got = _get(h)
    assert "result" in got, f"task {h.task_id} ({h.plan}) no longer answers its owner: {got}"
    task = got["result"]
    status = task["status"]
    if status != "completed":
        return status, task.get("statusMessage") or ""
    if h.plan.era == "legacy":
        result = reply_of(h.host.legacy("tasks/result", {"taskId": h.task_id}))["result"]
    else:
        result = task["result"]
    return status, result["content"][0]["text"]


def _working_in_store(d: Daemon) -> list[tuple[str, str, dict[str, Any]]]:
    """The unfinished tasks as the store last knew them: (id, upstream, stored body)."""
    rows = d.store_rows("SELECT id, upstream, body FROM tasks WHERE status NOT IN ('completed','failed','cancelled')")
    return [(str(tid), str(up), json.loads(body)) for tid, up, body in rows]


def _stored_events(d: Daemon) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with Api(d) as api:
        since = 0
        while page := api.get("/v1/events", params={"since": since, "limit": 5000}).json()["events"]:
            out += page
            since = page[-1]["seq"]
    return out


def _chaos(d: Daemon, upstreams: list[str], *, cut_fail: tuple[str, ...] = (), http: bool = False) -> None:
    """`cut_fail`: upstreams whose calls a kill cuts for good (plain calls over HTTP): those tasks
    complete or fail with the restart message; every one of the others completes (#37 item 11).
    `http`: the task servers are HTTP upstreams, whose reply to a task-creating call dies with the
    connection; a task the store had no upstream task id for at a kill may fail with the restart
    message (nobody can name the upstream's task any more). Every other one completes."""
    plans = _plans(upstreams)
    work: queue.Queue[Plan] = queue.Queue()
    for p in plans:
        work.put(p)
    run = Run()
    deadline = time.monotonic() + 240 * UNIT
    errors: list[BaseException] = []

    def creator() -> None:
        try:
            _creator(d.url, work, run, deadline)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=creator, daemon=True) for _ in range(WORKERS)]
    for t in threads:
        t.start()
    cut: list[int] = []
    handleless: set[str] = set()  # cut before the store held the upstream's task id
    for at in KILL_AT:
        wait_until(lambda at=at: run.count() >= at or errors, 120, f"{at} tasks handed out")
        assert not errors, errors
        d.stop(signal.SIGKILL)
        working = _working_in_store(d)  # what the kill interrupted, as the store last knew it
        cut.append(len(working))
        handleless |= {tid for tid, up, body in working if up not in cut_fail and not body.get("upstream_task_id")}
        d.start(port=d.port, wait_upstreams=False)
    for t in threads:
        t.join(max(1.0, deadline - time.monotonic()))
    assert not errors, errors
    assert run.count() == TASKS and not run.refused, run.refused[:5]

    # Every handed-out id answers its owner, and ends.
    open_: list[tuple[Handed, dict[str, Any]]] = []

    def all_ended() -> bool:
        open_[:] = [(h, t) for h in run.handed if (t := _get(h)["result"])["status"] not in TERMINAL]
        return not open_

    try:
        wait_until(all_ended, 120, "every task to end")
    except AssertionError:
        stuck = Counter((h.plan.upstream, h.plan.era, t["status"], t.get("statusMessage")) for h, t in open_)
        raise AssertionError(f"{len(open_)} tasks never ended: {dict(stuck)}\n{d.stderr()[-4000:]}") from None
    outcomes = {h.task_id: (h, *_outcome(h)) for h in run.handed}
    own = [tid for tid, (h, status, text) in outcomes.items() if status == "completed" and text == h.plan.expected()]
    others = {tid: (status, text) for tid, (h, status, text) in outcomes.items() if tid not in own}
    by_kind = Counter((h.plan.upstream, h.plan.era, status) for h, status, _ in outcomes.values())
    reasons = Counter(text for _, text in others.values())
    print(
        f"\n{len(own)}/{TASKS} completed with their own result; cut by the kills (working in the store): {cut};"
        f" calls the dying daemon dropped (retried): {run.dropped}\nby upstream, era, status: {dict(by_kind)}"
        f"\nthe others: {dict(reasons)}"
    )
    assert all(status == "failed" and text.strip() for status, text in others.values()), others
    honest = [tid for tid in others if outcomes[tid][0].plan.upstream in cut_fail or (http and tid in handleless)]
    assert all(others[tid][1] == RESTARTED for tid in honest), {others[tid][1] for tid in honest}
    carried = [h for h, _, _ in outcomes.values() if h.plan.upstream not in cut_fail]
    lost = len(others) - len(honest)
    assert lost == 0, f"{lost} of {len(carried)} did not complete with their own result: {reasons}"
    if http:
        print(f"task-server tasks cut before their upstream task id was stored: {len(handleless)}")
    assert all(n > 0 for n in cut), f"a kill cut nothing: {cut}"

    # One event log, no gap, every task's creation and end in it.
    events = _stored_events(d)
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "a gap in the event log"
    created = {e["taskId"] for e in events if e["kind"] == "task.created"}
    ended = {e["taskId"] for e in events if e["kind"] == "task.status" and e["data"]["status"] in TERMINAL}
    handed = {h.task_id for h in run.handed}
    assert handed <= created and handed <= ended


def _stdio(py: Path, script: str, *extra: str) -> dict[str, Any]:
    return {"command": str(py), "args": [str(PEERS / script), "stdio", *extra]}


def _config(servers: dict[str, Any]) -> dict[str, Any]:
    for entry in servers.values():
        entry["mcpx"] = {"maxInFlight": 2 * TASKS}  # every task at one server at once is the point
    return {
        "mcpServers": servers,
        "tasks": {"taskAfterMs": 50, "pollIntervalMs": 250, "maxActivePerOwner": 2000},
        "connections": {"maxRequestsPerSecond": 100000, "requestBurst": 100000},
    }


@pytest.mark.long
def test_three_sigkills_during_1000_tasks_on_kept_stdio_upstreams_lose_nothing(start_daemon: Any) -> None:
    servers = {
        "s2": _stdio(peer_python("mcp-2.3"), "sdk2_upstream.py"),
        "s1": _stdio(peer_python("mcp-1.30"), "sdk1_upstream.py"),
        "fm": _stdio(peer_python("fastmcp-tasks"), "fastmcp_upstream.py", *FM_CONCURRENCY),
    }
    d = start_daemon(_config(servers), name="chaos-stdio")
    _chaos(d, ["s2", "s1", "fm"])


@pytest.mark.long
@pytest.mark.sqlite_only("the stdio chaos runs on both stores; this one is about what HTTP upstreams resume")
def test_three_sigkills_during_1000_tasks_on_http_upstreams_resume_task_servers_and_fail_cut_plain_calls(
    start_daemon: Any, tmp_path: Path
) -> None:
    """The SDK 1.30 and FastMCP-tasks servers' tasks are resumed; a plain call to the SDK 2.3 server
    that a kill cut has lost its response with the connection, and its task says so."""
    from test_era_matrix import _start_sdk2_http, _stop
    from test_upstream_tasks import PeerHttp

    s1 = PeerHttp(peer_python("mcp-1.30"), PEERS / "sdk1_upstream.py", tmp_path, "sdk1-http")
    fm = PeerHttp(
        peer_python("fastmcp-tasks"), PEERS / "fastmcp_upstream.py", tmp_path, "fastmcp-http", *FM_CONCURRENCY
    )
    s2, s2_url = _start_sdk2_http(peer_python("mcp-2.3"), tmp_path)
    try:
        servers = {"s1": {"url": s1.url}, "fm": {"url": fm.url}, "s2": {"url": s2_url}}
        d = start_daemon(_config(servers), name="chaos-http")
        _chaos(d, ["s2", "s1", "fm"], cut_fail=("s2",), http=True)
    finally:
        s1.stop()
        fm.stop()
        _stop(s2)
