"""`/v1/upstreams`: the upstream servers; one's stderr, an operator's restart of it, and its OAuth
sign-in (`mcpx login`, `mcpx logout`).

Each stdio server's stderr goes to its log file in the state folder (upstream/stdio/process.py;
a kept server's keeper writes the same file), so the file is the buffer the daemon keeps: its
last lines are read back on each request, and a console tails it by asking again each second.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import anyio
from fastapi import FastAPI, HTTPException, Path, Query

from ..upstream.auth.auth_errors import AuthError
from ..upstream.auth.upstream_auth import UpstreamAuth
from ..upstream.pool import UpstreamServer
from . import models

TAIL_MAX = 2000
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": models.ErrorBody, "description": "No such upstream."}}
NO_LOGIN: dict[int | str, dict[str, Any]] = {
    **NOT_FOUND,
    409: {
        "model": models.ErrorBody,
        "description": "Not an upstream mcpx signs in to (stdio, or its own Authorization header).",
    },
    502: {
        "model": models.ErrorBody,
        "description": "The sign-in could not start: discovery or registration failed (the message says where).",
    },
}
WAIT_MAX_S = 60


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

    def auth_of(name: str) -> UpstreamAuth:
        server = server_of(name)
        if server.auth is None:
            raise HTTPException(
                409,
                f"upstream {name!r} is not one mcpx signs in to (a stdio server, or `headers` has an Authorization)",
            )
        return server.auth

    @app.get("/v1/upstreams", response_model=models.UpstreamList, summary="The upstream servers and their state")
    async def list_upstreams() -> dict[str, Any]:
        return {"upstreams": [row(s) for s in servers.values()]}

    @app.post(
        "/v1/upstreams/{name}/login",
        response_model=models.LoginStarted,
        responses=NO_LOGIN,
        summary="Start an OAuth sign-in to an HTTP upstream (`mcpx login`): open `authorizationUrl` in a browser",
        description="Discovers the server's authorization server, registers mcpx there if needed, and returns the"
        " authorization URL. The browser must run on the daemon's machine: the sign-in comes back to the daemon's"
        " loopback `/oauth/callback` (or `http://localhost:<oauth.callbackPort>/callback`). A sign-in with"
        " client credentials needs no browser and is done before this answers.",
    )
    async def start_login(name: Annotated[str, Path()], body: models.CancelBody | None = None) -> dict[str, Any]:
        auth = auth_of(name)
        by = by_of(body.by if body else None)
        try:
            login = await auth.start_login(by)
        except AuthError as exc:
            raise HTTPException(502, f"upstream {name!r}: {exc}") from None
        url = login.request.url or None
        return {
            "name": name,
            "authorizationUrl": url,
            "redirectUri": login.request.redirect_uri or None,
            "expiresMs": int(login.expires * 1000) if url else None,
            "signedIn": login.done.is_set() and login.error is None,
            "error": login.error,
            "by": by,
        }

    @app.get(
        "/v1/upstreams/{name}/auth",
        response_model=models.LoginState,
        responses=NO_LOGIN,
        summary="How the latest sign-in went; waits up to `waitS` for one still pending",
    )
    async def login_state(
        name: Annotated[str, Path()],
        waitS: Annotated[float, Query(ge=0, le=WAIT_MAX_S, description="Wait this long for a pending sign-in.")] = 0,
    ) -> dict[str, Any]:
        auth = auth_of(name)
        login = auth.last_login
        if login is not None and not login.done.is_set() and waitS > 0:
            with anyio.move_on_after(waitS):
                await login.done.wait()
        if login is None:
            state = "none"
        elif not login.done.is_set():
            state = "pending"
        else:
            state = "failed" if login.error is not None else "signed in"
        return {"name": name, "state": state, "error": login.error if login else None, "auth": auth.summary()}

    @app.post(
        "/v1/upstreams/{name}/logout",
        response_model=models.UpstreamStatus,
        responses=NO_LOGIN,
        summary="Forget an upstream's OAuth tokens and registration (`mcpx logout`); its connection is restarted",
    )
    async def logout(name: Annotated[str, Path()], body: models.CancelBody | None = None) -> dict[str, Any]:
        auth = auth_of(name)
        by = by_of(body.by if body else None)
        await auth.logout(by)
        server = server_of(name)
        await server.restart(by)  # its open session used the token: it goes, and the next connect asks again
        return row(server)

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


def row(server: UpstreamServer) -> dict[str, Any]:
    """One upstream as /v1/status and /v1/upstreams show it."""
    s = server
    return {
        "name": s.key,
        "transport": s.cfg.transport,
        "state": s.state,
        "era": s.session.era if s.session else None,
        "revision": s.session.revision if s.session else None,
        "tools": len(s.tools),
        "restarts": s.restarts,
        "lastError": s.last_error,
        "exitCode": s.exit_code,
        "stderrTail": s.stderr_tail() if s.state != "ready" else [],
        "logPath": str(s.log_path) if s.log_path else None,
        "leftOutTools": [{"name": n, "reason": r} for n, r in s.left_out.items()],
        "auth": s.auth.summary() if s.auth is not None else None,
    }
