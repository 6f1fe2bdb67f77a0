"""Span names, kinds, attributes and propagation (mcpx/telemetry/tracing.py), through the SDK's
in-memory exporter: the OpenTelemetry MCP conventions docs/telemetry.md cites."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from mcpx.config.telemetry import TracesConfig
from mcpx.host.connection import HostConnection, RequestContext
from mcpx.protocol import jsonrpc
from mcpx.protocol.revisions import LEGACY_LATEST, MODERN
from mcpx.telemetry import tracing

HOST_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
HOST_SPAN = "00f067aa0ba902b7"
HTTP_TRACE = "0af7651916cd43dd8448eb211c80319c"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use(provider, "test")
    try:
        yield exporter
    finally:
        tracing.tracer = None  # off again for every other test in this process
        provider.shutdown()


def _ctx(era: str = "legacy", transport: str = "http") -> RequestContext:
    conn = HostConnection(transport, peer="127.0.0.1:50123")  # type: ignore[arg-type]  # a test string for the Literal transport
    revision = LEGACY_LATEST if era == "legacy" else MODERN
    return RequestContext(conn, era, revision, {}, {}, None, None)  # type: ignore[arg-type]  # era: a plain str here


def _msg(method: str, params: dict[str, Any], rid: int = 7) -> jsonrpc.Message:
    return jsonrpc.parse(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode())


def _tp(trace: str, span: str) -> str:
    return f"00-{trace}-{span}-01"


def _only(exporter: InMemorySpanExporter) -> ReadableSpan:
    [span] = exporter.get_finished_spans()
    return span


def test_a_host_tools_call_is_a_server_span_named_for_its_tool(spans: InMemorySpanExporter) -> None:
    ctx = _ctx()
    traced = tracing.server_span(ctx, _msg("tools/call", {"name": "up__echo", "arguments": {"secret": "x"}}), None)
    traced.end(jsonrpc.result(7, {"content": []}))
    span = _only(spans)
    assert span.name == "tools/call up__echo" and span.kind == SpanKind.SERVER
    a = dict(span.attributes or {})
    assert a["mcp.method.name"] == "tools/call"
    assert a["gen_ai.tool.name"] == "up__echo" and a["gen_ai.operation.name"] == "execute_tool"
    assert a["jsonrpc.request.id"] == "7" and a["mcp.protocol.version"] == LEGACY_LATEST
    assert a["network.transport"] == "tcp" and a["client.address"] == "127.0.0.1" and a["client.port"] == 50123
    assert a["mcpx.connection.id"] == ctx.conn.record_id
    # The session id is a bearer credential: a digest names it, never the id itself.
    assert a["mcp.session.id"] != ctx.conn.id and len(str(a["mcp.session.id"])) == 32
    assert "secret" not in json.dumps(a)  # arguments are not recorded (opt-in in the conventions)
    assert span.status.status_code == StatusCode.UNSET and "error.type" not in a


def test_an_error_reply_sets_error_type_to_its_code_and_the_status_to_error(spans: InMemorySpanExporter) -> None:
    traced = tracing.server_span(_ctx(), _msg("tools/list", {}), None)
    traced.end(jsonrpc.error(7, {"code": -32602, "message": "Unknown tool: nope"}))
    span = _only(spans)
    assert span.name == "tools/list"
    assert span.attributes is not None
    assert span.attributes["error.type"] == "-32602" and span.attributes["rpc.response.status_code"] == "-32602"
    assert span.status.status_code == StatusCode.ERROR and span.status.description == "Unknown tool: nope"


def test_a_tool_result_with_is_error_is_a_tool_error(spans: InMemorySpanExporter) -> None:
    traced = tracing.server_span(_ctx(), _msg("tools/call", {"name": "t"}), None)
    traced.end(jsonrpc.result(7, {"content": [], "isError": True}))
    assert (_only(spans).attributes or {})["error.type"] == "tool_error"


def test_a_cancelled_request_has_no_reply_and_says_cancelled(spans: InMemorySpanExporter) -> None:
    tracing.server_span(_ctx(), _msg("tools/call", {"name": "t"}), None).end(None)
    assert (_only(spans).attributes or {})["error.type"] == "cancelled"


def test_the_meta_traceparent_is_the_parent_and_the_http_one_a_link(spans: InMemorySpanExporter) -> None:
    params = {"name": "t", "_meta": {"traceparent": _tp(HOST_TRACE, HOST_SPAN)}}
    headers = {"traceparent": _tp(HTTP_TRACE, "b7ad6b7169203331")}
    tracing.server_span(_ctx("modern"), _msg("tools/call", params), headers).end(jsonrpc.result(7, {}))
    span = _only(spans)
    assert span.parent is not None and span.parent.is_remote
    assert f"{span.context.trace_id:032x}" == HOST_TRACE and f"{span.parent.span_id:016x}" == HOST_SPAN
    assert [f"{link.context.trace_id:032x}" for link in span.links] == [HTTP_TRACE]
    assert "mcp.session.id" not in (span.attributes or {})  # a stateless 2026 request has no session


def test_an_http_traceparent_alone_is_the_parent(spans: InMemorySpanExporter) -> None:
    headers = {"traceparent": _tp(HTTP_TRACE, "b7ad6b7169203331")}
    tracing.server_span(_ctx(), _msg("ping", {}), headers).end(jsonrpc.result(7, {}))
    span = _only(spans)
    assert span.parent is not None and f"{span.context.trace_id:032x}" == HTTP_TRACE and not span.links


def test_a_malformed_traceparent_starts_a_new_trace(spans: InMemorySpanExporter) -> None:
    params = {"_meta": {"traceparent": "00-zz-yy-01"}}
    tracing.server_span(_ctx(), _msg("ping", params), None).end(jsonrpc.result(7, {}))
    assert _only(spans).parent is None


def test_an_upstream_call_is_a_client_child_whose_context_goes_into_meta(spans: InMemorySpanExporter) -> None:
    ctx = _ctx("legacy", "stdio")
    traced = tracing.server_span(ctx, _msg("tools/call", {"name": "up__echo"}), None)
    params: dict[str, Any] = {"name": "echo", "_meta": {"progressToken": "mcpx-3", "traceparent": "host's"}}
    span = tracing.client_span("up", "stdio", LEGACY_LATEST, "tools/call", 3, params)
    tracing.end_client(span, {"jsonrpc": "2.0", "id": 3, "result": {"content": []}}, None)
    traced.end(jsonrpc.result(7, {}))
    client, server = spans.get_finished_spans()
    assert client.kind == SpanKind.CLIENT and client.name == "tools/call echo"
    assert client.parent is not None and client.parent.span_id == server.context.span_id
    a = dict(client.attributes or {})
    assert a["mcpx.upstream"] == "up" and a["gen_ai.tool.name"] == "echo" and a["network.transport"] == "pipe"
    assert (dict(server.attributes or {}))["network.transport"] == "pipe"
    # The upstream continues mcpx's span, not the host's; the other _meta keys stay.
    sent = f"00-{client.context.trace_id:032x}-{client.context.span_id:016x}-{int(client.context.trace_flags):02x}"
    assert params["_meta"] == {"progressToken": "mcpx-3", "traceparent": sent}


def test_an_upstream_call_that_times_out_says_timeout(spans: InMemorySpanExporter) -> None:
    span = tracing.client_span("up", "http", None, "resources/read", 1, {"uri": "file:///a"})
    tracing.end_client(span, None, TimeoutError())
    done = _only(spans)
    assert done.name == "resources/read" and (done.attributes or {})["mcp.resource.uri"] == "file:///a"
    assert (done.attributes or {})["error.type"] == "timeout" and done.status.status_code == StatusCode.ERROR


@pytest.mark.parametrize(
    ("env", "enabled", "on"),
    [
        ({}, False, False),
        ({}, True, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, False, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, False, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, True, False),
    ],
    ids=["off", "config", "endpoint-env", "traces-endpoint-env", "sdk-disabled"],
)
def test_tracing_is_on_only_when_configured(env: dict[str, str], enabled: bool, on: bool) -> None:
    assert tracing.wanted(TracesConfig(enabled=enabled), env) is on


def test_off_means_no_tracer() -> None:
    assert tracing.tracer is None  # nothing turned it on in this process: every hook is skipped


@pytest.mark.anyio
async def test_waiting_for_an_answer_is_a_span_under_the_request(spans: InMemorySpanExporter) -> None:
    from mcpx.telemetry import waits

    class Asker:
        @waits.traced_wait(waits.question)
        async def ask(self, ctx: RequestContext, method: str, params: dict[str, Any], server: str) -> dict[str, Any]:
            return {"action": "accept"}

    ctx = _ctx()
    traced = tracing.server_span(ctx, _msg("tools/call", {"name": "up__ask"}), None)
    assert await Asker().ask(ctx, "elicitation/create", {}, "up") == {"action": "accept"}
    traced.end(jsonrpc.result(7, {}))
    question, server = spans.get_finished_spans()
    assert question.name == "mcpx.question elicitation/create"
    assert question.parent is not None and question.parent.span_id == server.context.span_id
    assert (question.attributes or {})["mcpx.upstream"] == "up"


@pytest.mark.anyio
async def test_off_a_decorated_wait_makes_no_span() -> None:
    from mcpx.telemetry import waits

    @waits.traced_wait(waits.mrtr_round)
    async def ask_round(_self: object, ctx: RequestContext, requests: dict[str, Any], server: str) -> int:
        return len(requests)

    assert tracing.tracer is None
    assert await ask_round(None, _ctx(), {"a": 1}, "up") == 1
