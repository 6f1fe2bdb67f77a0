"""Server-sent events as an MCP upstream sends them: JSON payloads, and the cursor to resume from.

A 2025-11-25 server may prime a stream with an event that has an id and empty data, close the
connection, and expect the client to GET the stream again with `Last-Event-ID` after its `retry`
hint (transports.mdx "Resumability and Redelivery"). The cursor keeps both; a priming event has no
payload, so it yields nothing (it is not a malformed event).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from ...protocol import fastjson
from .h1 import MAX_LINE_BYTES, ConnectionFailed

log = logging.getLogger("mcpx.upstream")
MAX_EVENT_BYTES = MAX_LINE_BYTES  # one event's data lines together: a server cannot grow one forever


class Lines(Protocol):
    def aiter_lines(self) -> AsyncIterator[str]: ...


@dataclass
class Cursor:
    """Where a stream stands: the last event id seen (WHATWG: kept across events, an empty `id:`
    clears it) and the server's reconnection delay, when it gave one."""

    last_id: str | None = None
    retry_ms: int | None = None
    events: int = 0  # events dispatched, payload or not: a resumed stream that gave nothing is told apart


async def iter_sse(
    resp: Lines, cursor: Cursor | None = None, max_event: int = MAX_EVENT_BYTES
) -> AsyncGenerator[Any, None]:
    """Yield the JSON payload of every event with data; `cursor` (if given) follows ids and retry.
    An event whose data grows past `max_event` characters ends the stream (ConnectionFailed)."""
    data: list[str] = []
    size = 0  # characters of `data`
    event_id: str | None = cursor.last_id if cursor is not None else None
    fields = False  # a blank line with no field before it dispatches nothing
    async for line in resp.aiter_lines():
        if line == "":
            if cursor is not None and fields:
                cursor.last_id = event_id
                cursor.events += 1
            fields = False
            if data:
                payload = "\n".join(data)
                data, size = [], 0
                if payload.strip():  # an empty `data:` primes the stream: nothing to deliver
                    try:
                        yield fastjson.loads(payload)
                    except ValueError:
                        log.warning("upstream SSE event is not JSON: %.200r", payload)
            continue
        if line.startswith(":"):
            continue
        fields = True
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
            size += len(value) + 1
            if size > max_event:
                raise ConnectionFailed(f"the server sent an SSE event longer than {max_event} characters")
        elif field == "id" and "\0" not in value:
            event_id = value or None
        elif field == "retry" and value.isascii() and value.isdigit() and cursor is not None:
            cursor.retry_ms = int(value)
    # An event not ended by a blank line is not dispatched (WHATWG), but a JSON reply cut from its
    # last newline is still the reply: deliver it, without moving the cursor past it.
    if data and "".join(data).strip():
        try:
            yield fastjson.loads("\n".join(data))
        except ValueError:
            pass
