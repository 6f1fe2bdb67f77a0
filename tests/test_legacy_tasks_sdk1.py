"""2025-11-25 tasks through mcpx, end to end, with the official SDK 1.30 client as the host.

SDK 1.30 is the newest SDK with the 2025-11-25 core tasks API (`session.experimental.*`);
`tests/peers/sdk1_host.py` drives it from the SDK 1.30 peer venv. One module-wide daemon
(`gateway`) sits in front of the fixture upstream twice, over stdio (`fx`) and over HTTP (`fh`),
plus a third stdio instance with `taskSupport` overrides (`ov`: `slow` required, `echo`
forbidden). Each SDK cell runs one script through it, as an HTTP host (`--url`) or as a stdio host
via `mcpx serve --state-dir <the daemon's>`, covering: a task created `working`, polled to
`completed`, its `tasks/result` (also blocking while the task runs) with the related-task `_meta`;
`tasks/list`; a slow task cancelled (`cancelled` in the reply, still `cancelled` after the upstream
would have finished, the fixture saw the cancellation, a second cancel is -32602, its progress
stops); an `isError` tool (`failed`, but `tasks/result` is the CallToolResult); a JSON-RPC error
from the upstream (`failed`, `tasks/result` is that error); progress under the call's own token
after the CreateTaskResult; `notifications/tasks/status` on the session's channel.

Below that, with raw frames (no SDK), on the same daemon: tasks are invisible across sessions
(one test per method; a foreign id is answered exactly like an unknown one), revision gating
(2025-06-18, 2026-07-28), `taskSupport` overrides, the TTL cap (`tasks.maxTtlMs`), `tasks/list`
pagination, and a cancel racing the task's completion. Task expiry (`tasks.ttlMs`) has its own
daemon.
"""

from __future__ import annotations

import json
import secrets
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import (
    LEGACY,
    UNIT,
    Daemon,
    FixtureHttp,
    RawHost,
    SuiteStore,
    read_jsonl,
    reply_of,
    stdio_server,
    wait_until,
)
from peers.run_host import run_host
from peers.venvs import peer_python

RELATED = "io.modelcontextprotocol/related-task"

# The first run builds the SDK 1.30 peer venv (about 40 s); each host run has its own timeout.
pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.peers,
    pytest.mark.sqlite_only("the SDK 1.30 host's view of 2025-11-25 tasks: the wire"),
]  # slow tier (tests/conftest.py)

# Short polls keep the SDK's poll_task (it sleeps pollInterval between polls) quick; the TTL cap
# is what test_requested_ttl_is_capped_at_max_ttl checks, scaled so slow machines keep their tasks.
MAX_TTL = int(10_000 * UNIT)
OVERRIDES = {"slow": {"taskSupport": "required"}, "echo": {"taskSupport": "forbidden"}}


@pytest.fixture(scope="module")
def sdk1_python() -> Path:
    return peer_python("mcp-1.30")


class Gateway:
    def __init__(self, daemon: Daemon, tmp: Path) -> None:
        self.daemon = daemon
        self.tmp = tmp
        self.logs = {"fx": tmp / "fx.log.jsonl", "fh": tmp / "fh-http.log.jsonl", "ov": tmp / "ov.log.jsonl"}

    @property
    def url(self) -> str:
        return self.daemon.url


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, suite_store: SuiteStore) -> Iterator[Gateway]:
    """One daemon for the module; stopped and its wire log schema-checked when the module ends."""
    tmp = tmp_path_factory.mktemp("sdk1-tasks")
    http = FixtureHttp(tmp, name="fh")
    config = {
        "mcpServers": {
            "fx": stdio_server(tmp, name="fx"),
            "fh": {"url": http.url},
            "ov": stdio_server(tmp, name="ov", tools=OVERRIDES),
        },
        "tasks": {"pollIntervalMs": 100, "maxTtlMs": MAX_TTL},
    }
    daemon = Daemon(tmp, config, name="gateway", store=suite_store)
    try:
        daemon.start()
        yield Gateway(daemon, tmp)
    finally:
        try:
            daemon.stop()
        finally:  # a daemon that fails to stop must not leave the upstream to the next test
            http.stop()
    daemon.check_wire()


# ==== SDK 1.30 host, end to end ==================================================================


def sdk1_script(up: str) -> list[dict[str, Any]]:
    """Step N prints line N; "$N" is the task that step N created."""
    return [
        {"op": "list_tools"},  # 1
        {"op": "call", "name": f"{up}__echo", "args": {"text": "plain"}},  # 2
        {
            "op": "call_task",
            "name": f"{up}__slow",
            "args": {"seconds": 0.6, "steps": 3},
            "ttl": 8000,
            "progress": True,
        },  # 3
        {"op": "poll", "task": "$3"},  # 4
        {"op": "result", "task": "$3"},  # 5
        {"op": "call_task", "name": f"{up}__slow", "args": {"seconds": 0.5, "steps": 1}, "ttl": 8000},  # 6
        {"op": "result", "task": "$6"},  # 7: blocks until the task is terminal
        {"op": "list_tasks"},  # 8
        {
            "op": "call_task",
            "name": f"{up}__slow",
            "args": {"seconds": 1.5, "steps": 15},
            "ttl": 8000,
            "progress": True,
        },  # 9
        {"op": "sleep", "seconds": 0.45},  # 10: a few progress steps go by
        {"op": "cancel", "task": "$9"},  # 11
        {"op": "get", "task": "$9"},  # 12
        {"op": "sleep", "seconds": 0.3},  # 13
        {"op": "get", "task": "$9"},  # 14: the progress seen so far
        {"op": "sleep", "seconds": 1.3},  # 15: the upstream call would have finished by now
        {"op": "get", "task": "$9"},  # 16: still cancelled, no progress since 14
        {"op": "result", "task": "$9"},  # 17
        {"op": "cancel", "task": "$9"},  # 18: terminal -> -32602
        {"op": "call_task", "name": f"{up}__fail", "ttl": 8000},  # 19
        {"op": "poll", "task": "$19"},  # 20
        {"op": "result", "task": "$19"},  # 21
        {
            "op": "call_task",
            "name": f"{up}__protocol_error",
            "args": {"code": -32001, "message": "boom"},
            "ttl": 8000,
        },  # 22
        {"op": "poll", "task": "$22"},  # 23
        {"op": "result", "task": "$22"},  # 24
        {"op": "get", "task": "no-such-task"},  # 25
        {"op": "list_tasks", "all": True},  # 26
        {"op": "notifications", "method": "notifications/tasks/status"},  # 27
    ]


def _tid(lines: list[dict[str, Any]], n: int) -> str:
    line = lines[n]
    assert line["op"] == "call_task" and line["ok"], line
    return line["task"]["taskId"]


def _check_sdk1_script(
    up: str, lines: list[dict[str, Any]], upstream_events: Callable[[], list[dict[str, Any]]]
) -> None:
    connect = lines[0]
    assert connect["protocolVersion"] == LEGACY
    assert connect["capabilities"]["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}

    tools = {t["name"]: t for t in lines[1]["result"]["tools"]}
    assert tools[f"{up}__slow"]["execution"] == {"taskSupport": "optional"}  # mcpx runs the task itself
    assert lines[2]["result"]["content"] == [{"type": "text", "text": "plain"}]  # a plain call stays plain

    # A task: created working, polled to completed, its result with the related-task _meta.
    created = lines[3]["task"]
    assert created["status"] == "working" and created["ttl"] == 8000, created
    assert created["pollInterval"] == 100 and created["createdAt"] and created["lastUpdatedAt"]
    t3 = created["taskId"]
    poll = lines[4]
    assert poll["ok"] and poll["statuses"][-1] == "completed", poll
    assert set(poll["statuses"][:-1]) <= {"working"}, poll
    assert poll["last"]["taskId"] == t3
    res = lines[5]
    assert res["ok"], res
    assert res["result"]["content"] == [{"type": "text", "text": "slept 0.6"}]
    assert res["result"]["isError"] is False
    assert res["result"]["_meta"][RELATED] == {"taskId": t3}
    # Progress under the call's own token, after the CreateTaskResult (progress.mdx:69-71).
    assert [p["progress"] for p in res["progress"]] == [1.0, 2.0, 3.0], res
    assert res["progress"][-1] == {"progress": 3.0, "total": 3.0, "message": "step 3/3"}

    # tasks/result blocks while the task works, then returns its result.
    t6 = _tid(lines, 6)
    assert lines[7]["ok"] and lines[7]["result"]["content"] == [{"type": "text", "text": "slept 0.5"}], lines[7]
    assert lines[7]["result"]["_meta"][RELATED] == {"taskId": t6}

    listed = {t["taskId"]: t["status"] for t in lines[8]["result"]["tasks"]}
    assert listed == {t3: "completed", t6: "completed"}

    # Cancel a slow task: cancelled in the reply, and it stays cancelled.
    t9 = _tid(lines, 9)
    cancel = lines[11]
    assert cancel["ok"] and cancel["result"]["taskId"] == t9 and cancel["result"]["status"] == "cancelled", cancel
    assert lines[12]["result"]["status"] == "cancelled"
    # related-task belongs on tasks/result only, not on get, list or cancel results (tasks.mdx:754).
    for n in (4, 8, 11, 12):
        body = lines[n].get("last") or lines[n]["result"]
        assert RELATED not in (body.get("_meta") or {}), lines[n]
    seen_before = lines[14]["progress"]
    assert seen_before, "progress during the task never reached the host"
    assert lines[16]["result"]["status"] == "cancelled", lines[16]
    assert lines[16]["progress"] == seen_before, "progress went on after the task was cancelled"
    cancelled_result = lines[17]
    assert not cancelled_result["ok"] and cancelled_result["error"]["code"] == -32603, cancelled_result  # DIGEST L3
    assert cancelled_result["error"]["data"]["_meta"][RELATED] == {"taskId": t9}
    again = lines[18]
    assert not again["ok"] and again["error"]["code"] == -32602, again
    cancelled = wait_until(
        lambda: [e for e in upstream_events() if e.get("event") == "cancelled" and e.get("tool") == "slow"],
        5,
        "the upstream to see the cancellation",
    )
    assert len(cancelled) == 1, cancelled
    assert not [
        e for e in upstream_events() if e.get("event") == "finished" and e.get("requestId") == cancelled[0]["requestId"]
    ]

    # isError: failed, yet tasks/result is the CallToolResult (tasks.mdx:721,862-863).
    t19 = _tid(lines, 19)
    assert lines[20]["statuses"][-1] == "failed", lines[20]
    fail = lines[21]
    assert fail["ok"] and fail["result"]["isError"] is True, fail
    assert fail["result"]["content"] == [{"type": "text", "text": "it failed"}]
    assert fail["result"]["_meta"][RELATED] == {"taskId": t19}

    # A JSON-RPC error from the upstream: failed, and tasks/result is that error (tasks.mdx:466).
    t22 = _tid(lines, 22)
    assert lines[23]["statuses"][-1] == "failed", lines[23]
    err = lines[24]
    assert not err["ok"], err
    assert err["error"]["code"] == -32001 and err["error"]["message"] == "boom"
    assert err["error"]["data"]["_meta"][RELATED] == {"taskId": t22}

    unknown = lines[25]
    assert not unknown["ok"] and unknown["error"]["code"] == -32602, unknown

    everything = {t["taskId"]: t["status"] for t in lines[26]["tasks"]}
    assert everything == {t3: "completed", t6: "completed", t9: "cancelled", t19: "failed", t22: "failed"}

    # notifications/tasks/status: whole Tasks on the session's channel, no related-task _meta.
    statuses: dict[str, list[str]] = defaultdict(list)
    for note in lines[27]["notifications"]:
        params = note["params"]
        assert RELATED not in (params.get("_meta") or {}), params
        assert {"taskId", "status", "createdAt", "lastUpdatedAt", "ttl"} <= set(params), params
        statuses[params["taskId"]].append(params["status"])
    assert statuses.get(t9) == ["cancelled"], statuses  # nothing after cancelled
    for tid, status in ((t3, "completed"), (t6, "completed"), (t19, "failed"), (t22, "failed")):
        assert statuses.get(tid, [])[-1:] == [status], (tid, dict(statuses))


@pytest.mark.parametrize("host", ["host-http", "host-serve"])
@pytest.mark.parametrize("upstream", ["up-stdio", "up-http"])
def test_sdk1_host_runs_tasks_through_mcpx(sdk1_python: Path, gateway: Gateway, upstream: str, host: str) -> None:
    up = {"up-stdio": "fx", "up-http": "fh"}[upstream]
    if host == "host-http":
        target = ["--url", gateway.url]
    else:
        target = ["--stdio", "--", sys.executable, "-m", "mcpx", "serve", "--state-dir", str(gateway.daemon.state_dir)]
    log = gateway.logs[up]
    skip = len(read_jsonl(log))  # the log is shared by the cells: look at this run's events only
    lines = run_host(sdk1_python, "sdk1_host.py", target, sdk1_script(up))
    _check_sdk1_script(up, lines, lambda: read_jsonl(log)[skip:])


def test_sdk1_host_meets_required_and_forbidden_tools(sdk1_python: Path, gateway: Gateway) -> None:
    skip = len(read_jsonl(gateway.logs["ov"]))
    lines = run_host(
        sdk1_python,
        "sdk1_host.py",
        ["--url", gateway.url],
        [
            {"op": "list_tools"},  # 1
            {"op": "call", "name": "ov__slow", "args": {"seconds": 0.1}},  # 2: required, no task
            {"op": "call_task", "name": "ov__echo", "args": {"text": "x"}, "ttl": 8000},  # 3: forbidden, as a task
            {"op": "call_task", "name": "ov__slow", "args": {"seconds": 0.1, "steps": 1}, "ttl": 8000},  # 4
            {"op": "result", "task": "$4"},  # 5
            {"op": "call", "name": "ov__echo", "args": {"text": "x"}},  # 6
        ],
    )
    support = {t["name"]: t["execution"]["taskSupport"] for t in lines[1]["result"]["tools"]}
    assert (
        support["ov__slow"] == "required" and support["ov__echo"] == "forbidden" and support["ov__fail"] == "optional"
    )
    assert not lines[2]["ok"] and lines[2]["error"]["code"] == -32601, lines[2]  # tasks.mdx:117, DIGEST L1
    assert not lines[3]["ok"] and lines[3]["error"]["code"] == -32601, lines[3]  # tasks.mdx:115
    assert lines[5]["ok"] and lines[5]["result"]["content"][0]["text"] == "slept 0.1", lines[5]
    assert lines[6]["ok"] and lines[6]["result"]["content"][0]["text"] == "x"
    # Neither refused call reached the upstream.
    events = read_jsonl(gateway.logs["ov"])[skip:]
    calls = [
        e["msg"]["params"].get("name")
        for e in events
        if e.get("event") == "recv" and e["msg"].get("method") == "tools/call"
    ]
    assert calls == ["slow", "echo"], calls


# ==== raw frames ===================================================================================


def rpc(host: RawHost, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    resp = host.legacy(method, params or {})
    assert resp.status_code == 200, (resp.status_code, resp.text)
    return reply_of(resp)


def legacy_session(
    raw_host: Callable[[str], RawHost], url: str, version: str = LEGACY
) -> tuple[RawHost, dict[str, Any]]:
    host = raw_host(url)
    init = host.initialize(version)
    return host, init


def create_task(host: RawHost, name: str, args: dict[str, Any], ttl: int | None = None) -> dict[str, Any]:
    task: dict[str, Any] = {} if ttl is None else {"ttl": ttl}
    reply = rpc(host, "tools/call", {"name": name, "arguments": args, "task": task})
    assert "result" in reply and "task" in reply["result"], reply
    return reply["result"]["task"]


def _normalised_error(reply: dict[str, Any], sent_id: str) -> dict[str, Any]:
    """The error with the id the caller sent replaced: nothing else in it may depend on the task."""
    assert "error" in reply, reply
    return json.loads(json.dumps(reply["error"]).replace(sent_id, "<ID>"))


def _assert_like_unknown(other: RawHost, method: str, tid: str) -> float:
    """`other` sends `method` for `tid` and for a fresh random id of the same shape: same answer."""
    unknown = secrets.token_urlsafe(32)  # the shape of mcpx's ids
    started = time.monotonic()
    foreign_resp = other.legacy(method, {"taskId": tid})
    elapsed = time.monotonic() - started
    unknown_resp = other.legacy(method, {"taskId": unknown})
    assert foreign_resp.status_code == unknown_resp.status_code == 200
    foreign, missing = reply_of(foreign_resp), reply_of(unknown_resp)
    assert foreign["error"]["code"] == missing["error"]["code"] == -32602, (foreign, missing)
    assert _normalised_error(foreign, tid) == _normalised_error(missing, unknown), (foreign, missing)
    assert set(foreign) == set(missing) == {"jsonrpc", "id", "error"}
    return elapsed


@pytest.mark.parametrize("method", ["tasks/get", "tasks/result", "tasks/cancel"])
def test_another_sessions_task_is_answered_like_an_unknown_id(gateway: Gateway, raw_host: Any, method: str) -> None:
    owner, _ = legacy_session(raw_host, gateway.url)
    other, _ = legacy_session(raw_host, gateway.url)
    tid = create_task(owner, "fx__slow", {"seconds": 1.5, "steps": 1})["taskId"]
    elapsed = _assert_like_unknown(other, method, tid)  # while the task works
    if method == "tasks/result":
        assert elapsed < 0.8 * UNIT, f"a foreign tasks/result waited {elapsed:.2f} s on someone else's task"
    # The owner's task is untouched: still working, then completes normally.
    assert rpc(owner, "tasks/get", {"taskId": tid})["result"]["status"] == "working"
    done = rpc(owner, "tasks/result", {"taskId": tid})
    assert done["result"]["content"] == [{"type": "text", "text": "slept 1.5"}], done
    _assert_like_unknown(other, method, tid)  # terminal now: still unknown (cancel: not "already completed")
    assert rpc(owner, "tasks/get", {"taskId": tid})["result"]["status"] == "completed"


def test_tasks_list_shows_only_the_callers_tasks(gateway: Gateway, raw_host: Any) -> None:
    a, _ = legacy_session(raw_host, gateway.url)
    b, _ = legacy_session(raw_host, gateway.url)
    mine = {create_task(a, "fx__echo", {"text": str(i)})["taskId"] for i in range(3)}
    theirs = {create_task(b, "fx__echo", {"text": "b"})["taskId"]}
    listed_a = rpc(a, "tasks/list")["result"]
    listed_b = rpc(b, "tasks/list")["result"]
    assert {t["taskId"] for t in listed_a["tasks"]} == mine
    assert {t["taskId"] for t in listed_b["tasks"]} == theirs
    assert "nextCursor" not in listed_a and "nextCursor" not in listed_b
    fresh, _ = legacy_session(raw_host, gateway.url)
    assert rpc(fresh, "tasks/list")["result"] == {"tasks": []}


def test_2025_06_18_session_has_no_tasks(gateway: Gateway, raw_host: Any) -> None:
    host, init = legacy_session(raw_host, gateway.url, "2025-06-18")
    assert init["protocolVersion"] == "2025-06-18"
    assert "tasks" not in init["capabilities"]
    listed = rpc(host, "tools/list")["result"]["tools"]
    assert listed and all("execution" not in t for t in listed), listed
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        reply = rpc(host, method, {"taskId": "x"})
        assert reply["error"]["code"] == -32601, (method, reply)
    assert rpc(host, "tasks/list")["error"]["code"] == -32601
    # No tasks here, so neither `required` nor a `task` param changes a call (tasks.mdx:392).
    plain = rpc(host, "tools/call", {"name": "ov__slow", "arguments": {"seconds": 0.05, "steps": 1}})
    assert plain["result"]["content"] == [{"type": "text", "text": "slept 0.05"}], plain
    ignored = rpc(host, "tools/call", {"name": "fx__echo", "arguments": {"text": "t"}, "task": {"ttl": 1000}})
    assert ignored["result"]["content"] == [{"type": "text", "text": "t"}] and "task" not in ignored["result"], ignored


def test_2026_host_never_sees_legacy_task_fields(gateway: Gateway, raw_host: Any) -> None:
    host = raw_host(gateway.url)
    discover = host.modern("server/discover").json()["result"]
    assert "tasks" not in discover["capabilities"], discover
    listed = host.modern("tools/list").json()["result"]["tools"]
    assert {"ov__slow", "ov__echo", "fx__slow"} <= {t["name"] for t in listed}
    assert all("execution" not in t for t in listed), listed


def test_task_support_overrides_on_2025_11_25(gateway: Gateway, raw_host: Any) -> None:
    host, _ = legacy_session(raw_host, gateway.url)
    listed = {t["name"]: t["execution"] for t in rpc(host, "tools/list")["result"]["tools"]}
    assert listed["ov__slow"] == {"taskSupport": "required"} and listed["ov__echo"] == {"taskSupport": "forbidden"}
    assert listed["ov__fail"] == listed["fx__slow"] == {"taskSupport": "optional"}
    required = rpc(host, "tools/call", {"name": "ov__slow", "arguments": {"seconds": 0.05}})
    assert required["error"]["code"] == -32601, required  # tasks.mdx:117, DIGEST L1
    forbidden = rpc(host, "tools/call", {"name": "ov__echo", "arguments": {"text": "x"}, "task": {}})
    assert forbidden["error"]["code"] == -32601, forbidden  # tasks.mdx:115
    ok = create_task(host, "ov__slow", {"seconds": 0.05, "steps": 1})
    assert rpc(host, "tasks/result", {"taskId": ok["taskId"]})["result"]["isError"] is False
    assert (
        rpc(host, "tools/call", {"name": "ov__echo", "arguments": {"text": "x"}})["result"]["content"][0]["text"] == "x"
    )


def test_requested_ttl_is_capped_at_max_ttl(gateway: Gateway, raw_host: Any) -> None:
    host, _ = legacy_session(raw_host, gateway.url)
    big = create_task(host, "fx__echo", {"text": "a"}, ttl=MAX_TTL * 360)
    assert big["ttl"] == MAX_TTL, big
    assert rpc(host, "tasks/get", {"taskId": big["taskId"]})["result"]["ttl"] == MAX_TTL
    assert rpc(host, "tasks/list")["result"]["tasks"][0]["ttl"] == MAX_TTL
    small = create_task(host, "fx__echo", {"text": "b"}, ttl=MAX_TTL // 2)
    assert small["ttl"] == MAX_TTL // 2, small  # below the cap: honoured
    default = create_task(host, "fx__echo", {"text": "c"})  # the default (600 s) is capped too
    assert default["ttl"] == MAX_TTL, default


def test_tasks_list_paginates_with_an_opaque_cursor(gateway: Gateway, raw_host: Any) -> None:
    host, _ = legacy_session(raw_host, gateway.url)
    created = [create_task(host, "fx__echo", {"text": str(i)})["taskId"] for i in range(57)]
    pages: list[list[str]] = []
    cursor = None
    while True:
        reply = rpc(host, "tasks/list", {} if cursor is None else {"cursor": cursor})
        assert "result" in reply, reply
        pages.append([t["taskId"] for t in reply["result"]["tasks"]])
        cursor = reply["result"].get("nextCursor")
        if cursor is None:
            break
        assert isinstance(cursor, str) and cursor not in created  # opaque, not a task id
        assert len(pages) < 10
    assert [len(p) for p in pages] == [50, 7]
    seen = [t for p in pages for t in p]
    assert sorted(seen) == sorted(created) and len(set(seen)) == len(seen)
    for garbage in ("garbage!", "", "eyJ0YXNrcyI6IDF9", 42):  # ..., base64 of {"tasks": 1}, not a string
        bad = rpc(host, "tasks/list", {"cursor": garbage})
        assert "error" in bad and bad["error"]["code"] == -32602, (garbage, bad)


class StatusStream:
    """The session's GET stream, read in a thread: every notifications/tasks/status, per task."""

    def __init__(self, url: str, host: RawHost) -> None:
        self.statuses: dict[str, list[str]] = defaultdict(list)
        self.client = httpx.Client(timeout=httpx.Timeout(5, read=None))
        headers = {"Accept": "text/event-stream", **host._legacy_headers()}
        self.opened = threading.Event()
        self.thread = threading.Thread(target=self._read, args=(url, headers), daemon=True)
        self.thread.start()
        assert self.opened.wait(10 * UNIT), "the GET stream did not open"

    def _read(self, url: str, headers: dict[str, str]) -> None:
        try:
            with self.client.stream("GET", url, headers=headers) as resp:
                self.opened.set()
                for line in resp.iter_lines():
                    if line.startswith("data:"):
                        frame = json.loads(line[5:])
                        if frame.get("method") == "notifications/tasks/status":
                            self.statuses[frame["params"]["taskId"]].append(frame["params"]["status"])
        except Exception:  # closed by close() below, or by the daemon stopping
            self.opened.set()

    def close(self) -> None:
        self.client.close()
        self.thread.join(5)


def test_cancel_racing_completion_leaves_one_terminal_status(gateway: Gateway, raw_host: Any) -> None:
    host, _ = legacy_session(raw_host, gateway.url)
    stream = StatusStream(gateway.url, host)
    problems: list[str] = []
    cancelled_ok: set[str] = set()
    created: list[str] = []
    try:
        for i in range(150):
            tid = create_task(host, "fx__echo", {"text": str(i)})["taskId"]
            created.append(tid)
            time.sleep((i % 6) * 0.0005)  # sweep the cancel across the task's completion
            cancel = rpc(host, "tasks/cancel", {"taskId": tid})
            status = rpc(host, "tasks/get", {"taskId": tid})["result"]["status"]
            if "result" in cancel:
                cancelled_ok.add(tid)
                if status != "cancelled":
                    problems.append(f"{tid}: tasks/cancel answered cancelled, tasks/get then says {status}")
            else:
                assert cancel["error"]["code"] == -32602, cancel
                if status != "completed":
                    problems.append(f"{tid}: cancel refused as terminal, yet the task is {status}")
            if problems:
                break
        # Every task's terminal status has been notified (then any duplicate would be too).
        terminal = {"completed", "failed", "cancelled"}
        wait_until(
            lambda: all(terminal & set(stream.statuses.get(t, [])) for t in created), 10, "terminal notifications"
        )
        for tid, seen in list(stream.statuses.items()):
            if len(seen) > 1:
                problems.append(f"{tid}: two terminal statuses notified: {seen}")
            elif tid in cancelled_ok and seen != ["cancelled"]:
                problems.append(f"{tid}: cancelled, but notified {seen}")
    finally:
        stream.close()
    assert not problems, "\n".join(problems[:5])


def test_finished_task_is_gone_after_its_ttl(start_daemon: Any, tmp_path: Path, raw_host: Any) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}, "tasks": {"ttlMs": 1500}})
    host, _ = legacy_session(raw_host, d.url)
    created = time.monotonic()
    task = create_task(host, "fx__echo", {"text": "short-lived"})
    tid = task["taskId"]
    assert task["ttl"] == 1500
    assert rpc(host, "tasks/result", {"taskId": tid})["result"]["content"][0]["text"] == "short-lived"
    assert rpc(host, "tasks/get", {"taskId": tid})["result"]["status"] == "completed"
    assert [t["taskId"] for t in rpc(host, "tasks/list")["result"]["tasks"]] == [tid]

    def gone() -> bool:
        return "error" in rpc(host, "tasks/get", {"taskId": tid})

    wait_until(gone, 5, "the task to expire")
    assert time.monotonic() - created >= 1.4, "expired before its TTL"
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        assert rpc(host, method, {"taskId": tid})["error"]["code"] == -32602, method
    assert rpc(host, "tasks/list")["result"]["tasks"] == []
