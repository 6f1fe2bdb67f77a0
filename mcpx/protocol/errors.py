"""JSON-RPC and MCP error codes, and the exceptions that carry them.

Exception tree (every one carries its JSON-RPC code and the HTTP status a host gets)::

    McpError                       code, message, data, http_status
    ├── ParseError                 -32700  400
    ├── InvalidRequest             -32600  400
    ├── MethodNotFound             -32601  (404 for modern HTTP, 200 for legacy)
    ├── InvalidParams              -32602  (400 when a required _meta key is missing)
    ├── InternalError              -32603  200
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
# Implementation-defined range (-32000..-32019): an upstream that is down or died mid-call.
UPSTREAM_UNAVAILABLE = -32000


class McpError(Exception):
    code = INTERNAL_ERROR
    http_status = 200

    def __init__(self, message: str, data: Any = None, *, http_status: int | None = None) -> None:
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


def upstream_error_for(error: dict[str, Any], revision: str) -> dict[str, Any]:
    """An upstream's JSON-RPC error, made legal for the host's revision (else passed unchanged)."""
    out = dict(error)
    if not isinstance(out.get("code"), int):
        out["code"] = INTERNAL_ERROR
    if not isinstance(out.get("message"), str):
        out["message"] = str(out.get("message", "upstream error"))
    if revision >= "2026-07-28":
        code = out["code"]
        if code == -32002:  # legacy "resource not found" became -32602
            out["code"] = INVALID_PARAMS
        elif -32099 <= code <= -32020 and code not in _MODERN_RESERVED_OK:
            out["code"] = INTERNAL_ERROR
    return out
