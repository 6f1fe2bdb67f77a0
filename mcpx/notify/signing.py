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


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of `<timestamp>.<body>`."""
    signed = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def headers(secret: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: f"{VERSION}={signature(secret, timestamp, body)}",
    }


def verify(secret: str, timestamp: str, signature_header: str, body: bytes) -> bool:
    """What a receiver does (docs/notify.md shows the same): recompute and compare in constant time."""
    if not timestamp.isdigit():
        return False
    expected = f"{VERSION}={signature(secret, int(timestamp), body)}"
    return hmac.compare_digest(expected, signature_header)
