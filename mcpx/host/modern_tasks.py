"""The 2026-07-28 `io.modelcontextprotocol/tasks` extension for modern hosts.

The server decides per request: for a client whose own request declares the extension, a call
still running after `tasks.taskAfterMs` (at once for `required` tools) becomes a task; `forbidden`
never does; `params.task` is ignored. Task ids are reachable by id alone unless auth binds them to
a principal (the extension's model); the creating host is still recorded for the console.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from ..protocol import jsonrpc
from ..protocol.errors import InternalError, InvalidParams, McpError, MissingClientCapability
from ..protocol.jsonrpc import Id
from ..protocol.revisions import META_SUBSCRIPTION, TASKS_EXTENSION
from ..store import StoreError
from ..tasks.model import COMPLETED, FAILED, INPUT_REQUIRED, Task, modern_task
from .connection import RequestContext, Send
from .parking import PARK_LINGER_S, Park, park_of, wait_for

if TYPE_CHECKING:
    from ..tasks.engine import Run
    from ..upstream.pool import Route, UpstreamServer
    from .dispatch import Dispatcher

REQUIRED: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}


def declares(ctx: RequestContext) -> bool:
    ext = ctx.client_caps.get("extensions")
    return isinstance(ext, dict) and TASKS_EXTENSION in ext


def require(ctx: RequestContext) -> None:
    if not declares(ctx):
        raise MissingClientCapability(
            "Missing required client capability: the io.modelcontextprotocol/tasks extension",
            {"requiredCapabilities": REQUIRED},
        )


def detailed(task: Task) -> dict[str, Any]:
    """DetailedTask: what tasks/get returns and notifications/tasks carry (X4)."""
    out = modern_task(task)
    if task.status == COMPLETED and task.result is not None:
        # X10: the inlined CallToolResult carries its own resultType.
        out["result"] = {**task.result, "resultType": "complete"}
    elif task.status == FAILED:
        out["error"] = task.error or {"code": -32603, "message": task.status_message or "failed"}
    elif task.status == INPUT_REQUIRED:
        out["inputRequests"] = dict(task.input_requests)  # every request still outstanding
    return out


class _Slot:
    """Whether a running call has become a task (decided) and under which id (adopted)."""

    def __init__(self) -> None:
        self.decided = False
        self.adopted = anyio.Event()
        self.task_id: str | None = None


def _is_mrtr(result: object) -> bool:
    return isinstance(result, dict) and result.get("resultType") == "input_required"


class ModernTasks:
    def __init__(self, dispatcher: Dispatcher) -> None:
        self.d = dispatcher
        self.parks: dict[str, tuple[Run, Park, _Slot, RequestContext]] = {}

    def owner(self, ctx: RequestContext) -> str:
        return f"principal:{ctx.conn.principal}" if ctx.conn.principal else f"modern:{ctx.conn.id}"

    async def _find(self, ctx: RequestContext, params: dict[str, Any]) -> Task:
        require(ctx)
        task_id = params.get("taskId")
        task = await self.d.engine.get(task_id) if isinstance(task_id, str) else None
        # Bound to a principal only when one exists; otherwise the id is the capability.
        if (
            task is None
            or task.era != "modern"
            or (task.owner.startswith("principal:") and task.owner != self.owner(ctx))
        ):
            raise InvalidParams(f"Unknown task: {task_id}")
        return task

    async def call(
        self, ctx: RequestContext, params: dict[str, Any], route: Route, server: UpstreamServer, support: str
    ) -> dict[str, Any]:
        """tools/call for a modern host: an inline result, an MRTR round, or a task handle.

        The upstream call always runs under the engine, so it can become a task (declaring
        clients, after `tasks.taskAfterMs`, or at once for `required` tools) or be held open while
        the host answers an upstream's questions by MRTR retry (host/parking.py).
        """
        declaring = declares(ctx)
        if not declaring and support == "required":
            raise MissingClientCapability(
                "This tool runs only as a task: declare the io.modelcontextprotocol/tasks extension",
                {"requiredCapabilities": REQUIRED},
            )
        taskable = declaring and support != "forbidden"
        params, round_ = self.d.unwrap_round(params, route)  # inside, rounds carry the raw state
        park_id = park_of(params)
        if park_id is not None:
            entry = self.parks.pop(park_id, None)
            if entry is None:
                raise InvalidParams(
                    "This input round is over (answered, expired or unknown): call the tool again without requestState"
                )
            run, park, slot, detached = entry
            detached.notify = None if taskable else ctx.notify  # progress follows the retry's stream
            responses = jsonrpc.as_object(params.get("inputResponses"))
            for qid, answer in responses.items():
                if qid in park.outstanding and isinstance(answer, dict):
                    await self.d.broker.answer(qid, answer, f"host:{ctx.conn.record_id}")
            params = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
        else:
            # Tasks carry no progress or log (tasks.md:505); other calls keep their stream.
            detached = RequestContext(
                ctx.conn,
                ctx.era,
                ctx.revision,
                ctx.client_caps,
                ctx.meta,
                None if taskable else ctx.log_level,
                None if taskable else ctx.notify,
            )
            park = Park()
            detached.park = park
            slot = _Slot()
            run = self.d.engine.begin("modern", self._work(detached, params, route, server, slot))
            run.taskable = taskable
        cfg = self.d.config.tasks
        try:
            outcome = await wait_for(run, park, cfg.taskAfterMs / 1000 if taskable and not slot.decided else None)
        except anyio.get_cancelled_exc_class():
            if not slot.decided:
                run.scope.cancel()  # the host closed its stream while it owned the call: a cancel
            raise
        if outcome == "question" and park.refused is not None and not slot.decided:
            run.scope.cancel()
            raise park.refused
        if outcome == "question" and not slot.decided:
            park.rearm()
            self.parks[park.id] = (run, park, slot, detached)
            self.d.engine.spawn(self._forget_when_done, park.id, run)
            round_result = {
                "resultType": "input_required",
                "inputRequests": dict(park.outstanding),
                "requestState": {"mcpxPark": park.id},
            }
            return self.d.wrap_round(round_result, params, route, round_)
        if outcome == "done" and (support != "required" or _is_mrtr(run.result)):
            if run.exception is not None:
                raise run.exception
            assert run.result is not None
            if _is_mrtr(run.result):
                return self.d.wrap_round(run.result, params, route, round_)
            return run.result
        return await self._adopt(ctx, run, slot, detached, route, server, params)

    def _work(
        self, detached: RequestContext, params: dict[str, Any], route: Route, server: UpstreamServer, slot: _Slot
    ) -> Callable[[], Awaitable[dict[str, Any]]]:
        async def work() -> dict[str, Any]:
            p = dict(params)
            while True:
                res = await self.d.call_tool(detached, p, route, server, raw_state=True)
                if res.get("resultType") != "input_required":
                    return res
                if not slot.decided:
                    return res  # asked before there is a task: the host answers it inline (MRTR)
                await slot.adopted.wait()
                # Inside a task the questions become the task's inputRequests (tasks.md:346).
                answers = await self.d.ask_in_task(detached, res.get("inputRequests") or {}, server)
                p = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
                p["inputResponses"] = answers
                if res.get("requestState") is not None:
                    p["requestState"] = res["requestState"]

        return work

    async def _adopt(
        self,
        ctx: RequestContext,
        run: Run,
        slot: _Slot,
        detached: RequestContext,
        route: Route,
        server: UpstreamServer,
        params: dict[str, Any],
    ) -> dict[str, Any]:
        cfg = self.d.config.tasks
        slot.decided = True
        record = self.d.engine.new_record(
            owner=self.owner(ctx),
            connection=ctx.conn.record_id,
            upstream=server.key,
            tool=route.name,
            arguments=params.get("arguments") or {},
            era="modern",
            ttl_ms=cfg.ttlMs,
            poll_ms=cfg.pollIntervalMs,
        )
        detached.notify = None
        try:
            with anyio.CancelScope(shield=True):  # once started, the row must land even if the host leaves
                task = await self.d.engine.adopt(run, record, by=f"host:{ctx.conn.record_id}")
        except StoreError as exc:
            run.scope.cancel()
            raise InternalError(f"could not create the task: {exc}") from None
        finally:
            slot.task_id = detached.task_id = record.id
            slot.adopted.set()
        return {**modern_task(task), "resultType": "task"}

    async def _forget_when_done(self, park_id: str, run: Run) -> None:
        """A parked call whose host never retries is dropped once it has finished and lingered."""
        await run.done.wait()
        await anyio.sleep(PARK_LINGER_S)
        self.parks.pop(park_id, None)

    async def get(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return detailed(await self._find(ctx, params))

    async def update(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        task = await self._find(ctx, params)
        if not isinstance(params.get("inputResponses"), dict):
            raise InvalidParams("tasks/update: params.inputResponses must be an object")
        # Keys that are not outstanding are ignored (tasks.md:379); the broker answers the rest.
        await self.d.answer_task_inputs(task, params["inputResponses"], ctx)
        return {}

    async def cancel(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        task = await self._find(ctx, params)
        if not task.terminal:
            try:
                await self.d.engine.cancel(task, by=f"host:{ctx.conn.record_id}")
            except StoreError as exc:
                raise InternalError(f"could not cancel the task: {exc}") from None
        return {}  # an ack, whatever state the task is in (cooperative; terminal is no error)

    async def listen_tasks(self, ctx: RequestContext, ids: object) -> list[str]:
        """Validate taskIds for a listen stream; returns the ids agreed (unknown ones are left out)."""
        require(ctx)
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise InvalidParams("subscriptions/listen: notifications.taskIds must be a list of strings")
        agreed = []
        for task_id in ids:
            try:
                await self._find(ctx, {"taskId": task_id})
            except McpError:
                continue
            agreed.append(task_id)
        return agreed

    async def send_state(self, task_id: str, send: Send, subscription_id: Id) -> None:
        task = await self.d.engine.get(task_id)
        if task is not None:
            await send(
                jsonrpc.notification(
                    "notifications/tasks", {**detailed(task), "_meta": {META_SUBSCRIPTION: subscription_id}}
                )
            )
