"""mcpx calls task-capable upstream tools as upstream tasks, and resumes them after a restart.

Unit part: `mcpx.upstream.tasks.follow` against a scripted fake session (both task formats,
poll bounds, cancellation, outages, MRTR before the task, inline answers).

End to end: the official SDK 1.30 server (`tests/peers/sdk1_upstream.py`, 2025-11-25 core tasks)
behind a real daemon, a raw 2025-11-25 host in front:
- a host task on a task-capable tool is an upstream task (the upstream logs `tools/call` with
  `task`, then `tasks/get` / `tasks/result` for the id mcpx stored on its task row), and the result
  is the upstream's; a plain host call stays a plain upstream call, and a `forbidden` tool is
  shown to the host as `forbidden`;
- the host's `tasks/cancel` reaches the upstream as `tasks/cancel` for that task;
- SIGKILL of the daemon mid-task, restart on the same port: with an HTTP upstream that outlives the
  daemon (and task ids any session may use) the mcpx task completes with the upstream's real
  result; with a stdio upstream (which dies with the daemon) it fails, honestly, with -32603.
And FastMCP 4.1.4 + fastmcp-tasks (`tests/peers/fastmcp_upstream.py`, the 2026 extension) over
HTTP: legacy and 2026 host tasks become extension tasks upstream (polled with `tasks/get`, result
inlined), its statusMessage reaches both hosts' tasks/get, /v1 and the feed, cancel reaches it as
`tasks/cancel`, and a SIGKILLed daemon resumes its task.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from harness import UNIT, Api, Daemon, FeedClient, RawHost, read_jsonl, reply_of, wait_until
from peers.venvs import peer_python

from mcpx.protocol.errors import InternalError, UpstreamError, UpstreamUnavailable
from mcpx.upstream.session import UpstreamSession
from mcpx.upstream.tasks import follow

SDK1_UPSTREAM = Path(__file__).resolve().parent / "peers" / "sdk1_upstream.py"
FASTMCP_UPSTREAM = Path(__file__).resolve().parent / "peers" / "fastmcp_upstream.py"
EXT = "io.modelcontextprotocol/tasks"
RELATED = "io.modelcontextprotocol/related-task"


# ---- unit: a scripted session ---------------------------------------------------------------
class FakeSession(UpstreamSession):
    """An UpstreamSession whose requests are answered by `handlers[method](params)`."""

    def __init__(self, era: str, handlers: dict[str, Any], capabilities: dict[str, Any] | None = None) -> None:
        super().__init__("fake", None)
        self.era = era
        self.capabilities = capabilities or {}
        self.handlers = handlers
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def request(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        self.sent.append((method, dict(params or {})))
        out = self.handlers[method](params or {})
        if hasattr(out, "__await__"):
            out = await out
        if isinstance(out, BaseException):
            raise out
        return out

    def methods(self) -> list[str]:
        return [m for m, _ in self.sent]


def _sleeps() -> tuple[list[float], Any]:
    seen: list[float] = []

    async def sleep(s: float) -> None:
        seen.append(s)
        await anyio.sleep(0)

    return seen, sleep


def _seq(*items: Any) -> Any:
    it = iter(items)
    last: list[Any] = [None]

    def next_item(_params: dict[str, Any]) -> Any:
        try:
            last[0] = next(it)
        except StopIteration:
            pass
        return last[0]

    return next_item


def _drive(session: FakeSession, params: dict[str, Any] | None = None, **kw: Any) -> tuple[dict[str, Any], list[str]]:
    ids: list[str] = []

    async def on_task_id(tid: str) -> None:
        ids.append(tid)

    async def get_session() -> FakeSession:
        return session

    async def main() -> dict[str, Any]:
        return await follow.call(
            session, params or {"name": "slow", "arguments": {}}, get_session=get_session, on_task_id=on_task_id, **kw
        )

    return anyio.run(main), ids


def _legacy_task(status: str, **extra: Any) -> dict[str, Any]:
    return {"taskId": "up-1", "status": status, "createdAt": "x", "lastUpdatedAt": "x", "ttl": 60000, **extra}


def test_legacy_task_is_created_reported_polled_and_collected() -> None:
    sleeps, sleep = _sleeps()
    s = FakeSession(
        "legacy",
        {
            "tools/call": lambda p: {"task": _legacy_task("working", pollInterval=20)},
            "tasks/get": _seq(_legacy_task("working", pollInterval=20000), _legacy_task("completed")),
            "tasks/result": lambda p: {
                "content": [{"type": "text", "text": "real"}],
                "_meta": {RELATED: {"taskId": "up-1"}, "keep": 1},
            },
        },
    )
    res, ids = _drive(s, ttl_ms=1234, sleep=sleep)
    assert ids == ["up-1"]
    assert res == {
        "content": [{"type": "text", "text": "real"}],
        "_meta": {"keep": 1},
    }  # the upstream's related-task is not ours
    assert s.methods() == ["tools/call", "tasks/get", "tasks/get", "tasks/result"]
    assert s.sent[0][1]["task"] == {"ttl": 1234}
    assert s.sent[1][1] == {"taskId": "up-1"}
    assert sleeps == [0.02, 0.04]  # 20 ms suggested: 20 ms (the floor); then 20 s suggested: backing off from 20 ms


def test_legacy_outcomes_error_failed_without_payload_and_cancelled_upstream() -> None:
    err = {"code": -32042, "message": "nope"}
    s = FakeSession(
        "legacy",
        {
            "tools/call": lambda p: {"task": _legacy_task("failed", statusMessage="it broke")},
            "tasks/result": lambda p: UpstreamError(err),
        },
    )
    with pytest.raises(UpstreamError) as info:
        _drive(s)
    assert info.value.error == err  # exactly what the underlying call answered
    s = FakeSession(
        "legacy",
        {
            "tools/call": lambda p: {"task": _legacy_task("failed", statusMessage="it broke")},
            "tasks/result": lambda p: {"_meta": {RELATED: {"taskId": "up-1"}}},
        },
    )
    assert _drive(s)[0] == {"content": [{"type": "text", "text": "it broke"}], "isError": True}
    s = FakeSession("legacy", {"tools/call": lambda p: {"task": _legacy_task("cancelled")}})
    with pytest.raises(UpstreamError):
        _drive(s)


def test_inline_answer_is_returned_without_a_task() -> None:
    s = FakeSession("legacy", {"tools/call": lambda p: {"content": [{"type": "text", "text": "inline"}]}})
    res, ids = _drive(s)
    assert res["content"][0]["text"] == "inline" and ids == [] and s.methods() == ["tools/call"]


def test_modern_task_declares_the_extension_everywhere_and_inlines_the_result() -> None:
    sleeps, sleep = _sleeps()
    s = FakeSession(
        "modern",
        {
            "tools/call": lambda p: {"resultType": "task", "taskId": "m-1", "status": "working", "pollIntervalMs": 300},
            "tasks/get": _seq(
                {"resultType": "complete", "taskId": "m-1", "status": "working", "pollIntervalMs": 300},
                {
                    "resultType": "complete",
                    "taskId": "m-1",
                    "status": "completed",
                    "result": {"content": [], "isError": True},
                },
            ),
        },
    )
    res, ids = _drive(s, client_caps={"elicitation": {}}, sleep=sleep)
    assert res == {"content": [], "isError": True} and ids == ["m-1"]  # isError inside completed stays a result
    assert s.methods() == ["tools/call", "tasks/get", "tasks/get"]
    for _method, params in s.sent:
        caps = params["_meta"]["io.modelcontextprotocol/clientCapabilities"]
        assert caps["extensions"] == {EXT: {}}
        assert params["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert s.sent[0][1]["_meta"]["io.modelcontextprotocol/clientCapabilities"]["elicitation"] == {}
    assert "task" not in s.sent[0][1]
    assert sleeps == [0.02, 0.04]  # doubling from 20 ms towards the suggested 300 ms


def test_modern_failed_is_the_upstream_error_and_a_bare_task_reply_is_never_a_result() -> None:
    err = {"code": -32000, "message": "bad"}
    s = FakeSession(
        "modern", {"tools/call": lambda p: {"resultType": "task", "taskId": "m-2", "status": "failed", "error": err}}
    )
    with pytest.raises(UpstreamError) as info:
        _drive(s)
    assert info.value.error == err
    s = FakeSession("modern", {"tools/call": lambda p: {"resultType": "task", "status": "working"}})
    with pytest.raises(UpstreamError):
        _drive(s)


def test_modern_input_required_is_asked_once_and_answered_with_tasks_update() -> None:
    asking = {
        "resultType": "complete",
        "taskId": "m-3",
        "status": "input_required",
        "pollIntervalMs": 100,
        "inputRequests": {"k1": {"method": "elicitation/create", "params": {}}},
    }
    s = FakeSession(
        "modern",
        {
            "tools/call": lambda p: {"resultType": "task", "taskId": "m-3", "status": "working"},
            "tasks/get": _seq(
                asking,
                asking,
                {"taskId": "m-3", "status": "completed", "result": {"content": [{"type": "text", "text": "ok"}]}},
            ),
            "tasks/update": lambda p: {"resultType": "complete"},
        },
    )
    asked: list[dict[str, Any]] = []

    async def on_input(requests: dict[str, Any]) -> dict[str, Any]:
        asked.append(requests)
        return {k: {"action": "accept", "content": {}} for k in requests}

    res, _ = _drive(s, on_input=on_input, sleep=_sleeps()[1])
    assert res["content"][0]["text"] == "ok"
    assert len(asked) == 1 and list(asked[0]) == ["k1"]  # the second snapshot repeats k1: not asked again
    update = [p for m, p in s.sent if m == "tasks/update"]
    assert (
        len(update) == 1
        and update[0]["taskId"] == "m-3"
        and update[0]["inputResponses"] == {"k1": {"action": "accept", "content": {}}}
    )


def test_modern_mrtr_round_before_the_task_is_asked_then_retried() -> None:
    calls: list[dict[str, Any]] = []

    def tools_call(p: dict[str, Any]) -> dict[str, Any]:
        calls.append(p)
        if len(calls) == 1:
            return {
                "resultType": "input_required",
                "inputRequests": {"q": {"method": "elicitation/create"}},
                "requestState": "st",
            }
        return {"resultType": "complete", "content": [{"type": "text", "text": "after"}]}

    async def ask_round(requests: dict[str, Any]) -> dict[str, Any]:
        return {"q": {"action": "decline"}}

    s = FakeSession("modern", {"tools/call": tools_call})
    res, ids = _drive(s, ask_round=ask_round)
    assert res["content"][0]["text"] == "after" and ids == []
    assert calls[1]["inputResponses"] == {"q": {"action": "decline"}} and calls[1]["requestState"] == "st"
    s = FakeSession("modern", {"tools/call": lambda p: {"resultType": "input_required", "inputRequests": {}}})
    assert _drive(s)[0]["resultType"] == "input_required"  # no asker: the caller answers the round


def test_cancelling_the_caller_sends_tasks_cancel_unless_the_daemon_is_stopping() -> None:
    for keep in (False, True):

        async def never(_p: dict[str, Any]) -> dict[str, Any]:
            await anyio.sleep_forever()
            raise AssertionError

        s = FakeSession(
            "legacy",
            {
                "tools/call": lambda p: {"task": _legacy_task("working", pollInterval=100)},
                "tasks/get": never,
                "tasks/cancel": lambda p: _legacy_task("cancelled"),
            },
        )

        async def main(s: FakeSession = s, keep: bool = keep) -> None:
            async def on_task_id(tid: str) -> None:
                pass

            async def get_session() -> FakeSession:
                return s

            with anyio.move_on_after(0.3):
                await follow.call(
                    s, {"name": "slow"}, get_session=get_session, on_task_id=on_task_id, keep_upstream=lambda: keep
                )

        anyio.run(main)
        cancels = [p for m, p in s.sent if m == "tasks/cancel"]
        assert cancels == ([] if keep else [{"taskId": "up-1"}])
        assert "notifications/cancelled" not in s.methods()


def test_polling_survives_an_outage_and_an_upstream_that_forgot_the_task_is_an_internal_error() -> None:
    s = FakeSession(
        "legacy",
        {
            "tasks/get": lambda p: _legacy_task("completed"),
            "tasks/result": lambda p: {"content": [{"type": "text", "text": "back"}]},
        },
    )
    attempts: list[int] = []

    async def flaky() -> FakeSession:
        attempts.append(1)
        if len(attempts) < 3:
            raise UpstreamUnavailable("upstream 'x' is not available (restarting)")
        return s

    res = anyio.run(lambda: follow.resume(flaky, "up-1", sleep=_sleeps()[1]))
    assert res["content"][0]["text"] == "back" and len(attempts) >= 3
    gone = FakeSession(
        "legacy", {"tasks/get": lambda p: UpstreamError({"code": -32602, "message": "Task not found: up-1"})}
    )

    async def get_gone() -> FakeSession:
        return gone

    with pytest.raises(InternalError) as info:
        anyio.run(lambda: follow.resume(get_gone, "up-1"))
    assert info.value.code == -32603 and "no longer knows" in info.value.message


def test_which_upstream_tools_may_run_as_tasks() -> None:
    legacy = FakeSession("legacy", {}, {"tasks": {"requests": {"tools": {"call": {}}}}})
    assert follow.task_capable(legacy, {"execution": {"taskSupport": "optional"}})
    assert follow.task_capable(legacy, {"execution": {"taskSupport": "required"}})
    assert not follow.task_capable(legacy, {"execution": {"taskSupport": "forbidden"}})
    assert not follow.task_capable(legacy, {})
    assert not follow.task_capable(
        FakeSession("legacy", {}, {"tasks": {"list": {}}}), {"execution": {"taskSupport": "optional"}}
    )
    modern = FakeSession("modern", {}, {"extensions": {EXT: {}}})
    assert follow.task_capable(modern, {"name": "x"})
    assert not follow.task_capable(FakeSession("modern", {}, {}), {"name": "x"})
    assert follow.poll_delay({"pollInterval": 250}) == 0.25 and follow.poll_delay({}) == follow.POLL_DEFAULT_S
    assert follow.poll_delay({"pollIntervalMs": 1}) == follow.POLL_MIN_S
    assert follow.poll_delay({"pollIntervalMs": 60000}) == follow.POLL_MAX_S
    ramp = [follow.poll_delay({"pollIntervalMs": 5000}, n) for n in range(10)]
    assert ramp == [0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.0, 5.0]


# ---- end to end: SDK 1.30 upstream behind the daemon ------------------------------------------
_T = TypeVar("_T")


def pytestmark_e2e(test: _T) -> _T:
    """The end-to-end part runs SDK 1.30 and FastMCP upstreams: slow tier (tests/conftest.py)."""
    return pytest.mark.peers(pytest.mark.timeout(180)(test))


@pytest.fixture(scope="module")
def sdk1_python() -> Path:
    return peer_python("mcp-1.30")


@pytest.fixture
def upstream_pids(tmp_path: Path) -> Iterator[list[int]]:
    """Every SDK 1.30 upstream process a test started (found in its events), killed at teardown."""
    pids: list[int] = []
    yield pids
    for path in tmp_path.glob("*.events.jsonl"):
        pids.extend({e["pid"] for e in read_jsonl(path)})
    for pid in set(pids):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _stdio_entry(py: Path, events: Path, *extra: str) -> dict[str, Any]:
    return {"command": str(py), "args": [str(SDK1_UPSTREAM), "stdio", "--events", str(events), *extra]}


class PeerHttp:
    """A peer upstream script as an HTTP server process of its own (it outlives daemons)."""

    def __init__(self, py: Path, script: Path, tmp: Path, name: str, *extra: str) -> None:
        self.events = tmp / f"{name}.events.jsonl"
        ready = tmp / f"{name}.port"
        with open(tmp / f"{name}.stderr", "wb") as err:
            self.proc = subprocess.Popen(
                [
                    str(py),
                    str(script),
                    "http",
                    "--port",
                    "0",
                    "--ready-file",
                    str(ready),
                    "--events",
                    str(self.events),
                    *extra,
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        port = wait_until(
            lambda: self.proc.poll() is None and ready.exists() and ready.read_text().strip(),
            60,
            f"{name} HTTP upstream",
        )
        self.url = f"http://127.0.0.1:{int(port)}/mcp"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _events(path: Path, event: str | None = None, **match: Any) -> list[dict[str, Any]]:
    return [
        e
        for e in read_jsonl(path)
        if (event is None or e["event"] == event) and all(e.get(k) == v for k, v in match.items())
    ]


def _task(host: RawHost, name: str, args: dict[str, Any]) -> str:
    frame = host.legacy("tools/call", {"name": name, "arguments": args, "task": {"ttl": 600000}}).json()
    assert "result" in frame, frame
    return frame["result"]["task"]["taskId"]


def _status(host: RawHost, tid: str) -> dict[str, Any]:
    return host.legacy("tasks/get", {"taskId": tid}).json()["result"]


def _row(d: Daemon, tid: str) -> dict[str, Any]:
    rows = d.store_rows("SELECT body FROM tasks WHERE id = ?", tid)
    return json.loads(rows[0][0]) if rows else {}


def _config(entry: dict[str, Any]) -> dict[str, Any]:
    return {"mcpServers": {"s1": entry}, "tasks": {"pollIntervalMs": 100}}


@pytestmark_e2e
def test_sdk1_host_task_runs_as_an_upstream_task_and_plain_calls_stay_plain(
    start_daemon: Any, tmp_path: Path, raw_host: Any, sdk1_python: Path, upstream_pids: list[int]
) -> None:
    events = tmp_path / "s1.events.jsonl"
    d = start_daemon(_config(_stdio_entry(sdk1_python, events)), name="ut")
    host = raw_host(d.url)
    host.initialize()
    tools = {t["name"]: t for t in host.legacy("tools/list").json()["result"]["tools"]}
    assert tools["s1__slow"]["execution"]["taskSupport"] == "optional"
    started = time.monotonic()
    tid = _task(host, "s1__slow", {"seconds": 0.6, "text": "real"})
    done = wait_until(
        lambda: (t := _status(host, tid))["status"] in ("completed", "failed", "cancelled") and t, 20, "task end"
    )
    elapsed = time.monotonic() - started
    assert done["status"] == "completed", done
    result = reply_of(host.legacy("tasks/result", {"taskId": tid}))["result"]
    assert result["content"] == [{"type": "text", "text": "real after 0.6 s"}]
    assert result["_meta"][RELATED] == {"taskId": tid}  # mcpx's own task, not the upstream's
    created = _events(events, "task_created", name="slow")
    assert len(created) == 1
    up_id = created[0]["taskId"]
    assert _row(d, tid)["upstream_task_id"] == up_id
    assert _events(events, "request", method="tools/call", name="slow")[0]["task"] is True
    assert _events(events, "request", method="tasks/get", taskId=up_id), "mcpx polled the upstream task"
    assert _events(events, "request", method="tasks/result", taskId=up_id), "mcpx collected the upstream result"
    # Plain calls stay plain: no task on the host side, or a task on a forbidden tool.
    plain = host.legacy("tools/call", {"name": "s1__slow", "arguments": {"seconds": 0.05, "text": "plain"}}).json()[
        "result"
    ]
    assert plain["content"][0]["text"] == "plain after 0.05 s"
    assert [e["task"] for e in _events(events, "request", method="tools/call", name="slow")] == [True, False]
    echo = host.legacy("tools/call", {"name": "s1__echo", "arguments": {"text": "e"}}).json()["result"]
    assert echo["content"][0]["text"] == "e"
    # The upstream forbids tasks for echo; mcpx holds one for it all the same, calling it plainly.
    assert tools["s1__echo"]["execution"]["taskSupport"] == "optional"
    held = _task(host, "s1__echo", {"text": "held"})
    wait_until(lambda: _status(host, held)["status"] == "completed", 20, "echo task")
    assert reply_of(host.legacy("tasks/result", {"taskId": held}))["result"]["content"][0]["text"] == "held"
    assert [e["task"] for e in _events(events, "request", method="tools/call", name="echo")] == [False, False]
    # A task whose tool raised: the upstream ends it failed with no payload; the host sees isError.
    boom = _task(host, "s1__boom", {"message": "kaput"})
    wait_until(lambda: _status(host, boom)["status"] == "failed", 20, "boom failed")
    res = reply_of(host.legacy("tasks/result", {"taskId": boom}))["result"]
    assert res["isError"] is True and "kaput" in res["content"][0]["text"]
    print(f"upstream task round trip: {elapsed:.2f} s for a 0.6 s tool")


@pytestmark_e2e
def test_an_upstream_tasks_status_message_reaches_the_host_the_api_and_the_feed(
    start_daemon: Any, tmp_path: Path, raw_host: Any, sdk1_python: Path, upstream_pids: list[int]
) -> None:
    events = tmp_path / "s1.events.jsonl"
    d = start_daemon(_config(_stdio_entry(sdk1_python, events)), name="um")
    feed = FeedClient(d, kinds=["task.status"])
    try:
        host = raw_host(d.url)
        host.initialize()
        tid = _task(host, "s1__slow", {"seconds": 3, "status": "Gathering sources…"})
        # The upstream says it (and notifies): mcpx's task says it too, long before the end.
        seen = wait_until(lambda: (t := _status(host, tid)).get("statusMessage") and t, 2.5, "status message")
        assert seen["statusMessage"] == "Gathering sources…" and seen["status"] == "working"
        with Api(d) as api:
            assert api.get(f"/v1/tasks/{tid}").json()["statusMessage"] == "Gathering sources…"
        assert any(e["data"]["statusMessage"] == "Gathering sources…" for e in feed.events() if e["taskId"] == tid)
        done = wait_until(lambda: (t := _status(host, tid))["status"] == "completed" and t, 20, "completion")
        assert reply_of(host.legacy("tasks/result", {"taskId": tid}))["result"]["content"][0]["text"] == (
            "done after 3 s"
        )
        assert done["status"] == "completed"
    finally:
        feed.close()


@pytestmark_e2e
def test_sdk1_host_cancel_reaches_the_upstream_as_tasks_cancel(
    start_daemon: Any, tmp_path: Path, raw_host: Any, sdk1_python: Path, upstream_pids: list[int]
) -> None:
    events = tmp_path / "s1.events.jsonl"
    d = start_daemon(_config(_stdio_entry(sdk1_python, events)), name="uc")
    host = raw_host(d.url)
    host.initialize()
    tid = _task(host, "s1__slow", {"seconds": 30, "steps": 150})
    up_id = wait_until(lambda: (c := _events(events, "task_created")) and c[0]["taskId"], 20, "upstream task")
    wait_until(lambda: _row(d, tid).get("upstream_task_id") == up_id, 10, "upstream id stored")
    cancelled = host.legacy("tasks/cancel", {"taskId": tid}).json()["result"]
    assert cancelled["status"] == "cancelled"
    wait_until(lambda: _events(events, "request", method="tasks/cancel", taskId=up_id), 10, "upstream tasks/cancel")
    wait_until(lambda: _events(events, "slow_cancelled", taskId=up_id), 10, "upstream work stopped")
    assert not _events(events, "slow_done")
    assert _status(host, tid)["status"] == "cancelled"


@pytestmark_e2e
@pytest.mark.parametrize("scoped", [False, True], ids=["unscoped-ids", "session-scoped-ids"])
def test_sigkill_mid_upstream_task_then_restart_finishes_with_the_upstream_result(
    start_daemon: Any, tmp_path: Path, raw_host: Any, sdk1_python: Path, scoped: bool
) -> None:
    """The HTTP upstream outlives the daemon. With `--unscoped` any session may poll its tasks; by
    default (the SDK's own) a task id works only in the session that created it, so the restarted
    daemon must carry on the previous daemon's upstream session (http_session_record)."""
    up = PeerHttp(sdk1_python, SDK1_UPSTREAM, tmp_path, "sdk1-http", *([] if scoped else ["--unscoped"]))
    try:
        d = start_daemon(_config({"url": up.url}), name="ur")
        host = raw_host(d.url)
        host.initialize()
        tid = _task(host, "s1__slow", {"seconds": 6, "steps": 60, "text": "survived"})
        up_id = wait_until(lambda: (c := _events(up.events, "task_created")) and c[0]["taskId"], 20, "upstream task")
        wait_until(lambda: _row(d, tid).get("upstream_task_id") == up_id, 10, "upstream id stored")
        d.stop(signal.SIGKILL)
        killed, killed_wall = time.monotonic(), time.time()
        assert not _events(up.events, "slow_done"), "the upstream task must still run when the daemon dies"
        d.start(port=d.port)
        restarted_after = time.monotonic() - killed
        host.post(
            {"jsonrpc": "2.0", "method": "notifications/initialized"}, host._legacy_headers()
        )  # the session id survives
        done = wait_until(
            lambda: (t := _status(host, tid))["status"] in ("completed", "failed", "cancelled") and t,
            30,
            "resumed task end",
        )
        resumed_after = time.monotonic() - killed
        assert done["status"] == "completed", done
        result = reply_of(host.legacy("tasks/result", {"taskId": tid}))["result"]
        assert result["content"] == [{"type": "text", "text": "survived after 6 s"}]
        assert len(_events(up.events, "slow_start")) == 1, "the upstream ran the tool once: resumed, not re-run"
        finished = _events(up.events, "slow_done", taskId=up_id)
        assert finished and finished[0]["t"] > killed_wall  # so the result reached mcpx after the restart
        after = [e for e in _events(up.events, "request", taskId=up_id) if e["t"] > killed_wall]
        assert {"tasks/get", "tasks/result"} <= {e["method"] for e in after}  # the new daemon polled and collected
        assert "carrying on the previous daemon's session" in d.stderr()  # not a new session
        print(
            f"daemon back {restarted_after:.2f} s after the SIGKILL; resumed task completed after {resumed_after:.2f} s"
        )
    finally:
        up.stop()


@pytestmark_e2e
def test_sigkill_with_a_kept_stdio_upstream_resumes_the_upstream_task(
    start_daemon: Any, tmp_path: Path, raw_host: Any, sdk1_python: Path, upstream_pids: list[int]
) -> None:
    """The SDK 1.30 task server runs under its keeper, so the same process (which knows the task)
    is there for the restarted daemon, which polls it again and collects its result."""
    events = tmp_path / "s1.events.jsonl"
    d = start_daemon(_config(_stdio_entry(sdk1_python, events)), name="uk")
    host = raw_host(d.url)
    host.initialize()
    tid = _task(host, "s1__slow", {"seconds": 4, "steps": 40, "text": "kept"})
    up_id = wait_until(lambda: (c := _events(events, "task_created")) and c[0]["taskId"], 20, "upstream task")
    wait_until(lambda: _row(d, tid).get("upstream_task_id") == up_id, 10, "upstream id stored")
    d.stop(signal.SIGKILL)
    killed_wall = time.time()
    d.start(port=d.port)
    host.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, host._legacy_headers())
    done = wait_until(lambda: (t := _status(host, tid))["status"] != "working" and t, 30 * UNIT, "task end")
    assert done["status"] == "completed", done
    result = reply_of(host.legacy("tasks/result", {"taskId": tid}))["result"]
    assert result["content"] == [{"type": "text", "text": "kept after 4 s"}]
    after = [e for e in _events(events, "request", taskId=up_id) if e["t"] > killed_wall]
    assert {"tasks/get", "tasks/result"} <= {e["method"] for e in after}  # the new daemon polled and collected
    assert len({e["pid"] for e in read_jsonl(events)}) == 1  # one server process all along


@pytestmark_e2e
def test_sigkill_with_an_unkept_stdio_upstream_fails_the_task_honestly(
    start_daemon: Any, tmp_path: Path, raw_host: Any, sdk1_python: Path, upstream_pids: list[int]
) -> None:
    events = tmp_path / "s1.events.jsonl"
    config = {**_config(_stdio_entry(sdk1_python, events)), "keepers": {"enabled": False}}
    d = start_daemon(config, name="us")
    host = raw_host(d.url)
    host.initialize()
    tid = _task(host, "s1__slow", {"seconds": 30, "steps": 30})
    up_id = wait_until(lambda: (c := _events(events, "task_created")) and c[0]["taskId"], 20, "upstream task")
    wait_until(lambda: _row(d, tid).get("upstream_task_id") == up_id, 10, "upstream id stored")
    d.stop(signal.SIGKILL)
    d.start(port=d.port)
    host.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, host._legacy_headers())
    done = wait_until(lambda: (t := _status(host, tid))["status"] != "working" and t, 30 * UNIT, "task end")
    assert done["status"] == "failed", done
    err = reply_of(host.legacy("tasks/result", {"taskId": tid}))["error"]
    assert err["code"] == -32603 and up_id in err["message"] and "no longer knows" in err["message"]


# ---- end to end: FastMCP + fastmcp-tasks upstream (2026 extension) behind the daemon ----------
# Over HTTP: FastMCP takes longer to import than mcpx's 5 s stdio probe allows, and an HTTP
# process outlives the daemon, so the same upstream serves the restart test.
@pytest.fixture(scope="module")
def fastmcp_python() -> Path:
    return peer_python("fastmcp-tasks")


@pytest.fixture
def fastmcp_up(fastmcp_python: Path, tmp_path: Path) -> Iterator[PeerHttp]:
    up = PeerHttp(fastmcp_python, FASTMCP_UPSTREAM, tmp_path, "fastmcp")
    yield up
    up.stop()


def _ext_ids(up: PeerHttp) -> list[str]:
    seen: list[str] = []
    for e in _events(up.events, "request", method="tasks/get"):
        if e["taskId"] not in seen:
            seen.append(e["taskId"])
    return seen


def _modern_ext(host: RawHost, method: str, params: dict[str, Any], **headers: str) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}}
    return reply_of(host.modern(method, params, meta=meta, headers=headers or None))


@pytestmark_e2e
def test_fastmcp_upstream_runs_host_tasks_of_both_eras_as_extension_tasks(
    start_daemon: Any, tmp_path: Path, raw_host: Any, fastmcp_up: PeerHttp
) -> None:
    d = start_daemon({"mcpServers": {"f": {"url": fastmcp_up.url}}, "tasks": {"pollIntervalMs": 100}}, name="fe")
    legacy = raw_host(d.url)
    legacy.initialize()
    started = time.monotonic()
    tid = _task(legacy, "f__slow", {"seconds": 0.5, "text": "ext"})
    done = wait_until(lambda: (t := _status(legacy, tid))["status"] != "working" and t, 20, "legacy task end")
    legacy_s = time.monotonic() - started
    assert done["status"] == "completed", done
    res = reply_of(legacy.legacy("tasks/result", {"taskId": tid}))["result"]
    assert res["content"] == [{"type": "text", "text": "ext after 0.5 s"}] and "resultType" not in res
    assert _ext_ids(fastmcp_up) == [_row(d, tid)["upstream_task_id"]]
    # A 2026 host that declares the extension: mcpx's task (after taskAfterMs) follows the upstream's.
    modern = raw_host(d.url)
    first = _modern_ext(modern, "tools/call", {"name": "f__slow", "arguments": {"seconds": 1.0, "text": "m"}})["result"]
    assert first["resultType"] == "task", first
    mid = first["taskId"]
    final = wait_until(
        lambda: (
            (t := _modern_ext(modern, "tasks/get", {"taskId": mid}, **{"Mcp-Name": mid})["result"])["status"]
            != "working"
            and t
        ),
        20,
        "modern task end",
    )
    assert final["status"] == "completed", final
    assert final["result"]["content"] == [{"type": "text", "text": "m after 1 s"}]
    ids = _ext_ids(fastmcp_up)
    assert len(ids) == 2 and ids[1] == _row(d, mid)["upstream_task_id"]
    # Without the host asking for a task, the upstream is called plainly: no upstream task.
    plain = legacy.legacy("tools/call", {"name": "f__slow", "arguments": {"seconds": 0.05, "text": "p"}}).json()[
        "result"
    ]
    assert plain["content"][0]["text"] == "p after 0.05 s"
    assert len(_ext_ids(fastmcp_up)) == 2
    print(f"legacy host task over a 2026 upstream task: {legacy_s:.2f} s for a 0.5 s tool")


@pytestmark_e2e
def test_a_2026_upstream_tasks_status_message_reaches_both_hosts_the_api_and_the_feed(
    start_daemon: Any, tmp_path: Path, raw_host: Any, fastmcp_up: PeerHttp
) -> None:
    """The extension task's statusMessage (FastMCP's progress message) is polled into mcpx's task:
    a 2025 host's and a 2026 host's tasks/get say it, and so do /v1 and the feed."""
    d = start_daemon({"mcpServers": {"f": {"url": fastmcp_up.url}}, "tasks": {"pollIntervalMs": 100}}, name="fs")
    feed = FeedClient(d, kinds=["task.created", "task.status"])
    try:
        legacy = raw_host(d.url)
        legacy.initialize()
        old = _task(legacy, "f__slow", {"seconds": 3, "steps": 30, "status": "Reading the archive…"})
        modern = raw_host(d.url)
        args = {"seconds": 3, "steps": 30, "status": "Indexing…"}
        new = _modern_ext(modern, "tools/call", {"name": "f__slow", "arguments": args})["result"]["taskId"]

        def modern_get() -> dict[str, Any]:
            return _modern_ext(modern, "tasks/get", {"taskId": new}, **{"Mcp-Name": new})["result"]

        seen = wait_until(lambda: (t := _status(legacy, old)).get("statusMessage") and t, 2.5, "the 2025 host's")
        assert seen == {**seen, "status": "working", "statusMessage": "Reading the archive…"}
        seen = wait_until(lambda: (t := modern_get()).get("statusMessage") and t, 2.5, "the 2026 host's")
        assert seen == {**seen, "status": "working", "statusMessage": "Indexing…"}
        with Api(d) as api:
            assert api.get(f"/v1/tasks/{old}").json()["statusMessage"] == "Reading the archive…"
            assert api.get(f"/v1/tasks/{new}").json()["statusMessage"] == "Indexing…"
        # A task.status, or already its task.created (the 2026 call said it before it became a task).
        said = {(e["taskId"], e["data"]["statusMessage"]) for e in feed.events()}
        assert {(old, "Reading the archive…"), (new, "Indexing…")} <= said, said
        done = wait_until(lambda: (t := modern_get())["status"] == "completed" and t, 20, "completion")
        assert done["result"]["content"] == [{"type": "text", "text": "done after 3 s"}]
        assert reply_of(legacy.legacy("tasks/result", {"taskId": old}))["result"]["content"][0]["text"] == (
            "done after 3 s"
        )
    finally:
        feed.close()


@pytestmark_e2e
def test_fastmcp_upstream_cancel_and_restart(
    start_daemon: Any, tmp_path: Path, raw_host: Any, fastmcp_up: PeerHttp
) -> None:
    d = start_daemon({"mcpServers": {"f": {"url": fastmcp_up.url}}, "tasks": {"pollIntervalMs": 100}}, name="fr")
    host = raw_host(d.url)
    host.initialize()
    victim = _task(host, "f__slow", {"seconds": 30, "steps": 300})
    up_id = wait_until(lambda: _row(d, victim).get("upstream_task_id"), 20, "upstream id stored")
    assert host.legacy("tasks/cancel", {"taskId": victim}).json()["result"]["status"] == "cancelled"
    wait_until(
        lambda: _events(fastmcp_up.events, "request", method="tasks/cancel", taskId=up_id), 10, "upstream tasks/cancel"
    )
    wait_until(lambda: _events(fastmcp_up.events, "slow_cancelled"), 10, "upstream work stopped")
    # SIGKILL while another upstream task runs; the restarted daemon finishes it from its id.
    tid = _task(host, "f__slow", {"seconds": 6, "steps": 60, "text": "kept"})
    wait_until(lambda: _row(d, tid).get("upstream_task_id"), 20, "upstream id stored")
    d.stop(signal.SIGKILL)
    killed, killed_wall = time.monotonic(), time.time()
    d.start(port=d.port)
    host.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, host._legacy_headers())
    done = wait_until(lambda: (t := _status(host, tid))["status"] != "working" and t, 30, "resumed task end")
    assert done["status"] == "completed", done
    assert reply_of(host.legacy("tasks/result", {"taskId": tid}))["result"]["content"] == [
        {"type": "text", "text": "kept after 6 s"}
    ]
    assert max(e["t"] for e in _events(fastmcp_up.events, "slow_done")) > killed_wall
    print(f"2026 upstream task resumed and completed {time.monotonic() - killed:.2f} s after the SIGKILL")
