"""OpenTelemetry traces of host requests, upstream calls, tasks, MRTR rounds and questions.

Off unless configured (`traces.enabled`, or an `OTEL_EXPORTER_OTLP_*ENDPOINT` variable): then
`tracer` stays None, the SDK is never imported, and every hook on the hot path is one module
attribute test (`if tracing.tracer is not None`). On: one SERVER span per host request, a CLIENT
span per upstream request (its W3C trace context injected into the request's `params._meta` and,
for HTTP upstreams, its headers), a span per task's life, per MRTR round and per question.

Names and attributes follow the OpenTelemetry semantic conventions for MCP (docs/telemetry.md
cites the version); mcpx's own attributes are `mcpx.*`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from ..config.telemetry import TracesConfig

if TYPE_CHECKING:  # the SDK is imported only when tracing is turned on
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

    from ..protocol.jsonrpc import Message


# What the spans read of a request, a task and its outcome. Protocols rather than the host's and the
# engine's own classes: those import this module, and the import graph has no circles.
class _Connection(Protocol):
    @property
    def transport(self) -> str: ...
    @property
    def record_id(self) -> str: ...
    @property
    def id(self) -> str: ...
    @property
    def peer(self) -> str | None: ...


class RequestContext(Protocol):
    @property
    def conn(self) -> _Connection: ...
    @property
    def revision(self) -> str: ...
    @property
    def era(self) -> str: ...

    span: Any  # set here: the request's own span


class Task(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def upstream(self) -> str: ...
    @property
    def tool(self) -> str: ...


class Outcome(Protocol):
    @property
    def status(self) -> str: ...
    @property
    def message(self) -> str | None: ...
    @property
    def result(self) -> Any: ...


tracer: Tracer | None = None  # None: tracing is off (the hot path's only check)
_provider: TracerProvider | None = None

# The W3C Trace Context keys the MCP conventions carry in `params._meta`, unprefixed (SEP-414).
TRACE_KEYS = ("traceparent", "tracestate")
_NAMED = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name"}


def wanted(cfg: TracesConfig, env: Mapping[str, str] = os.environ) -> bool:
    """On when the config says so or an OTLP endpoint variable is set; OTEL_SDK_DISABLED wins."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return cfg.enabled or bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def start(cfg: TracesConfig, version: str) -> bool:
    """Turn tracing on when `wanted`: an OTLP/HTTP exporter behind a batch processor. True when on."""
    if not wanted(cfg):
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    attributes: dict[str, str] = {"service.version": version}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = cfg.serviceName
    provider = TracerProvider(resource=Resource.create(attributes))
    endpoint = cfg.endpoint.rstrip("/") + "/v1/traces" if cfg.endpoint else None
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    use(provider, version)
    return True


def use(provider: TracerProvider, version: str = "") -> None:
    """Trace into `provider` from now on (the daemon's, or a test's with an in-memory exporter)."""
    global tracer, _provider
    _provider = provider
    tracer = provider.get_tracer("mcpx", version or None)


async def stop(grace_s: float = 5.0) -> None:
    """Flush what is batched and turn tracing off; a collector that does not answer is given up on."""
    global tracer, _provider
    provider, tracer, _provider = _provider, None, None
    if provider is not None:
        with anyio.move_on_after(grace_s):
            await anyio.to_thread.run_sync(provider.shutdown, abandon_on_cancel=True)


# ---- context ---------------------------------------------------------------------------------
def _extract(carrier: Mapping[str, Any] | None) -> Context | None:
    """The remote parent in a carrier (a request's `_meta`, or HTTP headers), if it names one."""
    if not carrier or not isinstance(carrier.get("traceparent"), str):
        return None
    from opentelemetry import propagate, trace

    found = propagate.extract({k: carrier[k] for k in TRACE_KEYS if isinstance(carrier.get(k), str)})
    return found if trace.get_current_span(found).get_span_context().is_valid else None


def _session_id(session: str) -> str:
    """A legacy session id is a bearer credential: traces get a digest that tells sessions apart."""
    return hashlib.sha256(session.encode()).hexdigest()[:32]


def _name(method: str, params: Mapping[str, Any]) -> tuple[str, str | None]:
    target = params.get("name") if method in _NAMED else None
    return (f"{method} {target}" if isinstance(target, str) else method), target if isinstance(target, str) else None


def _error_type(frame: Mapping[str, Any] | None) -> tuple[str | None, str]:
    """`error.type` and the status description of a JSON-RPC reply, per the conventions: the error
    code, or `tool_error` for a CallToolResult with isError."""
    if frame is None:
        return "cancelled", "no reply: the request was cancelled"
    error = frame.get("error")
    if isinstance(error, dict):
        return str(error.get("code", "_OTHER")), str(error.get("message", ""))
    result = frame.get("result")
    if isinstance(result, dict) and result.get("isError") is True:
        return "tool_error", "the tool reported an error"
    return None, ""


def fail(span: Span, error_type: str, message: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, message or None))


# ---- a host request (SERVER) -----------------------------------------------------------------
class ServerSpan:
    """A host request's span, current in its task until `end`."""

    __slots__ = ("span", "token")

    def __init__(self, span: Span, token: object) -> None:
        self.span, self.token = span, token

    def end(self, frame: Mapping[str, Any] | None) -> None:
        from opentelemetry import context

        error_type, message = _error_type(frame)
        if error_type is not None:
            code = jsonrpc_code(frame)
            if code is not None:
                self.span.set_attribute("rpc.response.status_code", code)
            fail(self.span, error_type, message)
        task_id = _created_task(frame)
        if task_id is not None:
            self.span.set_attribute("mcpx.task.id", task_id)
        self.span.end()
        context.detach(self.token)  # type: ignore[arg-type]  # attach's token, kept opaque in __slots__


def jsonrpc_code(frame: Mapping[str, Any] | None) -> str | None:
    error = frame.get("error") if frame is not None else None
    return str(error["code"]) if isinstance(error, dict) and "code" in error else None


def _created_task(frame: Mapping[str, Any] | None) -> str | None:
    result = frame.get("result") if frame is not None else None
    if not isinstance(result, dict):
        return None
    task = result.get("task")
    task_id = task.get("taskId") if isinstance(task, dict) else result.get("taskId")
    return task_id if isinstance(task_id, str) else None


def server_span(ctx: RequestContext, msg: Message, http_headers: Mapping[str, str] | None) -> ServerSpan:
    """Start the span of one host request. Its parent is the trace context in `params._meta` (the
    MCP convention), else the HTTP request's `traceparent`; when both are there, the HTTP one is
    linked (the conventions: MCP and transport contexts are independent)."""
    assert tracer is not None
    from opentelemetry import context, trace
    from opentelemetry.trace import Link, SpanKind

    params = msg.params
    meta = params.get("_meta")
    from_meta = _extract(meta) if isinstance(meta, dict) else None
    from_http = _extract(http_headers)
    parent = from_meta or from_http
    links = []
    if from_meta is not None and from_http is not None:
        links.append(Link(trace.get_current_span(from_http).get_span_context()))
    name, target = _name(msg.method, params)
    conn = ctx.conn
    attributes: dict[str, Any] = {
        "mcp.method.name": msg.method,
        "mcp.protocol.version": ctx.revision,
        "network.transport": "tcp" if conn.transport == "http" else "pipe",
        "network.protocol.name": "http" if conn.transport == "http" else "stdio",
        "mcpx.connection.id": conn.record_id,
    }
    if msg.id is not None:
        attributes["jsonrpc.request.id"] = str(msg.id)
    if target is not None:
        attributes[_NAMED[msg.method]] = target
        if msg.method == "tools/call":
            attributes["gen_ai.operation.name"] = "execute_tool"
    if msg.method == "resources/read" and isinstance(params.get("uri"), str):
        attributes["mcp.resource.uri"] = params["uri"]
    if isinstance(params.get("taskId"), str):
        attributes["mcpx.task.id"] = params["taskId"]
    if ctx.era == "legacy" and conn.transport == "http":
        attributes["mcp.session.id"] = _session_id(conn.id)
    if conn.peer:
        address, _, port = conn.peer.rpartition(":")
        attributes["client.address"] = address
        if port.isdigit():
            attributes["client.port"] = int(port)
    span = tracer.start_span(name, context=parent, kind=SpanKind.SERVER, attributes=attributes, links=links)
    ctx.span = span
    return ServerSpan(span, context.attach(trace.set_span_in_context(span)))


# ---- an upstream request (CLIENT) ------------------------------------------------------------
def client_span(
    upstream: str, transport: str, revision: str | None, method: str, rid: object, params: dict[str, Any]
) -> Span:
    """Start the span of one upstream request, a child of whatever runs now (the host request's
    or the task's span), and inject its context into `params["_meta"]` (a fresh dict)."""
    assert tracer is not None
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind

    name, target = _name(method, params)
    attributes: dict[str, Any] = {
        "mcp.method.name": method,
        "jsonrpc.request.id": str(rid),
        "network.transport": "tcp" if transport == "http" else "pipe",
        "mcpx.upstream": upstream,
    }
    if revision:
        attributes["mcp.protocol.version"] = revision
    if target is not None:
        attributes[_NAMED[method]] = target
        if method == "tools/call":
            attributes["gen_ai.operation.name"] = "execute_tool"
    if method == "resources/read" and isinstance(params.get("uri"), str):
        attributes["mcp.resource.uri"] = params["uri"]
    span = tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes)
    meta = params.get("_meta")
    meta = dict(meta) if isinstance(meta, dict) else {}
    from opentelemetry import propagate

    propagate.inject(meta, context=trace.set_span_in_context(span))
    params["_meta"] = meta
    return span


def end_client(span: Span, reply: Mapping[str, Any] | None, exc: BaseException | None) -> None:
    if reply:
        error_type, message = _error_type(reply)
        if error_type is not None:
            code = jsonrpc_code(reply)
            if code is not None:
                span.set_attribute("rpc.response.status_code", code)
            fail(span, error_type, message)
    elif exc is not None:
        kind = "timeout" if isinstance(exc, TimeoutError) else "cancelled" if cancelled(exc) else type(exc).__name__
        fail(span, kind, str(exc))
    span.end()


def cancelled(exc: BaseException) -> bool:
    return isinstance(exc, anyio.get_cancelled_exc_class())


# ---- a task's life ---------------------------------------------------------------------------
def task_span(task: Task, start_ns: int | None = None) -> Span:
    """From the task's creation (`start_ns`: when its call began, for a call that became a task
    later) to its end; a child of the request that created it."""
    assert tracer is not None
    return tracer.start_span(
        f"mcpx.task {task.tool}",
        start_time=start_ns,
        attributes={
            "mcpx.task.id": task.id,
            "mcpx.task.kind": task.kind,
            "mcpx.upstream": task.upstream,
            "gen_ai.tool.name": task.tool,
            "gen_ai.operation.name": "execute_tool",
        },
    )


def end_task(span: Span, outcome: Outcome | None) -> None:
    status = outcome.status if outcome is not None else "cancelled"
    span.set_attribute("mcpx.task.status", status)
    if status != "completed":
        fail(span, status, (outcome.message if outcome is not None else None) or status)
    elif outcome is not None and isinstance(outcome.result, dict) and outcome.result.get("isError") is True:
        fail(span, "tool_error", "the tool reported an error")
    span.end()


@contextlib.contextmanager
def current(span: Span) -> Iterator[None]:
    """`span` is the current one inside (so what starts there, in this task or one it spawns, is its child)."""
    from opentelemetry import context, trace

    token = context.attach(trace.set_span_in_context(span))
    try:
        yield
    finally:
        context.detach(token)


def now_ns() -> int:
    return time.time_ns()
