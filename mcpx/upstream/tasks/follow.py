"""Upstream tools called as upstream *tasks*: create, report the id, poll, collect; resume later.

mcpx runs a host's call as an upstream task only when that call is itself an mcpx task (so there is
a durable record to keep the upstream id in) and the upstream offers tasks for that tool:

- 2025-11-25 core tasks (a handshake upstream): the upstream declared `tasks.requests.tools.call`
  and the tool's `execution.taskSupport` is `optional` or `required` (DIGEST 2.1-2.2). mcpx sends
  `tools/call` with `params.task = {ttl}`; the reply is `{task: Task}` (2.3); it polls `tasks/get`
  at the upstream's `pollInterval` until the task is terminal, then `tasks/result` returns exactly
  what the underlying call would have: the CallToolResult, or its JSON-RPC error (2.6). A task in
  `input_required` gets a blocking `tasks/result` at once: the upstream asks its questions on that
  request's stream (2.7), and they reach the caller's `on_request`.
- 2026-07-28 extension (a modern upstream that lists `io.modelcontextprotocol/tasks` in its
  `server/discover` capabilities): the request declares the extension in its `_meta` client
  capabilities; the server decides (DIGEST 4.1). `resultType: "task"` is a flat Task (4.3) and is
  never taken for a result; `tasks/get` (with the extension in `_meta`, and `Mcp-Name` set by the
  HTTP transport) until terminal: `completed` inlines `result`, `failed` inlines `error` (4.5);
  `input_required` questions are answered with `tasks/update` (4.6).

Cancelling the caller sends `tasks/cancel` upstream (never `notifications/cancelled`: DIGEST 2.9,
4.7), unless `keep_upstream()` says the daemon is only stopping: the next daemon resumes the task
from the id it persisted. Polling survives a short upstream outage (an HTTP reconnect); an upstream
that forgot the task (a restarted stdio process) answers -32602, which becomes the call's error.

The routines take a session-like object (`era`, `capabilities`, `request`, `shape_params`) and a
`get_session` coroutine, so they can be driven by a fake in unit tests.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from ...protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, InternalError, UpstreamError, UpstreamUnavailable
from ...protocol.revisions import META_RELATED_TASK, TASKS_EXTENSION, Era
from ..session import OnNotify, OnRequest, OnSent

if TYPE_CHECKING:
    pass

log = logging.getLogger("mcpx.upstream")

TERMINAL = frozenset({"completed", "failed", "cancelled"})
POLL_MIN_S = 0.02  # the first poll comes this soon, and none faster (FastMCP's own client does the same)
POLL_MAX_S = 5.0  # nor slower: a result should not wait long after it exists
POLL_DEFAULT_S = 0.5  # when the upstream suggests nothing
REQUEST_TIMEOUT_S = 30.0  # one tasks/get, tasks/cancel, tasks/update (tasks/result may block)
OUTAGE_S = 60.0  # how long polling waits for a lost upstream to come back before giving up
CANCEL_TIMEOUT_S = 5.0
MAX_INPUT_ROUNDS = 32


class TaskSession(Protocol):
    """What the routines need of an upstream session (UpstreamSession; a plain fake in unit tests)."""

    era: Era | None
    capabilities: dict[str, Any]

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        on_notify: OnNotify | None = None,
        on_request: OnRequest | None = None,
        timeout: float | None = None,
        on_sent: OnSent | None = None,
    ) -> dict[str, Any]: ...

    def shape_params(
        self, params: dict[str, Any], *, client_caps: dict[str, Any] | None, log_level: str | None
    ) -> dict[str, Any]: ...

    def task_notified(self, task_id: str) -> anyio.Event:
        """Set when the upstream pushes a status notification for this task of its."""
        ...


GetSession = Callable[[], Awaitable[TaskSession]]
OnTaskId = Callable[[str], Awaitable[None]]
# Questions of a 2026 upstream task (its `inputRequests`, by key) -> the answers, by the same keys.
OnInput = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
Sleep = Callable[[float], Awaitable[None]]
# Told each status and status message an upstream task reports, as it changes.
OnStatus = Callable[[str, str | None], Awaitable[None]]


def _dig(obj: object, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def upstream_tool(tools: list[Any] | None, name: str) -> dict[str, Any] | None:
    """The upstream's own declaration of one of its tools, from its `tools/list` (unrenamed)."""
    for tool in tools or []:
        if isinstance(tool, dict) and tool.get("name") == name:
            return tool
    return None


def required(tool: dict[str, Any] | None) -> bool:
    """The upstream runs this tool only as a task (`execution.taskSupport: required`)."""
    return bool(_dig(tool, "execution", "taskSupport") == "required")


def task_capable(session: TaskSession, tool: dict[str, Any] | None) -> bool:
    """Whether this upstream may be asked to run this tool as a task."""
    support = _dig(tool, "execution", "taskSupport")
    if session.era == "legacy":
        # Without tasks.requests.tools.call nothing may be augmented; absent/forbidden: MUST NOT (tasks.mdx:113-117).
        return isinstance(_dig(session.capabilities, "tasks", "requests", "tools", "call"), dict) and support in (
            "optional",
            "required",
        )
    if session.era == "modern":
        ext = session.capabilities.get("extensions")
        return isinstance(ext, dict) and TASKS_EXTENSION in ext and support != "forbidden"
    return False


def with_extension(client_caps: dict[str, Any] | None) -> dict[str, Any]:
    caps = dict(client_caps or {})
    ext = caps.get("extensions")
    caps["extensions"] = {**(ext if isinstance(ext, dict) else {}), TASKS_EXTENSION: {}}
    return caps


def task_call_params(
    session: TaskSession,
    params: dict[str, Any],
    *,
    ttl_ms: int | None,
    client_caps: dict[str, Any] | None,
    log_level: str | None,
) -> dict[str, Any]:
    """Shaped `tools/call` params that ask this upstream for a task."""
    if session.era == "modern":
        return session.shape_params(params, client_caps=with_extension(client_caps), log_level=log_level)
    out = dict(session.shape_params(params, client_caps=client_caps, log_level=log_level))
    out["task"] = {"ttl": ttl_ms} if ttl_ms is not None else {}
    return out


def tasks_params(session: TaskSession, params: dict[str, Any]) -> dict[str, Any]:
    """Params of a tasks/* request: modern ones carry the full `_meta` with the extension declared."""
    return session.shape_params(params, client_caps=with_extension(None), log_level=None)


def created_task(session: TaskSession, res: dict[str, Any]) -> dict[str, Any] | None:
    """The Task if `res` is a CreateTaskResult, else None (an inline result or an MRTR round)."""
    if session.era == "modern":
        if res.get("resultType") != "task":
            return None
        if not isinstance(res.get("taskId"), str) or not res["taskId"]:
            raise UpstreamError(
                {"code": INTERNAL_ERROR, "message": 'upstream answered resultType "task" without a taskId'}
            )
        return res
    task = res.get("task")
    if isinstance(task, dict) and "content" not in res:
        if not isinstance(task.get("taskId"), str) or not task["taskId"]:
            raise UpstreamError(
                {"code": INTERNAL_ERROR, "message": "upstream answered a CreateTaskResult without a taskId"}
            )
        return task
    return None


def poll_delay(task: dict[str, Any] | None, attempt: int | None = None) -> float:
    """The upstream's suggested interval (`pollInterval` / `pollIntervalMs`, ms), bounded to
    [POLL_MIN_S, POLL_MAX_S]. With `attempt` (polls made so far) the first polls come sooner,
    doubling from POLL_MIN_S up to that interval (what FastMCP's own client does), so a short
    task is not held back by a long suggested interval (FastMCP suggests 5 s)."""
    ms = None
    if isinstance(task, dict):
        ms = task.get("pollIntervalMs", task.get("pollInterval"))
    if not isinstance(ms, (int, float)) or isinstance(ms, bool) or ms <= 0:
        suggested = POLL_DEFAULT_S
    else:
        suggested = min(POLL_MAX_S, max(POLL_MIN_S, ms / 1000))
    if attempt is None:
        return suggested
    return min(suggested, POLL_MIN_S * 2.0 ** min(attempt, 16))


def _strip_related(res: dict[str, Any]) -> dict[str, Any]:
    """The upstream's related-task `_meta` names its task, not mcpx's: drop it."""
    meta = res.get("_meta")
    if not isinstance(meta, dict) or META_RELATED_TASK not in meta:
        return res
    out = {k: v for k, v in res.items() if k != "_meta"}
    rest = {k: v for k, v in meta.items() if k != META_RELATED_TASK}
    if rest:
        out["_meta"] = rest
    return out


class Follower:
    """Polls one upstream task to its end; reconnects through `get_session` after an outage."""

    def __init__(
        self,
        get_session: GetSession,
        task_id: str,
        *,
        on_request: OnRequest | None = None,
        on_input: OnInput | None = None,
        keep_upstream: Callable[[], bool] = lambda: False,
        sleep: Sleep = anyio.sleep,
        outage_s: float = OUTAGE_S,
        on_status: OnStatus | None = None,
    ) -> None:
        self.get_session = get_session
        self.on_status = on_status
        self._seen: tuple[str, str | None] | None = None
        self.task_id = task_id
        self.on_request = on_request
        self.on_input = on_input
        self.keep_upstream = keep_upstream
        self.sleep = sleep
        self.outage_s = outage_s
        self.statuses: list[str] = []  # every status seen, for logs and tests
        self._answered: set[str] = set()

    async def _request(
        self,
        method: str,
        params: dict[str, Any],
        *,
        timeout: float | None = REQUEST_TIMEOUT_S,
        on_request: OnRequest | None = None,
    ) -> tuple[TaskSession, dict[str, Any]]:
        """One tasks/* request, retried while the upstream is away (up to `outage_s`)."""
        lost_at: float | None = None
        while True:
            try:
                session = await self.get_session()
                return session, await session.request(
                    method, tasks_params(session, params), on_request=on_request, timeout=timeout
                )
            except (UpstreamUnavailable, TimeoutError) as exc:
                now = time.monotonic()
                lost_at = lost_at if lost_at is not None else now
                if now - lost_at >= self.outage_s:
                    raise UpstreamUnavailable(
                        f"lost the upstream while following its task {self.task_id}: {exc}"
                    ) from None
                log.info("upstream task %s: %s failed (%s); retrying", self.task_id, method, exc)
                await self.sleep(1.0)

    async def run(self, first: dict[str, Any] | None = None) -> dict[str, Any]:
        """Poll until terminal and return the CallToolResult (or raise the upstream's error).
        `first` is the Task from the CreateTaskResult; None (a resume) starts with a `tasks/get`."""
        try:
            return await self._follow(first)
        except anyio.get_cancelled_exc_class():
            if not self.keep_upstream():
                await self.cancel()
            raise

    async def cancel(self) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_TIMEOUT_S):
            try:
                session = await self.get_session()
                await session.request(
                    "tasks/cancel", tasks_params(session, {"taskId": self.task_id}), timeout=CANCEL_TIMEOUT_S
                )
                log.info("upstream task %s: cancel sent", self.task_id)
            except Exception as exc:  # noqa: BLE001 - already terminal (-32602), or gone: nothing more to stop
                log.info("upstream task %s: tasks/cancel answered %s", self.task_id, exc)

    async def _follow(self, task: dict[str, Any] | None) -> dict[str, Any]:
        session: TaskSession | None = None
        polls = 0
        while True:
            if task is None:
                try:
                    session, task = await self._request("tasks/get", {"taskId": self.task_id})
                except UpstreamError as exc:
                    if exc.error.get("code") != INVALID_PARAMS:
                        raise
                    # Not the host's unknown id: the upstream forgot ours (it restarted, or the task expired).
                    raise InternalError(
                        f"the upstream no longer knows its task {self.task_id}: {exc.error.get('message')}"
                    ) from None
            elif session is None:
                session = await self.get_session()
            status = task.get("status")
            if not self.statuses or self.statuses[-1] != status:
                self.statuses.append(str(status))
            await self._report(task)
            if status in TERMINAL:
                return await self._outcome(session, task)
            if status == "input_required":
                if session.era == "legacy":
                    # The questions come on the stream of a blocking tasks/result (tasks.mdx:435-449).
                    return await self._blocking_result(session)
                await self._answer(task)
            await self._pause(session, poll_delay(task, polls))
            polls += 1
            task = None

    async def _pause(self, session: TaskSession, delay: float) -> None:
        """Until the next poll: the upstream's own interval, or sooner when it says the task moved."""
        notified = session.task_notified(self.task_id)
        async with anyio.create_task_group() as tg:

            async def on_notice() -> None:
                await notified.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(on_notice)
            await self.sleep(delay)
            tg.cancel_scope.cancel()

    async def _report(self, task: dict[str, Any]) -> None:
        """Relay a new status or status message (the host, the console and the feed see it)."""
        message = task.get("statusMessage")
        seen = (str(task.get("status")), message if isinstance(message, str) else None)
        if seen != self._seen and self.on_status is not None:
            self._seen = seen
            try:
                await self.on_status(*seen)
            except Exception as exc:  # noqa: BLE001 - a relay failure must not stop the following
                log.warning("upstream task %s: could not relay its status: %s", self.task_id, exc)

    async def _blocking_result(self, session: TaskSession) -> dict[str, Any]:
        _, res = await self._request("tasks/result", {"taskId": self.task_id}, timeout=None, on_request=self.on_request)
        _, task = await self._request("tasks/get", {"taskId": self.task_id})
        return self._legacy_outcome(task, res)

    async def _answer(self, task: dict[str, Any]) -> None:
        """2026: ask the caller each outstanding question once; answer with tasks/update."""
        pending = task.get("inputRequests")
        if not isinstance(pending, dict):
            return
        fresh = {k: v for k, v in pending.items() if k not in self._answered}
        if not fresh:
            return  # asked already; the upstream has not caught up with the answer yet (4.6)
        if self.on_input is None:
            raise InternalError(f"upstream task {self.task_id} asks for input that mcpx cannot relay")
        if len(self._answered) > MAX_INPUT_ROUNDS * 16:
            raise InternalError(f"upstream task {self.task_id} kept asking for input")
        answers = await self.on_input(fresh)
        self._answered.update(fresh)
        await self._request("tasks/update", {"taskId": self.task_id, "inputResponses": answers})

    async def _outcome(self, session: TaskSession, task: dict[str, Any]) -> dict[str, Any]:
        status = task.get("status")
        if session.era == "modern":
            if status == "completed":
                result = task.get("result")
                if not isinstance(result, dict):
                    raise UpstreamError(
                        {"code": INTERNAL_ERROR, "message": f"upstream task {self.task_id} completed without a result"}
                    )
                return result
            if status == "failed":
                error = task.get("error")
                if isinstance(error, dict) and isinstance(error.get("code"), int):
                    raise UpstreamError(error)
                raise UpstreamError(
                    {
                        "code": INTERNAL_ERROR,
                        "message": task.get("statusMessage") or f"upstream task {self.task_id} failed",
                    }
                )
            raise UpstreamError(
                {
                    "code": INTERNAL_ERROR,
                    "message": task.get("statusMessage") or f"upstream task {self.task_id} was cancelled upstream",
                }
            )
        if status == "cancelled":  # someone else cancelled it upstream (ours never gets here)
            return self._legacy_outcome(task, {})
        # Legacy: what the underlying request returned, error included (tasks.mdx:464-466).
        _, res = await self._request("tasks/result", {"taskId": self.task_id}, timeout=None, on_request=self.on_request)
        return self._legacy_outcome(task, res)

    def _legacy_outcome(self, task: dict[str, Any], res: dict[str, Any]) -> dict[str, Any]:
        status = task.get("status")
        res = _strip_related(res)
        if status == "cancelled":
            raise UpstreamError(
                {
                    "code": INTERNAL_ERROR,
                    "message": task.get("statusMessage") or f"upstream task {self.task_id} was cancelled upstream",
                }
            )
        if isinstance(res.get("content"), list):
            return res
        if status == "failed":
            # SDK 1.30: a tool that raised inside its task ends `failed` with an empty payload;
            # the same tool outside a task answers an isError result with the message.
            message = task.get("statusMessage") or "the upstream task failed"
            return {"content": [{"type": "text", "text": str(message)}], "isError": True}
        raise UpstreamError(
            {"code": INTERNAL_ERROR, "message": f"upstream task {self.task_id} ended {status} without a result"}
        )


async def call(
    session: TaskSession,
    params: dict[str, Any],
    *,
    get_session: GetSession,
    on_task_id: OnTaskId,
    ttl_ms: int | None = None,
    client_caps: dict[str, Any] | None = None,
    log_level: str | None = None,
    on_notify: OnNotify | None = None,
    on_request: OnRequest | None = None,
    on_input: OnInput | None = None,
    ask_round: OnInput | None = None,
    keep_upstream: Callable[[], bool] = lambda: False,
    sleep: Sleep = anyio.sleep,
    on_status: OnStatus | None = None,
    on_sent: OnSent | None = None,
) -> dict[str, Any]:
    """`tools/call` (unshaped params, the upstream's tool name) as an upstream task.

    Returns the CallToolResult; or, from a 2026 upstream that asks an MRTR question before it
    makes a task, that `input_required` round when `ask_round` is None (the caller answers it and
    calls again with `inputResponses`/`requestState` in `params`). `on_task_id` hears the upstream
    task id as soon as it exists, before any polling."""
    rounds = 0
    current = dict(params)
    while True:
        res = await session.request(
            "tools/call",
            task_call_params(session, current, ttl_ms=ttl_ms, client_caps=client_caps, log_level=log_level),
            on_notify=on_notify,
            on_request=on_request,
            timeout=None,  # an inline answer may take as long as the tool does; the caller bounds it
            on_sent=on_sent,  # a kept server: a restarted daemon collects the CreateTaskResult (upstream/carry_on.py)
        )
        task = created_task(session, res)
        if task is not None:
            break
        if res.get("resultType") != "input_required" or ask_round is None or session.era != "modern":
            return res  # answered inline: the upstream chose not to make a task
        rounds += 1
        if rounds > MAX_INPUT_ROUNDS:
            raise InternalError("upstream kept asking for input before its task started")
        answers = await ask_round(res.get("inputRequests") or {})
        current = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
        current["inputResponses"] = answers
        if res.get("requestState") is not None:
            current["requestState"] = res["requestState"]
    follower = Follower(
        get_session,
        task["taskId"],
        on_request=on_request,
        on_input=on_input,
        keep_upstream=keep_upstream,
        sleep=sleep,
        on_status=on_status,
    )
    try:
        with anyio.CancelScope(shield=True):  # the id must land before a cancel can lose it
            await on_task_id(task["taskId"])
    except Exception as exc:  # noqa: BLE001 - the task is followed all the same; only a restart could lose it
        log.warning("upstream task %s: could not record its id: %s", task["taskId"], exc)
    return await follower.run(task)


async def resume(
    get_session: GetSession,
    task_id: str,
    *,
    on_input: OnInput | None = None,
    keep_upstream: Callable[[], bool] = lambda: False,
    sleep: Sleep = anyio.sleep,
    on_status: OnStatus | None = None,
) -> dict[str, Any]:
    """Follow an upstream task a previous daemon started, from its id alone."""
    follower = Follower(
        get_session, task_id, on_input=on_input, keep_upstream=keep_upstream, sleep=sleep, on_status=on_status
    )
    return await follower.run(None)


__all__ = [
    "Follower",
    "call",
    "created_task",
    "poll_delay",
    "resume",
    "task_capable",
    "upstream_tool",
]
