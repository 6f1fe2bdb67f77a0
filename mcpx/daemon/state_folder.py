"""The state folder: daemon info file, API token (0600), single-daemon lock."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
import stat
from pathlib import Path
from typing import IO, Any

INFO = "daemon.json"
TOKEN = "token"
LOCK = "daemon.lock"

log = logging.getLogger("mcpx.state")


class AlreadyRunning(Exception):
    pass


def prepare(folder: Path) -> None:
    """The state folder, private: it holds the API token and every task's result and answers.
    A folder that already existed with looser permissions is tightened (and said so)."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    mode = stat.S_IMODE(folder.stat().st_mode)
    if mode != 0o700:
        folder.chmod(0o700)
        log.warning("state folder %s was %s; made it private (0700)", folder, oct(mode))


def acquire_lock(folder: Path) -> IO[str]:
    """Held for the daemon's life; a second daemon on the same folder fails here, not later."""
    fh = open(folder / LOCK, "a+")  # noqa: SIM115 - held open for the daemon's whole life
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        info = read_info(folder)
        where = f" (pid {info.get('pid')}, port {info.get('port')})" if info else ""
        raise AlreadyRunning(f"an mcpx daemon is already running for {folder}{where}") from None
    return fh


def api_token(folder: Path) -> str:
    path = folder / TOKEN
    try:
        token = path.read_text().strip()
        if token:
            os.chmod(path, 0o600)
            return token
    except FileNotFoundError:
        pass
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    return token


def write_private_json(path: Path, data: object) -> None:
    """Write a JSON file readable by its owner only (0600), atomically: a reader sees the old file
    or the new one, never half of one."""
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(data))
    os.replace(tmp, path)


def write_info(folder: Path, info: dict[str, Any]) -> None:
    tmp = folder / f".{INFO}.{os.getpid()}"
    tmp.write_text(json.dumps(info, indent=2) + "\n")
    os.replace(tmp, folder / INFO)


def read_info(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / INFO).read_text())
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def remove_info(folder: Path) -> None:
    try:
        (folder / INFO).unlink()
    except FileNotFoundError:
        pass


def pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
