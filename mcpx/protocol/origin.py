"""Which browser origins may talk to the daemon: loopback pages, and the ones configured. Pure."""

from __future__ import annotations

from collections.abc import Collection
from urllib.parse import urlsplit

_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}


def origin_allowed(origin: str, allowed: Collection[str] = ()) -> bool:
    if origin in allowed:
        return True
    try:
        parts = urlsplit(origin)
        parts.port  # noqa: B018 - raises ValueError unless the port is a number in range
    except ValueError:
        return False
    # Exactly one serialized origin (scheme://host[:port]): an origin list such as
    # "http://localhost:1 http://evil.example" (RFC 6454 7.1) or a path/userinfo is not loopback.
    if parts.path or parts.query or parts.fragment or "@" in parts.netloc or "?" in origin or "#" in origin:
        return False
    return parts.scheme in ("http", "https") and (parts.hostname or "") in _LOOPBACK_HOSTS
