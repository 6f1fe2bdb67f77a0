"""The local API (`/v1`): token-protected daemon status. Later issues add tasks and questions."""

from __future__ import annotations

import secrets
from typing import Any, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def routes(token: str, status: Callable[[], dict[str, Any]]) -> list[Route]:
    def authorized(request: Request) -> bool:
        got = request.headers.get("authorization", "")
        return secrets.compare_digest(got.encode(), f"Bearer {token}".encode())

    async def get_status(request: Request) -> JSONResponse:
        if not authorized(request):
            return JSONResponse({"error": "mcpx API token required"}, status_code=401)
        return JSONResponse(status())

    return [Route("/v1/status", get_status, methods=["GET"])]
