"""2026-07-28 request validation and result decoration. Pure: headers come in as a plain dict."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

from . import param_headers
from .errors import HeaderMismatch, InvalidParams, UnsupportedProtocolVersion
from .revisions import META_CAPS, META_SERVER_INFO, META_VERSION, MODERN_VERSIONS, SUPPORTED_VERSIONS

# Methods the 2026 revision removed, or that a modern client reaches only through extensions.
REMOVED_METHODS = frozenset(
    {
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "tasks/result",
        "tasks/list",
        "notifications/initialized",
        "notifications/roots/list_changed",
    }
)
# Requests whose Mcp-Name header mirrors a params field (streamable-http.mdx:288-293).
_NAME_SOURCE = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_TASK_NAME_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
_SAFE_HEADER = re.compile(r"[\x20-\x7e]*")
_B64 = re.compile(r"=\?base64\?(.*)\?=")


def check_meta(params: dict[str, Any]) -> dict[str, Any]:
    """Version first (-32022), then required keys (-32602, HTTP 400). Returns the client capabilities."""
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise InvalidParams("Missing params._meta", http_status=400)
    version = meta.get(META_VERSION)
    if not isinstance(version, str):
        # A missing (or non-string) protocolVersion is a missing required key, not an unsupported
        # version: -32602 + HTTP 400 (2026-07-28/basic/index.mdx:375,380-382; RequestMetaObject).
        raise InvalidParams(f"Missing or invalid _meta[{META_VERSION!r}] (a string is required)", http_status=400)
    if version not in MODERN_VERSIONS:
        raise UnsupportedProtocolVersion(
            f"Unsupported protocol version: {version!r}",
            {"supported": list(SUPPORTED_VERSIONS), "requested": version},
        )
    caps = meta.get(META_CAPS)
    if not isinstance(caps, dict):
        raise InvalidParams(
            f"Missing or invalid _meta[{META_CAPS!r}] (an object is required; {{}} declares none)", http_status=400
        )
    return caps


def decode_header_value(value: str) -> str:
    m = _B64.fullmatch(value)
    if not m:
        return value
    try:
        return base64.b64decode(m.group(1), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise HeaderMismatch("Header mismatch: Mcp-Name is not valid base64 sentinel encoding") from None


def check_headers(
    method: str,
    params: dict[str, Any],
    headers: Mapping[str, str],
    *,
    tasks_extension: bool,
    require_task_name: bool = True,
) -> bool:
    """HTTP header/body agreement (-32020). `headers` keys are lower-case. With
    `require_task_name` false (config `tasks.requireMcpName`), a tasks/* request without Mcp-Name
    passes; returns True when it did, so the caller can say so."""
    for name, value in headers.items():
        if name.startswith("mcp-") and not _SAFE_HEADER.fullmatch(value):
            raise HeaderMismatch(f"Header mismatch: {name} contains invalid characters")
    version = params["_meta"][META_VERSION]
    got = headers.get("mcp-protocol-version")
    if got is None:
        raise HeaderMismatch("Header mismatch: MCP-Protocol-Version header is required")
    if got != version:
        raise HeaderMismatch(f"Header mismatch: MCP-Protocol-Version header {got!r} does not match body {version!r}")
    got_method = headers.get("mcp-method")
    if got_method is None:
        raise HeaderMismatch("Header mismatch: Mcp-Method header is required")
    if got_method != method:
        raise HeaderMismatch(f"Header mismatch: Mcp-Method header {got_method!r} does not match body {method!r}")
    task_method = tasks_extension and method in _TASK_NAME_METHODS
    if method in _NAME_SOURCE:
        field = _NAME_SOURCE[method]
    elif task_method:
        field = "taskId"
    else:
        return False
    raw = headers.get("mcp-name")
    if raw is None:
        if task_method and not require_task_name:
            return True
        hint = " (a client that cannot send it: set tasks.requireMcpName to false)" if task_method else ""
        raise HeaderMismatch(f"Header mismatch: Mcp-Name header is required for {method}{hint}")
    name = decode_header_value(raw)
    body = params.get(field)
    if name != body:
        raise HeaderMismatch(f"Header mismatch: Mcp-Name header {name!r} does not match body {field} {body!r}")
    return False


def decorate(result: dict[str, Any], server_info: dict[str, Any]) -> dict[str, Any]:
    """Every modern result carries resultType and names the server in _meta (DIGEST 1.2, 3.1)."""
    out = dict(result)
    out.setdefault("resultType", "complete")
    meta = dict(out.get("_meta") or {})
    # Overwrite, not setdefault: a server names *itself* (2026-07-28/basic/index.mdx:396-398), and the
    # host's server is mcpx even when the result was forwarded from an upstream that named itself.
    meta[META_SERVER_INFO] = server_info
    out["_meta"] = meta
    return out


def cacheable(result: dict[str, Any], ttl_ms: int, scope: str = "private") -> dict[str, Any]:
    """List results are CacheableResult in 2026-07-28: ttlMs + cacheScope are required."""
    # ttlMs MUST be >= 0 (server/utilities/caching.mdx:60); cacheScope is "private" | "public" (schema).
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms < 0:
        raise ValueError(f"ttlMs must be an integer >= 0, got {ttl_ms!r}")
    if scope not in ("private", "public"):
        raise ValueError(f"cacheScope must be 'private' or 'public', got {scope!r}")
    out = dict(result)
    out["ttlMs"] = ttl_ms
    out["cacheScope"] = scope
    return out


def discover_result(
    capabilities: dict[str, Any], server_info: dict[str, Any], instructions: str | None
) -> dict[str, Any]:
    """DiscoverResult names the server only in _meta (schema: no top-level serverInfo)."""
    res: dict[str, Any] = {
        "supportedVersions": list(SUPPORTED_VERSIONS),
        "capabilities": capabilities,
        "resultType": "complete",
        # Capabilities change only with the config, i.e. with a daemon restart.
        "ttlMs": 60_000,
        "cacheScope": "private",
    }
    if instructions:
        res["instructions"] = instructions
    return decorate(res, server_info)


def check_version_header(params: dict[str, Any], headers: Mapping[str, str]) -> None:
    """A body/header version disagreement is a header mismatch (-32020), whatever the versions;
    it is judged before the version itself (streamable-http.mdx:252-261)."""
    meta = params.get("_meta")
    body = meta.get(META_VERSION) if isinstance(meta, dict) else None
    got = headers.get("mcp-protocol-version")
    if got is not None and isinstance(body, str) and got != body:
        raise HeaderMismatch(f"Header mismatch: MCP-Protocol-Version header {got!r} does not match body {body!r}")


def _same_value(header: str, value: object) -> bool:
    if isinstance(value, bool):
        return header == ("true" if value else "false")
    if isinstance(value, (int, float)):
        try:
            return float(header) == float(value)  # compared numerically: 42.0 == 42
        except ValueError:
            return False
    if isinstance(value, str):
        return header == value
    return False


def check_param_headers(input_schema: object, arguments: object, headers: Mapping[str, str]) -> None:
    """`Mcp-Param-{Name}` headers for a tool's `x-mcp-header` properties must mirror the arguments
    (streamable-http.mdx:520-560): present when the value is, and equal after decoding. The
    annotations are read as mcpx reads an upstream's (param_headers.py: nested properties too); a
    tool whose annotations are invalid has none to check (a host must not call it: SEP-2243)."""
    try:
        params = param_headers.header_params(input_schema)
    except param_headers.InvalidAnnotation:
        return
    for p in params:
        value: Any = arguments
        for key in p.path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if value is None:
            continue  # no value: the client omits the header and nothing is expected
        raw = headers.get(f"mcp-param-{p.name.lower()}")
        prop = ".".join(p.path)
        if raw is None:
            raise HeaderMismatch(f"Header mismatch: Mcp-Param-{p.name} header is required for argument {prop!r}")
        if not _same_value(decode_header_value(raw), value):
            raise HeaderMismatch(f"Header mismatch: Mcp-Param-{p.name} header does not match argument {prop!r}")
