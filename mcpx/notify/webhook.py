"""A webhook sink: POST the event's JSON, signed (signing.py), retried on the schedule of backoff.py."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import anyio
import httpx

from . import backoff, signing
from .outbox import SinkStats
from .payload import Undelivered

ATTEMPT_TIMEOUT_S = 10.0  # per attempt: a receiver that hangs holds only its own sink's queue


class Webhook:
    kind = "webhook"

    def __init__(
        self,
        url: str,
        secret: str,
        client: httpx.AsyncClient,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        delays: list[float] | None = None,
        timeout_s: float = ATTEMPT_TIMEOUT_S,
    ) -> None:
        self.url = url
        self._secret = secret
        self._client = client
        self._clock = clock
        self._sleep = sleep
        self._delays = backoff.delays() if delays is None else delays
        self._timeout = timeout_s

    @property
    def target(self) -> str:
        """Where it goes, for /v1/status: scheme and host only (a webhook's path often is its secret)."""
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}"

    async def deliver(self, body: bytes, stats: SinkStats) -> None:
        """Returns once the receiver answered 2xx; raises Undelivered after the last attempt."""
        waits = iter(self._delays)
        while True:
            error = await self._attempt(body)
            if error is None:
                return
            retry, message = error
            delay = next(waits, None) if retry else None
            if delay is None:
                raise Undelivered(message)
            stats.retries += 1
            stats.last_error, stats.last_error_ms = message, int(self._clock() * 1000)
            await self._sleep(delay)

    async def _attempt(self, body: bytes) -> tuple[bool, str] | None:
        """None when delivered, else (worth retrying, what went wrong)."""
        # Signed at each attempt: the timestamp says when this request was sent.
        headers = {"Content-Type": "application/json", **signing.headers(self._secret, int(self._clock()), body)}
        try:
            resp = await self._client.post(self.url, content=body, headers=headers, timeout=self._timeout)
        except httpx.TimeoutException:
            return True, f"no answer within {self._timeout:g} s"
        except httpx.HTTPError as exc:
            return True, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if 200 <= resp.status_code < 300:
            return None
        return backoff.retryable_status(resp.status_code), f"HTTP {resp.status_code} from the receiver"
