"""mcpx/ratelimit.py: the per-connection request budget behind connections.maxRequestsPerSecond."""

from __future__ import annotations

import pytest

from mcpx.host.ratelimit import TokenBucket, refusal


def test_a_burst_passes_then_requests_wait_for_the_rate() -> None:
    bucket = TokenBucket(rate=10, burst=3, now=100.0)
    assert [bucket.take(100.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take(100.0) == pytest.approx(0.1)  # one token comes back every 1/10 s
    assert bucket.take(100.05) == pytest.approx(0.05)
    assert bucket.take(100.1) == 0.0


def test_an_idle_connection_refills_only_up_to_the_burst() -> None:
    bucket = TokenBucket(rate=100, burst=2, now=0.0)
    bucket.take(0.0)
    bucket.take(0.0)
    assert bucket.take(3600.0) == 0.0 and bucket.take(3600.0) == 0.0
    assert bucket.take(3600.0) > 0


def test_the_refusal_names_the_limit_and_says_when_to_retry() -> None:
    err = refusal(50, 0.02)
    assert err.http_status == 429 and err.code == -32600
    assert err.message.startswith("mcpx limit connections.maxRequestsPerSecond (50) reached")
    assert "retry in 0.020 s" in err.message
