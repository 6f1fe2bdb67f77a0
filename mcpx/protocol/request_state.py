"""MRTR `requestState` that mcpx issues: the upstream's own state inside an HMAC-signed envelope.

Hosts must treat requestState as opaque and servers must treat it as attacker-controlled
(mrtr.mdx:231-233). The envelope binds the upstream state to the method, the call's name and arguments and the host
connection it was issued to, expires, counts rounds and carries a nonce, so a host can neither edit
it, replay it on another call or hand it to another host, nor loop forever; the nonce lets a gate
accept each envelope once (host/approvals.py). Pure: the key, `now` and the nonce come from the caller.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

from .errors import InvalidParams

MAX_ROUNDS = 32
LIFETIME_MS = 10 * 60 * 1000


@dataclass(frozen=True)
class Round:
    """What a verified envelope holds: the upstream's own state, the round it opens, its nonce."""

    state: Any
    number: int
    nonce: str


def binding(method: str, params: dict[str, Any], host: str) -> str:
    """What a retry must repeat: the method, the target and the arguments (mrtr: the retry
    repeats the original params), from the same host connection (its record id)."""
    target = params.get("name") if method != "resources/read" else params.get("uri")
    body = json.dumps([method, target, params.get("arguments"), host], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()


def wrap(key: bytes, upstream_state: object, bound: str, round_: int, now_ms: int, nonce: str) -> str:
    payload = json.dumps(
        {"u": upstream_state, "b": bound, "r": round_, "x": now_ms + LIFETIME_MS, "n": nonce}, separators=(",", ":")
    ).encode()
    mac = hmac.new(key, payload, hashlib.sha256).digest()
    return _b64(payload) + "." + _b64(mac)


def unwrap(key: bytes, token: object, bound: str, now_ms: int) -> Round:
    """The round of a state mcpx issued for this very call and host; else -32602."""
    try:
        if not isinstance(token, str):
            raise ValueError
        raw_payload, raw_mac = token.split(".")
        payload = _unb64(raw_payload)
        if not hmac.compare_digest(hmac.new(key, payload, hashlib.sha256).digest(), _unb64(raw_mac)):
            raise ValueError
        data = json.loads(payload)
        if not isinstance(data, dict):
            raise ValueError
    except (ValueError, binascii.Error):
        raise InvalidParams("requestState integrity check failed") from None
    if data.get("b") != bound:
        raise InvalidParams("requestState was issued for a different request")
    if data.get("x", 0) < now_ms:
        raise InvalidParams("requestState has expired; call again without it")
    if data.get("r", 0) >= MAX_ROUNDS:
        raise InvalidParams(f"too many input rounds (limit {MAX_ROUNDS})")
    return Round(data.get("u"), int(data.get("r", 0)), str(data.get("n", "")))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
