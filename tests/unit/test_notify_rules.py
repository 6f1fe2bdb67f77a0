"""mcpx.notify's pure rules: the webhook signature, the retry schedule, the payload's shape, and
the bounded outbox that drops its oldest event when full (counted)."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from mcpx.events.bus import Event, StoredEvent
from mcpx.notify import backoff, signing
from mcpx.notify.outbox import Outbox
from mcpx.notify.payload import body

SECRET = "s3cret-s3cret-s3cret"


def stored(seq: int) -> StoredEvent:
    return StoredEvent(seq, 1_700_000_000_000 + seq, Event("question.opened", {"id": "q1"}, "t1", "c1", "q1", "mcpx"))


# ---- signing -----------------------------------------------------------------------------------


def test_the_signature_is_hmac_sha256_over_timestamp_dot_body() -> None:
    expected = hmac.new(SECRET.encode(), b"1700000000.{}", hashlib.sha256).hexdigest()
    assert signing.signature(SECRET, 1700000000, b"{}") == expected
    assert signing.headers(SECRET, 1700000000, b"{}") == {
        "X-Mcpx-Timestamp": "1700000000",
        "X-Mcpx-Signature": f"v1={expected}",
    }


def test_verify_accepts_the_signed_body_and_refuses_any_change() -> None:
    h = signing.headers(SECRET, 1700000000, b'{"a":1}')
    ts, sig = h["X-Mcpx-Timestamp"], h["X-Mcpx-Signature"]
    assert signing.verify(SECRET, ts, sig, b'{"a":1}')
    assert not signing.verify(SECRET, ts, sig, b'{"a":2}')
    assert not signing.verify(SECRET, "1700000001", sig, b'{"a":1}')
    assert not signing.verify("another-secret-xx", ts, sig, b'{"a":1}')
    assert not signing.verify(SECRET, "soon", sig, b'{"a":1}')


# ---- backoff -----------------------------------------------------------------------------------


def test_retries_double_from_the_first_delay_up_to_the_cap() -> None:
    assert backoff.delays(4, first=0.5, cap=8) == [0.5, 1.0, 2.0]
    assert backoff.delays(7, first=1, cap=8) == [1, 2, 4, 8, 8, 8]
    assert backoff.delays(1) == []


@pytest.mark.parametrize(("status", "retry"), [(500, True), (503, True), (429, True), (400, False), (404, False)])
def test_only_5xx_and_429_are_retried(status: int, retry: bool) -> None:
    assert backoff.retryable_status(status) is retry


# ---- payload -----------------------------------------------------------------------------------


def test_the_payload_is_the_event_as_v1_events_shows_it() -> None:
    assert json.loads(body(stored(7))) == {
        "seq": 7,
        "ts": 1_700_000_000_007,
        "kind": "question.opened",
        "taskId": "t1",
        "connectionId": "c1",
        "questionId": "q1",
        "by": "mcpx",
        "data": {"id": "q1"},
    }


# ---- outbox ------------------------------------------------------------------------------------


def test_a_full_outbox_drops_its_oldest_event_and_counts_it() -> None:
    box = Outbox(max_len=3)
    for seq in range(1, 6):
        box.put(stored(seq))
    assert [e.seq for e in box.queue] == [3, 4, 5]
    assert box.stats.dropped == 2


@pytest.mark.anyio
async def test_an_outbox_hands_out_events_in_order() -> None:
    box = Outbox()
    box.put(stored(1))
    box.put(stored(2))
    assert [(await box.get()).seq, (await box.get()).seq] == [1, 2]
