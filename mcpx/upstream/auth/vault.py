"""Upstream credentials in the store, sealed (seal.py) with a key kept in a 0600 file.

The key file is the state folder's `secrets.key` unless `store.secretsKeyFile` names another:
daemons that share a PostgreSQL store share sign-ins only when they share this key. A row sealed
with another key is reported (once) and treated as absent, never as an error of the call.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from ...events.bus import Event, StoredEvent
from . import seal
from .credentials import Credentials

log = logging.getLogger("mcpx.upstream.auth")

KEY_FILE = "secrets.key"
PREFIX = "oauth:"


class SecretStore(Protocol):
    """The part of the store (store/base.py) the vault uses."""

    async def get_secret(self, name: str) -> str | None: ...
    async def put_secret(self, name: str, sealed: str, events: Sequence[Event] = ()) -> list[StoredEvent]: ...
    async def delete_secret(self, name: str, events: Sequence[Event] = ()) -> list[StoredEvent]: ...


def load_key(path: Path) -> bytes:
    """The key in `path`, made (32 random bytes, base64, mode 0600) when the file does not exist."""
    try:
        return seal.parse_key(path.read_bytes())
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = seal.new_key()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another daemon made it a moment ago
        return seal.parse_key(path.read_bytes())
    with os.fdopen(fd, "wb") as fh:
        fh.write(base64.b64encode(key) + b"\n")
    return key


class Vault:
    def __init__(self, store: SecretStore, key_file: Path) -> None:
        """The key is read (or made) on first use: a daemon with no sign-in never writes a key file."""
        self.store = store
        self.key_file = key_file
        self._key: bytes | None = None
        self._warned: set[str] = set()

    @property
    def key(self) -> bytes:
        if self._key is None:
            self._key = load_key(self.key_file)
        return self._key

    async def load(self, upstream: str) -> Credentials | None:
        name = PREFIX + upstream
        sealed = await self.store.get_secret(name)
        if sealed is None:
            return None
        try:
            return Credentials.from_wire(json.loads(seal.open_sealed(self.key, name, sealed)))
        except seal.SealError as exc:
            if upstream not in self._warned:
                self._warned.add(upstream)
                log.warning(
                    "upstream %s: its stored sign-in cannot be opened (%s); if daemons share this store, point their"
                    " store.secretsKeyFile at one key file",
                    upstream,
                    exc,
                )
            return None
        except (ValueError, KeyError, TypeError):
            log.warning("upstream %s: its stored sign-in is not readable; it is ignored", upstream)
            return None

    async def save(self, upstream: str, creds: Credentials, events: Sequence[Event] = ()) -> None:
        name = PREFIX + upstream
        await self.store.put_secret(name, seal.seal(self.key, name, json.dumps(creds.wire()).encode()), events)

    async def forget(self, upstream: str, events: Sequence[Event] = ()) -> None:
        await self.store.delete_secret(PREFIX + upstream, events)
