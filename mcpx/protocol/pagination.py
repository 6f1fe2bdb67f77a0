"""Opaque list cursors. Pure: a cursor names the list it belongs to and an offset into it."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import TypeVar

from .errors import InvalidParams

T = TypeVar("T")
PAGE_SIZE = 100


def encode(kind: str, offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps([kind, offset]).encode()).decode().rstrip("=")


def decode(kind: str, cursor: object) -> int:
    if cursor is None:
        return 0
    try:
        if not isinstance(cursor, str):
            raise ValueError
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        got_kind, offset = json.loads(raw)
        # bool is an int subclass: a forged [kind, true] cursor is garbage, not offset 1.
        if got_kind != kind or not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError
    except (ValueError, TypeError, binascii.Error):
        raise InvalidParams(f"Invalid cursor for {kind}") from None
    return offset


def page(kind: str, items: Sequence[T], cursor: object, size: int = PAGE_SIZE) -> tuple[list[T], str | None]:
    start = decode(kind, cursor)
    if start > len(items):
        raise InvalidParams(f"Invalid cursor for {kind}")
    chunk = list(items[start : start + size])
    nxt = encode(kind, start + size) if start + size < len(items) else None
    return chunk, nxt
