"""The 2026-07-28 `io.modelcontextprotocol/tasks` extension for modern hosts.

The rules (who may make or see a task, DetailedTask, update and cancel replies) are
protocol/modern_tasks.py; this module runs the call under the engine so it can become a task, or
holds it open while the host answers an upstream's questions by MRTR retry (host/parking.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from ..protocol import jsonrpc
from ..protocol import modern_tasks as rules
from ..protocol.errors import InternalError, InvalidParams, McpError
from ..protocol.jsonrpc import Id
from ..records.task import Task
from ..store import StoreError
from ..tasks.engine import ANCHOR_WAIT_S, Run, now_ms
from ..upstream.pool import Route, UpstreamServer
from .approvals import Resumed
from .connection import RequestContext, Send
from .parking import PARK_LINGER_S, Park, park_of, wait_for
from .task_host import TaskHost
from .task_why import task_why
from .upstream_call import retry_params


class _Slot:
    """Whether a running call has become a task (decided) and under which id (adopted)."""

    def __init__(self) -> None:
        self.decided = False
        self.adopted = anyio.Event()
        self.task_id: str | None = None


def _is_mrtr(result: object) -> bool:
    return isinstance(result, dict) and result.get("resultType") == "input_required"


def _cannot_ask_mid_call(server: UpstreamServer) -> bool:
    """A 2026 upstream asks only by an `input_required` result (MRTR), never by a request in the
    middle of a call, so a call to it never needs a park to hold it open."""
    session = server.session
    return session is not None and session.era == "modern"


def owner_key(ctx: RequestContext) -> str:
    return rules.owner_key(ctx.conn.principal, ctx.conn.id)


class ModernTasks:
    def __init__(self, host: TaskHost) -> None:
        self.host = host
        self.engine = host.engine
        self.parks: dict[str, tuple[Run, Park, _Slot, RequestContext]] = {}

    async def _find(self, ctx: RequestContext, task_id: object) -> Task:
        rules.require(ctx.client_caps)
        task = await self.engine.get(task_id) if isinstance(task_id, str) else None
        return rules.visible(task, task_id, owner_key(ctx), now_ms())

    async def tools_call(
        self, ctx: RequestContext, params: dict[str, Any], route: Route, server: UpstreamServer, support: str
    ) -> dict[str, Any]:
        """tools/call for a modern host: an inline result, an MRTR round, or a task handle.

        The upstream call always runs under the engine, so it can become a task (declaring
        clients, after `tasks.taskAfterMs`, or at once for `required` tools) or be held open while
        the host answers an upstream's questions by MRTR retry.
        """
        taskable = rules.taskable(ctx.client_caps, support)
        calls = self.host.calls
        params, verified = calls.unwrap_round(ctx, {k: v for k, v in params.items() if k != "task"}, route)
        round_ = verified.number if verified is not None else 0
        # Only an envelope mcpx signed for this call and host continues past its approval gate.
        resumed = Resumed(verified.nonce) if verified is not None else None
        park_id = park_of(params) if verified is not None else None  # inside, rounds carry the raw state
        if park_id is not None:
            entry = self.parks.pop(park_id, None)
            if entry is None:
                raise InvalidParams(
                    "This input round is over (answered, expired or unknown): call the tool again without requestState"
                )
            run, park, slot, detached = entry
            taskable = run.taskable  # decided when the call began (a task limit may have said no)
            detached.notify = None if taskable else ctx.notify  # progress follows the retry's stream
            responses = jsonrpc.as_object(params.get("inputResponses"))
            for qid, answer in responses.items():
                if qid in park.outstanding and isinstance(answer, dict):
                    await self.host.broker.answer(qid, answer, f"host:{ctx.conn.record_id}")
            params = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
        else:
            refused = self.engine.active.refusal(owner_key(ctx)) if taskable else None
            if refused is not None:
                if support == "required":
                    raise refused
                taskable = False  # at its task limit the owner still gets its answer, inline
            if not taskable and _cannot_ask_mid_call(server):
                # Nothing can turn this call into a task or park it: it runs in the request's own
                # task, as a 2025 host's plain call does (no engine run, no park, no task spawn).
                result = await calls.call_tool(ctx, params, route, server, raw_state=True, resumed=resumed)
                return calls.wrap_round(ctx, result, params, route, round_) if _is_mrtr(result) else result
            # Tasks carry no progress or log (tasks.md:505); other calls keep their stream.
            detached = RequestContext(
                ctx.conn,
                ctx.era,
                ctx.revision,
                ctx.client_caps,
                ctx.meta,
                None if taskable else ctx.log_level,
                None if taskable else ctx.notify,
                peer=ctx.peer,
            )
            detached.resumed = ctx.resumed  # (a resumed call may not become a second task: upstream_call.py)
            park = Park()
            detached.park = park
            slot = _Slot()
            run = self.engine.begin("modern", self._work(detached, params, route, server, slot, resumed))
            run.taskable = taskable
        try:
            deadline = self.host.config.taskAfterMs / 1000 if taskable and not slot.decided else None
            outcome = await wait_for(run, park, deadline)
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
            self.engine.spawn(self._forget_when_done, park.id, run)
            return calls.wrap_round(ctx, rules.input_round(park.outstanding, park.id), params, route, round_)
        if outcome == "done" and (support != "required" or _is_mrtr(run.result)):
            if run.exception is not None:
                raise run.exception
            assert run.result is not None
            if _is_mrtr(run.result):
                return calls.wrap_round(ctx, run.result, params, route, round_)
            return run.result
        return await self._adopt(ctx, run, slot, detached, route, server, params)

    def _work(
        self,
        detached: RequestContext,
        params: dict[str, Any],
        route: Route,
        server: UpstreamServer,
        slot: _Slot,
        resumed: Resumed | None,
    ) -> Callable[[], Awaitable[dict[str, Any]]]:
        calls = self.host.calls

        async def work() -> dict[str, Any]:
            with server.hold():  # a `scope: host` process outlives its host while this (task's) work runs
                return await rounds()

        async def rounds() -> dict[str, Any]:
            p, again = dict(params), resumed
            while True:
                res = await calls.call_tool(detached, p, route, server, raw_state=True, resumed=again)
                if res.get("resultType") != "input_required":
                    return res
                if not slot.decided:
                    return res  # asked before there is a task: the host answers it inline (MRTR)
                await slot.adopted.wait()
                # Inside a task the questions become the task's inputRequests (tasks.md:346).
                answers = await calls.ask_round(detached, res.get("inputRequests") or {}, server)
                p, again = retry_params(params, res, answers), Resumed(None)  # mcpx's own retry

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
        cfg = self.host.config
        slot.decided = True
        # The handle names work a restarted daemon can carry on (as a legacy handle does), unless
        # the upstream is slow to take the call; meanwhile its questions wait for the task.
        with anyio.move_on_after(ANCHOR_WAIT_S):
            await run.anchored.wait()
        record = self.engine.new_record(
            owner=owner_key(ctx),
            connection=ctx.conn.record_id,
            upstream=server.key,
            tool=route.name,
            arguments=params.get("arguments") or {},
            era="modern",
            ttl_ms=cfg.ttlMs,
            poll_ms=cfg.pollIntervalMs,
            why=task_why(server, route.name),
        )
        detached.notify = None
        try:
            with anyio.CancelScope(shield=True):  # once started, the row must land even if the host leaves
                task = await self.engine.adopt(run, record, by=f"host:{ctx.conn.record_id}")
        except StoreError as exc:
            run.scope.cancel()
            raise InternalError(f"could not create the task: {exc}") from None
        finally:
            slot.task_id = detached.task_id = record.id
            slot.adopted.set()
        return rules.task_handle(task)

    async def _forget_when_done(self, park_id: str, run: Run) -> None:
        """A parked call whose host never retries is dropped once it has finished and lingered."""
        await run.done.wait()
        await anyio.sleep(PARK_LINGER_S)
        self.parks.pop(park_id, None)

    async def get(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        task = await self._find(ctx, params.get("taskId"))
        if await self.engine.pacer.pace(task):  # polled again too soon: answered a little later
            task = await self._find(ctx, task.id)
        return rules.detailed(task)

    async def update(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        task = await self._find(ctx, params.get("taskId"))
        responses = rules.update_responses(params)
        settled = await self.engine.answer(task.id, responses)  # the broker answers the outstanding ones
        # Keys of the task asked by no one here: on a shared store, the daemon running the task asks
        # them; the answer goes to the question's row and that daemon is told (unknown keys: ignored).
        shared = self.engine.shares_store
        for key, value in responses.items():
            if shared and key not in settled and key in task.input_requests and not self.engine.inputs.outstanding(key):
                await self.host.broker.answer_elsewhere(key, task.id, value, f"host:{ctx.conn.record_id}")
        return {}

    async def cancel(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        task = await self._find(ctx, params.get("taskId"))
        if rules.cancel_needed(task):
            try:
                await self.engine.cancel(task, by=f"host:{ctx.conn.record_id}")
            except StoreError as exc:
                raise InternalError(f"could not cancel the task: {exc}") from None
        return {}  # an ack, whatever state the task is in

    async def listen_tasks(self, ctx: RequestContext, ids: object) -> list[str]:
        """The taskIds a listen stream agrees to: the ones this host may see."""
        rules.require(ctx.client_caps)
        agreed = []
        for task_id in rules.listen_ids(ids):
            try:
                await self._find(ctx, task_id)
            except McpError:
                continue
            agreed.append(task_id)
        return agreed

    async def send_state(self, task_id: str, send: Send, subscription_id: Id) -> None:
        task = await self.engine.get(task_id)
        if task is not None:
            note = rules.task_notification(task, subscription_id)
            await send(note)
            self.engine.frames.record(task_id, "host", "out", note)

    async def announce(self, task: Task) -> None:
        """notifications/tasks (a DetailedTask) on every listen stream that asked for this task."""
        for note in await self.host.hub.task_changed(task.id, rules.detailed(task)):
            self.engine.frames.record(task.id, "host", "out", note)
