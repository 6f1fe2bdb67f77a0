"""`/v1/upstreams/{name}/...`: an upstream server's stderr, and an operator's restart of it.

Each stdio server's stderr goes to its log file in the state folder (upstream/stdio/process.py;
a kept server's keeper writes the same file), so the file is the buffer the daemon keeps: its
last lines are read back on each request, and a console tails it by asking again each second.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Path, Query

from ..upstream.pool import UpstreamServer
from . import models

TAIL_MAX = 2000
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": models.ErrorBody, "description": "No such upstream."}}


def add_routes(app: FastAPI, servers: dict[str, UpstreamServer], by_of: Callable[[str | None], str]) -> None:
    def server_of(name: str) -> UpstreamServer:
        server = servers.get(name)
        if server is None:
            raise HTTPException(404, f"no upstream {name!r} (mcpServers in the config names them)")
        return server

    @app.get(
        "/v1/upstreams/{name}/stderr",
        response_model=models.UpstreamStderr,
        responses=NOT_FOUND,
        summary="The last lines a stdio upstream wrote to stderr (poll it to follow)",
    )
    async def upstream_stderr(
        name: Annotated[str, Path()],
        tail: Annotated[int, Query(ge=1, le=TAIL_MAX, description="How many of the last lines.")] = 200,
    ) -> dict[str, Any]:
        server = server_of(name)
        return {
            "name": name,
            "lines": server.stderr_log(tail),
            "logPath": str(server.log_path) if server.log_path else None,
            "state": server.state,
            "exitCode": server.exit_code,
        }

    @app.post(
        "/v1/upstreams/{name}/restart",
        response_model=models.UpstreamRestart,
        responses=NOT_FOUND,
        summary="Restart an upstream server now (its calls in flight fail; it starts again at once)",
    )
    async def restart_upstream(name: Annotated[str, Path()], body: models.CancelBody | None = None) -> dict[str, Any]:
        server = server_of(name)
        by = by_of(body.by if body else None)
        await server.restart(by)
        return {"name": name, "state": server.state, "restarts": server.restarts, "by": by}
