"""Optional record of every frame mcpx sends to a host (env MCPX_WIRE_LOG=path), for schema checks."""

from __future__ import annotations

import functools
import json
import os
import threading
from typing import Any

_lock = threading.Lock()


@functools.cache
def _path() -> str | None:
    # Read at the first frame, not at import: a daemon forked from a process that imported mcpx
    # earlier (the test harness) has its environment only by then.
    return os.environ.get("MCPX_WIRE_LOG") or None


def record(revision: str | None, method: str | None, frame: dict[str, Any]) -> None:
    """One line per frame: the revision it was sent under and the method it answers or carries."""
    path = _path()
    if not path:
        return
    line = json.dumps({"rev": revision, "method": method, "frame": frame}, separators=(",", ":"))
    with _lock, open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
