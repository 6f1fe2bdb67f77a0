"""The daemon's Prometheus metrics (mcpx/telemetry/metrics.py): counts folded from events, call
outcomes, bounded labels, and /metrics' token rule (the ASGI endpoint, in process)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mcpx.events.bus import Event, StoredEvent
from mcpx.telemetry.metrics import OTHER, Metrics, answered_by, call_outcome
from mcpx.telemetry.metrics_endpoint import MetricsEndpoint

TOKEN = "t" * 32


def _metrics(tools: dict[str, tuple[str, str]] | None = None, tool_labels: int = 200) -> Metrics:
    known = tools or {}
    return Metrics(
        route_of=lambda name: known.get(name) if isinstance(name, str) else None,
        upstreams=lambda: [("up", "ready", 2)],
        feed_subscribers=lambda: 3,
        tool_labels=tool_labels,
    )


def _value(m: Metrics, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(generate_latest(m.registry).decode()):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    raise KeyError((name, labels))


_seq = iter(range(1, 10_000))


def _ev(kind: Any, data: dict[str, Any], ts: int = 1000, **ids: Any) -> StoredEvent:
    return StoredEvent(next(_seq), ts, Event(kind, data, **ids))


@pytest.mark.parametrize(
    ("frame", "outcome"),
    [
        ({"result": {"content": []}}, "ok"),
        ({"result": {"content": [], "isError": True}}, "tool_error"),
        ({"error": {"code": -32602, "message": "x"}}, "error"),
        ({"result": {"task": {"taskId": "t"}}}, "task"),
        ({"result": {"resultType": "task", "taskId": "t"}}, "task"),
        ({"result": {"resultType": "input_required", "inputRequests": {}}}, "input_required"),
        (None, "cancelled"),
    ],
)
def test_a_call_outcome_is_read_from_its_reply(frame: dict[str, Any] | None, outcome: str) -> None:
    assert call_outcome(frame) == outcome


def test_calls_are_counted_and_timed_by_upstream_tool_era_and_outcome() -> None:
    m = _metrics({"up__echo": ("up", "echo")})
    m.observe_call("up__echo", "legacy", {"result": {}}, 0.002)
    m.observe_call("up__echo", "legacy", {"result": {}}, 0.004)
    m.observe_call("up__echo", "modern", {"error": {"code": 1}}, 0.1)
    labels = {"upstream": "up", "tool": "echo", "era": "legacy", "outcome": "ok"}
    assert _value(m, "mcpx_tool_calls_total", **labels) == 2
    assert _value(m, "mcpx_tool_call_duration_seconds_count", **labels) == 2
    assert _value(m, "mcpx_tool_call_duration_seconds_sum", **labels) == pytest.approx(0.006)
    assert _value(m, "mcpx_tool_calls_total", upstream="up", tool="echo", era="modern", outcome="error") == 1


def test_tool_labels_stay_bounded() -> None:
    m = _metrics({f"up__t{i}": ("up", f"t{i}") for i in range(5)}, tool_labels=2)
    for i in range(5):
        m.observe_call(f"up__t{i}", "legacy", {"result": {}}, 0.001)
    m.observe_call("made-up-by-a-host", "legacy", {"error": {"code": -32602}}, 0.001)
    base = {"era": "legacy", "outcome": "ok", "upstream": "up"}
    assert _value(m, "mcpx_tool_calls_total", tool="t0", **base) == 1
    assert _value(m, "mcpx_tool_calls_total", tool="t1", **base) == 1
    assert _value(m, "mcpx_tool_calls_total", tool=OTHER, **base) == 3
    assert _value(m, "mcpx_tool_calls_total", upstream="unknown", tool=OTHER, era="legacy", outcome="error") == 1


def test_tasks_are_counted_from_their_events() -> None:
    m = _metrics()
    m.count(_ev("task.created", {"kind": "task", "status": "working"}, task_id="a"))
    m.count(_ev("task.created", {"kind": "call", "status": "working"}, task_id="b"))
    m.count(_ev("task.status", {"status": "input_required", "previous": "working"}, task_id="a"))
    assert _value(m, "mcpx_tasks_open", kind="task", status="input_required") == 1
    m.count(_ev("task.status", {"status": "input_required", "previous": "input_required"}, task_id="a"))
    m.count(_ev("task.status", {"status": "completed", "previous": "input_required"}, task_id="a"))
    m.count(_ev("task.status", {"status": "cancelled", "previous": "working"}, task_id="b"))
    m.count(_ev("task.expired", {}, task_id="a"))
    assert _value(m, "mcpx_tasks_created_total", kind="task") == 1
    assert _value(m, "mcpx_tasks_created_total", kind="call") == 1
    assert _value(m, "mcpx_tasks_ended_total", kind="task", status="completed") == 1
    assert _value(m, "mcpx_tasks_ended_total", kind="call", status="cancelled") == 1
    assert _value(m, "mcpx_tasks_expired_total") == 1
    with pytest.raises(KeyError):
        _value(m, "mcpx_tasks_open", kind="task", status="input_required")  # none open any more


def test_questions_open_wait_and_who_answered() -> None:
    m = _metrics()
    m.count(_ev("question.opened", {"method": "elicitation/create"}, ts=1000, question_id="q1"))
    m.count(_ev("question.opened", {"method": "elicitation/create"}, ts=1000, question_id="q2"))
    m.count(_ev("question.opened", {"method": "sampling/createMessage"}, ts=1000, question_id="q3"))
    assert _value(m, "mcpx_questions_open") == 3
    m.count(_ev("question.answered", {"by": "operator:olga"}, ts=3500, question_id="q1", by="operator:olga"))
    m.count(_ev("question.answered", {"by": "host:c1"}, ts=1500, question_id="q2", by="host:c1"))
    m.count(_ev("question.expired", {"reason": "x"}, ts=61_000, question_id="q3", by="mcpx"))
    assert _value(m, "mcpx_questions_open") == 0
    assert _value(m, "mcpx_questions_opened_total", method="elicitation/create") == 2
    assert _value(m, "mcpx_question_answers_total", by="operator") == 1
    assert _value(m, "mcpx_question_answers_total", by="host") == 1
    assert _value(m, "mcpx_question_wait_seconds_count", outcome="answered") == 2
    assert _value(m, "mcpx_question_wait_seconds_sum", outcome="answered") == pytest.approx(3.0)
    assert _value(m, "mcpx_question_wait_seconds_sum", outcome="expired") == pytest.approx(60.0)


def test_who_answered_is_a_bounded_label() -> None:
    assert [answered_by(b) for b in ("operator:olga@link", "host:c", "mcpx", None, "x:y")] == [
        "operator",
        "host",
        "mcpx",
        OTHER,
        OTHER,
    ]


def test_live_state_is_read_at_scrape_time() -> None:
    m = _metrics()
    m.observe_commit(0.003)
    assert _value(m, "mcpx_upstream_state", upstream="up", state="ready") == 1
    assert _value(m, "mcpx_upstream_state", upstream="up", state="down") == 0
    assert _value(m, "mcpx_upstream_restarts_total", upstream="up") == 2
    assert _value(m, "mcpx_feed_subscribers") == 3
    assert _value(m, "mcpx_store_commit_duration_seconds_count") == 1


def test_two_daemons_in_one_process_keep_their_own_counts() -> None:
    a, b = _metrics({"x": ("up", "x")}), _metrics({"x": ("up", "x")})
    a.observe_call("x", "legacy", {"result": {}}, 0.001)
    with pytest.raises(KeyError):
        _value(b, "mcpx_tool_calls_total", upstream="up", tool="x", era="legacy", outcome="ok")


async def _get(endpoint: MetricsEndpoint, headers: dict[str, str] | None = None) -> httpx.Response:
    transport = httpx.ASGITransport(app=endpoint)  # type: ignore[arg-type]  # raw ASGI callable
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        return await client.get("/metrics", headers=headers or {})


@pytest.mark.anyio
async def test_metrics_need_the_api_token() -> None:
    endpoint = MetricsEndpoint(_metrics().registry, TOKEN, public=False, allowed_origins=[])
    assert (await _get(endpoint)).status_code == 401
    assert (await _get(endpoint, {"Authorization": "Bearer nope"})).status_code == 401
    ok = await _get(endpoint, {"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200 and "mcpx_feed_subscribers 3.0" in ok.text


@pytest.mark.anyio
async def test_public_metrics_need_no_token_but_refuse_a_foreign_page() -> None:
    endpoint = MetricsEndpoint(_metrics().registry, TOKEN, public=True, allowed_origins=[])
    assert (await _get(endpoint)).status_code == 200
    assert (await _get(endpoint, {"Origin": "https://evil.example"})).status_code == 403
