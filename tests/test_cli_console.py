"""`mcpx console` when no daemon runs: it says so and how to start one, in the terminal (the
command itself, a real process) and in the console (the real app over the real client, the daemon
gone); its options for the bell and toasts are there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from harness import ROOT
from textual.widgets import Static

from console.app import ConsoleApp
from console.client import DaemonClient, locate_in

ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))


def console(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in ENV.items() if k not in ("MCPX_CONFIG", "MCPX_STATE_DIR")}
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"))  # no config file anywhere
    return subprocess.run(
        [sys.executable, "-m", "mcpx", "console", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_with_no_daemon_it_says_so_and_how_to_start_one(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    run = console(tmp_path, "--state-dir", str(folder))
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr.splitlines() == [
        f"mcpx console: no daemon is running for {folder}.",
        "  start one:   mcpx daemon --config FILE   (or: mcpx console --start --config FILE)",
        "  or try it:   mcpx console --demo",
    ]


def test_start_with_no_config_anywhere_says_which_config_to_give(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    run = console(tmp_path, "--state-dir", str(folder), "--start")
    assert run.returncode != 0
    assert f"no daemon is running for {folder} and no config file was found" in run.stderr
    assert "give one: mcpx console --start --config FILE" in run.stderr
    assert not (folder / "daemon.json").exists()


def test_help_names_the_bell_and_toast_switches(tmp_path: Path) -> None:
    run = console(tmp_path, "--help")
    assert run.returncode == 0
    assert "--no-bell" in run.stdout and "--no-toasts" in run.stdout and "--demo" in run.stdout


@pytest.mark.anyio
async def test_the_console_without_a_daemon_shows_no_daemon_and_how_to_start_one(tmp_path: Path) -> None:
    app = ConsoleApp(DaemonClient(locate_in(tmp_path), "olga"), bell=False)
    async with app.run_test(size=(180, 48)) as pilot:
        with anyio.fail_after(10):
            while app.link != "no daemon":
                await pilot.pause(0.05)
        top = str(app.query_one("#topbar", Static).content)
        assert "no daemon" in top and "start one: mcpx daemon" in top
