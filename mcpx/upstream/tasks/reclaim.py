"""After a restart, a task whose call went to a kept stdio server collects that call's reply from
the same server process (the keeper held it, or it is still coming). A plain call's reply is the
task's result; a call that asked the server for a task of its own may have been cut before its
CreateTaskResult was stored, and then that reply names the upstream task, which is followed from
there. If the server process is not the one the call went to (it exited, or its keeper was
replaced), the reply is lost for good, and the task fails saying why."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ...protocol import shaping
from ...protocol.errors import InternalError, UpstreamUnavailable
from ...protocol.revisions import LEGACY_LATEST, MODERN
from . import follow

if TYPE_CHECKING:  # as follow.py: the upstream layer names the engine's types only
    from ...tasks.engine import Resume, TaskEngine
    from ...tasks.model import Task
    from ..pool import UpstreamPool

log = logging.getLogger("mcpx.upstream")


def parse_ref(ref: str) -> tuple[str, int] | None:
    """ "<server run>/<request id>" (Task.upstream_request) -> its parts; None if malformed."""
    run_id, sep, rid = ref.rpartition("/")
    if not sep or not run_id or not rid.isdigit():
        return None
    return run_id, int(rid)


def make_ref(run_id: str, rid: object) -> str | None:
    return f"{run_id}/{rid}" if isinstance(rid, int) and not isinstance(rid, bool) else None


def reclaimer(pool: UpstreamPool, engine: TaskEngine) -> Resume:
    """The engine's reclaim callback (`TaskEngine.reclaim`)."""

    async def run(task: Task) -> dict[str, Any]:
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
        res = await session.claim(rid, timeout=server.cfg.mcpx.callTimeout)
        created = follow.created_task(session, res)
        if created is not None:
            upstream_task_id = str(created["taskId"])
            log.info("task %s: its cut call had become upstream task %s; following it", task.id, upstream_task_id)
            await engine.store_upstream_task(task.id, upstream_task_id)
            return await follow.follow(pool, engine, task, upstream_task_id)
        if res.get("resultType") == "input_required":
            raise InternalError(f"upstream {task.upstream!r} asked for more input after the daemon restarted")
        return shaping.call_result_for(res, LEGACY_LATEST if task.era == "legacy" else MODERN)

    return run
