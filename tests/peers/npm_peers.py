"""Install and cache the pinned npm packages the peer tests run: server-everything (an MCP server)
and oidc-provider (an OAuth authorization server, for the real sign-in test).

Each has a folder here (``tests/peers/everything/``, ``tests/peers/oidc/``) with a ``package.json``
pinning it and its full ``package-lock.json``. The first use copies both to
``~/.cache/mcpx-test-peers/<folder>-<sha256(package-lock.json)[:16]>/`` and runs ``npm ci`` there, so
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
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script (python tests/peers/npm_peers.py): make `peers` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from peers.venvs import CACHE_ROOT, MARKER, _log, _try_lock  # after the sys.path line above

__all__ = [
    "EVERYTHING_VERSION",
    "everything_command",
    "everything_dir",
    "everything_http_command",
    "oidc_provider_command",
]

EVERYTHING = Path(__file__).resolve().parent / "everything"  # package.json + package-lock.json
EVERYTHING_PACKAGE = "@modelcontextprotocol/server-everything"
EVERYTHING_VERSION = "2026.8.31"
BIN = "mcp-server-everything"  # the package's one bin entry (dist/index.js); argv[2] picks the transport
OIDC = Path(__file__).resolve().parent / "oidc"  # package.json + package-lock.json + provider.mjs
OIDC_PACKAGE = "oidc-provider"
FILES = ("package.json", "package-lock.json")
NPM_CI_TIMEOUT = 600  # s: a cold npm cache downloads about a hundred packages


def npm_dir(source: Path) -> Path:
    digest = hashlib.sha256((source / "package-lock.json").read_bytes()).hexdigest()[:16]
    return CACHE_ROOT / f"{source.name}-{digest}"


def everything_dir() -> Path:
    return npm_dir(EVERYTHING)


def _tool(name: str, source: Path = EVERYTHING) -> str:
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(
            f"{name} is not on PATH: the npm peers need Node.js >= 20 with npm"
            f" (installed with `npm ci` from {source / 'package-lock.json'})"
        )
    return path


def _entry(folder: Path) -> Path:
    """The script the package's bin entry names, as its installed package.json says."""
    package = folder / "node_modules" / EVERYTHING_PACKAGE
    meta = json.loads((package / "package.json").read_text())
    if meta.get("version") != EVERYTHING_VERSION:
        raise RuntimeError(f"{package} is version {meta.get('version')!r}, not the pinned {EVERYTHING_VERSION}")
    return package / meta["bin"][BIN]


def _install(source: Path, folder: Path, npm: str, check: Callable[[Path], None]) -> None:
    if folder.exists():
        _log(f"removing incomplete install {folder}")
        shutil.rmtree(folder)
    started = time.monotonic()
    _log(f"npm ci of {source.name} into {folder}")
    folder.mkdir(parents=True)
    for name in FILES:
        shutil.copyfile(source / name, folder / name)
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
            raise RuntimeError(f"npm ci for {source.name} in {folder} failed (exit {proc.returncode})")
        check(folder)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    (folder / MARKER).write_text(f"{source / 'package-lock.json'}\n")
    _log(f"{source.name} ready in {time.monotonic() - started:.0f}s")


def _check_everything(folder: Path) -> None:
    entry = _entry(folder)
    if not entry.is_file():
        raise RuntimeError(f"npm ci for {EVERYTHING_PACKAGE} left no {entry}")


def _check_oidc(folder: Path) -> None:
    if not (folder / "node_modules" / OIDC_PACKAGE / "package.json").is_file():
        raise RuntimeError(f"npm ci for {OIDC_PACKAGE} left no node_modules/{OIDC_PACKAGE}")


def npm_installed(source: Path, check: Callable[[Path], None]) -> tuple[str, Path]:
    """node's path and the install folder of `source`'s lock, installing it first if needed."""
    node, npm = _tool("node", source), _tool("npm", source)
    folder = npm_dir(source)
    if not (folder / MARKER).is_file():
        CACHE_ROOT.mkdir(parents=True, exist_ok=True)
        with open(folder.with_name(folder.name + ".lock"), "a+") as lock:
            if not _try_lock(lock):
                _log(f"waiting for another process installing {folder.name}")
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                if not (folder / MARKER).is_file():  # another process may have finished it meanwhile
                    _install(source, folder, npm, check)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    return node, folder


def _installed() -> tuple[str, Path]:
    """node's path and server-everything's entry script, installing the package first if needed."""
    node, folder = npm_installed(EVERYTHING, _check_everything)
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


def oidc_provider_command(workdir: Path, *args: str) -> list[str]:
    """argv starting tests/peers/oidc/provider.mjs (oidc-provider; its options in the script).

    Node resolves an ES module's imports from the script's real folder, so the script is copied into
    `workdir` beside a `node_modules` link to the cached install: the checkout's script runs with
    the locked packages, and an edit of it needs no new install."""
    node, folder = npm_installed(OIDC, _check_oidc)
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(OIDC / "provider.mjs", workdir / "provider.mjs")
    link = workdir / "node_modules"
    if not link.exists():
        link.symlink_to(folder / "node_modules", target_is_directory=True)
    return [node, str(workdir / "provider.mjs"), *args]


if __name__ == "__main__":  # python tests/peers/npm_peers.py: install now, print the stdio argv
    print(" ".join(everything_command()))
