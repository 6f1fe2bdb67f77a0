"""The `/v1/events` feed against a real daemon: every event, in order, exactly once, across a
forced reconnect and a SIGKILL restart; a subscriber that never reads slows nothing down."""

from __future__ import annotations

import base64
import itertools
import json
import os
import signal
import socket
import threading
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from harness import UNIT, Api, Daemon, FeedClient, RawHost, stdio_server, wait_until

from mcpx.api.event_schemas import data_schema, envelope_schema
from mcpx.tasks.engine import RESTARTED

TERMINAL = {"completed", "failed", "cancelled"}


def _make_tasks(url: str, count: int, workers: int, args: dict[str, Any], name: str = "fx__slow") -> list[str]:
    """`count` 2025-11-25 tasks created concurrently over `workers` sessions; their ids."""
    ids: list[str] = []
    lock = threading.Lock()
    errors: list[str] = []

    def work(n: int) -> None:
        with RawHost(url) as host:
            host.initialize()
            for _ in range(n):
                frame = host.legacy("tools/call", {"name": name, "arguments": args, "task": {}}).json()
                if "result" not in frame:
                    errors.append(json.dumps(frame))
                    continue
                with lock:
                    ids.append(frame["result"]["task"]["taskId"])

    shares = [count // workers + (i < count % workers) for i in range(workers)]
    threads = [threading.Thread(target=work, args=(n,)) for n in shares]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    return ids


def _check_shapes(messages: list[dict[str, Any]]) -> None:
    envelope = envelope_schema()
    for m in messages:
        if m.get("type") == "event":
            jsonschema.validate(m, envelope)
            jsonschema.validate(m["data"], data_schema(m["kind"]))


TASKS = 500  # live at once through a SIGKILL (the chaos test runs 1,000 through three)
QUEUE = 256  # the stuck subscriber's queue bound (events.subscriberQueue)


def _all_terminal(api: Api, ids: list[str]) -> bool:
    page = api.get("/v1/tasks", params={"status": ["working", "input_required"], "limit": 1}).json()
    return not page["tasks"]


@pytest.mark.long
@pytest.mark.stress
def test_every_event_of_500_tasks_arrives_in_order_once_across_a_reconnect_and_a_sigkill(
    start_daemon: Any, tmp_path: Path
) -> None:
    """500 tasks live at once (each runs 12 s, longer than creating them all takes); a subscriber
    dropped and resumed mid-creation; the daemon SIGKILLed while every one of them runs, then
    restarted. Each task then ends after the restart: failed as the restart cut it, or carried on
    through its kept upstream and completed. Every event arrives once, in order, none missing."""
    d: Daemon = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    first = FeedClient(d)
    snapshot = first.snapshot()
    segments: list[list[dict[str, Any]]] = []
    ids: list[str] = []
    args = {"seconds": 12 * UNIT, "steps": 1}
    creator = threading.Thread(target=lambda: ids.extend(_make_tasks(d.url, TASKS, 8, args)))
    creator.start()
    wait_until(lambda: len(first.events("task.created")) >= 150, 60, "150 tasks created")
    first.close()  # a dropped feed: resume by sequence
    segments.append(first.events())
    second = FeedClient(d, since=segments[-1][-1]["seq"])
    creator.join(120)
    assert len(ids) == TASKS
    before = sum(e["kind"] == "task.created" for e in segments[0])
    wait_until(lambda: len(second.events("task.created")) + before >= TASKS, 30, "all creations seen")
    with Api(d) as api:
        live = api.get("/v1/tasks", params={"status": "working", "limit": 1000}).json()["tasks"]
    assert {t["id"] for t in live} == set(ids), f"only {len(live)} of the {TASKS} tasks ran at once"
    d.stop(signal.SIGKILL)  # every task is still working
    second.close()
    segments.append(second.events())
    d.start(port=d.port)
    third = FeedClient(d, since=segments[-1][-1]["seq"])
    with Api(d) as api:
        wait_until(lambda: _all_terminal(api, ids), 60 * UNIT, "every task terminal")
        last = api.get("/v1/status").json()["lastSeq"]
        wait_until(lambda: third.events() and third.events()[-1]["seq"] >= last, 20, "third feed caught up")
        third.close()
        segments.append(third.events())
        stored: list[dict[str, Any]] = []
        since = snapshot["seq"]
        while True:
            page = api.get("/v1/events", params={"since": since, "limit": 5000}).json()["events"]
            if not page:
                break
            stored += page
            since = page[-1]["seq"]
    got = [e["seq"] for seg in segments for e in seg]
    assert got == sorted(set(got)), "out of order or duplicated across the reconnect and the restart"
    assert got == [e["seq"] for e in stored], "the feed and the store disagree"
    assert got == list(range(snapshot["seq"] + 1, got[-1] + 1)), "a gap in the sequence"
    for seg in segments:
        _check_shapes(seg)
    events = [e for seg in segments for e in seg]
    created = {e["taskId"] for e in events if e["kind"] == "task.created"}
    assert created == set(ids)
    # The SIGKILL cut every task: each one's end is an event of the restarted daemon.
    ends = [e for e in events if e["kind"] == "task.status" and e["data"]["status"] in TERMINAL]
    assert min(e["seq"] for e in ends) > segments[1][-1]["seq"], "a task ended before the SIGKILL"
    assert sorted(e["taskId"] for e in ends) == sorted(ids)
    failed = [e for e in ends if e["data"]["status"] == "failed"]
    resumed = [e for e in ends if e["data"]["status"] == "completed"]
    assert all(e["data"]["statusMessage"] == RESTARTED for e in failed), {e["data"]["statusMessage"] for e in failed}
    assert len(failed) + len(resumed) == TASKS
    print(f"{len(events)} events; of {TASKS} tasks cut by the SIGKILL {len(resumed)} resumed, {len(failed)} failed")


def _stuck_subscriber(port: int, token: str) -> socket.socket:
    """A websocket client that subscribes and then never reads, with a tiny receive buffer."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert b" 101 " in head.split(b"\r\n")[0], head
    payload = json.dumps({"type": "subscribe"}).encode()
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    sock.sendall(bytes([0x81, 0x80 | len(payload)]) + mask + masked)
    return sock


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@pytest.mark.long
@pytest.mark.stress
def test_a_subscriber_that_never_reads_neither_slows_tasks_nor_grows_without_bound(
    start_daemon: Any, tmp_path: Path
) -> None:
    # A subscriber queue of 256 (2,048 by default): the same overflow, with a third of the tasks.
    d: Daemon = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}, "events": {"subscriberQueue": QUEUE}})
    stuck = _stuck_subscriber(d.port, d.token)
    reader = FeedClient(d, kinds=["task.created"])  # a healthy subscriber beside it
    try:
        assert d.proc is not None
        before = _rss_kb(d.proc.pid)
        # Big arguments make big task.created events: the stuck socket's buffers fill quickly.
        ids = _make_tasks(d.url, 800, 8, {"text": "x" * 16_000}, name="fx__echo")
        with Api(d) as api:
            wait_until(lambda: _all_terminal(api, ids), 60, "every task terminal")
            subs = api.get("/v1/status").json()["subscribers"]
        after = _rss_kb(d.proc.pid)
        wait_until(lambda: len(reader.events("task.created")) == len(ids), 30, "the healthy reader saw every task")
        queued = sorted(s["queued"] for s in subs)
        print(f"queues {queued}; overflowed {[s['overflowed'] for s in subs]}; RSS {before} -> {after} kB")
        assert len(ids) == 800
        stuck_sub = max(subs, key=lambda s: (s["overflowed"], s["queued"]))
        assert stuck_sub["overflowed"] or stuck_sub["queued"] <= QUEUE
        assert all(s["queued"] <= QUEUE for s in subs)  # bounded, whatever the subscriber does
        assert any(s["overflowed"] for s in subs), "the stuck subscriber never fell behind: make the run longer"
    finally:
        reader.close()
        stuck.close()


def test_a_resumed_subscriber_is_told_it_is_caught_up_at_once(start_daemon: Any, tmp_path: Path) -> None:
    """After the stored events, a heartbeat with the newest seq at once (not 15 s later), so a
    console resuming after a restart knows it is live while nothing happens."""
    d: Daemon = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    ids = _make_tasks(d.url, 2, 1, {"text": "x"}, name="fx__echo")
    first = FeedClient(d)
    seq = first.snapshot()["seq"]
    first.close()
    resumed = FeedClient(d, since=seq - 1)
    wait_until(lambda: any(m["type"] == "heartbeat" for m in resumed.messages), 3, "the caught-up heartbeat")
    messages = list(resumed.messages)
    beat = next(i for i, m in enumerate(messages) if m["type"] == "heartbeat")
    # The stored events from `since` on (the one at `seq`, and any a finishing task wrote since the
    # snapshot), then at once the heartbeat naming the newest of them.
    caught_up = messages[:beat]
    assert [m["type"] for m in caught_up] == ["event"] * len(caught_up) and caught_up, messages
    assert [m["seq"] for m in caught_up] == list(range(seq, seq + len(caught_up))), messages
    assert messages[beat]["seq"] == caught_up[-1]["seq"] and len(ids) == 2
    resumed.close()


# ---- who may subscribe ---------------------------------------------------------------------------
def _connect(d: Daemon, **headers: str) -> Any:
    """A raw feed websocket with exactly these headers (FeedClient always sends the token)."""
    from websockets.sync.client import connect

    return connect(f"ws://127.0.0.1:{d.port}/v1/events", additional_headers=headers, open_timeout=10)


def _refused_at_handshake(d: Daemon, **headers: str) -> Any:
    """The HTTP response that refused the websocket upgrade."""
    from websockets.exceptions import InvalidStatus

    try:
        _connect(d, **headers).close()
    except InvalidStatus as exc:
        return exc.response
    raise AssertionError(f"the feed accepted {headers}")


def _closed_after(d: Daemon, hello: dict[str, Any]) -> Any:
    """Subscribe without an Authorization header; the close frame the daemon answered with."""
    from websockets.exceptions import ConnectionClosed

    with _connect(d) as ws:
        ws.send(json.dumps(hello))
        try:
            got = ws.recv(timeout=10)
        except ConnectionClosed as closed:
            return closed.rcvd
        raise AssertionError(f"the feed answered {got!r} to {hello}")


def test_the_feed_takes_the_token_in_a_header_or_the_first_message_and_refuses_anything_else(
    start_daemon: Any,
) -> None:
    d: Daemon = start_daemon()
    # For clients that cannot set headers: the token in the subscribe message is enough.
    with _connect(d) as ws:
        ws.send(json.dumps({"type": "subscribe", "token": d.token}))
        assert json.loads(ws.recv(timeout=10))["type"] == "snapshot"
    # A loopback page may subscribe (its Origin is allowed) ...
    with _connect(d, Authorization=f"Bearer {d.token}", Origin=f"http://localhost:{d.port}") as ws:
        ws.send(json.dumps({"type": "subscribe"}))
        assert json.loads(ws.recv(timeout=10))["type"] == "snapshot"
    # ... a foreign one may not, token or not: HTTP 403, as on /v1.
    foreign = _refused_at_handshake(d, Authorization=f"Bearer {d.token}", Origin="https://evil.example")
    assert foreign.status_code == 403, foreign
    # A wrong token in the header: HTTP 401, as on /v1.
    wrong = _refused_at_handshake(d, Authorization="Bearer not-the-token")
    assert wrong.status_code == 401 and b"token" in wrong.body, (wrong.status_code, wrong.body)
    # No header, and the first message has no token or a wrong one: closed with 4401.
    for hello in (
        {"type": "subscribe"},
        {"type": "subscribe", "token": d.token + "x"},
        {"type": "subscribe", "token": 1},
    ):
        close = _closed_after(d, hello)
        assert close is not None and (close.code, close.reason) == (4401, "mcpx API token required"), (hello, close)
    assert d.status()["subscribers"] == []  # none of the refused ones stayed subscribed


# ---- falling behind, resuming too late, heartbeats -----------------------------------------------
def _seqs_after(messages: list[dict[str, Any]], start: int) -> list[int]:
    """The event seqs of a subscription, checked to run from `start` + 1 on with no gap and no repeat."""
    got = [m["seq"] for m in messages if m["type"] == "event"]
    assert got == list(range(start + 1, start + 1 + len(got))), "an event missing or repeated"
    return got


def test_a_subscriber_that_falls_behind_is_told_gap_and_caught_up_from_the_store(
    start_daemon: Any, tmp_path: Path
) -> None:
    # A queue of one event: any burst while the feed is still sending overflows it.
    d: Daemon = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}, "events": {"subscriberQueue": 1}})
    feed = FeedClient(d)
    start = feed.snapshot()["seq"]
    ids: list[str] = []
    for _ in range(10):  # rounds of concurrent tasks until the feed has fallen behind once
        ids += _make_tasks(d.url, 80, 8, {"text": "x"}, name="fx__echo")
        if any(m["type"] == "gap" for m in feed.messages):
            break
    with Api(d) as api:
        wait_until(lambda: _all_terminal(api, ids), 30, "every task terminal")
        last = api.get("/v1/status").json()["lastSeq"]
    wait_until(lambda: feed.events() and feed.events()[-1]["seq"] >= last, 20, "the feed caught up")
    feed.close()
    messages = feed.messages[1:]
    gaps = [i for i, m in enumerate(messages) if m["type"] == "gap"]
    assert gaps, "the feed never fell behind"
    # Each gap names the last event sent before it; the catch-up goes on right after that one.
    for i in gaps:
        sent = [m["seq"] for m in messages[:i] if m["type"] == "event"]
        assert messages[i]["after"] == (sent[-1] if sent else start), messages[i]
        after = next(m for m in messages[i + 1 :] if m["type"] in ("event", "gap"))
        assert after["type"] == "gap" or after["seq"] == messages[i]["after"] + 1, after
    got = _seqs_after(messages, start)
    assert got[-1] == last and {e["taskId"] for e in feed.events("task.created")} == set(ids)
    print(f"{len(got)} events, {len(gaps)} gaps caught up")


def test_a_resume_from_before_the_retained_events_gets_reset_and_a_fresh_snapshot(
    start_daemon: Any, tmp_path: Path
) -> None:
    d: Daemon = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}, "events": {"maxRows": 20}})
    ids = _make_tasks(d.url, 16, 2, {"text": "x"}, name="fx__echo")  # more than 20 events
    with Api(d) as api:
        wait_until(lambda: _all_terminal(api, ids), 20, "every task terminal")
    d.stop()
    d.start()  # the cap is applied at start: the oldest events go
    with Api(d) as api:

        def first_stored() -> int:
            return int(api.get("/v1/events", params={"since": 0, "limit": 1}).json()["events"][0]["seq"])

        wait_until(lambda: first_stored() > 2, 10, "the event log trimmed to its cap")
        first, last = first_stored(), api.get("/v1/status").json()["lastSeq"]
    assert last - first + 1 <= 20
    late = FeedClient(d, since=1)  # a console that last applied event 1
    wait_until(lambda: len(late.messages) >= 2, 10, "reset and snapshot")
    reset, snapshot = late.messages[:2]
    assert reset == {"type": "reset", "reason": f"events up to {first - 1} are no longer stored"}, reset
    assert snapshot["type"] == "snapshot" and snapshot["seq"] >= last
    assert {t["id"] for t in snapshot["tasks"]} >= set(ids)
    # Still live after the reset: a new task arrives as the next event after the snapshot.
    [tid] = _make_tasks(d.url, 1, 1, {"text": "y"}, name="fx__echo")
    [created] = wait_until(lambda: late.events("task.created"), 10, "the new task's event")
    with Api(d) as api:  # its time as /v1 gives it: epoch milliseconds, the same number
        assert (
            created["taskId"] == tid and created["data"]["createdMs"] == api.get(f"/v1/tasks/{tid}").json()["createdMs"]
        )
    _seqs_after(late.messages[2:], snapshot["seq"])
    # A resume from an event still stored is no reset: the stored events follow.
    kept = FeedClient(d, since=first)
    wait_until(lambda: any(m["type"] == "heartbeat" for m in kept.messages), 10, "caught up")
    assert kept.messages[0]["type"] == "event" and kept.messages[0]["seq"] == first + 1, kept.messages[0]
    late.close()
    kept.close()


def test_an_idle_subscriber_gets_a_heartbeat_every_configured_interval(start_daemon: Any) -> None:
    d: Daemon = start_daemon({"events": {"heartbeatS": 0.3}})
    feed = FeedClient(d)
    seq = feed.snapshot()["seq"]

    def beats() -> list[dict[str, Any]]:
        return [m for m in feed.messages if m["type"] == "heartbeat"]

    wait_until(lambda: len(beats()) >= 4, 5, "four heartbeats")  # the default (15 s) would time out here
    feed.close()
    got = beats()
    assert all(b["seq"] == seq for b in got), got  # nothing happened: the newest event is still the snapshot's
    gaps = [b["ts"] - a["ts"] for a, b in itertools.pairwise(got)]
    assert all(g >= 250 for g in gaps), gaps  # one per interval of silence, not a flood
