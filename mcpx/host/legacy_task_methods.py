"""The 2025-11-25 task surface for legacy sessions: params.task, tasks/get|result|list|cancel.

The rules (who sees a task, what each reply holds, what a cancel of a finished task answers) are
protocol/legacy_tasks.py; this module does the waiting, storing and sending around them.
"""

from __future__ import annotations

from typing import Any

from ..protocol import legacy_tasks as rules
from ..protocol.errors import InternalError, UpstreamUnavailable
from ..records.task import Task
from ..store import StoreError
from ..tasks.engine import ANCHOR_WAIT_S, now_ms
from ..upstream.pool import Route, UpstreamServer
from .connection import RequestContext
from .task_host import TaskHost
from .task_streams import TaskStreams
from .task_why import task_why


def owner_key(ctx: RequestContext) -> str:
    return rules.owner_key(ctx.conn.principal, ctx.conn.id)


class LegacyTasks:
    def __init__(self, host: TaskHost, streams: TaskStreams) -> None:
        self.host = host
        self.engine = host.engine
        self.streams = streams

    def _gate(self, ctx: RequestContext) -> None:
        if not rules.enabled(ctx.era, ctx.revision):
            raise rules.not_enabled(ctx.revision)

    async def _owned(self, ctx: RequestContext, params: dict[str, Any]) -> Task:
        self._gate(ctx)
        task_id = params.get("taskId")
        task = await self.engine.get(task_id) if isinstance(task_id, str) else None
        return rules.owned(task, task_id, owner_key(ctx), now_ms())

    async def tools_call(
        self, ctx: RequestContext, params: dict[str, Any], route: Route, server: UpstreamServer, support: str
    ) -> dict[str, Any]:
        """tools/call for a legacy host: a task when it asks for one (2025-11-25 only), else inline."""
        if not rules.enabled(ctx.era, ctx.revision):
            return await self.host.calls.call_tool(ctx, params, route, server)
        rules.check_support(support, params)
        if "task" not in params:
            return await self.host.calls.call_tool(ctx, params, route, server)
        if ctx.resumed:
            # `mcpx serve` asks again because a previous daemon never answered: that daemon may have
            # made the task already, and a second one would run the call twice.
            raise UpstreamUnavailable(
                "the mcpx daemon restarted before this task's handle reached you; the call was not made"
                " again (if the task was created, tasks/list shows it)"
            )
        refused = server.call_refusal()
        if refused is not None:
            raise refused  # before a handle: a task that could only fail at once is not made
        cfg = self.host.config
        ttl = rules.task_ttl(params, cfg.ttlMs, cfg.maxTtlMs)
        conn = ctx.conn
        call_params = {k: v for k, v in params.items() if k != "task"}
        # The original progress token stays valid for the task's whole life (progress.mdx:69-71):
        # after the CreateTaskResult the request stream is gone, so progress goes on the session.
        task_ctx = RequestContext(conn, ctx.era, ctx.revision, ctx.client_caps, ctx.meta, ctx.log_level, None)
        task_ctx.notify = self.streams.sender(task_ctx)
        calls = self.host.calls

        async def call(task: Task) -> dict[str, Any]:
            with server.hold():  # a `scope: host` process outlives its host while this task runs
                return await calls.call_tool(task_ctx, call_params, route, server)

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
                anchor_wait_s=ANCHOR_WAIT_S,
                why=task_why(server, route.name),
            )
        except StoreError as exc:
            raise InternalError(f"could not create the task: {exc}") from None
        task_ctx.task_id = task.id
        return rules.created_reply(task)

    async def get(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        task = await self._owned(ctx, params)
        if await self.engine.pacer.pace(task):  # polled again too soon: answered a little later
            task = await self._owned(ctx, params)
        return rules.get_reply(task)

    async def result(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        task = await self._owned(ctx, params)
        # While this tasks/result is open, its stream is where the task's questions and progress
        # go (tasks.mdx:435-449, DIGEST L5); the session's GET stream is the fallback.
        notify = ctx.notify
        if notify is not None:
            self.streams.open(task.id, notify, ctx.conn)
        try:
            done = await self.engine.wait_terminal(task.id)
        finally:
            if notify is not None:
                self.streams.close(task.id, notify)
        return rules.result_reply(done, task.id)

    async def list(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        self._gate(ctx)
        after = rules.decode_cursor(params.get("cursor"))
        return rules.list_reply(await self.engine.list_owner(owner_key(ctx), after, rules.PAGE + 1))

    async def cancel(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        task = await self._owned(ctx, params)
        rules.check_cancellable(task)
        try:
            done = await self.engine.cancel(task, by=f"host:{ctx.conn.record_id}")
        except StoreError as exc:
            raise InternalError(f"could not cancel the task: {exc}") from None
        return rules.cancel_reply(task.id, done)

    async def announce(self, task: Task) -> None:
        """notifications/tasks/status to the owning session, if it has a channel open."""
        if not task.owner.startswith("conn:"):
            return
        conn = self.host.hub.legacy.get(task.owner[5:])
        if conn is not None and conn.send is not None:
            note = rules.status_notification(task)
            await conn.send(note)
            self.engine.frames.record(task.id, "host", "out", note)
