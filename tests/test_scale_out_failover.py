"""Three daemons on one PostgreSQL database, all in front of the same HTTP task servers (the SDK
1.30 server's 2025-11-25 core tasks and the FastMCP-tasks server's 2026 extension), each with a
stdio server of its own for plain calls. Hosts of both eras start long upstream tasks and plain
calls on every instance; one instance is SIGKILLed mid-run. Within the lease its upstream tasks are
taken over by the survivors and finish with their own results; its plain calls (their server died
with it: keepers off) fail naming it; no task id vanishes; a survivor's feed carries it all in one
gap-free sequence, and the console attached to a survivor shows every task with its final state."""

from __future__ import annotations

import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pgcluster
import pytest
from harness import UNIT, Daemon, FeedClient, RawHost, postgres_only, read_jsonl, reply_of, stdio_server, wait_until
from peers.venvs import peer_python
from test_chaos import EXT_META, FM_CONCURRENCY, PEERS, TERMINAL
from textual.pilot import Pilot

from console.app import ConsoleApp
from console.client import DaemonClient, locate_in

# Its daemons name their store; SIGKILLs with SDK 1.30 and FastMCP upstreams: slow tier.
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240), postgres_only, pytest.mark.stress, pytest.mark.peers]

LEASE_MS = 1000
NAMES = ("a", "b", "c")
KILLED, SURVIVORS = "a", ("b", "c")
ERAS = ("legacy", "modern")
PER_KIND = 3  # upstream tasks per instance, task server and era: 36 in all, 12 of them on a


@dataclass
class Call:
    """One call a host made on one instance, and what it must end as."""

    index: int
    instance: str
    upstream: str  # s1 (SDK 1.30 tasks), fm (FastMCP tasks), fx (the instance's own plain server)
    era: str
    seconds: float
    task_id: str = ""

    @property
    def plain(self) -> bool:
        return self.upstream == "fx"

    def arguments(self) -> dict[str, Any]:
        if self.plain:
            return {"seconds": self.seconds, "steps": 2}
        return {"seconds": self.seconds, "steps": 2, "text": f"failover-{self.index}"}

    def expected(self) -> tuple[str, str]:
        """The final status, and the result's text (or the status message it must contain)."""
        if self.plain and self.instance == KILLED:
            return "failed", f"the mcpx instance {KILLED} was lost"
        if self.plain:
            return "completed", f"slept {self.seconds}"
        return "completed", f"failover-{self.index} after {self.seconds:g} s"


def _plans() -> list[Call]:
    calls: list[Call] = []
    for instance in NAMES:
        # a's work must still be running when a dies (and after the takeover); the others' need not.
        # 10 s: on a loaded machine making every call took 5 s and anchoring a's 3 more, and with 5 s
        # a's first task ended (a wrote it completed) just before the kill, so it was never a
        # survivor's (a clean-clone CI run timed out waiting for the takeover).
        base = 10.0 if instance == KILLED else 2.0
        for upstream in ("s1", "fm"):
            for era in ERAS:
                for k in range(PER_KIND):
                    calls.append(Call(len(calls), instance, upstream, era, base + k))
        for era in ERAS:  # plain calls: a's are cut by the kill
            calls.append(Call(len(calls), instance, "fx", era, 60.0 if instance == KILLED else 3.0))
    return calls


class Hosts:
    """Per instance, a 2025 session and a 2026 host made there; any call can be followed through
    any instance (the session goes on through the shared store; a 2026 task is reachable by id)."""

    def __init__(self, daemons: dict[str, Daemon]) -> None:
        self.daemons = daemons
        self.legacy = {name: RawHost(d.url) for name, d in daemons.items()}
        for host in self.legacy.values():
            host.initialize()
        self.modern = {name: RawHost(d.url) for name, d in daemons.items()}
        self._via: dict[tuple[str, str], RawHost] = {}

    def create(self, call: Call) -> str:
        params = {"name": f"{call.upstream}__slow", "arguments": call.arguments()}
        if call.era == "legacy":
            frame = reply_of(self.legacy[call.instance].legacy("tools/call", {**params, "task": {"ttl": 600000}}))
            return str(frame["result"]["task"]["taskId"])
        frame = reply_of(self.modern[call.instance].modern("tools/call", params, meta=EXT_META))
        assert frame["result"]["resultType"] == "task", frame
        return str(frame["result"]["taskId"])

    def via(self, call: Call, instance: str) -> RawHost:
        """A host on `instance` that may follow `call` (its own session, for a 2025 call)."""
        if call.era == "modern":
            return self.modern[instance]
        key = (call.instance, instance)
        if key not in self._via:
            made = self.legacy[call.instance]
            host = RawHost(self.daemons[instance].url)
            host.session_id, host.revision = made.session_id, made.revision
            self._via[key] = host
        return self._via[key]

    def get(self, call: Call, instance: str) -> dict[str, Any]:
        host = self.via(call, instance)
        if call.era == "legacy":
            frame = reply_of(host.legacy("tasks/get", {"taskId": call.task_id}))
        else:
            frame = reply_of(
                host.modern("tasks/get", {"taskId": call.task_id}, meta=EXT_META, headers={"Mcp-Name": call.task_id})
            )
        assert "result" in frame, f"{call} vanished on {instance}: {frame}"
        return dict(frame["result"])

    def outcome(self, call: Call, instance: str) -> tuple[str, str]:
        """(status, the result's text or the status message), through `instance`."""
        task = self.get(call, instance)
        if task["status"] != "completed":
            return task["status"], task.get("statusMessage") or ""
        if call.era == "legacy":
            result = reply_of(self.via(call, instance).legacy("tasks/result", {"taskId": call.task_id}))["result"]
        else:
            result = task["result"]
        return "completed", result["content"][0]["text"]


class Rows:
    """The task rows as the shared store holds them: which instance runs each, and its upstream task."""

    def __init__(self, cluster: pgcluster.Cluster, url: str) -> None:
        self.cluster = cluster
        self.database = urlsplit(url).path.lstrip("/")

    def __call__(self) -> dict[str, tuple[str, str, str]]:
        sql = "SELECT id, coalesce(instance, ''), status, coalesce(body::json->>'upstream_task_id', '') FROM tasks"
        out = self.cluster.psql(sql, self.database)
        rows = [line.split("|") for line in out.splitlines() if line]
        return {r[0]: (r[1], r[2], r[3]) for r in rows}


def _first_poll_after(events: Path, upstream_task_id: str, after: float) -> float | None:
    """When the upstream was first asked about its task after `after` (wall clock), if it was."""
    seen = [
        e["t"]
        for e in read_jsonl(events)
        if e["event"] == "request" and e.get("taskId") == upstream_task_id and e["t"] > after
    ]
    return min(seen) if seen else None


def _scenario(daemons: dict[str, Daemon], rows: Rows, peer_events: dict[str, Path], feed: FeedClient) -> list[Call]:
    """Everything but the console: returns the calls made, with their task ids."""
    rng = random.Random(14)
    hosts = Hosts(daemons)
    start_seq = feed.snapshot()["seq"]
    calls = _plans()
    for call in sorted(calls, key=lambda c: c.instance == KILLED):  # a's last: all still running at the kill
        call.task_id = hosts.create(call)
    ours = [c for c in calls if c.instance == KILLED]
    carried = [c for c in ours if not c.plain]
    stored = rows()
    assert {c.task_id for c in calls} <= stored.keys()
    assert all(stored[c.task_id][0] == c.instance for c in calls), "each task runs where it was made"

    # Every upstream task a started is on its row (else a kill could only fail it), and still running.
    def anchored() -> dict[str, str] | None:
        now = rows()
        ids = {c.task_id: now[c.task_id][2] for c in carried}
        return ids if all(ids.values()) else None

    upstream_ids: dict[str, str] = wait_until(anchored, 10, "a's upstream task ids on their rows")
    assert all(rows()[c.task_id][1] == "working" for c in ours), "a's work ended before the kill"

    daemons[KILLED].stop(signal.SIGKILL)
    killed, killed_wall = time.monotonic(), time.time()

    # Within the lease (three of them at most) every open task of a is a survivor's.
    def taken_over() -> bool:
        now = rows()
        return all(now[c.task_id][0] in SURVIVORS for c in ours)

    wait_until(taken_over, 10, "the survivors to take a's tasks over")
    took = time.monotonic() - killed
    assert took < 3 * LEASE_MS / 1000 * UNIT, f"a's tasks taken over {took:.1f} s after the kill"
    by = Counter(rows()[c.task_id][0] for c in ours)
    # ...and the new owner asks the task servers about a's upstream tasks again, as quickly. (A poll
    # a sent just before it died lands a moment after the kill; none can come later than that.)
    polled_after: list[float] = []
    for call in carried:
        events = peer_events[call.upstream]
        upstream_id = upstream_ids[call.task_id]
        polled = wait_until(
            lambda e=events, u=upstream_id: _first_poll_after(e, u, killed_wall + 0.3), 10, "a survivor's poll"
        )
        polled_after.append(polled - killed_wall)
        assert polled_after[-1] < 3 * LEASE_MS / 1000 * UNIT, f"{call} polled again {polled_after[-1]:.1f} s on"

    # Every call ends, followed through random survivors; each with its own result, a's plain
    # calls failed naming a. Not one id vanished: each answers on both survivors.
    def ended(call: Call) -> bool:
        return hosts.get(call, rng.choice(SURVIVORS))["status"] in TERMINAL

    for call in calls:
        wait_until(lambda call=call: ended(call), 30, f"{call} to end")
    for call in calls:
        for survivor in SURVIVORS:
            status, text = hosts.outcome(call, survivor)
            want_status, want_text = call.expected()
            assert status == want_status, (call, status, text)
            assert text == want_text if status == "completed" else want_text in text, (call, text)
    final = rows()
    assert all(final[c.task_id][0] in SURVIVORS for c in ours)
    assert all(final[c.task_id][1] in TERMINAL for c in calls)

    # The task servers ran each tool once: a's upstream tasks were followed, not started again;
    # those of the SDK 1.30 server (it names the task) were still running when a died.
    for upstream, events in peer_events.items():
        started = [e for e in read_jsonl(events) if e["event"] == "slow_start"]
        assert len(started) == sum(c.upstream == upstream for c in calls), f"{upstream} ran a tool twice"
    done_at = {e["taskId"]: e["t"] for e in read_jsonl(peer_events["s1"]) if e["event"] == "slow_done"}
    assert all(done_at[upstream_ids[c.task_id]] > killed_wall for c in carried if c.upstream == "s1")

    # b's feed: every task made, and every end (a's too), in one sequence without holes.
    def all_ended_on_feed() -> bool:
        ends = {e["taskId"] for e in feed.events("task.status") if e["data"]["status"] in TERMINAL}
        return {c.task_id for c in calls} <= ends

    wait_until(all_ended_on_feed, 10, "every end on b's feed")
    seqs = [e["seq"] for e in feed.events()]
    assert seqs == list(range(start_seq + 1, start_seq + 1 + len(seqs))), "one gap-free sequence"
    assert {c.task_id for c in calls} <= {e["taskId"] for e in feed.events("task.created")}
    lost = [e for e in feed.events("task.status") if e["data"]["status"] == "failed"]
    assert {e["taskId"] for e in lost} == {c.task_id for c in ours if c.plain}
    assert all(e["by"] == "mcpx" and f"instance {KILLED} was lost" in e["data"]["statusMessage"] for e in lost), lost
    print(
        f"\n{len(calls)} calls, {len(ours)} of them on {KILLED}: taken over {took:.2f} s after the SIGKILL"
        f" (by {dict(by)}); its upstream tasks polled again {min(polled_after):.2f}-{max(polled_after):.2f} s after"
    )
    return calls


def _start_peers(tmp_path: Path) -> dict[str, Any]:
    from test_upstream_tasks import PeerHttp

    with ThreadPoolExecutor(2) as pool:  # FastMCP takes seconds to import: both at once
        s1 = pool.submit(PeerHttp, peer_python("mcp-1.30"), PEERS / "sdk1_upstream.py", tmp_path, "sdk1-http")
        fm = pool.submit(
            PeerHttp, peer_python("fastmcp-tasks"), PEERS / "fastmcp_upstream.py", tmp_path, "fm-http", *FM_CONCURRENCY
        )
    started = {name: f.result() for name, f in (("s1", s1), ("fm", fm)) if f.exception() is None}
    if len(started) < 2:  # one did not start: the other is not left running
        for peer in started.values():
            peer.stop()
        (s1 if s1.exception() else fm).result()
    return started


def _start_three(
    start_daemon: Callable[..., Daemon], tmp_path: Path, url: str, peers: dict[str, Any]
) -> dict[str, Daemon]:
    def start(name: str) -> Daemon:
        config = {
            "mcpServers": {
                "s1": {"url": peers["s1"].url},
                "fm": {"url": peers["fm"].url},
                "fx": stdio_server(tmp_path, name=f"fx-{name}"),
            },
            "keepers": {"enabled": False},  # a's plain calls die with it
            "tasks": {"taskAfterMs": 100, "pollIntervalMs": 250},
            "connections": {"maxRequestsPerSecond": 100000, "requestBurst": 100000},
            "store": {"url": url, "instance": name, "leaseMs": LEASE_MS},
        }
        return start_daemon(config, name=f"fo-{name}")

    with ThreadPoolExecutor(3) as pool:
        return dict(zip(NAMES, pool.map(start, NAMES), strict=True))


async def _until(pilot: Pilot[None], cond: Callable[[], Any], what: str, timeout: float = 20) -> Any:
    with anyio.move_on_after(timeout * UNIT):
        while not (got := cond()):
            await pilot.pause(0.05)
        return got
    raise AssertionError(f"never: {what}")


@pytest.mark.long
async def test_a_sigkilled_instance_s_upstream_tasks_finish_on_survivors_and_its_plain_calls_fail_naming_it(
    start_daemon: Any, tmp_path: Path, pg_cluster: pgcluster.Cluster
) -> None:
    peers = await anyio.to_thread.run_sync(_start_peers, tmp_path)
    try:
        url = pg_cluster.database()
        daemons = await anyio.to_thread.run_sync(_start_three, start_daemon, tmp_path, url, peers)
        feed = FeedClient(daemons["b"])
        # The console is attached to c from the start: it watches the kill and the takeover live.
        app = ConsoleApp(DaemonClient(locate_in(daemons["c"].state_dir), "olga"), bell=False)
        async with app.run_test(size=(180, 48)) as pilot:
            await _until(pilot, lambda: app.link == "connected", "the console connected")
            events = {name: peer.events for name, peer in peers.items()}
            calls = await anyio.to_thread.run_sync(_scenario, daemons, Rows(pg_cluster, url), events, feed)

            def final(call: Call) -> bool:
                row = app.state.tasks.get(call.task_id)
                return row is not None and row.status == call.expected()[0]

            await _until(pilot, lambda: all(final(c) for c in calls), "every task's final status in the console")
            await _until(pilot, lambda: {c.task_id for c in calls} <= set(app.table.shown()), "every task's row")
            for call in calls:
                status, text = call.expected()
                assert app.table.get_cell(call.task_id, "status").plain == status
                if status == "failed":
                    assert text in str(app.table.get_cell(call.task_id, "message"))
        feed.close()
    finally:
        for peer in peers.values():
            peer.stop()
