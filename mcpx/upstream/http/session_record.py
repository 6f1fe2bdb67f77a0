"""A 2025-11-25 HTTP upstream's session, remembered in the state folder.

Some task servers tie their task ids to the session that created them (the official SDK 1.30
does), so a restarted daemon that opened a new session could no longer poll the tasks its
predecessor started. The session id and the handshake are written (0600) once the session is
open; a daemon killed without its clean stop leaves the file, and the next one carries the session
on. A clean stop DELETEs the session upstream and removes the file; a record whose URL or headers
no longer match the config is ignored.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, TypedDict

from ...config.model import ServerConfig
from ...config.state_files import write_private_json
from ..stdio.keeper_wire import stem

FOLDER = "upstream-sessions"


class SessionRecord(TypedDict):
    sessionId: str
    handshake: dict[str, Any]
    configHash: str


def config_hash(cfg: ServerConfig) -> str:
    """The session belongs to this URL with these headers (hashed: they may hold credentials)."""
    spec = {"url": cfg.url, "headers": cfg.headers}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _path(folder: Path, server: str) -> Path:
    return folder / f"{stem(server)}.json"


def load(folder: Path, server: str, cfg: ServerConfig) -> SessionRecord | None:
    try:
        data = json.loads(_path(folder, server).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("configHash") != config_hash(cfg):
        return None
    sid, handshake = data.get("sessionId"), data.get("handshake")
    if not isinstance(sid, str) or not sid or not isinstance(handshake, dict):
        return None
    return SessionRecord(sessionId=sid, handshake=handshake, configHash=data["configHash"])


def save(folder: Path, server: str, cfg: ServerConfig, session_id: str, handshake: dict[str, Any]) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    record = SessionRecord(sessionId=session_id, handshake=handshake, configHash=config_hash(cfg))
    write_private_json(_path(folder, server), record)


def forget(folder: Path, server: str) -> None:
    try:
        _path(folder, server).unlink()
    except FileNotFoundError:
        pass
