"""`/metrics`: the Prometheus text exposition of one daemon's registry.

The token rule is /v1's (the state folder's token as a bearer; a browser origin must be allowed),
unless `metrics.public` lets a scraper on loopback in without it. Either way a page in a browser
cannot read it: an Origin that is not allowed is refused (a DNS-rebinding page sends its own)."""

from __future__ import annotations

import secrets

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.types import Receive, Scope, Send

from ..protocol.origin import origin_allowed


class MetricsEndpoint:
    def __init__(self, registry: CollectorRegistry, token: str, *, public: bool, allowed_origins: list[str]) -> None:
        self.registry = registry
        self.token = token
        self.public = public
        self.allowed_origins = set(allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        origin = headers.get("origin")
        if scope["method"] not in ("GET", "HEAD"):
            return await _plain(send, 405, b"GET only\n", [(b"allow", b"GET, HEAD")])
        if origin is not None and not origin_allowed(origin, self.allowed_origins):
            return await _plain(send, 403, f"origin {origin!r} is not allowed\n".encode())
        if not self.public:
            auth = headers.get("authorization", "")
            given = auth[7:] if auth.lower().startswith("bearer ") else ""
            if not secrets.compare_digest(given.encode(), self.token.encode()):
                return await _plain(
                    send,
                    401,
                    b"the mcpx API token is required (or set metrics.public)\n",
                    [(b"www-authenticate", b"Bearer")],
                )
        body = generate_latest(self.registry)
        await _plain(send, 200, b"" if scope["method"] == "HEAD" else body, content_type=CONTENT_TYPE_LATEST)


async def _plain(
    send: Send,
    status: int,
    body: bytes,
    headers: list[tuple[bytes, bytes]] | None = None,
    content_type: str = "text/plain; charset=utf-8",
) -> None:
    out = [(b"content-type", content_type.encode()), (b"cache-control", b"no-store"), *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body})
