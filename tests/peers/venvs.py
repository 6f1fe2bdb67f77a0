"""Build and cache one virtual environment per pinned third-party MCP stack.

The peer stacks (official ``mcp`` SDK 2.3, ``mcp`` 1.30, FastMCP with tasks)
conflict with each other and with mcpx itself, so each runs from its own venv,
built from ``<shared>/peers/requirements-<name>.txt`` (a full pip-freeze lock).

Venvs live at ``~/.cache/mcpx-test-peers/<name>-<sha256(requirements)[:16]>/``
so a changed lock file gives a new venv.  Building is guarded by an exclusive
``fcntl.flock`` on ``<venv>.lock`` (safe when several pytest processes race),
and a ``.complete`` marker written last tells a finished venv from a half-built
one; a venv without the marker is deleted and rebuilt.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["PEER_NAMES", "peer_python", "requirements_file", "shared_dir", "venv_dir"]

PEER_NAMES = ("mcp-2.3", "mcp-1.30", "fastmcp-tasks")
CACHE_ROOT = Path.home() / ".cache" / "mcpx-test-peers"
MARKER = ".complete"


def shared_dir() -> Path:
    """The shared/ folder beside the repository checkout, or $MCPX_SHARED (tests/shared_folder.py)."""
    from shared_folder import SHARED

    return SHARED


def requirements_file(name: str) -> Path:
    path = shared_dir() / "peers" / f"requirements-{name}.txt"
    if not path.is_file():
        raise FileNotFoundError(f"no requirements file for peer {name!r}: {path}")
    return path


def venv_dir(name: str) -> Path:
    digest = hashlib.sha256(requirements_file(name).read_bytes()).hexdigest()[:16]
    return CACHE_ROOT / f"{name}-{digest}"


def _python_in(venv: Path) -> Path:
    return venv / "bin" / "python"


def _log(msg: str) -> None:
    print(f"[mcpx-test-peers] {msg}", file=sys.stderr, flush=True)


def _build(name: str, venv: Path, reqs: Path) -> None:
    if venv.exists():
        _log(f"removing incomplete venv {venv}")
        shutil.rmtree(venv)
    started = time.monotonic()
    _log(f"building venv for {name} at {venv} (first time takes about a minute)")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = _python_in(venv)
    _log(f"pip install -r {reqs}")
    proc = subprocess.run(
        [str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q", "-r", str(reqs)],
        stdout=sys.stderr,
        stderr=sys.stderr,
    )
    if proc.returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        raise RuntimeError(f"pip install for peer {name!r} failed (exit {proc.returncode})")
    (venv / MARKER).write_text(f"{reqs}\n")
    _log(f"venv for {name} ready in {time.monotonic() - started:.0f}s")


def peer_python(name: str) -> Path:
    """Return the python executable of the peer's venv, building the venv first if needed."""
    venv = venv_dir(name)
    py = _python_in(venv)
    if (venv / MARKER).is_file() and py.exists():
        return py
    reqs = requirements_file(name)
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    lock_path = venv.with_name(venv.name + ".lock")
    with open(lock_path, "a+") as lock:
        if not _try_lock(lock):
            _log(f"waiting for another process building {venv.name}")
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            # Re-check under the lock: another process may have finished it.
            if not ((venv / MARKER).is_file() and py.exists()):
                _build(name, venv, reqs)
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    return py


def _try_lock(lock) -> bool:
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


if __name__ == "__main__":  # python tests/peers/venvs.py mcp-2.3 [...]
    for arg in sys.argv[1:] or ["mcp-2.3"]:
        print(peer_python(arg))
