"""Questions an upstream asks during a host's call, put through the broker to whoever may answer.

Per era: a 2025 host is asked on the stream of the request that caused it (inside a task, on the
task's stream); inside a 2026 task a question becomes one of the task's inputRequests; a 2026
host's ordinary call is held open and gets the question as an MRTR round (host/parking.py).
Operators may answer any of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from ..protocol import jsonrpc
from ..protocol.errors import InternalError, MissingClientCapability, UpstreamError
from ..protocol.legacy_tasks import related_meta
from ..questions import routing
from ..questions.broker import Broker, HostAsk, OnWaiting
from ..records.question import Question
from ..tasks.engine import TaskEngine, current_run
from ..telemetry import waits
from ..upstream.pool import UpstreamServer
from ..upstream.session import AskOwner, OnRequest
from .connection import HostConnection, HostError, RequestContext
from .task_streams import TaskStreams
from .waiting import first_error

_CAPABILITY_FOR = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}
QUESTION_TIMEOUT_S = 600.0
# A 2025 host opens its GET stream just after initialize, while its first call may already have
# started its own process, whose first question then comes before the stream: it is given this long.
CHANNEL_WAIT_S = 2.0


class Asker:
    def __init__(self, engine: TaskEngine, broker: Broker, streams: TaskStreams) -> None:
        self.engine = engine
        self.broker = broker
        self.streams = streams

    def on_request(self, ctx: RequestContext, server: UpstreamServer) -> OnRequest:
        async def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
            return await self.ask(ctx, method, params, server)

        return ask

    @waits.traced_wait(waits.mrtr_round)
    async def ask_round(self, ctx: RequestContext, requests: dict[str, Any], server: UpstreamServer) -> dict[str, Any]:
        """Every MRTR inputRequest of one round, asked of the host at once."""
        answers: dict[str, Any] = {}

        async def one(key: str, request: object) -> None:
            if not isinstance(request, dict) or not isinstance(request.get("method"), str):
                raise InternalError(f"upstream sent a malformed input request {key!r}")
            answers[key] = await self.ask(ctx, request["method"], request.get("params") or {}, server)

        try:
            async with anyio.create_task_group() as tg:
                for key, request in requests.items():
                    tg.start_soon(one, key, request)
        except BaseExceptionGroup as group:
            raise first_error(group) from None  # one question's failure is the round's, as it is
        return answers

    @waits.traced_wait(waits.question)
    async def ask(
        self, ctx: RequestContext, method: str, params: dict[str, Any], server: UpstreamServer
    ) -> dict[str, Any]:
        """One question, through the broker: to the host as its era allows, to an operator always."""
        clean = {k: v for k, v in params.items() if k != "_meta"}
        capability = _CAPABILITY_FOR.get(method)
        if ctx.era == "legacy":
            host_ask = self._legacy_host_ask(ctx, method, clean, capability)
        else:
            host_ask = self._modern_host_ask(ctx, method, clean, capability)
        task_id = ctx.task_id
        if task_id is None and ctx.plain is not None:
            # A plain call that asks is listed at once, and its question shown with it (the host,
            # which holds no task, is asked as before: nothing names the row to it).
            task_id = await ctx.plain.row()
        return await self.broker.ask(
            upstream=server.key,
            method=method,
            params=clean,
            task_id=task_id,
            connection=ctx.conn.record_id,
            host_ask=host_ask,
            on_waiting=self._tell_waiting(ctx),
            why=_why(ctx, capability, host_ask),
        )

    def for_owner(self, conn: HostConnection, upstream: str, gone: Callable[[], bool]) -> AskOwner:
        """Who answers a question that a host's own process (`scope: host`) asks with no call in
        flight (a roots/list at its start, say): that host, when it declared the capability and
        has a stream to be asked on (a 2025 session's GET stream, a shim's channel); otherwise an
        operator, as for any question its host cannot take. Never another host. `gone`: the host
        disconnected while its tasks still run on the process."""

        async def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
            clean = {k: v for k, v in params.items() if k != "_meta"}
            capability = _CAPABILITY_FOR.get(method)
            declared = capability is not None and capability in conn.client_caps
            if declared and conn.era == "legacy" and conn.send is None and not gone():
                with anyio.move_on_after(CHANNEL_WAIT_S):
                    await conn.channel_opened.wait()
            send = conn.send
            host_ask: HostAsk | None = None
            if gone():
                why = routing.host_gone()
            elif conn.era == "legacy" and not declared:
                why = routing.host_lacks(capability)
            elif conn.era != "legacy" or send is None:  # (a 2026 host declares per request: in a call)
                why = routing.no_channel_outside_a_call(conn.era)
            else:
                channel = send

                async def host_ask(q: Question) -> dict[str, Any]:
                    try:
                        return await conn.request(channel, method, clean, QUESTION_TIMEOUT_S)
                    except HostError as exc:
                        raise UpstreamError(exc.error) from None

                why = routing.asked_of_host(capability)
            return await self.broker.ask(
                upstream=upstream,
                method=method,
                params=clean,
                task_id=None,
                connection=conn.record_id,
                host_ask=host_ask,
                why=why,
            )

        return ask

    @waits.traced_wait(waits.approval)
    async def ask_operator(
        self, ctx: RequestContext, upstream: str, params: dict[str, Any], expiry_s: float, qid: str, why: str
    ) -> dict[str, Any]:
        """A question for operators alone (an approval: never the host's to answer about its own
        call), waiting for one however long `expiry_s` is, attached or not. Shown with the call's
        task, or its plain call's row (listed now), whose status message says it waits."""
        run = current_run()
        task_id = ctx.task_id or (run.task_id if run is not None else None)  # (a new task's ctx learns it later)
        if task_id is None and ctx.plain is not None:
            task_id = await ctx.plain.row(f"listed: {why}")  # e.g. listed: waiting for an operator: approval gate
        return await self.broker.ask(
            upstream=upstream,
            method="elicitation/create",
            params=params,
            task_id=task_id,
            connection=ctx.conn.record_id,
            host_ask=None,
            on_waiting=self._tell_waiting(ctx),
            qid=qid,
            expiry_s=expiry_s,
            wait_always=True,
            why=why,
        )

    def _legacy_host_ask(
        self, ctx: RequestContext, method: str, clean: dict[str, Any], capability: str | None
    ) -> HostAsk | None:
        """A server request on the stream of the request that caused it, if the host declared
        that capability; inside a task, on the task's stream and tagged with it."""
        if capability is None or capability not in ctx.client_caps or ctx.notify is None:
            return None
        notify, task_id = ctx.notify, ctx.task_id
        sent = dict(clean) if task_id is None else {**clean, "_meta": related_meta(task_id)}

        async def host_ask(q: Question) -> dict[str, Any]:
            try:
                if task_id is None:
                    return await ctx.conn.request(notify, method, sent, QUESTION_TIMEOUT_S)
                async with self.engine.asking(task_id):  # the task shows input_required meanwhile
                    channel = await self.streams.question_channel(task_id, ctx.conn)
                    record = self.engine.frames.recorder(task_id, "host")
                    # Answered on the connection whose stream asked (another session of the owner's,
                    # when the task's host has left).
                    return await channel.conn.request(channel.send, method, sent, QUESTION_TIMEOUT_S, record)
            except HostError as exc:
                raise UpstreamError(exc.error) from None

        return host_ask

    def _modern_host_ask(
        self, ctx: RequestContext, method: str, clean: dict[str, Any], capability: str | None
    ) -> HostAsk | None:
        task_id = ctx.task_id
        if task_id is not None:
            if capability not in ctx.client_caps:
                return None

            async def host_ask(q: Question) -> dict[str, Any]:
                # Inside a 2026 task the question is one of the task's inputRequests, keyed by its
                # question id (unique for the task's whole life, tasks.md:350).
                answers = await self.engine.ask(task_id, {q.id: {"method": method, "params": clean}})
                answer: dict[str, Any] = answers[q.id]
                return answer

            return host_ask
        if ctx.park is None:
            return None
        if capability not in ctx.client_caps:
            # The upstream needs what this 2026 host did not declare: the host's call gets -32021
            # (index.mdx:387-392) and the held upstream call is dropped.
            refused = MissingClientCapability(
                f"Missing required client capability: {capability}",
                {"requiredCapabilities": {capability or method: {}}},
            )
            ctx.park.refuse(refused)
            raise refused
        # A 2026 host's ordinary call: the question goes back to it as an MRTR round while the
        # upstream call is held open, and its retry answers it.
        return ctx.park.hold

    def _tell_waiting(self, ctx: RequestContext) -> OnWaiting:
        """While a question waits for an operator the host sees it: its task's status message
        (withdrawn once it is answered, back to what it said before), or progress on a plain call
        that asked for progress."""
        said: list[tuple[str, str | None]] = []  # (what was told, the task's message before it)
        run = current_run()  # a new task's ctx learns its id only once its handle is out

        async def tell(message: str | None) -> None:
            task_id = ctx.task_id or (run.task_id if run is not None else None)
            if task_id is not None:
                if message is not None:
                    said.append((message, await self.engine.set_status_message(task_id, message)))
                elif said:
                    await self.engine.restore_status_message(task_id, *said.pop())
                return
            token = ctx.meta.get("progressToken")
            if message is None:
                return  # progress is not taken back; the upstream's next progress follows
            if token is not None and ctx.notify is not None:
                # Progress must grow (progress.mdx): just past the last value the upstream sent.
                progress = 0.0 if ctx.last_progress is None else ctx.last_progress + 1e-6
                params = {"progressToken": token, "progress": progress, "message": message}
                await ctx.notify(jsonrpc.notification("notifications/progress", params))

        return tell


def _why(ctx: RequestContext, capability: str | None, host_ask: HostAsk | None) -> str:
    """Who the question is put to, and why, as the era's rules above decided it."""
    if host_ask is not None:
        return routing.asked_of_host(capability, in_task=ctx.era == "modern" and ctx.task_id is not None)
    if capability is not None and capability in ctx.client_caps:
        return routing.host_unreachable()
    return routing.host_lacks(capability)
