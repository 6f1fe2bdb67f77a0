"""What the console remembers per user between runs: its theme, in `$XDG_CONFIG_HOME/mcpx/console.json`
(`~/.config` when XDG_CONFIG_HOME is unset). A missing or unreadable file is the defaults; a file
written by a newer console keeps the keys this one does not know."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def settings_path(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "mcpx" / "console.json"


def load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save(path: Path, **changes: Any) -> None:
    """These keys changed; the rest of the file stays. Written whole, then renamed over the old one."""
    data = load(path) | changes
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)
