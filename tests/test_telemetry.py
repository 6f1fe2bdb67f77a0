"""Telemetry against real daemons (docs/telemetry.md).

Traces: a daemon started with OTEL_EXPORTER_OTLP_ENDPOINT exports over OTLP/HTTP to a receiver in
this test (protobufs decoded with opentelemetry-proto); a host call to a real HTTP upstream is one
trace, host span -> mcpx's SERVER span -> its CLIENT span, and the upstream receives that trace in
`traceparent` (header and `params._meta`). Metrics: after a scripted run, /metrics (parsed with
prometheus_client's parser) counts exactly the calls, tasks and operator answers made; it needs the
API token unless `metrics.public`."""

from __future__ import annotations

import secrets
import threading
from typing import Any

import httpx
import otlp_receiver
import pytest
from harness import Api, conformance_server, operator_attached, read_jsonl, reply_of, wait_until
from prometheus_client.parser import text_string_to_metric_families

SERVER, CLIENT = 2, 3  # opentelemetry.proto.trace.v1.Span.SpanKind


def _traceparent(trace_id: str, span_id: str) -> str:
    return f"00-{trace_id}-{span_id}-01"


def _received_traceparents(log: Any) -> list[tuple[str | None, str | None]]:
    """(HTTP header, params._meta) traceparent of each tools/call the fixture upstream received."""
    out = []
    for entry in read_jsonl(log):
        msg = entry.get("msg") or {}
        if entry.get("event") == "recv" and msg.get("method") == "tools/call":
            meta = (msg.get("params") or {}).get("_meta") or {}
            out.append((entry.get("headers", {}).get("traceparent"), meta.get("traceparent")))
    return out


def _one_trace(otlp: otlp_receiver.Receiver, trace_id: str, host_span: str, log: Any) -> None:
    """The spans of `trace_id`: mcpx's SERVER span under the host's, its CLIENT span under that, and
    the upstream got the CLIENT span's context."""
    spans = wait_until(
        lambda: (s := otlp.of_trace(trace_id)) and any(x.kind == CLIENT for x in s) and s, 15, "exported spans"
    )
    [server] = [s for s in spans if s.kind == SERVER]
    [client] = [s for s in spans if s.kind == CLIENT]
    assert server.parent_span_id == host_span, server
    assert client.parent_span_id == server.span_id, (client, server)
    assert server.name == "tools/call up__echo" and client.name == "tools/call echo"
    assert server.attributes["mcp.method.name"] == "tools/call"
    assert server.attributes["gen_ai.tool.name"] == "up__echo"
    assert server.attributes["gen_ai.operation.name"] == "execute_tool"
    assert server.attributes["network.transport"] == "tcp"
    assert client.attributes["gen_ai.tool.name"] == "echo" and client.attributes["mcpx.upstream"] == "up"
    assert server.service == "mcpx"
    # Version, trace id and parent id (the flags byte may carry the SDK's random-id bit as well).
    expected = _traceparent(trace_id, client.span_id)[:-3]
    got = [(h[:-3], m[:-3]) for h, m in _received_traceparents(log) if h and m]
    assert (expected, expected) in got, _received_traceparents(log)


def test_a_host_call_through_mcpx_to_an_http_upstream_is_one_trace(
    start_daemon: Any, fixture_http: Any, raw_host: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with otlp_receiver.running() as otlp:
        up = fixture_http()
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.url)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # ms: the batch leaves at once
        daemon = start_daemon({"mcpServers": {"up": {"url": up.url}}, "metrics": {"public": True}})
        host = raw_host(daemon.url)
        echo = {"name": "up__echo", "arguments": {"text": "hi"}}

        # A 2026 host puts its trace context in params._meta (the MCP convention).
        trace_id, host_span = secrets.token_hex(16), secrets.token_hex(8)
        reply = reply_of(host.modern("tools/call", echo, meta={"traceparent": _traceparent(trace_id, host_span)}))
        assert "result" in reply, reply
        _one_trace(otlp, trace_id, host_span, up.log)

        # A 2025 session's host sends it as an HTTP header.
        host.initialize()
        trace_id, host_span = secrets.token_hex(16), secrets.token_hex(8)
        resp = host.legacy("tools/call", echo, headers={"traceparent": _traceparent(trace_id, host_span)})
        assert "result" in reply_of(resp), resp.text
        _one_trace(otlp, trace_id, host_span, up.log)
        assert otlp.paths and set(otlp.paths) == {"/v1/traces"}

        # metrics.public: a scraper without the token is served.
        scraped = httpx.get(f"http://127.0.0.1:{daemon.port}/metrics", timeout=5)
        assert scraped.status_code == 200, scraped.text
        samples = _samples(scraped.text)
        assert _v(samples, "mcpx_tool_calls_total", **_call("up", "echo", "legacy", "ok")) == 1
        assert _v(samples, "mcpx_tool_calls_total", **_call("up", "echo", "modern", "ok")) == 1


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _samples(text: str) -> Samples:
    """Every sample of a Prometheus exposition, keyed by name and labels."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def _v(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def _total(samples: Samples, name: str) -> float:
    return sum(v for (n, _), v in samples.items() if n == name)


def _call(upstream: str, tool: str, era: str, outcome: str) -> dict[str, str]:
    return {"upstream": upstream, "tool": tool, "era": era, "outcome": outcome}


N_CALLS, M_TASKS, K_ANSWERS = 5, 3, 2
ANSWER = {"username": "ada", "email": "ada@example.com"}


def test_metrics_count_a_scripted_run_and_need_the_token(start_daemon: Any, raw_host: Any) -> None:
    up = conformance_server(also_tasks=("test_simple_text",))
    daemon = start_daemon({"mcpServers": {"up": up}})
    url = f"http://127.0.0.1:{daemon.port}/metrics"
    assert httpx.get(url, timeout=5).status_code == 401
    assert httpx.get(url, headers={"Authorization": "Bearer wrong"}, timeout=5).status_code == 401

    host = raw_host(daemon.url)
    host.initialize()
    for _ in range(N_CALLS):
        assert "result" in reply_of(host.legacy("tools/call", {"name": "test_simple_text"}))
    tasks = []
    for _ in range(M_TASKS):
        res = reply_of(host.legacy("tools/call", {"name": "test_simple_text", "task": {}}))
        tasks.append(res["result"]["task"]["taskId"])
    for tid in tasks:
        assert "result" in reply_of(host.legacy("tasks/result", {"taskId": tid}))
    feed = operator_attached(daemon, "olga")
    try:
        with Api(daemon) as api:
            for i in range(K_ANSWERS):
                message = f"question {i}?"
                replies: list[Any] = []
                call = {"name": "test_elicitation", "arguments": {"message": message}}
                t = threading.Thread(target=lambda c=call, r=replies: r.append(host.legacy("tools/call", c)))
                t.start()
                [q] = wait_until(
                    lambda m=message: [q for q in api.open_questions() if q["params"].get("message") == m], 15
                )
                assert api.answer(q["id"], "accept", by="olga", content=ANSWER).status_code == 200
                t.join(15)
                assert "result" in reply_of(replies[0])
    finally:
        feed.close()

    def scraped() -> Samples:
        resp = httpx.get(url, headers={"Authorization": f"Bearer {daemon.token}"}, timeout=5)
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
        return _samples(resp.text)

    # The bus-fed counts arrive just after the replies: wait for the last of them (M tasks, K listed calls).
    def settled() -> Samples | None:
        s = scraped()
        ended = s.get(("mcpx_tasks_ended_total", frozenset({"kind": "task", "status": "completed"}.items())))
        return s if ended == M_TASKS and _v(s, "mcpx_questions_open") == 0 else None

    try:
        s = wait_until(settled, 10)
    except AssertionError:
        raise AssertionError(
            sorted((n, dict(lb), v) for (n, lb), v in scraped().items() if n.startswith("mcpx_t"))
        ) from None
    assert _v(s, "mcpx_tool_calls_total", **_call("up", "test_simple_text", "legacy", "ok")) == N_CALLS
    assert _v(s, "mcpx_tool_calls_total", **_call("up", "test_simple_text", "legacy", "task")) == M_TASKS
    assert _v(s, "mcpx_tool_calls_total", **_call("up", "test_elicitation", "legacy", "ok")) == K_ANSWERS
    assert _total(s, "mcpx_tool_calls_total") == N_CALLS + M_TASKS + K_ANSWERS
    assert _v(s, "mcpx_tool_call_duration_seconds_count", **_call("up", "test_simple_text", "legacy", "ok")) == N_CALLS
    assert _v(s, "mcpx_tasks_created_total", kind="task") == M_TASKS
    assert _v(s, "mcpx_tasks_ended_total", kind="task", status="completed") == M_TASKS
    # A plain call that asks is listed at once (kind call), and ends with its call.
    assert _v(s, "mcpx_tasks_created_total", kind="call") == K_ANSWERS
    assert _v(s, "mcpx_tasks_ended_total", kind="call", status="completed") == K_ANSWERS
    assert _v(s, "mcpx_question_answers_total", by="operator") == K_ANSWERS
    assert _total(s, "mcpx_questions_opened_total") == K_ANSWERS
    assert _v(s, "mcpx_question_wait_seconds_count", outcome="answered") == K_ANSWERS
    assert _v(s, "mcpx_questions_open") == 0
    assert _v(s, "mcpx_upstream_state", upstream="up", state="ready") == 1
    assert _v(s, "mcpx_upstream_restarts_total", upstream="up") == 0
    assert _total(s, "mcpx_store_commit_duration_seconds_count") > 0
    assert _v(s, "process_resident_memory_bytes") > 0
    assert not any(tid in value for _, labels in s for _, value in labels for tid in tasks)  # no ids as labels
