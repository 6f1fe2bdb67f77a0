"""When a webhook delivery is tried again (pure): which failures are worth a retry, and after how long."""

from __future__ import annotations

ATTEMPTS = 4  # the first try and three retries, then the event is given up for this sink (counted)
FIRST_DELAY_S = 0.5
MAX_DELAY_S = 8.0


def retryable_status(status: int) -> bool:
    """5xx and 429 may pass; any other failure (a 4xx, a redirect) will not change by sending the same body again."""
    return status == 429 or status >= 500


def delays(attempts: int = ATTEMPTS, first: float = FIRST_DELAY_S, cap: float = MAX_DELAY_S) -> list[float]:
    """The waits before each retry: doubling from `first`, at most `cap` (attempts - 1 of them)."""
    return [min(first * 2**i, cap) for i in range(max(attempts - 1, 0))]
