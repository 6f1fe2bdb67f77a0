"""The host side of the conformance client driver: an ordinary MCP host talking to mcpx's `/mcp`.

Both wires, picked by the revision the suite runs the scenario at (MCP_CONFORMANCE_PROTOCOL_VERSION):
2025-11-25 (initialize, `Mcp-Session-Id`, server requests on the SSE stream of the call that caused
them, answered with a POST) and 2026-07-28 (per-request `_meta`, MRTR rounds answered by retrying
with `inputResponses` and the `requestState` echoed). The host declares elicitation (form and URL),
sampling and roots, and answers what mcpx relays the way an unattended host would:

* elicitation, form mode: `accept`, with a value for each *required* field that has no schema
  default, and nothing for the others. Leaving the defaulted fields out is deliberate: applying a
  field's default to an answer that leaves it out is the client's job (SEP-1034), and the client
  under test is mcpx, not this host;
* elicitation, URL mode: `accept`;
* sampling: one text message from a model named `mcpx-conformance-host`;
* roots: one root.

Stdlib + httpx only (the test environment's), so the driver also runs from a plain checkout.
"""

from __future__ import annotations

import base64
import itertools
import json
import sys
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import httpx

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
CLIENT_INFO = {"name": "mcpx-conformance-host", "version": "1.0.0"}
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
MAX_ROUNDS = 8  # MRTR rounds one call may take before the host gives up on it


class HostError(Exception):
    pass


def log(message: str) -> None:
    print(f"[host] {message}", file=sys.stderr, flush=True)


# ---- what an unattended host answers ------------------------------------------------------------
def example_value(schema: object) -> Any:
    """A value a person could have typed for this (JSON) schema: its const, first enum member, or
    default if it has one, else something of its type (an object gets its required fields)."""
    if not isinstance(schema, dict):
        return "example"
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("oneOf", "anyOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            titled = [o for o in options if isinstance(o, dict) and "const" in o]
            return titled[0]["const"] if titled else example_value(options[0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "integer":
        return max(1, int(schema.get("minimum", 1)))
    if kind == "number":
        return float(schema.get("minimum", 1.5))
    if kind == "boolean":
        return True
    if kind == "array":
        return [example_value(schema.get("items"))] if schema.get("minItems") else []
    if kind == "object" or "properties" in schema:
        return required_values(schema)
    if schema.get("format") == "email":
        return "host@example.com"
    if schema.get("format") == "uri":
        return "https://example.com/"
    if schema.get("format") == "date":
        return "2025-11-25"
    return "example"


def _fields(schema: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """An object schema's properties and its required names."""
    props = schema.get("properties")
    required = schema.get("required")
    names = [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
    return (props if isinstance(props, dict) else {}), names


def required_values(schema: dict[str, Any]) -> dict[str, Any]:
    props, required = _fields(schema)
    return {name: example_value(props.get(name)) for name in required}


def form_answer(schema: object) -> dict[str, Any]:
    """An elicitation form accepted with only the required fields that have no default filled in."""
    if not isinstance(schema, dict):
        return {}
    props, required = _fields(schema)
    return {
        name: example_value(props.get(name))
        for name in required
        if not (isinstance(props.get(name), dict) and "default" in props[name])
    }


def answer(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The result an unattended host sends for one server request."""
    if method == "elicitation/create":
        if params.get("mode") == "url":
            return {"action": "accept"}
        return {"action": "accept", "content": form_answer(params.get("requestedSchema"))}
    if method == "sampling/createMessage":
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "an answer from the conformance host"},
            "model": "mcpx-conformance-host",
            "stopReason": "endTurn",
        }
    if method == "roots/list":
        return {"roots": [{"uri": "file:///tmp/mcpx-conformance", "name": "conformance"}]}
    if method == "ping":
        return {}
    raise HostError(f"the host cannot answer {method}")


# ---- the wire ---------------------------------------------------------------------------------------
def sse_events(resp: httpx.Response) -> Iterator[dict[str, Any]]:
    data: list[str] = []
    for line in resp.iter_lines():
        if line == "":
            if data and "".join(data).strip():
                yield json.loads("\n".join(data))
            data = []
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    if data and "".join(data).strip():
        yield json.loads("\n".join(data))


class Host:
    """One host connection to mcpx's /mcp, at `revision` (2025-11-25 or 2026-07-28)."""

    def __init__(self, url: str, revision: str) -> None:
        self.url = url
        self.revision = revision if revision in (LEGACY, MODERN) else LEGACY
        self.modern = self.revision == MODERN
        self.http = httpx.Client(timeout=httpx.Timeout(60.0, connect=10.0))
        self.session_id: str | None = None
        self._ids = itertools.count(1)
        self.notifications: list[dict[str, Any]] = []
        self.tools: dict[Any, dict[str, Any]] = {}  # listed tools by name (for their x-mcp-header)

    def close(self) -> None:
        if self.session_id is not None:
            try:
                self.http.delete(self.url, headers={"Mcp-Session-Id": self.session_id}, timeout=5)
            except httpx.HTTPError:
                pass
        self.http.close()

    def _headers(self, msg: dict[str, Any]) -> dict[str, str]:
        h = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": self.revision,
        }
        if self.session_id is not None:
            h["Mcp-Session-Id"] = self.session_id
        if self.modern and "method" in msg:
            h["Mcp-Method"] = msg["method"]
            params = msg.get("params") or {}
            name = params.get("name") if msg["method"] in ("tools/call", "prompts/get") else params.get("uri")
            if isinstance(name, str) and msg["method"] in ("tools/call", "prompts/get", "resources/read"):
                h["Mcp-Name"] = _header_value(name)
            if msg["method"] == "tools/call":
                h.update(self._param_headers(params))
        return h

    def _param_headers(self, params: dict[str, Any]) -> dict[str, str]:
        """SEP-2243: mcpx, as a 2026 server, checks that a call mirrors its tool's `x-mcp-header`
        arguments (top-level ones: the only kind this host's tools have)."""
        tool = self.tools.get(params.get("name"))
        props = (tool or {}).get("inputSchema", {}).get("properties") or {}
        args = params.get("arguments") or {}
        out = {}
        for prop, spec in props.items():
            header = spec.get("x-mcp-header") if isinstance(spec, dict) else None
            value = args.get(prop)
            if not isinstance(header, str) or value is None:
                continue
            text = ("true" if value else "false") if isinstance(value, bool) else str(value)
            out[f"Mcp-Param-{header}"] = _header_value(text)
        return out

    def initialize(self) -> None:
        if self.modern:
            return  # 2026-07-28: no handshake, every request carries its own _meta
        self.request("initialize", {"protocolVersion": LEGACY, "capabilities": CAPABILITIES, "clientInfo": CLIENT_INFO})
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _post(self, msg: dict[str, Any]) -> None:
        resp = self.http.post(self.url, content=json.dumps(msg), headers=self._headers(msg))
        if resp.status_code >= 400:
            log(f"{msg.get('method') or 'reply'} refused: HTTP {resp.status_code} {resp.text[:200]}")

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """One request to its result; a 2026 InputRequiredResult is answered and retried."""
        params = dict(params or {})
        for _ in range(MAX_ROUNDS):
            result = self._one(method, params)
            if not (self.modern and result.get("resultType") == "input_required"):
                return result
            requests = result.get("inputRequests") or {}
            params = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
            params["inputResponses"] = {
                key: answer(str(req.get("method")), req.get("params") or {}) for key, req in requests.items()
            }
            if "requestState" in result:
                params["requestState"] = result["requestState"]
        raise HostError(f"{method}: still asking after {MAX_ROUNDS} rounds")

    def _one(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.modern:
            meta = {
                **(params.get("_meta") or {}),
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
                "io.modelcontextprotocol/clientCapabilities": CAPABILITIES,
            }
            params = {**params, "_meta": meta}
        rid = next(self._ids)
        msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        with self.http.stream("POST", self.url, content=json.dumps(msg), headers=self._headers(msg)) as resp:
            if method == "initialize" and resp.headers.get("mcp-session-id"):
                self.session_id = resp.headers["mcp-session-id"]
            reply: dict[str, Any] | None = None
            if "text/event-stream" in resp.headers.get("content-type", ""):
                for item in sse_events(resp):
                    if "method" in item and "id" in item:
                        self._answer_server_request(item)
                    elif "method" in item:
                        self.notifications.append(item)
                    elif item.get("id") == rid:
                        reply = item
                        break
            else:
                resp.read()
                try:
                    reply = resp.json()
                except ValueError:
                    raise HostError(f"{method}: HTTP {resp.status_code} {resp.text[:200]}") from None
        if not isinstance(reply, dict):
            raise HostError(f"{method}: the stream ended without a reply")
        if "error" in reply:
            raise HostError(f"{method}: {reply['error']}")
        result = reply.get("result")
        if not isinstance(result, dict):
            raise HostError(f"{method}: the result is not an object")
        return result

    def _answer_server_request(self, item: dict[str, Any]) -> None:
        method = str(item.get("method"))
        try:
            reply: dict[str, Any] = {
                "jsonrpc": "2.0",
                "id": item["id"],
                "result": answer(method, item.get("params") or {}),
            }
        except HostError as exc:
            reply = {"jsonrpc": "2.0", "id": item["id"], "error": {"code": -32601, "message": str(exc)}}
        log(f"answering {method}")
        self._post(reply)

    def list_all(self, method: str, key: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor = None
        for _ in range(100):
            res = self.request(method, {"cursor": cursor} if cursor else {})
            items.extend(i for i in res.get(key) or [] if isinstance(i, dict))
            cursor = res.get("nextCursor")
            if not cursor:
                break
        return items


def _header_value(value: str) -> str:
    """SEP-2243 value encoding: plain printable ASCII as is, anything else base64 in the sentinel."""
    plain = all(0x20 <= ord(c) <= 0x7E for c in value) and value == value.strip()
    if plain and not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


# ---- what a host does with a server -------------------------------------------------------------


def exercise(host: Host, scenario: str, context: dict[str, Any]) -> int:
    """initialize, list, call: every listed tool (or the calls the scenario's context names), then
    one listed prompt and one resource. Returns how many steps failed (each is logged)."""
    failures = 0

    def step(what: str, run: Callable[[], Any]) -> tuple[bool, Any]:
        nonlocal failures
        try:
            out = run()
        except (HostError, httpx.HTTPError, ValueError) as exc:
            failures += 1
            log(f"{what}: {exc}")
            return False, None
        log(f"{what}: ok")
        return True, out

    if not step("initialize", host.initialize)[0]:
        return failures
    _, tools = step("tools/list", partial(host.list_all, "tools/list", "tools"))
    host.tools = {t.get("name"): t for t in tools or []}
    for name, arguments in _calls(scenario, context, tools or []):
        step(f"tools/call {name}", partial(host.request, "tools/call", {"name": name, "arguments": arguments}))
    _, prompts = step("prompts/list", partial(host.list_all, "prompts/list", "prompts"))
    for prompt in (prompts or [])[:1]:
        args = {a["name"]: "example" for a in prompt.get("arguments") or [] if a.get("required")}
        get = {"name": prompt.get("name"), "arguments": args}
        step(f"prompts/get {prompt.get('name')}", partial(host.request, "prompts/get", get))
    _, resources = step("resources/list", partial(host.list_all, "resources/list", "resources"))
    for resource in (resources or [])[:1]:
        step(
            f"resources/read {resource.get('uri')}",
            partial(host.request, "resources/read", {"uri": resource.get("uri")}),
        )
    return failures


def _calls(scenario: str, context: dict[str, Any], tools: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    listed: dict[str, dict[str, Any]] = {t["name"]: t for t in tools if isinstance(t.get("name"), str)}
    named = context.get("toolCalls")
    if isinstance(named, list):
        # The scenario names the calls and their arguments (http-custom-headers): made as given, and
        # only for tools mcpx lists (a tool mcpx left out is not the host's to call).
        return [(c["name"], c.get("arguments") or {}) for c in named if isinstance(c, dict) and c.get("name") in listed]
    if scenario == "json-schema-2020-12-preservation" and "json_schema_echo" in listed:
        # The scenario's stated client part: echo the other tool's inputSchema back as it was listed.
        focal = next((t for n, t in listed.items() if n != "json_schema_echo"), None)
        if focal is not None:
            return [("json_schema_echo", {"schema": focal.get("inputSchema") or {}})]
    out: list[tuple[str, dict[str, Any]]] = []
    for name, tool in listed.items():
        schema = tool.get("inputSchema")
        out.append((name, required_values(schema) if isinstance(schema, dict) else {}))
    return out
