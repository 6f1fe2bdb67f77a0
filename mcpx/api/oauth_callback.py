"""`GET /oauth/callback`: where a person's browser returns from an upstream's OAuth sign-in
(`mcpx login NAME`). It needs no API token: the sign-in's `state`, known only to the browser that
was sent to the authorization server, is what it is matched by (upstream/auth/desk.py)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse

from ..upstream.auth.desk import Desk


class OAuthCallback:
    def __init__(self, desk: Desk) -> None:
        self.desk = desk

    async def __call__(self, request: Request) -> HTMLResponse:
        status, page = await self.desk.complete(dict(request.query_params))
        # no-store: the page follows a URL that held an authorization code
        return HTMLResponse(page, status, headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"})
