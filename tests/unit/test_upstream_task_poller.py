"""mcpx.upstream.tasks.follow: calling an upstream tool as an upstream task and following it, in
both formats (2025-11-25 `{task}` + tasks/get + tasks/result; the 2026 extension's
`resultType: "task"` + tasks/get with inline outcome + tasks/update), driven by a plain fake
session whose replies come from one list per method."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from anyio.lowlevel import checkpoint

from mcpx.protocol.errors import INTERNAL_ERROR, InternalError, UpstreamError, UpstreamUnavailable
from mcpx.protocol.revisions import META_CAPS, META_RELATED_TASK, TASKS_EXTENSION
from mcpx.upstream.tasks.follow import (
    POLL_DEFAULT_S,
    POLL_MAX_S,
    POLL_MIN_S,
    Follower,
    call,
    created_task,
    poll_delay,
    task_capable,
)

TEXT = {"content": [{"type": "text", "text": "done"}]}
LEGACY_CAPS = {"tasks": {"requests": {"tools": {"call": {}}}}}
MODERN_CAPS = {"extensions": {TASKS_EXTENSION: {}}}
Reply = dict[str, Any] | BaseException | Callable[[dict[str, Any], Any], Awaitable[dict[str, Any]]]


class FakeSession:
    """The session-like peer the routines take: `era`, `capabilities`, `shape_params`, and
    `request`, answered from one list of replies per method (an exception is raised, a callable
    is awaited with the params and the request's on_request). Every request is recorded."""

    def __init__(self, era: str, replies: dict[str, list[Reply]], capabilities: dict[str, Any] | None = None) -> None:
        self.era = era
        self.capabilities = (
            capabilities if capabilities is not None else (LEGACY_CAPS if era == "legacy" else MODERN_CAPS)
        )
        self.replies = {method: list(queue) for method, queue in replies.items()}
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.notices: dict[str, anyio.Event] = {}

    def shape_params(
        self, params: dict[str, Any], *, client_caps: dict[str, Any] | None, log_level: str | None
    ) -> dict[str, Any]:
        if self.era != "modern":
            return dict(params)
        return {**params, "_meta": {**(params.get("_meta") or {}), META_CAPS: client_caps or {}}}

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        on_notify: Any = None,
        on_request: Any = None,
        timeout: float | None = None,
        on_sent: Any = None,
    ) -> dict[str, Any]:
        self.sent.append((method, params or {}))
        queue = self.replies.get(method)
        assert queue, f"the fake upstream has no reply left for {method}"
        reply = queue.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            return await reply(params or {}, on_request)
        return reply

    def task_notified(self, task_id: str) -> anyio.Event:
        """Set when the upstream notifies a status of its task `task_id`: only when a test sets it
        (`notify`); like the real session, a fresh event once the last one was set."""
        event = self.notices.get(task_id)
        if event is None or event.is_set():
            event = self.notices[task_id] = anyio.Event()
        return event

    def notify(self, task_id: str) -> None:
        """The upstream's notifications/tasks/status (2025) or notifications/tasks (2026) for it."""
        self.task_notified(task_id).set()

    def methods(self) -> list[str]:
        return [method for method, _ in self.sent]

    def params_of(self, method: str) -> list[dict[str, Any]]:
        return [params for m, params in self.sent if m == method]


class Sleeps:
    """The routines' injected sleep: records every delay, waits for nothing."""

    def __init__(self) -> None:
        self.seen: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seen.append(seconds)
        await checkpoint()


def provider(session: FakeSession, failures: list[BaseException] | None = None) -> Callable[[], Awaitable[Any]]:
    """`get_session`: raises the given failures first (an upstream that is restarting), then the session."""
    pending = list(failures or [])

    async def get_session() -> Any:
        if pending:
            raise pending.pop(0)
        return session

    return get_session


class TaskIds:
    def __init__(self, session: FakeSession) -> None:
        self.session = session
        self.seen: list[tuple[str, int]] = []  # (id, how many requests had been sent by then)

    async def __call__(self, task_id: str) -> None:
        self.seen.append((task_id, len(self.session.sent)))


def legacy_task(status: str, **kw: Any) -> dict[str, Any]:
    return {"taskId": "u1", "status": status, "ttl": 60_000, "pollInterval": 1000, **kw}


def modern_task(status: str, **kw: Any) -> dict[str, Any]:
    return {"taskId": "m1", "status": status, "ttlMs": 60_000, "pollIntervalMs": 1000, **kw}


async def run_call(session: FakeSession, sleeps: Sleeps | None = None, **kw: Any) -> dict[str, Any]:
    kw.setdefault("on_task_id", TaskIds(session))
    with anyio.fail_after(5):
        return await call(
            session,
            {"name": "slow", "arguments": {"n": 1}},
            get_session=provider(session),
            sleep=sleeps or Sleeps(),
            **kw,
        )


# ---- the 2025-11-25 format -------------------------------------------------------------------


@pytest.mark.anyio
async def test_legacy_call_creates_a_task_polls_tasks_get_and_collects_tasks_result() -> None:
    session = FakeSession(
        "legacy",
        {
            "tools/call": [{"task": legacy_task("working")}],
            "tasks/get": [legacy_task("working"), legacy_task("working"), legacy_task("completed")],
            "tasks/result": [{**TEXT, "_meta": {META_RELATED_TASK: {"taskId": "u1"}, "trace": "t-1"}}],
        },
    )
    ids, sleeps = TaskIds(session), Sleeps()
    result = await run_call(session, sleeps, on_task_id=ids, ttl_ms=60_000)
    assert result == {**TEXT, "_meta": {"trace": "t-1"}}  # the upstream's related-task key is dropped
    assert session.methods() == ["tools/call", "tasks/get", "tasks/get", "tasks/get", "tasks/result"]
    assert session.params_of("tools/call") == [{"name": "slow", "arguments": {"n": 1}, "task": {"ttl": 60_000}}]
    assert session.params_of("tasks/result") == [{"taskId": "u1"}]
    assert ids.seen == [("u1", 1)]  # known before the first poll
    assert sleeps.seen == [0.02, 0.04, 0.08]  # ramping up towards pollInterval


@pytest.mark.anyio
async def test_legacy_input_required_gets_a_blocking_tasks_result_that_carries_the_questions() -> None:
    questions: list[dict[str, Any]] = []

    async def on_request(msg: dict[str, Any]) -> dict[str, Any]:
        questions.append(msg)
        return {"action": "accept"}

    async def blocking_result(params: dict[str, Any], relay: Any) -> dict[str, Any]:
        assert relay is on_request  # the upstream's questions arrive on this request's stream
        await relay({"method": "elicitation/create", "params": {"message": "sure?"}})
        return TEXT

    session = FakeSession(
        "legacy",
        {
            "tools/call": [{"task": legacy_task("working")}],
            "tasks/get": [legacy_task("input_required"), legacy_task("completed")],
            "tasks/result": [blocking_result],
        },
    )
    assert await run_call(session, on_request=on_request) == TEXT
    assert session.methods() == ["tools/call", "tasks/get", "tasks/result", "tasks/get"]
    assert questions == [{"method": "elicitation/create", "params": {"message": "sure?"}}]


@pytest.mark.anyio
async def test_legacy_failed_task_with_an_empty_payload_becomes_an_is_error_result() -> None:
    session = FakeSession(
        "legacy",
        {
            "tools/call": [{"task": legacy_task("working")}],
            "tasks/get": [legacy_task("failed", statusMessage="tool raised ValueError")],
            "tasks/result": [{}],
        },
    )
    assert await run_call(session) == {
        "content": [{"type": "text", "text": "tool raised ValueError"}],
        "isError": True,
    }


@pytest.mark.anyio
async def test_legacy_tasks_result_error_is_the_calls_error() -> None:
    error = {"code": -32000, "message": "the tool's own JSON-RPC error"}
    session = FakeSession(
        "legacy",
        {
            "tools/call": [{"task": legacy_task("working")}],
            "tasks/get": [legacy_task("failed")],
            "tasks/result": [UpstreamError(error)],
        },
    )
    with pytest.raises(UpstreamError) as caught:
        await run_call(session)
    assert caught.value.error == error


@pytest.mark.anyio
async def test_legacy_task_cancelled_by_someone_else_upstream_is_an_error_without_tasks_result() -> None:
    session = FakeSession(
        "legacy", {"tools/call": [{"task": legacy_task("working")}], "tasks/get": [legacy_task("cancelled")]}
    )
    with pytest.raises(UpstreamError) as caught:
        await run_call(session)
    assert caught.value.error["code"] == INTERNAL_ERROR and "cancelled upstream" in caught.value.error["message"]
    assert "tasks/result" not in session.methods()


@pytest.mark.anyio
@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_an_inline_answer_is_returned_as_is_and_names_no_task(era: str) -> None:
    inline = {"content": [{"type": "text", "text": "quick"}], "task": {"taskId": "not-a-task"}}
    session = FakeSession(era, {"tools/call": [inline]})
    ids = TaskIds(session)
    assert await run_call(session, on_task_id=ids) == inline
    assert ids.seen == [] and session.methods() == ["tools/call"]


@pytest.mark.anyio
async def test_a_failure_to_record_the_task_id_does_not_stop_the_call() -> None:
    async def on_task_id(task_id: str) -> None:
        raise RuntimeError("store is full")

    session = FakeSession(
        "legacy",
        {
            "tools/call": [{"task": legacy_task("working")}],
            "tasks/get": [legacy_task("completed")],
            "tasks/result": [TEXT],
        },
    )
    assert await run_call(session, on_task_id=on_task_id) == TEXT


# ---- the 2026-07-28 extension ----------------------------------------------------------------


@pytest.mark.anyio
async def test_modern_call_follows_a_server_decided_task_to_its_inline_result() -> None:
    session = FakeSession(
        "modern",
        {
            "tools/call": [{"resultType": "task", **modern_task("working", pollIntervalMs=200)}],
            "tasks/get": [modern_task("working", pollIntervalMs=200), modern_task("completed", result=TEXT)],
        },
    )
    ids, sleeps = TaskIds(session), Sleeps()
    assert await run_call(session, sleeps, on_task_id=ids) == TEXT
    assert session.methods() == ["tools/call", "tasks/get", "tasks/get"]  # no tasks/result in 2026
    assert ids.seen == [("m1", 1)]
    assert sleeps.seen == [0.02, 0.04]  # ramping up, below pollIntervalMs 200
    for _method, params in session.sent:  # every request declares the extension
        assert TASKS_EXTENSION in params["_meta"][META_CAPS]["extensions"]
    assert session.params_of("tasks/get")[0]["taskId"] == "m1"


@pytest.mark.anyio
async def test_modern_failed_task_raises_its_inline_error() -> None:
    error = {"code": -32000, "message": "the tool failed", "data": {"why": "disk"}}
    session = FakeSession(
        "modern",
        {
            "tools/call": [{"resultType": "task", **modern_task("working")}],
            "tasks/get": [modern_task("failed", error=error)],
        },
    )
    with pytest.raises(UpstreamError) as caught:
        await run_call(session)
    assert caught.value.error == error


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("task", "message"),
    [
        (modern_task("failed", statusMessage="out of memory"), "out of memory"),
        (modern_task("completed"), "completed without a result"),
        (modern_task("cancelled"), "cancelled upstream"),
    ],
    ids=["failed-without-error", "completed-without-result", "cancelled"],
)
async def test_modern_task_ends_without_a_usable_outcome_are_internal_errors(
    task: dict[str, Any], message: str
) -> None:
    session = FakeSession(
        "modern", {"tools/call": [{"resultType": "task", **modern_task("working")}], "tasks/get": [task]}
    )
    with pytest.raises(UpstreamError) as caught:
        await run_call(session)
    assert caught.value.error["code"] == INTERNAL_ERROR and message in caught.value.error["message"]


@pytest.mark.anyio
async def test_modern_input_requests_are_asked_once_each_and_answered_with_tasks_update() -> None:
    q1 = {"method": "elicitation/create", "params": {"message": "name?"}}
    q2 = {"method": "roots/list", "params": {}}
    asked: list[dict[str, Any]] = []

    async def on_input(requests: dict[str, Any]) -> dict[str, Any]:
        asked.append(requests)
        return {key: {"answer": key} for key in requests}

    session = FakeSession(
        "modern",
        {
            "tools/call": [{"resultType": "task", **modern_task("working")}],
            "tasks/get": [
                modern_task("input_required", inputRequests={"k1": q1}),
                modern_task("input_required", inputRequests={"k1": q1}),  # has not caught up yet
                modern_task("input_required", inputRequests={"k1": q1, "k2": q2}),
                modern_task("completed", result=TEXT),
            ],
            "tasks/update": [{}, {}],
        },
    )
    assert await run_call(session, on_input=on_input) == TEXT
    assert asked == [{"k1": q1}, {"k2": q2}]
    updates = session.params_of("tasks/update")
    assert [(u["taskId"], u["inputResponses"]) for u in updates] == [
        ("m1", {"k1": {"answer": "k1"}}),
        ("m1", {"k2": {"answer": "k2"}}),
    ]


@pytest.mark.anyio
async def test_modern_input_requests_without_a_relay_fail_the_call() -> None:
    session = FakeSession(
        "modern",
        {
            "tools/call": [{"resultType": "task", **modern_task("working")}],
            "tasks/get": [modern_task("input_required", inputRequests={"k1": {"method": "roots/list"}})],
        },
    )
    with pytest.raises(InternalError, match="cannot relay"):
        await run_call(session, on_input=None)


@pytest.mark.anyio
async def test_a_modern_question_before_the_task_exists_is_answered_by_retrying_the_call() -> None:
    round_ = {"resultType": "input_required", "inputRequests": {"r1": {"method": "roots/list"}}, "requestState": "s1"}
    session = FakeSession(
        "modern",
        {
            "tools/call": [round_, {"resultType": "task", **modern_task("working")}],
            "tasks/get": [modern_task("completed", result=TEXT)],
        },
    )

    async def ask_round(requests: dict[str, Any]) -> dict[str, Any]:
        assert requests == {"r1": {"method": "roots/list"}}
        return {"r1": {"roots": []}}

    assert await run_call(session, ask_round=ask_round) == TEXT
    retry = session.params_of("tools/call")[1]
    assert retry["inputResponses"] == {"r1": {"roots": []}} and retry["requestState"] == "s1"


@pytest.mark.anyio
async def test_a_modern_question_before_the_task_is_handed_back_without_ask_round() -> None:
    round_ = {"resultType": "input_required", "inputRequests": {"r1": {"method": "roots/list"}}}
    session = FakeSession("modern", {"tools/call": [round_]})
    assert await run_call(session) == round_


# ---- both: outages, a forgotten task, cancellation -------------------------------------------


def era_task(era: str, status: str, **kw: Any) -> dict[str, Any]:
    return legacy_task(status, **kw) if era == "legacy" else modern_task(status, **kw)


def era_replies(era: str, *polls: dict[str, Any] | BaseException) -> dict[str, list[Reply]]:
    replies: dict[str, list[Reply]] = {"tasks/get": list(polls)}
    if era == "legacy":
        replies["tasks/result"] = [TEXT]
    return replies


def done(era: str) -> dict[str, Any]:
    return era_task(era, "completed", result=TEXT) if era == "modern" else era_task(era, "completed")


@pytest.mark.anyio
@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_polling_retries_through_a_short_upstream_outage(era: str) -> None:
    down = UpstreamUnavailable("upstream 'up' is not available (restarting)")
    session = FakeSession(era, era_replies(era, down, TimeoutError(), done(era)))
    sleeps = Sleeps()
    follower = Follower(provider(session, [down]), "u1", sleep=sleeps)
    with anyio.fail_after(5):
        assert await follower.run(None) == TEXT
    assert sleeps.seen == [1.0, 1.0, 1.0]  # get_session down, then tasks/get down, then timed out
    assert session.methods()[:3] == ["tasks/get", "tasks/get", "tasks/get"]


@pytest.mark.anyio
async def test_polling_gives_up_after_a_long_outage() -> None:
    session = FakeSession("legacy", era_replies("legacy", UpstreamUnavailable("gone")))
    follower = Follower(provider(session), "u1", sleep=Sleeps(), outage_s=0.0)
    with anyio.fail_after(5), pytest.raises(UpstreamUnavailable, match="lost the upstream"):
        await follower.run(None)


@pytest.mark.anyio
@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_an_upstream_that_forgot_its_task_fails_the_call_with_an_internal_error(era: str) -> None:
    forgot = UpstreamError({"code": -32602, "message": "Unknown task: u1"})
    session = FakeSession(era, {"tasks/get": [forgot]})
    with anyio.fail_after(5), pytest.raises(InternalError, match="no longer knows its task u1"):
        await Follower(provider(session), "u1", sleep=Sleeps()).run(None)


@pytest.mark.anyio
async def test_other_upstream_errors_while_polling_are_passed_on_unchanged() -> None:
    error = {"code": -32603, "message": "database locked"}
    session = FakeSession("modern", {"tasks/get": [UpstreamError(error)]})
    with anyio.fail_after(5), pytest.raises(UpstreamError) as caught:
        await Follower(provider(session), "m1", sleep=Sleeps()).run(None)
    assert caught.value.error == error


async def follow_until_cancelled(session: FakeSession, era: str, **kw: Any) -> anyio.CancelScope:
    """Follow a working task; the caller is cancelled during the first wait between polls."""
    with anyio.fail_after(5), anyio.CancelScope() as scope:

        async def sleep(seconds: float) -> None:
            scope.cancel()
            await checkpoint()

        await Follower(provider(session), "u1", sleep=sleep, **kw).run(era_task(era, "working"))
    return scope


@pytest.mark.anyio
@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_cancelling_the_caller_sends_tasks_cancel_upstream(era: str) -> None:
    session = FakeSession(era, {"tasks/cancel": [{}]})
    scope = await follow_until_cancelled(session, era)
    assert scope.cancelled_caught
    assert session.methods() == ["tasks/cancel"]  # never notifications/cancelled
    assert session.params_of("tasks/cancel")[0]["taskId"] == "u1"
    if era == "modern":
        assert TASKS_EXTENSION in session.params_of("tasks/cancel")[0]["_meta"][META_CAPS]["extensions"]


@pytest.mark.anyio
async def test_a_daemon_that_is_only_stopping_leaves_the_upstream_task_running() -> None:
    session = FakeSession("legacy", {})
    scope = await follow_until_cancelled(session, "legacy", keep_upstream=lambda: True)
    assert scope.cancelled_caught and session.sent == []  # the next daemon resumes it


@pytest.mark.anyio
async def test_a_refused_tasks_cancel_still_lets_the_cancellation_through() -> None:
    session = FakeSession("legacy", {"tasks/cancel": [UpstreamError({"code": -32602, "message": "already done"})]})
    scope = await follow_until_cancelled(session, "legacy")
    assert scope.cancelled_caught and session.methods() == ["tasks/cancel"]


# ---- pure helpers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "delay"),
    [
        ({"pollInterval": 1000}, 1.0),
        ({"pollIntervalMs": 250}, 0.25),
        ({"pollIntervalMs": 300, "pollInterval": 9000}, 0.3),  # the extension's name first
        ({"pollInterval": 10}, POLL_MIN_S),
        ({"pollIntervalMs": 60_000}, POLL_MAX_S),
        ({}, POLL_DEFAULT_S),
        (None, POLL_DEFAULT_S),
        ({"pollInterval": 0}, POLL_DEFAULT_S),
        ({"pollInterval": -5}, POLL_DEFAULT_S),
        ({"pollInterval": True}, POLL_DEFAULT_S),
        ({"pollInterval": "1000"}, POLL_DEFAULT_S),
    ],
)
def test_poll_delay_is_the_upstreams_interval_within_bounds(task: dict[str, Any] | None, delay: float) -> None:
    assert poll_delay(task) == delay


def test_first_polls_come_sooner_doubling_up_to_the_interval() -> None:
    assert POLL_MIN_S == 0.02
    assert [poll_delay({"pollInterval": 1000}, n) for n in range(8)] == pytest.approx(
        [0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0, 1.0]
    )
    assert [poll_delay({"pollIntervalMs": 5000}, n) for n in (5, 7, 8, 40)] == pytest.approx([0.64, 2.56, 5.0, 5.0])


@pytest.mark.anyio
async def test_a_status_notification_from_the_upstream_ends_the_wait_for_the_next_poll() -> None:
    session = FakeSession(
        "legacy",
        {
            "tools/call": [{"task": legacy_task("working", pollInterval=60_000)}],
            "tasks/get": [legacy_task("completed")],
            "tasks/result": [TEXT],
        },
    )
    waiting = anyio.Event()

    async def sleep(seconds: float) -> None:  # the upstream's interval: far longer than this test
        waiting.set()
        await anyio.sleep_forever()

    results: list[dict[str, Any]] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                results.append(
                    await call(
                        session,
                        {"name": "slow", "arguments": {}},
                        get_session=provider(session),
                        on_task_id=TaskIds(session),
                        sleep=sleep,
                    )
                )

            tg.start_soon(run)
            await waiting.wait()
            session.notify("u1")
    assert results == [TEXT] and session.methods() == ["tools/call", "tasks/get", "tasks/result"]


@pytest.mark.parametrize(
    ("era", "capabilities", "support", "capable"),
    [
        ("legacy", LEGACY_CAPS, "optional", True),
        ("legacy", LEGACY_CAPS, "required", True),
        ("legacy", LEGACY_CAPS, "forbidden", False),
        ("legacy", LEGACY_CAPS, None, False),  # absent: MUST NOT augment
        ("legacy", {"tasks": {"list": {}}}, "optional", False),  # no tasks.requests.tools.call
        ("modern", MODERN_CAPS, None, True),  # the server decides
        ("modern", MODERN_CAPS, "optional", True),
        ("modern", MODERN_CAPS, "forbidden", False),
        ("modern", {"extensions": {}}, "optional", False),
        (None, LEGACY_CAPS, "optional", False),  # not probed yet
    ],
)
def test_task_capable_follows_each_formats_declarations(
    era: str | None, capabilities: dict[str, Any], support: str | None, capable: bool
) -> None:
    session = FakeSession("legacy", {}, capabilities)
    session.era = era  # type: ignore[assignment]  # the parametrized eras include None
    tool = {"name": "slow"} if support is None else {"name": "slow", "execution": {"taskSupport": support}}
    assert task_capable(session, tool) is capable


def test_created_task_tells_a_task_from_an_inline_result() -> None:
    legacy, modern = FakeSession("legacy", {}), FakeSession("modern", {})
    assert created_task(legacy, {"task": legacy_task("working")}) == legacy_task("working")
    assert created_task(legacy, {**TEXT, "task": legacy_task("working")}) is None  # a result with a "task" field
    assert created_task(legacy, TEXT) is None
    task = {"resultType": "task", **modern_task("working")}
    assert created_task(modern, task) == task
    assert created_task(modern, {"resultType": "complete", **TEXT}) is None
    assert created_task(modern, {"task": legacy_task("working")}) is None  # the legacy shape means nothing here


@pytest.mark.parametrize(
    ("era", "res"),
    [("legacy", {"task": {"status": "working"}}), ("modern", {"resultType": "task", "taskId": ""})],
)
def test_a_task_without_an_id_is_an_upstream_error(era: str, res: dict[str, Any]) -> None:
    with pytest.raises(UpstreamError):
        created_task(FakeSession(era, {}), res)
