"""MRTR `requestState` that mcpx issues: the upstream's own state inside an HMAC-signed envelope.

Hosts must treat requestState as opaque and servers must treat it as attacker-controlled
(mrtr.mdx:231-233). The envelope binds the upstream state to the method, the call's name and arguments and the host
connection it was issued to, expires, counts rounds and carries a nonce, so a host can neither edit
it, replay it on another call or hand it to another host, nor loop forever; the nonce lets a gate
accept each envelope once (host/approvals.py). It also carries the defaults of the round's form
questions, so the retry's answers go upstream with them (SEP-1034, `fill_defaults`). Pure: the key, `now` and the nonce come from the caller.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass, field
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
    # The defaults of the round's form questions, by input key and field (SEP-1034): an accepted
    # answer that leaves a field out gets its default before the retry goes upstream.
    defaults: dict[str, dict[str, Any]] = field(default_factory=dict)


def binding(method: str, params: dict[str, Any], host: str) -> str:
    """What a retry must repeat: the method, the target and the arguments (mrtr: the retry
    repeats the original params), from the same host connection (its record id)."""
    target = params.get("name") if method != "resources/read" else params.get("uri")
    body = json.dumps([method, target, params.get("arguments"), host], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()


def wrap(
    key: bytes,
    upstream_state: object,
    bound: str,
    round_: int,
    now_ms: int,
    nonce: str,
    defaults: dict[str, dict[str, Any]] | None = None,
) -> str:
    data: dict[str, Any] = {"u": upstream_state, "b": bound, "r": round_, "x": now_ms + LIFETIME_MS, "n": nonce}
    if defaults:
        data["d"] = defaults
    payload = json.dumps(data, separators=(",", ":")).encode()
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
    defaults = data.get("d")
    return Round(
        data.get("u"), int(data.get("r", 0)), str(data.get("n", "")), defaults if isinstance(defaults, dict) else {}
    )


def fill_defaults(responses: object, defaults: dict[str, dict[str, Any]]) -> object:
    """A retry's `inputResponses` with the round's form defaults put into each accepted answer that
    leaves those fields out (its content an object, or absent)."""
    if not defaults or not isinstance(responses, dict):
        return responses
    out = dict(responses)
    for key, fields in defaults.items():
        answer = out.get(key)
        if not isinstance(answer, dict) or answer.get("action") != "accept" or not isinstance(fields, dict):
            continue
        content = answer.get("content")
        if content is None or isinstance(content, dict):
            out[key] = {**answer, "content": {**fields, **(content or {})}}
    return out


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
