"""Webhook signatures (pure): HMAC-SHA256 over `<timestamp>.<body>` with the sink's secret.

Sent as `X-Mcpx-Timestamp: <unix seconds>` and `X-Mcpx-Signature: v1=<hex>`, like Stripe's scheme:
the timestamp is signed too, so a receiver can refuse old deliveries replayed to it.
"""

from __future__ import annotations

import hashlib
import hmac

TIMESTAMP_HEADER = "X-Mcpx-Timestamp"
SIGNATURE_HEADER = "X-Mcpx-Signature"
VERSION = "v1"
_TIMESTAMP_DIGITS = 20  # more than any Unix time in seconds; int() refuses past 4,300 digits


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of `<timestamp>.<body>`."""
    signed = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def headers(secret: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: f"{VERSION}={signature(secret, timestamp, body)}",
    }


def verify(secret: str, timestamp: object, signature_header: object, body: bytes) -> bool:
    """What a receiver does (docs/notify.md shows the same): recompute and compare in constant time.
    False for anything malformed: a missing (None) or non-string header, a timestamp that is not plain
    ASCII digits, a signature of other characters; it never raises on what a request carries."""
    if not isinstance(timestamp, str) or not isinstance(signature_header, str):
        return False
    if not (timestamp.isascii() and timestamp.isdigit()) or len(timestamp) > _TIMESTAMP_DIGITS:
        return False
    expected = f"{VERSION}={signature(secret, int(timestamp), body)}".encode()
    # As bytes: compare_digest refuses str with characters beyond ASCII (TypeError).
    return hmac.compare_digest(expected, signature_header.encode("utf-8", "replace"))
