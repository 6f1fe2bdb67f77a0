"""A server's progress, passed on at most once per `window_s`, the newest of each call kept.

A server that floods (40,000 progress notifications at full speed) would otherwise cost the keeper
a send and the daemon a wakeup for every few lines, and every other call's request and reply
would wait behind that work (bench/flood_latency.py). Progress that comes sooner than `window_s`
after the last progress passed on (of any call: one window for the server) is held, one line per
token (a newer line replaces the one held), and passed on when the window ends (the keeper's timer calls `flush`) or at once before any
other line, so nothing else is reordered and a call's progress still comes before its reply.

Only progress with a string token is held: mcpx gives its upstreams string tokens, one per call
(upstream/session.py); any other line passes at once, as it is. Pure: the caller owns the clock
and the timer.
"""

from __future__ import annotations

import orjson

from ...protocol.progress_batch import PROGRESS as METHOD

PROGRESS = f'"{METHOD}"'.encode()  # in a line's bytes: the cheap test before a parse
# 100 updates a second is more than any host shows; against 2 ms, the flooded daemon
# woke 5x less and another host's echo through the same server came 1.4-1.7x idle, not 1.7-2.3x.
WINDOW_S = 0.01


def progress_token(line: bytes) -> str | None:
    """The token of a progress notification whose token is a string, else None."""
    if PROGRESS not in line:
        return None
    try:
        msg = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(msg) is not dict or msg.get("method") != METHOD or "id" in msg:
        return None
    params = msg.get("params")
    token = params.get("progressToken") if type(params) is dict else None
    return token if type(token) is str else None


class ProgressHold:
    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._held: dict[str, bytes] = {}  # token -> its newest line not passed on yet
        self._passed_at = float("-inf")  # when progress was last passed on

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def take(self, lines: list[bytes], now: float) -> list[bytes]:
        """The lines to pass on now, in order; the rest is held for `flush`."""
        out: list[bytes] = []
        for line in lines:
            token = progress_token(line)
            if token is None:
                out += self._held.values()  # what was held goes first: no line overtakes another
                self._held.clear()
                out.append(line)
            elif not self._held and now - self._passed_at >= self.window_s:
                out.append(line)
                self._passed_at = now
            else:
                self._held[token] = line
        return out

    def flush(self, now: float) -> list[bytes]:
        """What is held, to pass on now (the window ended, or the server did)."""
        out = list(self._held.values())
        self._held.clear()
        if out:
            self._passed_at = now
        return out
