"""JSON-RPC 2.0 framing: parsing inbound messages and building replies. Pure."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import orjson

from . import fastjson
from .errors import InvalidRequest, McpError, ParseError

Id = str | int
# A \uD800-\uDFFF escape: the only way a lone surrogate gets into a parsed string (raw surrogate
# bytes already fail UTF-8 decoding). Cheap to look for; the full check runs only on a hit.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Message:
    """One inbound JSON-RPC message, classified."""

    raw: dict[str, Any]

    @property
    def kind(self) -> str:
        if "method" in self.raw:
            return "request" if "id" in self.raw else "notification"
        return "response"

    @property
    def id(self) -> Id | None:
        rid = self.raw.get("id")
        return rid if isinstance(rid, (str, int)) else None  # classify() admits nothing else

    @property
    def method(self) -> str:
        method = self.raw.get("method")
        return method if isinstance(method, str) else ""

    @property
    def params(self) -> dict[str, Any]:
        p = self.raw.get("params")
        return p if isinstance(p, dict) else {}


def as_object(value: object) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one: for fields a peer may have sent as anything."""
    return value if isinstance(value, dict) else {}


def parse(body: bytes | str) -> Message:
    """Parse one JSON-RPC message; raise ParseError/InvalidRequest with a clear message."""
    if isinstance(body, bytes) and not fastjson.has_long_digits(body):
        # orjson takes strict UTF-8 JSON only (no NaN, no lone surrogate): what it takes, the
        # stdlib path below takes the same way; anything else goes there for its verdict.
        try:
            return classify(orjson.loads(body[3:] if body.startswith(_BOM) else body))
        except orjson.JSONDecodeError:
            pass
    try:
        # UTF-8 only (RFC 8259 8.1; a BOM is tolerated): json.loads(bytes) would also take UTF-16/32.
        text = body.decode("utf-8-sig") if isinstance(body, (bytes, bytearray)) else body
        # NaN/Infinity are not JSON (RFC 8259 6); Python accepts them and would forward them upstream.
        data = json.loads(text, parse_constant=_not_json)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        # RecursionError: nesting too deep to parse. Still a -32700 reply, not a crash (JSON-RPC 2.0 5.1).
        raise ParseError(f"Parse error: {exc}") from None
    if _SURROGATE_ESCAPE.search(text):
        # A lone surrogate cannot be encoded as UTF-8, so no reply that echoes it (an id, a tool
        # name in an error message) could be written: reject the text up front (RFC 7493 2.1).
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ParseError("Parse error: a string holds an unpaired UTF-16 surrogate escape") from None
    return classify(data)


def _not_json(token: str) -> Any:
    raise ValueError(f"{token} is not a JSON value")


def classify(data: object) -> Message:
    if isinstance(data, list):
        raise InvalidRequest("JSON-RPC batches are not supported")
    if not isinstance(data, dict):
        raise InvalidRequest("A JSON-RPC message must be a JSON object")
    if data.get("jsonrpc") != "2.0":
        raise InvalidRequest('"jsonrpc" must be "2.0"')
    if "method" in data:
        if not isinstance(data["method"], str):
            raise InvalidRequest('"method" must be a string')
        if "id" in data and (isinstance(data["id"], bool) or not isinstance(data["id"], (str, int))):
            raise InvalidRequest('"id" must be a string or an integer')
        if "params" in data and not isinstance(data["params"], dict):
            raise InvalidRequest('"params" must be an object')
    elif "error" not in data and ("id" not in data or "result" not in data):
        # An error response may omit its id: both schemas' JSONRPCErrorResponse require only
        # jsonrpc + error (schema/2025-11-25 and 2026-07-28), a result response needs its id.
        raise InvalidRequest("Not a JSON-RPC request, notification or response")
    return Message(data)


def result(id_: Id | None, res: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": res}


def error(id_: Id | None, err: dict[str, Any]) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "error": err}
    # Both schemas type id as string|integer and make it optional on errors: omit it when unknown.
    if id_ is not None:
        msg["id"] = id_
    return msg


def error_from(id_: Id | None, exc: McpError) -> dict[str, Any]:
    return error(id_, exc.to_error())


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def request(id_: Id, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def dumps(msg: dict[str, Any]) -> bytes:
    """A frame as compact UTF-8 JSON (fastjson.dumps: a lone surrogate is escaped, never raw)."""
    return fastjson.dumps(msg)
