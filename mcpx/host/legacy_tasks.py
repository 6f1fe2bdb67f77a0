"""The 2025-11-25 task surface for legacy sessions: params.task, tasks/get|result|list|cancel.

Only sessions negotiated at 2025-11-25 see any of it (tasks did not exist before); 2026 hosts
never do. A task belongs to the host connection that created it (its principal when auth is on);
any other owner gets exactly what an unknown id gets.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import TYPE_CHECKING, Any

import anyio

from ..protocol.errors import INTERNAL_ERROR, InternalError, InvalidParams, MethodNotFound
from ..protocol.revisions import LEGACY_LATEST, META_RELATED_TASK
from ..store import StoreError
from ..tasks.model import CANCELLED, Task, legacy_task
from ..waiting import first_of
from .connection import HostConnection, RequestContext, Send

if TYPE_CHECKING:
    from ..tasks.engine import TaskEngine
    from ..upstream.pool import Route, UpstreamServer
    from .dispatch import Dispatcher

PAGE = 50
TASK_CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}


def owner_key(ctx: RequestContext) -> str:
    """Principal when authenticated (so it survives reconnects), else the connection itself."""
    return f"principal:{ctx.conn.principal}" if ctx.conn.principal else f"conn:{ctx.conn.id}"


def tasks_enabled(ctx: RequestContext) -> bool:
    return ctx.era == "legacy" and ctx.revision == LEGACY_LATEST


def task_support(dispatcher: Dispatcher, server_key: str, tool: dict[str, Any], upstream_name: str) -> str:
    """Config override, else the upstream's own declaration, else `optional` (mcpx runs the task)."""
    server = dispatcher.pool.servers[server_key]
    override = server.cfg.mcpx.tools.get(upstream_name)
    if override and override.taskSupport:
        return override.taskSupport
    declared = (tool.get("execution") or {}).get("taskSupport")
    return declared if declared in ("forbidden", "optional", "required") else "optional"


class LegacyTasks:
    def __init__(self, dispatcher: Dispatcher) -> None:
        self.d = dispatcher
        self.streams: dict[str, list[Send]] = {}  # task id -> open tasks/result streams
        self._stream_opened: dict[str, anyio.Event] = {}  # task id -> set when one opens

    def _sender(self, task_ctx: RequestContext) -> Send:
        """Best effort (progress): an open tasks/result stream of the task, else the GET stream."""

        async def send(msg: dict[str, Any]) -> None:
            streams = self.streams.get(task_ctx.task_id or "")
            target = streams[-1] if streams else task_ctx.conn.send
            if target is not None:
                await target(msg)

        return send

    async def question_channel(self, task_id: str, conn: HostConnection) -> Send:
        """Where to ask the host a question inside this task: wait until it has a stream open
        (it sees `input_required` meanwhile and should call tasks/result, tasks.mdx:449)."""
        while True:
            streams = self.streams.get(task_id)
            if streams:
                return streams[-1]
            if conn.send is not None:
                return conn.send
            stream_opened = self._stream_opened.setdefault(task_id, anyio.Event())
            await first_of(stream_opened, conn.channel_opened)

    @property
    def engine(self) -> TaskEngine:
        return self.d.engine

    async def _owned(self, ctx: RequestContext, params: dict[str, Any]) -> Task:
        task_id = params.get("taskId")
        task = await self.engine.get(task_id) if isinstance(task_id, str) else None
        if task is None or task.owner != owner_key(ctx):
            raise InvalidParams(f"Unknown task: {task_id}")  # the same for foreign and missing ids
        return task

    async def call_as_task(
        self, ctx: RequestContext, params: dict[str, Any], route: Route, server: UpstreamServer
    ) -> dict[str, Any]:
        meta = params.get("task")
        if not isinstance(meta, dict):
            raise InvalidParams("tools/call: params.task must be an object")
        cfg = self.d.config.tasks
        ttl = meta.get("ttl", cfg.ttlMs)
        if ttl is not None and (not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0):
            raise InvalidParams("tools/call: params.task.ttl must be a positive integer (ms)")
        ttl = min(ttl or cfg.ttlMs, cfg.maxTtlMs)  # honoured up to the configured maximum
        conn = ctx.conn
        call_params = {k: v for k, v in params.items() if k != "task"}
        # The original progress token stays valid for the task's whole life (progress.mdx:69-71):
        # after the CreateTaskResult the request stream is gone, so progress goes on the session.
        task_ctx = RequestContext(conn, ctx.era, ctx.revision, ctx.client_caps, ctx.meta, ctx.log_level, None)
        task_ctx.notify = self._sender(task_ctx)

        async def call(task: Task) -> dict[str, Any]:
            return await self.d.call_tool(task_ctx, call_params, route, server)

        try:
            task = await self.engine.create(
                owner=owner_key(ctx),
                connection=conn.record_id,
                by=f"host:{conn.record_id}",
                upstream=server.key,
                tool=route.name,
                arguments=params.get("arguments") or {},
                era="legacy",
                ttl_ms=ttl,
                poll_ms=cfg.pollIntervalMs,
                call=call,
            )
        except StoreError as exc:
            raise InternalError(f"could not create the task: {exc}") from None
        task_ctx.task_id = task.id
        return {"task": legacy_task(task)}

    async def get(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return legacy_task(await self._owned(ctx, params))

    async def result(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        task = await self._owned(ctx, params)
        # While this tasks/result is open, its stream is where the task's questions and progress
        # go (tasks.mdx:435-449, DIGEST L5); the session's GET stream is the fallback.
        streams = self.streams.setdefault(task.id, []) if ctx.notify is not None else None
        if streams is not None and ctx.notify is not None:
            streams.append(ctx.notify)
            opened = self._stream_opened.pop(task.id, None)
            if opened is not None:
                opened.set()
        try:
            done = await self.engine.wait_terminal(task.id)
        finally:
            if streams is not None and ctx.notify is not None:
                streams.remove(ctx.notify)
                if not streams:
                    self.streams.pop(task.id, None)
        if done is None:
            raise InvalidParams(f"Unknown task: {task.id} (expired)")
        related = {META_RELATED_TASK: {"taskId": done.id}}
        if done.result is not None:
            out = dict(done.result)
            out["_meta"] = {**(out.get("_meta") or {}), **related}
            return out
        error = dict(
            done.error
            or {"code": INTERNAL_ERROR, "message": "task cancelled" if done.status == CANCELLED else "task failed"}
        )
        # The underlying request's JSON-RPC error, as an error reply (DIGEST 2.6, L3); an error
        # object has no _meta, so the related-task key rides in its data.
        data = error.get("data")
        if data is None or isinstance(data, dict):
            error["data"] = {**(data or {}), "_meta": related}
        raise TaskErrorReply(error, related)

    async def list(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        after = _decode_cursor(params.get("cursor"))
        tasks = await self.engine.list_owner(owner_key(ctx), after, PAGE + 1)
        res: dict[str, Any] = {"tasks": [legacy_task(t) for t in tasks[:PAGE]]}
        if len(tasks) > PAGE:
            last = tasks[PAGE - 1]
            res["nextCursor"] = _encode_cursor(last.created_ms, last.id)
        return res

    async def cancel(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        task = await self._owned(ctx, params)
        if task.terminal:
            raise InvalidParams(f"Task {task.id} is already {task.status} and cannot be cancelled")
        try:
            done = await self.engine.cancel(task, by=f"host:{ctx.conn.record_id}")
        except StoreError as exc:
            raise InternalError(f"could not cancel the task: {exc}") from None
        if done is None:  # it finished while the cancel was on its way
            raise InvalidParams(f"Task {task.id} has already finished and cannot be cancelled")
        return legacy_task(done)

    def check_required(self, ctx: RequestContext, support: str, params: dict[str, Any]) -> None:
        if "task" in params and support == "forbidden":
            raise MethodNotFound("This tool cannot run as a task (taskSupport: forbidden)")
        if "task" not in params and support == "required":
            # L1: -32601 (tasks.mdx:117) rather than the MAY -32600 of tasks.mdx:775.
            raise MethodNotFound("This tool must be called as a task (taskSupport: required): add params.task")


class TaskErrorReply(Exception):
    """tasks/result of a failed task: the stored JSON-RPC error is the reply."""

    def __init__(self, error: dict[str, Any], related: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.error = error
        self.related = related


def _encode_cursor(created_ms: int, task_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps(["tasks", created_ms, task_id]).encode()).decode().rstrip("=")


def _decode_cursor(cursor: object) -> tuple[int, str] | None:
    if cursor is None:
        return None
    try:
        if not isinstance(cursor, str):
            raise ValueError
        kind, created, task_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if kind != "tasks" or not isinstance(created, int) or isinstance(created, bool) or not isinstance(task_id, str):
            raise ValueError
    except (ValueError, TypeError, binascii.Error):
        raise InvalidParams("Invalid cursor for tasks/list") from None
    return created, task_id
