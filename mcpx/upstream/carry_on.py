"""Carrying a task's upstream work on after a restart, or after taking over a lost instance's task.

A task that follows an upstream task polls it again (`Resumer`), in the session it was made in.

A task whose call went to a kept stdio server collects that call's reply from
the same server process (the keeper held it, or it is still coming). A plain call's reply is the
task's result; a call that asked the server for a task of its own may have been cut before its
CreateTaskResult was stored, and then that reply names the upstream task, which is followed from
there. If the server process is not the one the call went to (it exited, or its keeper was
replaced), the reply is lost for good, and the task fails saying why."""

from __future__ import annotations

import logging
from typing import Any

from ..protocol import shaping
from ..protocol.errors import InternalError, UpstreamUnavailable
from ..protocol.jsonrpc import Id
from ..protocol.revisions import LEGACY_LATEST, MODERN
from ..records.task import Task
from ..tasks.control import TaskControl
from .pool import UpstreamPool, UpstreamServer
from .session import NeverArrived, UpstreamSession
from .tasks import follow

log = logging.getLogger("mcpx.upstream")


def parse_ref(ref: str) -> tuple[str, int] | None:
    """ "<server run>/<request id>" (Task.upstream_request) -> its parts; None if malformed."""
    run_id, sep, rid = ref.rpartition("/")
    if not sep or not run_id or not rid.isdigit():
        return None
    return run_id, int(rid)


def make_ref(run_id: str, rid: object) -> str | None:
    return f"{run_id}/{rid}" if isinstance(rid, int) and not isinstance(rid, bool) else None


class Resumer:
    """The engine's `resume`: finish an mcpx task from its upstream task id, once that upstream is
    ready, with the result shaped for the task's host era."""

    def __init__(self, pool: UpstreamPool) -> None:
        self._pool = pool

    async def __call__(self, task: Task, control: TaskControl) -> dict[str, Any]:
        upstream_task_id = task.upstream_task_id
        if upstream_task_id is None:  # the engine resumes only rows that name one
            raise InternalError(f"task {task.id} names no upstream task to follow")
        return await follow_upstream_task(self._pool, control, task, upstream_task_id)


class Reclaimer:
    """The engine's `reclaim`: collect the reply to a plain call a kept stdio server still holds."""

    def __init__(self, pool: UpstreamPool) -> None:
        self._pool = pool

    async def __call__(self, task: Task, control: TaskControl) -> dict[str, Any]:
        pool = self._pool
        ref = parse_ref(task.upstream_request or "")
        if ref is None:
            raise InternalError(f"task {task.id} names no upstream request to collect")
        run_id, rid = ref
        server = pool.servers.get(task.upstream)
        if server is None:
            raise UpstreamUnavailable(
                f"upstream {task.upstream!r} is no longer configured; the result of this call is lost"
            )
        session = await server.ready_session()
        if session.transport.run_id != run_id:
            code = server.previous_exit
            how = f"exited with code {code}" if code is not None else "was stopped or replaced"
            raise UpstreamUnavailable(
                f"upstream {task.upstream!r} {how} while the mcpx daemon was down; the result of this call is lost"
            )
        try:
            res = await session.claim(rid, timeout=server.cfg.mcpx.callTimeout)
        except NeverArrived as never:
            log.info("task %s: %s; sending it again", task.id, never.message)
            return await _send_again(server, session, control, task)
        created = follow.created_task(session, res)
        if created is not None:
            upstream_task_id = str(created["taskId"])
            log.info("task %s: its cut call had become upstream task %s; following it", task.id, upstream_task_id)
            await control.store_upstream_task(task.id, upstream_task_id)
            return await follow_upstream_task(pool, control, task, upstream_task_id)
        if res.get("resultType") == "input_required":
            raise InternalError(f"upstream {task.upstream!r} asked for more input after the daemon restarted")
        return shaping.call_result_for(
            server.naming.call_result_out(res), LEGACY_LATEST if task.era == "legacy" else MODERN
        )


async def _send_again(
    server: UpstreamServer, session: UpstreamSession, control: TaskControl, task: Task
) -> dict[str, Any]:
    """The task's call, which its kept server never got, sent now as it was meant: as an upstream
    task where the server runs this tool as one, else as a plain call. Its new request id goes on
    the row first, as the first one did, so another restart still finds it."""
    params = {"name": task.tool, "arguments": task.arguments}
    run_id = session.transport.run_id

    async def sent(rid: Id) -> None:
        ref = make_ref(run_id, rid) if run_id is not None else None
        if ref is not None:
            await control.store_upstream_request(task.id, ref)

    if follow.task_capable(session, follow.upstream_tool(server.lists.get("tools"), task.tool)):

        async def on_task_id(upstream_task_id: str) -> None:
            await control.store_upstream_task(task.id, upstream_task_id)

        async def on_status(status: str, message: str | None) -> None:
            await control.set_status_message(task.id, message)

        on_input = None
        if task.era == "modern":

            async def on_input(requests: dict[str, Any]) -> dict[str, Any]:
                return await control.ask(task.id, requests)

        res = await follow.call(
            session,
            params,
            get_session=server.ready_session,
            on_task_id=on_task_id,
            ttl_ms=task.ttl_ms,
            on_input=on_input,
            keep_upstream=lambda: control.closing,
            on_status=on_status,
            on_sent=sent,
        )
    else:
        shaped = session.shape_params(params, client_caps={}, log_level=None)
        res = await session.request("tools/call", shaped, timeout=server.cfg.mcpx.callTimeout, on_sent=sent)
        if res.get("resultType") == "input_required":
            raise InternalError(f"upstream {task.upstream!r} asked for input after the daemon restarted")
    return shaping.call_result_for(
        server.naming.call_result_out(res), LEGACY_LATEST if task.era == "legacy" else MODERN
    )


async def follow_upstream_task(
    pool: UpstreamPool, control: TaskControl, task: Task, upstream_task_id: str
) -> dict[str, Any]:
    """Finish the mcpx task `task` from upstream task `upstream_task_id` a previous daemon started."""
    server = pool.servers.get(task.upstream)
    if server is None:
        raise UpstreamUnavailable(
            f"upstream {task.upstream!r} is no longer configured; its task {upstream_task_id} cannot be followed"
        )
    on_input = None
    if task.era == "modern":

        async def on_input(requests: dict[str, Any]) -> dict[str, Any]:
            return await control.ask(task.id, requests)

    async def on_status(status: str, message: str | None) -> None:
        await control.set_status_message(task.id, message)

    # Asked in the session the task was made in (another daemon's, when this one took it over).
    async with pool.foreign.session_for(server, task.upstream_session) as get_session:
        res = await follow.resume(
            get_session,
            upstream_task_id,
            on_input=on_input,
            keep_upstream=lambda: control.closing,
            on_status=on_status,
        )
    return shaping.call_result_for(
        server.naming.call_result_out(res), LEGACY_LATEST if task.era == "legacy" else MODERN
    )
