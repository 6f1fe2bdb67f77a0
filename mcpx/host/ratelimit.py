"""Requests per second per host connection (`connections.maxRequestsPerSecond`): a token bucket,
pure (the caller passes the clock), so a runaway host loop cannot starve the others."""

from __future__ import annotations

from ..protocol.errors import LimitReached

LIMIT = "connections.maxRequestsPerSecond"


class TokenBucket:
    """`rate` tokens a second, holding at most `burst`; each request takes one."""

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.at = now

    def take(self, now: float) -> float:
        """0 when the request may go; otherwise the seconds until a token is there."""
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1 - 1e-9:  # float drift must not refuse a request that is on time
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate


class RateLimited(LimitReached):
    """A request over its connection's rate; `retry_after_s` is when the next one may go."""

    def __init__(self, rate: float, wait_s: float) -> None:
        super().__init__(LIMIT, int(rate), f"this connection sends faster; retry in {wait_s:.3f} s", http_status=429)
        self.retry_after_s = wait_s


def refusal(rate: float, wait_s: float) -> RateLimited:
    return RateLimited(rate, wait_s)
