"""Optional record of every frame mcpx sends to a host (env MCPX_WIRE_LOG=path), for schema checks."""

from __future__ import annotations

import json
import os
import threading
from typing import Any

_lock = threading.Lock()


def record(revision: str | None, method: str | None, frame: dict[str, Any]) -> None:
    """One line per frame: the revision it was sent under and the method it answers or carries."""
    path = os.environ.get("MCPX_WIRE_LOG")  # read per frame, not at import: a forked daemon sets it late
    if not path:
        return
    line = json.dumps({"rev": revision, "method": method, "frame": frame}, separators=(",", ":"))
    with _lock, open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
