"""The pinned official conformance suite (tests/conformance/package.json + package-lock.json),
installed with `npm ci` the first time a test needs it (node_modules is ignored). Shared by the
server-side (test_conformance.py) and client-side (test_conformance_client.py) runs."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

import pytest
from harness import ROOT

CONF = ROOT / "tests" / "conformance"
PKG = CONF / "node_modules" / "@modelcontextprotocol" / "conformance"


def installed_suite() -> Path:
    """The installed package folder (CONFORMANCE_PKG for the run-*.sh scripts)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("node and npm are required for the conformance suite")
    # Two xdist units may start together: one `npm ci` at a time (two at once fail with ENOTEMPTY),
    # and the second finds the first one's install.
    with open(CONF / ".npm-ci.lock", "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            if not (PKG / "dist" / "index.js").exists():
                subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=CONF, check=True, timeout=600)
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    return PKG
