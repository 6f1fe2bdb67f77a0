"""Files in the state folder that more than the daemon reads or writes: the daemon's info file and
API token (read by the CLI, the console and the demo), private JSON files (a keeper's record, an
HTTP upstream's session), and whether a pid named in one is alive. daemon/state_folder.py keeps the
folder itself (its lock, its token, its info file while serving)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

INFO = "daemon.json"
TOKEN = "token"


def write_private_json(path: Path, data: object) -> None:
    """Write a JSON file readable by its owner only (0600), atomically: a reader sees the old file
    or the new one, never half of one."""
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(data))
    os.replace(tmp, path)


def read_info(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / INFO).read_text())
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) else None


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
