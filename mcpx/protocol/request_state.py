"""MRTR `requestState` that mcpx issues: the upstream's own state inside an HMAC-signed envelope.

Hosts must treat requestState as opaque and servers must treat it as attacker-controlled
(mrtr.mdx:231-233). The envelope binds the upstream state to the method and the call's name and
arguments, expires, and counts rounds, so a host can neither edit it, replay it on another call,
nor loop forever. Pure: the key and `now` come from the caller.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from typing import Any

from .errors import InvalidParams

MAX_ROUNDS = 32
LIFETIME_MS = 10 * 60 * 1000


def binding(method: str, params: dict[str, Any]) -> str:
    """What a retry must repeat: the method, the target and the arguments (mrtr: the retry
    repeats the original params)."""
    target = params.get("name") if method != "resources/read" else params.get("uri")
    body = json.dumps([method, target, params.get("arguments")], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()


def wrap(key: bytes, upstream_state: object, bound: str, round_: int, now_ms: int) -> str:
    payload = json.dumps(
        {"u": upstream_state, "b": bound, "r": round_, "x": now_ms + LIFETIME_MS}, separators=(",", ":")
    ).encode()
    mac = hmac.new(key, payload, hashlib.sha256).digest()
    return _b64(payload) + "." + _b64(mac)


def unwrap(key: bytes, token: object, bound: str, now_ms: int) -> tuple[Any, int]:
    """(upstream state, round) of a state mcpx issued for this very call; else -32602."""
    try:
        if not isinstance(token, str):
            raise ValueError
        raw_payload, raw_mac = token.split(".")
        payload = _unb64(raw_payload)
        if not hmac.compare_digest(hmac.new(key, payload, hashlib.sha256).digest(), _unb64(raw_mac)):
            raise ValueError
        data = json.loads(payload)
    except (ValueError, binascii.Error):
        raise InvalidParams("requestState integrity check failed") from None
    if data.get("b") != bound:
        raise InvalidParams("requestState was issued for a different request")
    if data.get("x", 0) < now_ms:
        raise InvalidParams("requestState has expired; call again without it")
    if data.get("r", 0) >= MAX_ROUNDS:
        raise InvalidParams(f"too many input rounds (limit {MAX_ROUNDS})")
    return data.get("u"), int(data.get("r", 0))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
