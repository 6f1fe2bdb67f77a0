"""Protocol core of the conformance fixture: both wires, transport-independent.

* 2025-11-25 (stateful): ``initialize`` opens a :class:`Session` (the stdio process, or one HTTP
  ``Mcp-Session-Id``). Questions to the client are real server->client requests
  (``elicitation/create``, ``sampling/createMessage``, ``roots/list``) sent on the stream of the
  request that asked them; the client's responses come back through :meth:`Session.on_response`.
* 2026-07-28 (stateless): every request carries ``_meta`` (protocol version, client capabilities,
  optional client info / log level). Questions are MRTR: the request ends with an
  ``InputRequiredResult`` (``inputRequests`` + an HMAC-signed ``requestState``) and the retry carries
  ``inputResponses``. Every result carries ``resultType``; list/read/discover results carry
  ``ttlMs`` and ``cacheScope``.

The tools, prompts and resources themselves live in ``fixture_surface.py``; the transports in
``server.py`` (stdio) and ``fixture_http.py`` (Streamable HTTP).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import itertools
import json
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from fixture_common import RpcError

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")

PV_KEY = "io.modelcontextprotocol/protocolVersion"
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
INFO_KEY = "io.modelcontextprotocol/clientInfo"
LOGLEVEL_KEY = "io.modelcontextprotocol/logLevel"
SERVERINFO_KEY = "io.modelcontextprotocol/serverInfo"
SUBID_KEY = "io.modelcontextprotocol/subscriptionId"

LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
SERVER_INFO = {"name": "mcpx-conformance-fixture", "version": "1.0.0"}
INSTRUCTIONS = "Fixture upstream exposing the MCP conformance suite's tool/prompt/resource surface."

# Which client capability each server->client request needs.
CAPABILITY_OF = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}

# The surface's methods, the same on both wires.
SURFACE_METHODS = {
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "completion/complete",
}
LEGACY_METHODS = SURFACE_METHODS | {
    "initialize",
    "ping",
    "resources/subscribe",
    "resources/unsubscribe",
    "logging/setLevel",
}
MODERN_METHODS = SURFACE_METHODS | {"server/discover", "subscriptions/listen"}
# MRTR is allowed on these (2026-07-28 basic/patterns/mrtr.mdx:184-192).
MRTR_METHODS = {"tools/call", "prompts/get", "resources/read"}
# Results that carry caching hints on the modern wire (server/utilities/caching.mdx).
CACHEABLE = {
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
}

Send = Callable[[dict[str, Any]], Awaitable[None]]


def log_stderr(text: str) -> None:
    print(f"[conformance-fixture] {text}", file=sys.stderr, flush=True)


class InputRequired(Exception):
    """Raised by :meth:`Call.ask` on the modern wire: the request ends with an InputRequiredResult."""

    def __init__(self, requests: dict[str, Any], state: str | None):
        super().__init__("input required")
        self.requests, self.state = requests, state

    def to_result(self) -> dict[str, Any]:
        result: dict[str, Any] = {"resultType": "input_required", "inputRequests": self.requests}
        if self.state is not None:
            result["requestState"] = self.state
        return result


def missing_capability(caps: dict[str, Any]) -> RpcError:
    return RpcError(
        -32021, "Missing required client capability: " + ", ".join(sorted(caps)), {"requiredCapabilities": caps}, 400
    )


# ==== requestState: opaque, HMAC-protected =====================================================
class StateSigner:
    """``base64url(json payload) "." base64url(hmac-sha256)``; any change fails verification."""

    def __init__(self, key: bytes | None = None):
        env = os.environ.get("CONFORMANCE_FIXTURE_STATE_KEY")
        self.key = key or (env.encode() if env else os.urandom(32))

    def _mac(self, body: bytes) -> str:
        digest = hmac.new(self.key, body, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def sign(self, payload: dict[str, Any]) -> str:
        body = base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode())
        return body.decode().rstrip("=") + "." + self._mac(body.rstrip(b"="))

    def verify(self, token: Any) -> dict[str, Any]:
        bad = RpcError(-32602, "requestState integrity check failed")
        if not isinstance(token, str) or token.count(".") != 1:
            raise bad
        body, mac = token.split(".")
        if not hmac.compare_digest(self._mac(body.encode()), mac):
            raise bad
        try:
            payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        except ValueError:
            raise bad from None
        if not isinstance(payload, dict):
            raise bad
        return payload


def valid_answer(method: str, answer: Any) -> bool:
    """Does ``answer`` look like a result of the client-side ``method``? (invalid = still missing)"""
    if not isinstance(answer, dict):
        return False
    if method == "elicitation/create":
        return answer.get("action") in ("accept", "decline", "cancel")
    if method == "sampling/createMessage":
        return isinstance(answer.get("content"), (dict, list)) and isinstance(answer.get("role"), str)
    if method == "roots/list":
        return isinstance(answer.get("roots"), list)
    return True


# ==== legacy session ===========================================================================
class Session:
    """One 2025-11-25 session: the stdio process or one HTTP ``Mcp-Session-Id``."""

    def __init__(self, sid: str | None):
        self.sid = sid
        self.protocol_version = LEGACY
        self.client_caps: dict[str, Any] = {}
        self.log_level: str | None = None
        self.subscriptions: set[str] = set()
        self.pending: dict[Any, asyncio.Future] = {}
        self.running: dict[Any, asyncio.Task] = {}
        self.standalone: Send | None = None  # GET stream (HTTP) or stdout (stdio)
        self.closed = False
        self._ids = itertools.count(1)

    async def request(self, send: Send, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a server->client request on ``send`` and wait for the client's answer."""
        rid = f"fixture-{next(self._ids)}"
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self.pending[rid] = fut
        try:
            await send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            return await fut
        except asyncio.CancelledError:
            # abandoned (our own request was cancelled): tell the client to stop asking
            if not fut.done():
                try:
                    await send(
                        {
                            "jsonrpc": "2.0",
                            "method": "notifications/cancelled",
                            "params": {"requestId": rid, "reason": "request abandoned"},
                        }
                    )
                except Exception:  # the stream may already be gone
                    pass
            raise
        finally:
            self.pending.pop(rid, None)

    def on_response(self, msg: dict[str, Any]) -> bool:
        fut = self.pending.get(msg.get("id"))
        if fut is None or fut.done():
            return False
        if "error" in msg:
            err = msg["error"] if isinstance(msg["error"], dict) else {}
            fut.set_exception(
                RpcError(int(err.get("code", -32603)), str(err.get("message", "client error")), err.get("data"))
            )
        else:
            fut.set_result(msg.get("result") if isinstance(msg.get("result"), dict) else {})
        return True

    def allows_log(self, level: str) -> bool:
        if self.log_level is None:
            return True
        return LEVELS.index(level) >= LEVELS.index(self.log_level)

    def close(self) -> None:
        self.closed = True
        for task in list(self.running.values()):
            task.cancel()
        for fut in self.pending.values():
            if not fut.done():
                fut.cancel()


# ==== modern listen subscription ===============================================================
class Subscription:
    def __init__(self, sub_id: Any, accepted: dict[str, Any], send: Send):
        self.id, self.accepted, self.send = sub_id, accepted, send

    def wants(self, method: str, params: dict[str, Any]) -> bool:
        if method == "notifications/tools/list_changed":
            return bool(self.accepted.get("toolsListChanged"))
        if method == "notifications/prompts/list_changed":
            return bool(self.accepted.get("promptsListChanged"))
        if method == "notifications/resources/list_changed":
            return bool(self.accepted.get("resourcesListChanged"))
        if method == "notifications/resources/updated":
            return params.get("uri") in (self.accepted.get("resourceSubscriptions") or [])
        return False


# ==== per-request context ======================================================================
class Call:
    """Everything a handler needs: which wire, the client's capabilities, and a way to talk back."""

    def __init__(self, server: Server, msg: dict[str, Any], modern: bool, session: Session | None, send: Send):
        self.server, self.modern, self.session, self.send = server, modern, session, send
        self.id = msg.get("id")
        self.method = msg.get("method")
        params = msg.get("params")
        self.params: dict[str, Any] = params if isinstance(params, dict) else {}
        meta = self.params.get("_meta")
        self.meta: dict[str, Any] = meta if isinstance(meta, dict) else {}
        self.target = self.params.get("name") or self.params.get("uri")
        # MRTR bookkeeping (modern only)
        self.answers: dict[str, Any] = {}  # answers known for this round (state + inputResponses)
        self.collected: dict[str, Any] = {}  # answers used so far; carried in the next requestState
        self.state_verified = False
        self.resumed = False

    # ---- capabilities --------------------------------------------------------------------------
    @property
    def caps(self) -> dict[str, Any]:
        if self.modern:
            caps = self.meta.get(CAPS_KEY)
            return caps if isinstance(caps, dict) else {}
        return self.session.client_caps if self.session else {}

    # ---- outbound notifications on this request's stream ---------------------------------------
    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def log(self, level: str, data: Any, logger: str = "conformance-fixture") -> bool:
        """Emit notifications/message if this request may receive it at ``level``."""
        if self.modern:
            wanted = self.meta.get(LOGLEVEL_KEY)
            if wanted not in LEVELS or LEVELS.index(level) < LEVELS.index(wanted):
                return False  # no logLevel in _meta: MUST NOT log (2026-07-28 basic/index.mdx:378)
        elif self.session is None or not self.session.allows_log(level):
            return False
        await self.notify("notifications/message", {"level": level, "logger": logger, "data": data})
        return True

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> bool:
        token = self.meta.get("progressToken")
        if token is None:
            return False
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)
        return True

    # ---- MRTR / server->client requests --------------------------------------------------------
    def load_mrtr(self) -> None:
        """Read ``requestState`` and ``inputResponses`` of a modern retry (tampered state -> -32602)."""
        token = self.params.get("requestState")
        if token is not None:
            payload = self.server.signer.verify(token)
            if payload.get("k") != self.mrtr_key():
                raise RpcError(-32602, "requestState was issued for a different request")
            carried = payload.get("a")
            if isinstance(carried, dict):
                self.answers.update(carried)
                self.collected.update(carried)
            self.state_verified = True
        responses = self.params.get("inputResponses")
        if isinstance(responses, dict):
            self.answers.update(responses)
        self.resumed = self.state_verified or bool(isinstance(responses, dict) and responses)

    def mrtr_key(self) -> str:
        return f"{self.method}:{self.target}"

    async def ask(self, requests: dict[str, dict[str, Any]], *, state: bool = True) -> dict[str, Any]:
        """Ask the client the given ``{key: {method, params}}`` questions; return ``{key: answer}``.

        Legacy: all questions go out at once as server->client requests on this request's stream.
        Modern: answers already present (from ``inputResponses`` or the carried ``requestState``)
        are used; otherwise the request ends with an InputRequiredResult listing the missing
        questions. ``state=False`` omits ``requestState`` while nothing needs carrying.
        """
        if not self.modern:
            assert self.session is not None
            keys = list(requests)
            answers = await asyncio.gather(
                *(self.session.request(self.send, requests[k]["method"], requests[k]["params"]) for k in keys)
            )
            return dict(zip(keys, answers, strict=True))
        have = {
            k: self.answers[k]
            for k, r in requests.items()
            if k in self.answers and valid_answer(r["method"], self.answers[k])
        }
        missing = {k: r for k, r in requests.items() if k not in have}
        self.collected.update(have)
        if not missing:
            return have
        needed = {CAPABILITY_OF[r["method"]] for r in missing.values()} - set(self.caps)
        if needed:
            raise missing_capability({cap: {} for cap in sorted(needed)})
        token = None
        if state or self.collected:
            token = self.server.signer.sign(
                {"k": self.mrtr_key(), "a": self.collected, "n": uuid.uuid4().hex[:12], "t": int(time.time())}
            )
        raise InputRequired(missing, token)


def elicit(message: str, properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return {"method": "elicitation/create", "params": {"message": message, "requestedSchema": schema}}


def sample(text: str, max_tokens: int = 100) -> dict[str, Any]:
    return {
        "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": max_tokens},
    }


def list_roots() -> dict[str, Any]:
    return {"method": "roots/list", "params": {}}


# ==== the server ===============================================================================
class Server:
    """Method dispatch for both wires. Transports build a :class:`Call` and await :meth:`handle`."""

    def __init__(self, surface: Any, ttl_ms: int = 0):
        self.surface = surface
        self.ttl_ms = ttl_ms
        self.signer = StateSigner()
        self.sessions: dict[str, Session] = {}
        self.listeners: dict[int, Subscription] = {}
        self._listener_ids = itertools.count(1)

    # ---- classification ------------------------------------------------------------------------
    @staticmethod
    def is_modern(msg: dict[str, Any], header_version: str | None = None) -> bool:
        """Modern if ``_meta`` names a protocol version, or the HTTP header names a non-legacy one."""
        params = msg.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict) and PV_KEY in meta:
            return True
        if msg.get("method") == "initialize":
            return False
        if header_version is not None and header_version.strip() not in LEGACY_VERSIONS:
            return True
        return msg.get("method") in ("server/discover", "subscriptions/listen")

    # ---- request entry point -------------------------------------------------------------------
    async def respond(self, call: Call) -> tuple[dict[str, Any], int]:
        """Run one request to completion: ``(JSON-RPC response, HTTP status)``."""
        try:
            result = await self.handle(call)
        except InputRequired as ir:
            result = ir.to_result()
        except RpcError as e:
            return e.to_msg(call.id), e.http_status
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a fixture bug still answers
            log_stderr(f"internal error in {call.method}: {e!r}")
            return RpcError(-32603, f"internal error: {e!r}").to_msg(call.id), 500
        if call.modern:
            result = self.modern_result(call.method, result)
        return {"jsonrpc": "2.0", "id": call.id, "result": result}, 200

    def modern_result(self, method: str | None, result: dict[str, Any]) -> dict[str, Any]:
        result.setdefault("resultType", "complete")
        if method in CACHEABLE and result["resultType"] == "complete":
            result.setdefault("ttlMs", self.ttl_ms)
            result.setdefault("cacheScope", "public")
        meta = result.setdefault("_meta", {})
        meta.setdefault(SERVERINFO_KEY, dict(SERVER_INFO))
        return result

    def check_modern_meta(self, call: Call) -> None:
        """Per-request ``_meta`` rules of 2026-07-28 (basic/index.mdx:375-392)."""
        meta = call.params.get("_meta")
        if not isinstance(meta, dict):
            raise RpcError(-32602, "Invalid params: missing _meta (protocolVersion, clientCapabilities)", None, 400)
        missing = [k for k in (PV_KEY, CAPS_KEY) if k not in meta]
        if missing:
            raise RpcError(-32602, f"Invalid params: missing _meta keys: {', '.join(missing)}", None, 400)
        if not isinstance(meta[CAPS_KEY], dict):
            raise RpcError(-32602, f"Invalid params: _meta[{CAPS_KEY!r}] must be an object", None, 400)
        if INFO_KEY in meta and not isinstance(meta[INFO_KEY], dict):
            raise RpcError(-32602, f"Invalid params: _meta[{INFO_KEY!r}] must be an object", None, 400)

    def check_modern_version(self, call: Call) -> None:
        version = call.meta.get(PV_KEY)
        if version != MODERN:
            raise RpcError(
                -32022, f"Unsupported protocol version: {version!r}", {"supported": [MODERN], "requested": version}, 400
            )

    async def handle(self, call: Call) -> dict[str, Any]:
        method = call.method
        if call.modern:
            self.check_modern_meta(call)
            self.check_modern_version(call)
            if method not in MODERN_METHODS:
                raise RpcError(-32601, f"Method not found: {method}", None, 404)
            level = call.meta.get(LOGLEVEL_KEY)
            if level is not None and level not in LEVELS:
                raise RpcError(-32602, f"Invalid params: unknown logLevel {level!r}", None, 400)
            if method in MRTR_METHODS:
                call.load_mrtr()
        else:
            if method not in LEGACY_METHODS:
                raise RpcError(-32601, f"Method not found: {method}")
        return await self.dispatch(call)

    async def dispatch(self, call: Call) -> dict[str, Any]:
        method, params, s = call.method, call.params, self.surface
        if method == "initialize":
            return self.initialize(call)
        if method == "ping":
            return {}
        if method == "server/discover":
            if getattr(self, "legacy_only", False):
                raise RpcError(-32601, "Method not found: server/discover (this server speaks 2025-11-25)")
            return {"supportedVersions": [MODERN], "capabilities": self.capabilities(), "instructions": INSTRUCTIONS}
        if method == "logging/setLevel":
            level = params.get("level")
            if level not in LEVELS:
                raise RpcError(-32602, f"Invalid params: unknown level {level!r}")
            assert call.session is not None
            call.session.log_level = level
            return {}
        if method == "tools/list":
            return {"tools": s.list_tools()}
        if method == "tools/call":
            return await s.call_tool(call)
        if method == "prompts/list":
            return {"prompts": s.list_prompts()}
        if method == "prompts/get":
            return await s.get_prompt(call)
        if method == "resources/list":
            return {"resources": s.list_resources()}
        if method == "resources/templates/list":
            return {"resourceTemplates": s.list_resource_templates()}
        if method == "resources/read":
            return await s.read_resource(call)
        if method in ("resources/subscribe", "resources/unsubscribe"):
            uri = params.get("uri")
            if not isinstance(uri, str):
                raise RpcError(-32602, "Invalid params: 'uri' (string) is required")
            assert call.session is not None
            if method == "resources/subscribe":
                call.session.subscriptions.add(uri)
                s.on_subscribe(self, call.session, uri)
            else:
                call.session.subscriptions.discard(uri)
            return {}
        if method == "completion/complete":
            return s.complete(params)
        raise RpcError(-32601, f"Method not found: {method}", None, 404 if call.modern else 200)

    def initialize(self, call: Call) -> dict[str, Any]:
        assert call.session is not None
        requested = call.params.get("protocolVersion")
        version = requested if requested in LEGACY_VERSIONS else LEGACY
        caps = call.params.get("capabilities")
        call.session.protocol_version = version
        call.session.client_caps = caps if isinstance(caps, dict) else {}
        return {
            "protocolVersion": version,
            "capabilities": self.capabilities(),
            "serverInfo": dict(SERVER_INFO),
            "instructions": INSTRUCTIONS,
        }

    @staticmethod
    def capabilities() -> dict[str, Any]:
        """Same on both wires. Modern: list changes and resource updates arrive on
        subscriptions/listen streams; legacy: on the session (GET stream / stdout)."""
        return {
            "tools": {"listChanged": True},
            "prompts": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": True},
            "completions": {},
            "logging": {},
        }

    # ---- subscriptions/listen (modern) ---------------------------------------------------------
    def listen_filter(self, call: Call) -> dict[str, Any]:
        """The subset of the requested filter this server honours (for the acknowledgement)."""
        wanted = call.params.get("notifications")
        if not isinstance(wanted, dict):
            raise RpcError(-32602, "Invalid params: 'notifications' (SubscriptionFilter) is required")
        accepted: dict[str, Any] = {}
        for key in ("toolsListChanged", "promptsListChanged", "resourcesListChanged"):
            if wanted.get(key) is True:
                accepted[key] = True
        uris = wanted.get("resourceSubscriptions")
        if isinstance(uris, list):
            accepted["resourceSubscriptions"] = [u for u in uris if isinstance(u, str)]
        return accepted

    async def open_listen(self, call: Call) -> Subscription:
        """Validate a listen request, register it, and send the acknowledgement on ``call.send``."""
        self.check_modern_meta(call)
        self.check_modern_version(call)
        accepted = self.listen_filter(call)
        sub = Subscription(call.id, accepted, call.send)
        await call.notify(
            "notifications/subscriptions/acknowledged", {"_meta": {SUBID_KEY: call.id}, "notifications": accepted}
        )
        self.listeners[next(self._listener_ids)] = sub
        for uri in accepted.get("resourceSubscriptions", []):
            self.surface.on_subscribe(self, None, uri)
        return sub

    def close_listen(self, sub: Subscription) -> None:
        for key, value in list(self.listeners.items()):
            if value is sub:
                del self.listeners[key]

    @staticmethod
    def listen_closed_result(sub: Subscription) -> dict[str, Any]:
        return {"resultType": "complete", "_meta": {SUBID_KEY: sub.id}}

    # ---- broadcast (list changes, resource updates) --------------------------------------------
    async def broadcast(self, method: str, params: dict[str, Any] | None = None) -> None:
        params = params or {}
        for session in list(self.sessions.values()):
            if session.closed or session.standalone is None:
                continue
            if method == "notifications/resources/updated" and params.get("uri") not in session.subscriptions:
                continue
            try:
                await session.standalone({"jsonrpc": "2.0", "method": method, "params": dict(params)})
            except Exception as e:
                log_stderr(f"dropping {method} for session {session.sid}: {e!r}")
        for sub in list(self.listeners.values()):
            if not sub.wants(method, params):
                continue
            tagged = dict(params)
            tagged["_meta"] = {SUBID_KEY: sub.id}
            try:
                await sub.send({"jsonrpc": "2.0", "method": method, "params": tagged})
            except Exception as e:
                log_stderr(f"dropping {method} for subscription {sub.id}: {e!r}")
