"""HTTP to resource and authorization servers, for the OAuth client (httpx: these requests are few;
the hot path to an upstream stays on h1.py). Bodies are bounded and every failure is an AuthError
that names the URL, never a traceback."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from ...protocol import fastjson
from .auth_errors import AuthError

MAX_BODY = 1024 * 1024
TIMEOUT_S = 15.0
USER_AGENT = "mcpx-oauth"


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any  # parsed JSON, or None
    headers: httpx.Headers


def new_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=TIMEOUT_S, follow_redirects=False, headers={"User-Agent": USER_AGENT})


async def get_json(client: httpx.AsyncClient, url: str) -> Reply:
    return await _send(client, "GET", url, headers={"Accept": "application/json"})


async def post_form(client: httpx.AsyncClient, url: str, form: dict[str, str], headers: dict[str, str]) -> Reply:
    return await _send(client, "POST", url, headers={"Accept": "application/json", **headers}, data=form)


async def post_json(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> Reply:
    return await _send(client, "POST", url, headers={"Accept": "application/json", **(headers or {})}, json_body=body)


async def _send(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    headers: dict[str, str],
    data: dict[str, str] | None = None,
    json_body: dict[str, Any] | None = None,
) -> Reply:
    try:
        request = client.build_request(method, url, headers=headers, data=data, json=json_body)
        response = await client.send(request, stream=True)
        try:
            raw = b""
            async for chunk in response.aiter_bytes():
                raw += chunk
                if len(raw) > MAX_BODY:
                    raise AuthError(f"{url} answered more than {MAX_BODY} bytes")
        finally:
            await response.aclose()
    except httpx.HTTPError as exc:
        raise AuthError(f"cannot reach {url}: {exc or type(exc).__name__}") from None
    body: Any = None
    if raw:
        try:
            body = fastjson.loads(raw)
        except (ValueError, json.JSONDecodeError):
            body = None
    return Reply(response.status_code, body, response.headers)
