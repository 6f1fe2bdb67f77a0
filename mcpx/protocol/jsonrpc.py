"""JSON-RPC 2.0 framing: parsing inbound messages and building replies. Pure."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .errors import InvalidRequest, McpError, ParseError

Id = str | int


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
        return self.raw.get("id")

    @property
    def method(self) -> str:
        return self.raw.get("method", "")

    @property
    def params(self) -> dict[str, Any]:
        p = self.raw.get("params")
        return p if isinstance(p, dict) else {}


def parse(body: bytes | str) -> Message:
    """Parse one JSON-RPC message; raise ParseError/InvalidRequest with a clear message."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ParseError(f"Parse error: {exc}") from None
    return classify(data)


def classify(data: Any) -> Message:
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
    elif "id" not in data or ("result" not in data and "error" not in data):
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
    return json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode()
