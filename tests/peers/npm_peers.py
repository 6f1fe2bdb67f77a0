"""Install and cache the pinned npm MCP servers the peer tests run (today: server-everything).

``tests/peers/everything/`` holds a ``package.json`` pinning ``@modelcontextprotocol/server-everything``
and its full ``package-lock.json``. The first use copies both to
``~/.cache/mcpx-test-peers/everything-<sha256(package-lock.json)[:16]>/`` and runs ``npm ci`` there, so
the checkout never gets a ``node_modules`` and a changed lock gives a new folder. As in ``venvs.py``:
an exclusive ``fcntl.flock`` on ``<folder>.lock`` serialises installers (a waiting process reuses the
finished install), and a ``.complete`` marker written last tells a finished install from a half-made
one, which is deleted and made again.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script (python tests/peers/npm_peers.py): make `peers` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from peers.venvs import CACHE_ROOT, MARKER, _log, _try_lock  # after the sys.path line above

__all__ = ["EVERYTHING_VERSION", "everything_command", "everything_dir", "everything_http_command"]

EVERYTHING = Path(__file__).resolve().parent / "everything"  # package.json + package-lock.json
EVERYTHING_PACKAGE = "@modelcontextprotocol/server-everything"
EVERYTHING_VERSION = "2026.8.31"
BIN = "mcp-server-everything"  # the package's one bin entry (dist/index.js); argv[2] picks the transport
FILES = ("package.json", "package-lock.json")
NPM_CI_TIMEOUT = 600  # s: a cold npm cache downloads about a hundred packages


def everything_dir() -> Path:
    digest = hashlib.sha256((EVERYTHING / "package-lock.json").read_bytes()).hexdigest()[:16]
    return CACHE_ROOT / f"everything-{digest}"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(
            f"{name} is not on PATH: the {EVERYTHING_PACKAGE} peer needs Node.js >= 20 with npm"
            f" (it is installed with `npm ci` from {EVERYTHING / 'package-lock.json'})"
        )
    return path


def _entry(folder: Path) -> Path:
    """The script the package's bin entry names, as its installed package.json says."""
    package = folder / "node_modules" / EVERYTHING_PACKAGE
    meta = json.loads((package / "package.json").read_text())
    if meta.get("version") != EVERYTHING_VERSION:
        raise RuntimeError(f"{package} is version {meta.get('version')!r}, not the pinned {EVERYTHING_VERSION}")
    return package / meta["bin"][BIN]


def _install(folder: Path, npm: str) -> None:
    if folder.exists():
        _log(f"removing incomplete install {folder}")
        shutil.rmtree(folder)
    started = time.monotonic()
    _log(f"npm ci of {EVERYTHING_PACKAGE}@{EVERYTHING_VERSION} into {folder}")
    folder.mkdir(parents=True)
    for name in FILES:
        shutil.copyfile(EVERYTHING / name, folder / name)
    try:
        proc = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=sys.stderr,
            stderr=sys.stderr,
            timeout=NPM_CI_TIMEOUT,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"npm ci for {EVERYTHING_PACKAGE} in {folder} failed (exit {proc.returncode})")
        entry = _entry(folder)
        if not entry.is_file():
            raise RuntimeError(f"npm ci for {EVERYTHING_PACKAGE} left no {entry}")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    (folder / MARKER).write_text(f"{EVERYTHING / 'package-lock.json'}\n")
    _log(f"{EVERYTHING_PACKAGE} ready in {time.monotonic() - started:.0f}s")


def _installed() -> tuple[str, Path]:
    """node's path and the server's entry script, installing the package first if needed."""
    node, npm = _tool("node"), _tool("npm")
    folder = everything_dir()
    if not (folder / MARKER).is_file():
        CACHE_ROOT.mkdir(parents=True, exist_ok=True)
        with open(folder.with_name(folder.name + ".lock"), "a+") as lock:
            if not _try_lock(lock):
                _log(f"waiting for another process installing {folder.name}")
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                if not (folder / MARKER).is_file():  # another process may have finished it meanwhile
                    _install(folder, npm)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    return node, _entry(folder)


def everything_command() -> list[str]:
    """argv starting server-everything over stdio (its default transport, named here all the same)."""
    node, entry = _installed()
    return [node, str(entry), "stdio"]


def everything_http_command(port: int) -> list[str]:
    """argv starting server-everything over Streamable HTTP at http://127.0.0.1:<port>/mcp.

    The server takes its port only from $PORT (default 3001), hence ``env PORT=<port>``; it listens
    on every interface (express ``app.listen(PORT)``, no host setting) and prints its log to stdout."""
    node, entry = _installed()
    return [_tool("env"), f"PORT={port}", node, str(entry), "streamableHttp"]


if __name__ == "__main__":  # python tests/peers/npm_peers.py: install now, print the stdio argv
    print(" ".join(everything_command()))
