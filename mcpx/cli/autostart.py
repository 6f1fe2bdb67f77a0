"""Starting a daemon in the background when none runs for a state folder: `mcpx serve` (a host
spawned it and expects a server) and `mcpx console --start`."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..client.daemon_client import running_daemon
from ..config.model import CONFIG_SEARCH, find_config
from ..daemon import state_folder


def ensure_daemon(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """The running daemon's info, starting one in the background if none runs."""
    info = running_daemon(folder)
    if info is not None:
        return info
    if find_config(args.config) is None:
        # A daemon started here would serve nothing and outlive its host: refuse instead.
        again = "console --start" if args.command == "console" else args.command
        raise SystemExit(
            f"mcpx {args.command}: no daemon is running for {folder} and no config file was found"
            f" (searched: {CONFIG_SEARCH}).\n  give one: mcpx {again} --config FILE   (or set MCPX_CONFIG)"
        )
    state_folder.prepare(folder)
    cmd = [sys.executable, "-m", "mcpx", "daemon", "--state-dir", str(folder)]
    if args.config:
        cmd += ["--config", args.config]
    log_path = folder / "daemon.log"
    with open(log_path, "ab") as log_fh:
        offset = log_fh.tell()
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=log_fh, stderr=log_fh, start_new_session=True, env=os.environ.copy()
        )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        info = running_daemon(folder)
        if info is not None:
            return info
        if proc.poll() is not None:
            # It exited without serving (bad config, port taken): say why now, not after the deadline,
            # so the host's log shows the reason. Losing a start race to another shim's daemon is
            # fine: that one is about to write its info file, so keep waiting for it.
            with open(log_path, "rb") as fh:
                fh.seek(offset)
                why = fh.read().decode(errors="replace").strip()
            if "already running" not in why:
                raise SystemExit(
                    f"mcpx serve: the daemon exited with code {proc.returncode} before serving: {why or '(no output)'}\n(log: {log_path})"
                )
        time.sleep(0.05)
    raise SystemExit(f"mcpx serve: the daemon did not start; see {log_path}")
