"""JSON-RPC and MCP error codes, and the exceptions that carry them.

Exception tree (every one carries its JSON-RPC code and the HTTP status a host gets)::

    McpError                       code, message, data, http_status
    ├── ParseError                 -32700  400
    ├── InvalidRequest             -32600  400
    ├── MethodNotFound             -32601  (404 for modern HTTP, 200 for legacy)
    ├── InvalidParams              -32602  (400 when a required _meta key is missing)
    ├── InternalError              -32603  200
    │   └── UpstreamUnavailable    -32603  200   (the message names the upstream)
    ├── HeaderMismatch             -32020  400   (2026-07-28 only)
    ├── MissingClientCapability    -32021  400   (2026-07-28 only)
    └── UnsupportedProtocolVersion -32022  400   (2026-07-28 only)

`UpstreamError` is not an McpError of ours: it is an upstream's own JSON-RPC error, forwarded as-is.
"""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022
# An upstream that is down or died mid-call is, to the host, an internal error of the gateway:
# -32000..-32019 is closed to new implementations and MCP reserves -32020..-32099 (index.mdx:116-120).
UPSTREAM_UNAVAILABLE = INTERNAL_ERROR


class McpError(Exception):
    code = INTERNAL_ERROR
    http_status = 200

    def __init__(self, message: str, data: object = None, *, http_status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data
        if http_status is not None:
            self.http_status = http_status

    def to_error(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


class ParseError(McpError):
    code = PARSE_ERROR
    http_status = 400


class InvalidRequest(McpError):
    code = INVALID_REQUEST
    http_status = 400


class MethodNotFound(McpError):
    code = METHOD_NOT_FOUND


class InvalidParams(McpError):
    code = INVALID_PARAMS


class InternalError(McpError):
    code = INTERNAL_ERROR


class UpstreamUnavailable(McpError):
    code = UPSTREAM_UNAVAILABLE


class LimitReached(McpError):
    """A configured limit refused the request; the message names the limit and its value."""

    code = INVALID_REQUEST

    def __init__(self, limit: str, value: int, detail: str, *, http_status: int | None = None) -> None:
        message = f"mcpx limit {limit} ({value}) reached: {detail}"
        super().__init__(message, {"limit": limit, "value": value}, http_status=http_status)


class HeaderMismatch(McpError):
    code = HEADER_MISMATCH
    http_status = 400


class MissingClientCapability(McpError):
    code = MISSING_CLIENT_CAPABILITY
    http_status = 400


class UnsupportedProtocolVersion(McpError):
    code = UNSUPPORTED_PROTOCOL_VERSION
    http_status = 400


class UpstreamError(Exception):
    """An upstream answered with a JSON-RPC error object; forwarded to the host unchanged."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(str(error.get("message", "upstream error")))
        self.error = error


# Codes a 2026-07-28 client may receive from the reserved range (basic/index.mdx:117-144).
_MODERN_RESERVED_OK = {HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION}


def _has_required_data(code: int, data: object) -> bool:
    """-32021 and -32022 are only legal with the `data` their schema requires (schema/2026-07-28/schema.json
    MissingRequiredClientCapabilityError, UnsupportedProtocolVersionError); -32020 needs none."""
    if code == MISSING_CLIENT_CAPABILITY:
        return isinstance(data, dict) and isinstance(data.get("requiredCapabilities"), dict)
    if code == UNSUPPORTED_PROTOCOL_VERSION:
        if not isinstance(data, dict):
            return False
        supported = data.get("supported")
        return (
            isinstance(supported, list)
            and all(isinstance(v, str) for v in supported)
            and isinstance(data.get("requested"), str)
        )
    return True


def upstream_error_for(error: dict[str, Any], revision: str) -> dict[str, Any]:
    """An upstream's JSON-RPC error, made legal for the host's revision (else passed unchanged)."""
    out = dict(error)
    # Error codes MUST be integers (2026-07-28/basic/index.mdx:105; JSON-RPC 2.0 5.1): a JSON `true`
    # arrives as Python True, which isinstance(..., int) would accept.
    if not isinstance(out.get("code"), int) or isinstance(out.get("code"), bool):
        out["code"] = INTERNAL_ERROR
    if not isinstance(out.get("message"), str):
        out["message"] = str(out.get("message", "upstream error"))
    if revision >= "2026-07-28":
        code = out["code"]
        if code == -32002:  # legacy "resource not found" became -32602
            out["code"] = INVALID_PARAMS
        elif -32099 <= code <= -32020 and (
            code not in _MODERN_RESERVED_OK or not _has_required_data(code, out.get("data"))
        ):
            out["code"] = INTERNAL_ERROR
    elif out["code"] == -32042:
        # 2025-11-25 URLElicitationRequiredError must carry data.elicitations (schema); without it
        # the frame is invalid for the host, so it becomes a plain internal error.
        data = out.get("data")
        if not (isinstance(data, dict) and isinstance(data.get("elicitations"), list)):
            out["code"] = INTERNAL_ERROR
    return out
