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

ATTEMPT_TIMEOUT_S = 10.0  # per attempt, all of it: a receiver that hangs holds only its own sink's queue
RESPONSE_CAP = 64 * 1024  # bytes of an answer's body read at most (only its status matters)


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
        """None when delivered, else (worth retrying, what went wrong). One deadline covers the whole
        attempt (connecting, sending, the answer's head and what is read of its body): a receiver that
        trickles its answer a byte at a time is cut at the deadline as one that hangs is."""
        # Signed at each attempt: the timestamp says when this request was sent.
        headers = {"Content-Type": "application/json", **signing.headers(self._secret, int(self._clock()), body)}
        status: int | None = None
        try:
            with anyio.fail_after(self._timeout):
                async with self._client.stream(
                    "POST", self.url, content=body, headers=headers, timeout=self._timeout
                ) as resp:
                    status = resp.status_code
                    await _drain(resp)
        except (TimeoutError, httpx.TimeoutException):
            if status is None:  # once the status came, what follows of the body does not matter
                return True, f"no answer within {self._timeout:g} s"
        except httpx.HTTPError as exc:
            if status is None:
                return True, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        assert status is not None
        if 200 <= status < 300:
            return None
        return backoff.retryable_status(status), f"HTTP {status} from the receiver"


async def _drain(resp: httpx.Response) -> None:
    """Read (and drop) the answer's body up to RESPONSE_CAP, so its connection can serve the next
    delivery; a longer one is left unread and its connection closed. Nothing of it is kept."""
    read = 0
    async for chunk in resp.aiter_raw():  # raw: a compressed body is not inflated to count it
        read += len(chunk)
        if read > RESPONSE_CAP:
            return
