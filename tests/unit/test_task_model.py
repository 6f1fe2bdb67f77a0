"""The task record's transitions and wire shapes, and mcpx's signed MRTR requestState. Pure."""

from __future__ import annotations

import pytest
from wire_schema import check_definition

from mcpx.protocol import request_state
from mcpx.protocol.errors import InvalidParams
from mcpx.protocol.task_wire import legacy_task, modern_task
from mcpx.records.task import (
    CANCELLED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    WORKING,
    Task,
    TransitionError,
    legacy_status_for_result,
    new_task_id,
)


def _task(status: str = WORKING, **kw: object) -> Task:
    return Task(
        new_task_id(), status, 1_700_000_000_000, 1_700_000_000_000, 60_000, 1000, "conn:x", "up", "tool", {}, **kw
    )  # type: ignore[arg-type]  # a test-chosen status and fields


@pytest.mark.parametrize("status", [INPUT_REQUIRED, COMPLETED, FAILED, CANCELLED])
def test_working_may_move_to_any_other_status(status: str) -> None:
    assert _task().move(status, 1).status == status


@pytest.mark.parametrize("terminal", [COMPLETED, FAILED, CANCELLED])
@pytest.mark.parametrize("target", [WORKING, INPUT_REQUIRED, COMPLETED, FAILED, CANCELLED])
def test_a_terminal_status_never_changes(terminal: str, target: str) -> None:
    with pytest.raises(TransitionError):
        _task(terminal).move(target, 1)


def test_leaving_input_required_drops_outstanding_requests() -> None:
    asked = _task(INPUT_REQUIRED, input_requests={"1-a": {"method": "elicitation/create", "params": {}}})
    assert asked.move(WORKING, 2).input_requests == {}


def test_task_ids_carry_at_least_128_random_bits() -> None:
    ids = {new_task_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(len(i) >= 22 for i in ids)  # 22 url-safe chars = 132 bits


def test_is_error_fails_a_legacy_task_but_completes_otherwise() -> None:
    assert legacy_status_for_result({"isError": True, "content": []}) == FAILED
    assert legacy_status_for_result({"content": []}) == COMPLETED


def test_legacy_shape_is_a_2025_task() -> None:
    wire = legacy_task(_task(status_message="busy"))
    check_definition(wire, "Task", "2025-11-25")
    assert wire["ttl"] == 60_000 and "ttlMs" not in wire and wire["createdAt"].endswith("Z")


def test_modern_shape_is_an_extension_task() -> None:
    wire = modern_task(_task())
    check_definition(wire, "ext-tasks:Task", "2026-07-28")
    assert wire["ttlMs"] == 60_000 and wire["pollIntervalMs"] == 1000 and "ttl" not in wire


KEY = b"k" * 32


def test_request_state_round_trips_the_upstream_state() -> None:
    bound = request_state.binding("tools/call", {"name": "t", "arguments": {"a": 1}}, "host-a")
    token = request_state.wrap(KEY, {"upstream": "opaque"}, bound, 1, now_ms=1000, nonce="n1")
    assert request_state.unwrap(KEY, token, bound, now_ms=2000) == request_state.Round({"upstream": "opaque"}, 1, "n1")


@pytest.mark.parametrize("mutate", [lambda t: t + "x", lambda t: "x" + t, lambda t: t.replace(".", "..")])
def test_tampered_request_state_is_refused(mutate: object) -> None:
    bound = request_state.binding("tools/call", {"name": "t"}, "host-a")
    token = request_state.wrap(KEY, None, bound, 1, now_ms=0, nonce="n")
    with pytest.raises(InvalidParams, match="integrity"):
        request_state.unwrap(KEY, mutate(token), bound, now_ms=0)  # type: ignore[operator]  # the parametrized lambdas take and return a str


def test_request_state_is_bound_to_its_call_and_host_expires_and_limits_rounds() -> None:
    bound = request_state.binding("tools/call", {"name": "t", "arguments": {"a": 1}}, "host-a")
    other = request_state.binding("tools/call", {"name": "t", "arguments": {"a": 2}}, "host-a")
    other_host = request_state.binding("tools/call", {"name": "t", "arguments": {"a": 1}}, "host-b")
    token = request_state.wrap(KEY, None, bound, 1, now_ms=0, nonce="n")
    with pytest.raises(InvalidParams, match="different request"):
        request_state.unwrap(KEY, token, other, now_ms=0)
    with pytest.raises(InvalidParams, match="different request"):
        request_state.unwrap(KEY, token, other_host, now_ms=0)
    with pytest.raises(InvalidParams, match="expired"):
        request_state.unwrap(KEY, token, bound, now_ms=request_state.LIFETIME_MS + 1)
    too_many = request_state.wrap(KEY, None, bound, request_state.MAX_ROUNDS, now_ms=0, nonce="n")
    with pytest.raises(InvalidParams, match="too many"):
        request_state.unwrap(KEY, too_many, bound, now_ms=0)
    with pytest.raises(InvalidParams):
        request_state.unwrap(b"other-key" * 4, token, bound, now_ms=0)
