"""What a sink is sent (pure): the event exactly as a `/v1/events` entry, as compact JSON bytes.

`question.opened`'s `data` already is the question as `/v1/questions` shows it (the broker stores
that with the event), so no lookup is needed to include it.
"""

from __future__ import annotations

import json

from ..events.bus import StoredEvent


def body(stored: StoredEvent, answer_url: str | None = None) -> bytes:
    """The event's JSON; a question's notification also carries `answerUrl`, a one-time link
    that answers it from a browser (docs/answer-links.md), when it can be answered there."""
    wire = stored.wire()
    if answer_url is not None:
        wire["answerUrl"] = answer_url
    return json.dumps(wire, separators=(",", ":"), ensure_ascii=False).encode()


class Undelivered(Exception):
    """A sink gave up on one event; the message is what `/v1/status` shows as its last error."""
