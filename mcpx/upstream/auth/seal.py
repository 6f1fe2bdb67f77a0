"""Sealing what the store keeps secret (AES-256-GCM, `cryptography`; pure over bytes).

A sealed value is `v1.<key id>.<base64url of nonce + ciphertext + tag>`. The key id (the first 8
bytes of the key's SHA-256, in hex) says which key sealed it, so a daemon holding another key says
so instead of failing obscurely; the name the value is kept under is the associated data, so a
sealed value moved to another name does not open.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_BYTES = 32
NONCE_BYTES = 12


class SealError(Exception):
    """A sealed value that cannot be opened: another key sealed it, or it was altered."""


def new_key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


def key_id(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:16]


def seal(key: bytes, name: str, plain: bytes) -> str:
    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(key).encrypt(nonce, plain, name.encode())
    return f"v1.{key_id(key)}.{base64.urlsafe_b64encode(nonce + sealed).decode()}"


def open_sealed(key: bytes, name: str, value: str) -> bytes:
    version, _, rest = value.partition(".")
    kid, _, body = rest.partition(".")
    if version != "v1" or not body:
        raise SealError("not a sealed value of this mcpx")
    if kid != key_id(key):
        raise SealError(f"sealed with another key ({kid}; this daemon's is {key_id(key)})")
    try:
        raw = base64.urlsafe_b64decode(body)
        return AESGCM(key).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], name.encode())
    except (InvalidTag, ValueError):
        raise SealError("the sealed value was altered or is damaged") from None


def parse_key(text: bytes) -> bytes:
    """A key file's content: 32 bytes as base64 (with or without a newline)."""
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except ValueError:
        raise SealError("the key file is not base64") from None
    if len(key) != KEY_BYTES:
        raise SealError(f"the key file holds {len(key)} bytes, not {KEY_BYTES}")
    return key
