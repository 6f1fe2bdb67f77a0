"""The state folder, as the daemon keeps it: private (0700), its API token (0600), the
single-daemon lock, the info file it writes while it serves (config/state_files.py reads it)."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
import stat
from pathlib import Path
from typing import IO, Any

from ..config.state_files import INFO, TOKEN, read_info

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


def write_info(folder: Path, info: dict[str, Any]) -> None:
    tmp = folder / f".{INFO}.{os.getpid()}"
    tmp.write_text(json.dumps(info, indent=2) + "\n")
    os.replace(tmp, folder / INFO)


def remove_info(folder: Path) -> None:
    try:
        (folder / INFO).unlink()
    except FileNotFoundError:
        pass
