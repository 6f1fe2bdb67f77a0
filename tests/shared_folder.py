"""Where the shared/ folder is (the verbatim spec copies, the peers' pinned requirements, the
conformance runner): $MCPX_SHARED; else the `shared` folder beside the checkout; else, for a clone
of a local checkout (CI's clean clone in a temporary folder), the one beside the checkout it was
cloned from. Every test that reads from it asks here."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _find() -> Path:
    if os.environ.get("MCPX_SHARED"):
        return Path(os.environ["MCPX_SHARED"]).resolve()
    beside = ROOT.parent / "shared"
    if beside.is_dir():
        return beside
    origin = subprocess.run(
        ["git", "-C", str(ROOT), "remote", "get-url", "origin"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if origin and Path(origin).is_dir() and (Path(origin).resolve().parent / "shared").is_dir():
        return Path(origin).resolve().parent / "shared"
    return beside  # absent: the tests that need it fail saying so


SHARED = _find()
SPEC = SHARED / "spec" / "upstream"
