"""Three daemons on one PostgreSQL database (loopback only): one task space. Any instance answers
tasks/get; a cancel sent to another instance stops the work on the owner (forwarded by NOTIFY);
every instance's feed carries every instance's events in one gap-free sequence; when an instance is
SIGKILLed, a survivor takes its tasks over within the lease and its cut plain call fails naming it."""

from __future__ import annotations

import json
import random
import signal
import time
from pathlib import Path
from typing import Any

import pgcluster
import pytest
from harness import (
    Api,
    Daemon,
    FeedClient,
    ListenStream,
    RawHost,
    conformance_server,
    operator_attached,
    postgres_only,
    read_jsonl,
    reply_of,
    stdio_server,
    wait_until,
)

pytestmark = [postgres_only, pytest.mark.stress]  # its daemons name their store; slow tier

EXT = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
LEASE_MS = 1000
CONTENT = {"username": "ada", "email": "ada@example.com"}
NAMES = ("a", "b", "c")


def _start_three(start_daemon: Any, tmp_path: Path, url: str) -> dict[str, Daemon]:
    return {
        name: start_daemon(
            {
                "mcpServers": {"fx": stdio_server(tmp_path, name=f"fx-{name}")},
                "keepers": {"enabled": False},
                "tasks": {"taskAfterMs": 100},
                "store": {"url": url, "instance": name, "leaseMs": LEASE_MS},
            },
            name=f"inst-{name}",
        )
        for name in NAMES
    }


def _call(host: RawHost, seconds: float) -> str:
    args = {"seconds": seconds, "steps": max(1, int(seconds * 10))}
    handle = host.modern("tools/call", {"name": "fx__slow", "arguments": args}, meta=EXT).json()["result"]
    assert handle["resultType"] == "task", handle
    return str(handle["taskId"])


def _get(host: RawHost, tid: str) -> dict[str, Any]:
    return dict(host.modern("tasks/get", {"taskId": tid}, meta=EXT, headers={"Mcp-Name": tid}).json()["result"])


def test_three_instances_share_tasks_forward_cancels_feed_every_event_and_take_over_a_lost_one(
    start_daemon: Any, tmp_path: Path, raw_host: Any, pg_cluster: pgcluster.Cluster
) -> None:
    rng = random.Random(14)
    daemons = _start_three(start_daemon, tmp_path, pg_cluster.database())
    hosts = {name: raw_host(d.url) for name, d in daemons.items()}
    feed = FeedClient(daemons["c"])
    start_seq = feed.snapshot()["seq"]

    # Tasks made on random instances, each polled on random instances until done.
    made = {_call(hosts[rng.choice(NAMES)], 0.3): "completed" for _ in range(12)}
    # Long ones made on one instance and cancelled through another: the owner stops the work.
    for owner, via in (("a", "b"), ("b", "c"), ("c", "a")):
        tid = _call(hosts[owner], 30)
        ack = hosts[via].modern("tasks/cancel", {"taskId": tid}, meta=EXT, headers={"Mcp-Name": tid}).json()
        assert ack["result"]["resultType"] == "complete"
        made[tid] = "cancelled"
        wait_until(
            lambda owner=owner: any(
                e.get("event") == "cancelled" for e in read_jsonl(tmp_path / f"fx-{owner}.log.jsonl")
            ),
            what=f"the upstream of {owner} to see the cancel forwarded from {via}",
        )
    for tid, wanted in made.items():
        wait_until(lambda tid=tid, wanted=wanted: _get(hosts[rng.choice(NAMES)], tid)["status"] == wanted, what=wanted)

    # The feed of c carries a's and b's events too, in one sequence without holes.
    created = {e["taskId"] for e in feed.events("task.created")}
    wait_until(lambda: made.keys() <= {e["taskId"] for e in feed.events("task.created")}, what="every task on c's feed")
    seqs = [e["seq"] for e in feed.events()]
    assert seqs == list(range(start_seq + 1, start_seq + 1 + len(seqs))), "one gap-free sequence"
    assert created

    # SIGKILL a with a plain call running: a survivor fails it within the lease, naming a.
    cut = _call(hosts["a"], 60)
    assert _get(hosts["b"], cut)["status"] == "working"
    daemons["a"].stop(signal.SIGKILL)
    killed = time.monotonic()
    ended = wait_until(
        lambda: (t := _get(hosts[rng.choice(("b", "c"))], cut))["status"] != "working" and t,
        timeout=10,
        what="a survivor to take the lost task over",
    )
    took = time.monotonic() - killed
    assert ended["status"] == "failed" and "instance a was lost" in ended["statusMessage"], ended
    assert took < 3 * LEASE_MS / 1000, f"taken over after {took:.1f} s"
    wait_until(lambda: any(e["taskId"] == cut for e in feed.events("task.status")), what="c's feed to show it")
    for tid in made:  # no task id vanished with a
        assert _get(hosts["b"], tid)["status"] == made[tid]
    feed.close()


def test_an_operator_on_one_instance_answers_a_question_raised_in_a_task_another_runs(
    start_daemon: Any, raw_host: Any, pg_cluster: pgcluster.Cluster
) -> None:
    url = pg_cluster.database()
    a, b = (
        start_daemon(
            {
                "mcpServers": {"up": conformance_server(also_tasks=("test_tool_with_task",))},
                "tasks": {"taskAfterMs": 200},
                "store": {"url": url, "instance": name, "leaseMs": LEASE_MS},
            },
            name=f"q-{name}",
        )
        for name in ("a", "b")
    )
    host = raw_host(b.url)
    host.initialize()
    watcher = operator_attached(b, "olga")  # b's broker waits for an operator; the answer comes from a
    feed_a = FeedClient(a, kinds=["question.opened"])
    try:
        args = {"name": "test_elicitation", "arguments": {"message": "Across instances?"}, "task": {}}
        tid = host.legacy("tools/call", args).json()["result"]["task"]["taskId"]
        [opened] = wait_until(lambda: feed_a.events("question.opened"), 15, "a's feed to show b's question")
        assert opened["taskId"] == tid
        with Api(a) as api:
            taken = api.answer(opened["questionId"], "accept", by="olga", content=CONTENT)
            assert taken.status_code == 200, taken.text
            assert api.answer(opened["questionId"], "decline", by="late").status_code == 409
        result = reply_of(host.legacy("tasks/result", {"taskId": tid}))["result"]
        assert result["content"][0]["text"] == f"User response: action=accept, content={json.dumps(CONTENT)}"
    finally:
        watcher.close()
        feed_a.close()


ASKER = {
    "io.modelcontextprotocol/clientCapabilities": {
        "elicitation": {},
        **EXT["io.modelcontextprotocol/clientCapabilities"],
    }
}
PLAIN_META = EXT
TASKS = 1000


class _Plan:
    """One task of the 1,000: what its host asks of it and through which instances."""

    def __init__(self, n: int, rng: random.Random) -> None:
        self.n = n
        # 3 in 5 ask a question the host answers (confirming on even n), 1 in 5 are cancelled while
        # they ask, 1 in 5 are plain slow calls cancelled while they work.
        self.kind = ("answer", "answer", "answer", "cancel-asking", "cancel-working")[n % 5]
        self.confirm = n % 2 == 0
        self.owner = rng.choice(NAMES)
        self.task_id = ""
        self.status = ""  # the last status a tasks/get showed
        self.final: dict[str, Any] = {}
        self.acted = ""  # the instance it was answered or cancelled through
        self.via: list[str] = []  # the instances each request went through

    @property
    def wanted(self) -> str:
        return "completed" if self.kind == "answer" else "cancelled"

    @property
    def text(self) -> str:
        return f"{'Deleted' if self.confirm else 'Kept'} f{self.n}.txt"


@pytest.mark.long
@pytest.mark.timeout(240)
def test_1000_tasks_on_three_instances_polled_updated_and_cancelled_through_random_ones_end_as_asked(
    start_daemon: Any, tmp_path: Path, pg_cluster: pgcluster.Cluster
) -> None:
    """Every request goes to a random instance: tasks/get answered from the database, tasks/update
    and tasks/cancel forwarded to the owner by NOTIFY when they land elsewhere. Every task ends in
    the state its host asked for, with the answer it was given, and the feed of one instance holds
    every instance's events in one gap-free sequence."""
    from concurrent.futures import ThreadPoolExecutor

    url = pg_cluster.database()
    daemons = {
        name: start_daemon(
            {
                "mcpServers": {"fx": stdio_server(tmp_path, name=f"fx-{name}"), "up": conformance_server()},
                "keepers": {"enabled": False},
                "tasks": {"taskAfterMs": 100, "pollFloorMs": 0},
                "store": {"url": url, "instance": name, "leaseMs": 3000},
            },
            name=f"big-{name}",
        )
        for name in NAMES
    }
    rng = random.Random(1000)
    plans = [_Plan(n, rng) for n in range(TASKS)]
    feed = FeedClient(daemons["b"])
    start_seq = feed.snapshot()["seq"]
    workers = 8
    hosts = [{name: RawHost(d.url) for name, d in daemons.items()} for _ in range(workers)]

    def each(step: Any, todo: list[_Plan]) -> None:
        """`step(plan, hosts)` for every plan, spread over the workers (one RawHost per instance each)."""
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda w: [step(p, hosts[w]) for p in todo[w::workers]], range(workers)))

    def send(p: _Plan, hs: dict[str, RawHost], method: str, params: dict[str, Any], name: str | None = None) -> Any:
        name = name or rng.choice(NAMES)
        p.via.append(name)
        meta = PLAIN_META if p.kind == "cancel-working" else ASKER
        headers = {"Mcp-Name": params["taskId"]} if "taskId" in params else None
        frame = hs[name].modern(method, params, meta=meta, headers=headers).json()
        assert "result" in frame, (method, p.n, frame)
        return frame["result"]

    def create(p: _Plan, hs: dict[str, RawHost]) -> None:
        if p.kind == "cancel-working":
            call = {"name": "fx__slow", "arguments": {"seconds": 120}}
        else:
            call = {"name": "confirm_delete", "arguments": {"filename": f"f{p.n}.txt"}}
        handle = send(p, hs, "tools/call", call, name=p.owner)
        assert handle["resultType"] == "task", handle
        p.task_id = handle["taskId"]

    def poll(p: _Plan, hs: dict[str, RawHost]) -> None:
        got = send(p, hs, "tasks/get", {"taskId": p.task_id})
        p.status = got["status"]
        if got["status"] in ("completed", "cancelled", "failed"):
            p.final = got
            return
        if p.acted:
            return
        if p.kind == "cancel-working" or (p.kind == "cancel-asking" and got.get("inputRequests")):
            assert send(p, hs, "tasks/cancel", {"taskId": p.task_id})["resultType"] == "complete"
            p.acted = p.via[-1]
        elif p.kind == "answer" and got.get("inputRequests"):
            [key] = got["inputRequests"]
            answer = {"action": "accept", "content": {"confirm": p.confirm}}
            send(p, hs, "tasks/update", {"taskId": p.task_id, "inputResponses": {key: answer}})
            p.acted = p.via[-1]

    started = time.monotonic()
    each(create, plans)
    deadline = time.monotonic() + 60  # about 20 s here
    while (open_ := [p for p in plans if not p.final]) and time.monotonic() < deadline:
        each(poll, open_)
    took = time.monotonic() - started
    assert not open_, f"{len(open_)} tasks never ended, e.g. {[(p.n, p.kind, p.status) for p in open_[:5]]}"

    wrong = [(p.n, p.kind, p.final.get("status"), p.final.get("statusMessage")) for p in plans if p.status != p.wanted]
    assert not wrong, f"{len(wrong)} ended otherwise than asked, e.g. {wrong[:5]}"
    for p in plans:
        if p.kind == "answer":
            assert p.final["result"]["content"][0]["text"] == p.text, (p.n, p.final)
    # The hops that needed forwarding happened: updates and cancels through non-owners.
    forwarded = sum(1 for p in plans if p.acted != p.owner)
    assert forwarded > TASKS / 3, forwarded

    ids = {p.task_id for p in plans}
    wait_until(lambda: ids <= _ended(feed), 30, "b's feed to show every task end")
    seqs = [e["seq"] for e in feed.events()]
    assert seqs == list(range(start_seq + 1, start_seq + 1 + len(seqs))), "one gap-free sequence"
    answered = {e["taskId"]: e["by"] for e in feed.events("question.answered")}
    assert {p.task_id for p in plans if p.kind == "answer"} <= answered.keys()
    assert all(by.startswith("host:") for by in answered.values())
    for hs in hosts:
        for h in hs.values():
            h.close()
    feed.close()
    print(f"\n{TASKS} tasks on three instances in {took:.1f} s, {forwarded} updates/cancels via a non-owner")


def _ended(feed: FeedClient) -> set[str]:
    return {e["taskId"] for e in feed.events("task.status") if e["data"].get("status") in ("completed", "cancelled")}


def test_a_legacy_session_outlives_its_instance_and_goes_on_at_another(
    start_daemon: Any, tmp_path: Path, raw_host: Any, pg_cluster: pgcluster.Cluster
) -> None:
    """A 2025-11-25 session opened on a, which is then SIGKILLed: the host points at b with the same
    Mcp-Session-Id and goes on (its tasks listed, the cut one failed, new calls, DELETE)."""
    url = pg_cluster.database()
    a, b = (
        start_daemon(
            {
                "mcpServers": {"fx": stdio_server(tmp_path, name=f"fx-{name}")},
                "keepers": {"enabled": False},
                "store": {"url": url, "instance": name, "leaseMs": LEASE_MS},
            },
            name=f"s-{name}",
        )
        for name in ("a", "b")
    )
    host = raw_host(a.url)
    host.initialize()
    done = host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "before"}, "task": {}}).json()
    cut = host.legacy("tools/call", {"name": "fx__slow", "arguments": {"seconds": 60}, "task": {}}).json()
    done_id, cut_id = done["result"]["task"]["taskId"], cut["result"]["task"]["taskId"]
    wait_until(lambda: host.legacy("tasks/get", {"taskId": done_id}).json()["result"]["status"] == "completed")
    a.stop(signal.SIGKILL)

    host.url = b.url  # the same session id, another instance
    listed = {t["taskId"]: t for t in host.legacy("tasks/list").json()["result"]["tasks"]}
    assert listed.keys() == {done_id, cut_id}
    result = reply_of(host.legacy("tasks/result", {"taskId": done_id}))["result"]
    assert result["content"][0]["text"] == "before"
    ended = wait_until(
        lambda: (t := host.legacy("tasks/get", {"taskId": cut_id}).json()["result"])["status"] != "working" and t,
        timeout=3 * LEASE_MS / 1000 + 5,
        what="b to take a's cut call over",
    )
    assert ended["status"] == "failed" and "instance a was lost" in ended["statusMessage"]
    again = host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "after"}})
    assert reply_of(again)["result"]["content"][0]["text"] == "after"
    assert host.client.delete(b.url, headers=host._legacy_headers()).status_code in (200, 204)
    gone = host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "x"}})
    assert gone.status_code == 404, gone.text


def test_a_cleanly_stopped_instance_hands_its_tasks_over_at_once_not_after_its_lease(
    start_daemon: Any, tmp_path: Path, raw_host: Any, pg_cluster: pgcluster.Cluster
) -> None:
    """SIGTERM: a ends its lease and says so; b claims a's unfinished task at once, although the
    lease (60 s) has long to run, and fails the cut plain call naming a as stopped, not lost."""
    url = pg_cluster.database()
    a, b = (
        start_daemon(
            {
                "mcpServers": {"fx": stdio_server(tmp_path, name=f"fx-{name}")},
                "keepers": {"enabled": False},
                "tasks": {"taskAfterMs": 100},
                "store": {"url": url, "instance": name, "leaseMs": 60_000},
            },
            name=f"c-{name}",
        )
        for name in ("a", "b")
    )
    host = raw_host(a.url)
    cut = _call(host, 60)
    assert a.stop(signal.SIGTERM) == 0
    stopped_at = time.monotonic()
    host.url = b.url
    ended = wait_until(lambda: (t := _get(host, cut))["status"] != "working" and t, 10, "b to take a's task over")
    assert time.monotonic() - stopped_at < 10 < 60  # the hand-over, not the lease running out
    assert ended["status"] == "failed", ended
    assert "instance a stopped while this call was running" in ended["statusMessage"]
    rows = b.store_rows("SELECT instance FROM tasks WHERE id = ?", cut)
    assert rows == [("b",)]
    [(lease_until, stopped)] = b.store_rows("SELECT lease_until_ms, stopped_ms FROM instances WHERE id = ?", "a")
    assert lease_until == 0 and stopped is not None


def test_a_listen_stream_on_one_instance_hears_of_a_task_another_runs_once_per_change(
    start_daemon: Any, tmp_path: Path, raw_host: Any, pg_cluster: pgcluster.Cluster
) -> None:
    """notifications/tasks come from the event log, not only from changes the instance made itself:
    a task made and run on a, listened to on b, is heard at b as it moves; a cancel sent to b
    (forwarded to a, the change made there) is heard once."""
    daemons = _start_three(start_daemon, tmp_path, pg_cluster.database())
    a, b = daemons["a"], daemons["b"]
    host = raw_host(a.url)
    done, cut = _call(host, 0.5), _call(host, 60)
    stream = ListenStream(b.url, EXT, [done, cut])
    try:
        heard = wait_until(
            lambda: {n["taskId"]: n["status"] for n in stream.tasks_seen()}.get(done) == "completed",
            10,
            "b's listen stream to hear a's task complete",
        )
        assert heard
        ack = reply_of(raw_host(b.url).modern("tasks/cancel", {"taskId": cut}, meta=EXT, headers={"Mcp-Name": cut}))
        assert "result" in ack, ack
        wait_until(
            lambda: any(n["taskId"] == cut and n["status"] == "cancelled" for n in stream.tasks_seen()),
            10,
            "b's listen stream to hear the cancel a carried out",
        )
    finally:
        stream.close()
    seen = [(n["taskId"], n["status"]) for n in stream.tasks_seen()]
    assert seen.count((done, "completed")) == 1 and seen.count((cut, "cancelled")) == 1, seen
