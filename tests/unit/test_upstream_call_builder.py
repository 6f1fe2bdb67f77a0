"""mcpx.host.upstream_call.build: what goes upstream for a host request, per host and upstream era."""

from __future__ import annotations

from typing import Any

import pytest

from mcpx.host.connection import HostConnection, RequestContext
from mcpx.host.upstream_call import build, retry_params, stripped
from mcpx.protocol import request_state
from mcpx.protocol.errors import InvalidParams
from mcpx.protocol.revisions import Era
from mcpx.upstream.session import RELAYED_CLIENT_CAPS

KEY = b"k" * 32
NOW = 1_700_000_000_000
CAPS = {"elicitation": {}, "sampling": {}, "experimental": {"x": {}}}
CALL = {"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": "p1"}}


async def _send(msg: dict[str, Any]) -> None:  # pragma: no cover - never called
    pass


def ctx(era: Era, *, stream: bool = True, level: str | None = None) -> RequestContext:
    conn = HostConnection("http")
    conn.log_level = "warning"
    revision = "2026-07-28" if era == "modern" else "2025-11-25"
    return RequestContext(conn, era, revision, dict(CAPS), {}, level, _send if stream else None)


def test_mcpx_own_keys_never_go_upstream_as_they_came() -> None:
    params = {**CALL, "task": {"ttl": 5}, "inputResponses": {}, "requestState": "s"}
    assert stripped(params) == CALL


def test_a_2026_host_calling_a_2026_upstream_relays_only_its_own_relayable_capabilities() -> None:
    req = build(ctx("modern"), "modern", "tools/call", CALL, key=KEY, raw_state=False, now=NOW)
    assert req.mrtr and req.client_caps == {"elicitation": {}, "sampling": {}}
    assert req.params == CALL  # the progress token rides along in _meta (the session maps it)


def test_a_2025_host_with_a_stream_gets_everything_mcpx_relays_declared_upstream() -> None:
    req = build(ctx("legacy"), "modern", "tools/call", CALL, key=KEY, raw_state=False, now=NOW)
    assert req.mrtr and req.client_caps == RELAYED_CLIENT_CAPS


def test_a_2025_host_without_a_stream_cannot_answer_rounds() -> None:
    req = build(ctx("legacy", stream=False), "modern", "tools/call", CALL, key=KEY, raw_state=False, now=NOW)
    assert not req.mrtr and req.client_caps == {}


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_2025_upstream_gets_no_mrtr_and_no_relayed_capabilities(era: Era) -> None:
    req = build(ctx(era), "legacy", "tools/call", CALL, key=KEY, raw_state=False, now=NOW)
    assert not req.mrtr and req.client_caps == {}


def test_only_calls_that_may_answer_input_required_run_mrtr() -> None:
    req = build(ctx("modern"), "modern", "completion/complete", {"ref": {}}, key=KEY, raw_state=False, now=NOW)
    assert not req.mrtr


def test_the_log_level_is_the_requests_for_2026_and_the_sessions_for_2025() -> None:
    modern = build(ctx("modern", level="debug"), "modern", "tools/call", CALL, key=KEY, raw_state=False, now=NOW)
    legacy = build(ctx("legacy", level="debug"), "modern", "tools/call", CALL, key=KEY, raw_state=False, now=NOW)
    assert (modern.log_level, legacy.log_level) == ("debug", "warning")


def test_a_2026_retry_has_mcpxs_signed_state_replaced_by_the_upstreams_own() -> None:
    host = ctx("modern")
    bound = request_state.binding("tools/call", CALL, host.conn.record_id)
    signed = request_state.wrap(KEY, {"up": 1}, bound, 3, NOW, nonce="n")
    params = {**CALL, "inputResponses": {"q": {"action": "accept"}}, "requestState": signed}
    req = build(host, "modern", "tools/call", params, key=KEY, raw_state=False, now=NOW)
    assert req.params["requestState"] == {"up": 1} and req.params["inputResponses"] == {"q": {"action": "accept"}}
    assert req.round_ == 3 and req.bound == bound


def test_a_raw_state_passes_through_unopened() -> None:
    params = {**CALL, "requestState": "upstream-own"}
    req = build(ctx("modern"), "modern", "tools/call", params, key=KEY, raw_state=True, now=NOW)
    assert req.params["requestState"] == "upstream-own" and req.round_ == 0


def test_a_signed_state_for_another_call_is_refused() -> None:
    host = ctx("modern")
    bound = request_state.binding("tools/call", {"name": "other"}, host.conn.record_id)
    signed = request_state.wrap(KEY, None, bound, 0, NOW, nonce="n")
    with pytest.raises(InvalidParams, match="different request"):
        build(host, "modern", "tools/call", {**CALL, "requestState": signed}, key=KEY, raw_state=False, now=NOW)


def test_a_signed_state_issued_to_another_host_is_refused() -> None:
    issued_to = ctx("modern")
    signed = request_state.wrap(
        KEY, None, request_state.binding("tools/call", CALL, issued_to.conn.record_id), 0, NOW, nonce="n"
    )
    with pytest.raises(InvalidParams, match="different request"):
        build(
            ctx("modern"), "modern", "tools/call", {**CALL, "requestState": signed}, key=KEY, raw_state=False, now=NOW
        )


def test_an_expired_signed_state_is_refused_at_now() -> None:
    host = ctx("modern")
    signed = request_state.wrap(
        KEY, None, request_state.binding("tools/call", CALL, host.conn.record_id), 0, NOW, nonce="n"
    )
    later = NOW + request_state.LIFETIME_MS + 1
    with pytest.raises(InvalidParams, match="expired"):
        build(host, "modern", "tools/call", {**CALL, "requestState": signed}, key=KEY, raw_state=False, now=later)


def test_a_2025_hosts_state_keys_are_not_forwarded() -> None:
    params = {**CALL, "inputResponses": {"q": {}}, "requestState": "x"}
    req = build(ctx("legacy"), "modern", "tools/call", params, key=KEY, raw_state=False, now=NOW)
    assert req.params == CALL


def test_a_retry_repeats_the_params_with_the_answers_and_the_upstreams_state() -> None:
    first = {**CALL, "inputResponses": {"old": {}}, "requestState": "old"}
    retry = retry_params(first, {"resultType": "input_required", "requestState": "s2"}, {"q": {"action": "accept"}})
    assert retry == {**CALL, "inputResponses": {"q": {"action": "accept"}}, "requestState": "s2"}
    assert "requestState" not in retry_params(CALL, {"resultType": "input_required"}, {})


def test_a_2026_retry_gets_the_defaults_the_signed_round_carries_for_its_form_questions() -> None:
    host = ctx("modern")
    bound = request_state.binding("tools/call", CALL, host.conn.record_id)
    defaults = {"q": {"name": "John Doe", "age": 30}, "other": {"x": 1}}
    signed = request_state.wrap(KEY, None, bound, 0, NOW, nonce="n", defaults=defaults)
    responses = {"q": {"action": "accept", "content": {"age": 41}}, "other": {"action": "decline"}}
    params = {**CALL, "inputResponses": responses, "requestState": signed}
    req = build(host, "modern", "tools/call", params, key=KEY, raw_state=False, now=NOW)
    assert req.params["inputResponses"] == {
        "q": {"action": "accept", "content": {"name": "John Doe", "age": 41}},
        "other": {"action": "decline"},
    }
    assert params["inputResponses"] == responses  # the host's own params are not changed in place
