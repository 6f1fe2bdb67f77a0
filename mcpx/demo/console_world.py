"""`mcpx console --demo`'s private world: a daemon with the bundled demo upstream, and three demo
hosts calling it (mcpx/demo_hosts.py), in a temporary state folder that `stop()` removes.

    run = start_demo()          # or: with start_demo() as run:
    run.url, run.state_dir, run.token
    run.stop()                  # hosts, then the daemon: SIGTERM, SIGKILL after a bound
    run.leave()                 # the same, by a detached process: returns at once (a console quits)

The asking tools (`deploy`, `confirm`) run in a second upstream process, "release": mcpx ties a
stdio upstream's question to a call only while that call is the upstream's only one in flight,
and the other demo tools (a `watch` runs until cancelled) are nearly always busy.

Nothing outlives `stop()`: the daemon and the hosts each lead their own process group (their
children go with them), the daemon's upstreams end when it closes their stdin, and every process
of the run carries MCPX_DEMO_RUN in its environment, so a last sweep finds any straggler.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import mcpx

from ..config import state_files

MARK = "MCPX_DEMO_RUN"  # environment variable naming the run; every process of it inherits it
START_TIMEOUT_S = 20.0
STOP_GRACE_S = 5.0  # the daemon's own graceful shutdown is bounded at 3 s (daemon.GRACEFUL_S)
HOSTS_GRACE_S = 3.0
DEMO_TOOLS = "echo,countdown,add,build,flaky,watch,report"
ASKING_TOOLS = "deploy,confirm"


def demo_config() -> dict[str, Any]:
    upstream = [sys.executable, "-m", "mcpx.demo.upstream", "--tools"]
    return {
        "mcpServers": {
            "demo": {"command": upstream[0], "args": [*upstream[1:], DEMO_TOOLS], "mcpx": {"namespace": "demo"}},
            "release": {"command": upstream[0], "args": [*upstream[1:], ASKING_TOOLS]},
        },
        # Questions wait for the console's operator, however late it attaches; unanswered ones
        # close after five minutes so the demo never fills up with them.
        "questions": {"waitForOperator": "always", "expiryMs": 300_000},
    }


class DemoError(Exception):
    """The demo could not start (the message says why, with the daemon's log)."""


class DemoRun:
    def __init__(self, folder: Path, daemon: subprocess.Popen[bytes], info: dict[str, Any]) -> None:
        self.state_dir = folder
        self.daemon = daemon
        self.url: str = info["url"]
        self.port = int(info["port"])
        self.hosts: subprocess.Popen[bytes] | None = None
        self._stopped = False

    @property
    def token(self) -> str:
        """The operator API's token (the daemon wrote it to `<state_dir>/token`)."""
        return (self.state_dir / state_files.TOKEN).read_text().strip()

    @property
    def marker(self) -> str:
        return str(self.state_dir)

    def pids(self) -> list[int]:
        """Every live process of this run (Linux: /proc; elsewhere the process groups must do)."""
        return marked_pids(MARK, self.marker)

    def stop(self) -> None:
        """Stop the hosts, then the daemon; kill what lingers; remove the state folder. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        try:
            # Hosts first: none of them reconnects (or spawns a shim) to a daemon going away.
            if self.hosts is not None:
                _end_group(self.hosts, HOSTS_GRACE_S)
            _end_group(self.daemon, STOP_GRACE_S)
            _sweep(self.marker)
        finally:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def leave(self) -> None:
        """stop(), without waiting for it: a console that quits gives the terminal back at once
        (stop() takes seconds: up to 3 s for the hosts, 5 s for the daemon, then the sweep). A
        detached process (`python -m mcpx.demo.console_world --reap`) ends the hosts and the daemon
        within the same bounds, sweeps, and removes the folder. Idempotent, as stop() is."""
        if self._stopped:
            return
        self._stopped = True
        argv = [sys.executable, "-m", "mcpx.demo.console_world", "--reap", str(self.state_dir)]
        if self.hosts is not None:
            argv += ["--hosts-pid", str(self.hosts.pid)]
        env = _env(str(self.state_dir))
        del env[MARK]  # not one of the run's processes: the sweep is its own work
        subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=tempfile.gettempdir(),
            start_new_session=True,  # outlives this process, and a Ctrl-C in its terminal
        )

    def __enter__(self) -> DemoRun:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def start_demo() -> DemoRun:
    """Start the daemon (and wait until it serves), then the hosts. Raises DemoError.

    One temporary folder holds everything: the daemon's state, the config, and the logs of the
    daemon (`daemon.log`) and the hosts (`hosts.log`)."""
    folder = Path(tempfile.mkdtemp(prefix="mcpx-console-demo-"))
    env = _env(str(folder))
    config = folder / "demo-config.json"
    config.write_text(json.dumps(demo_config(), indent=2))
    daemon: subprocess.Popen[bytes] | None = None
    run: DemoRun | None = None
    try:
        daemon_args = ["-m", "mcpx", "daemon", "--config", str(config), "--state-dir", str(folder), "--port", "0"]
        daemon = _spawn(daemon_args, env, folder / "daemon.log")
        run = DemoRun(folder, daemon, _wait_for_info(daemon, folder))
        hosts_args = ["-m", "mcpx.demo.paced_hosts", "--url", run.url, "--state-dir", str(folder), "--reap-on-orphan"]
        hosts_args += ["--parent", str(os.getpid())]
        run.hosts = _spawn(hosts_args, env, folder / "hosts.log")
    except BaseException:
        if run is not None:
            run.stop()
        else:
            if daemon is not None:
                _end_group(daemon, STOP_GRACE_S)
            _sweep(str(folder))
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return run


def reap_orphaned(folder: Path) -> None:
    """What stop() would have done, for a run whose console died without calling it (the hosts
    notice, being its children too, and call this on their way out): end the daemon, remove the folder."""
    info = state_files.read_info(folder)
    pid = info.get("pid") if info else None
    if isinstance(pid, int) and state_files.pid_alive(pid):
        _end_pid_group(pid, STOP_GRACE_S)
    _sweep(str(folder))
    shutil.rmtree(folder, ignore_errors=True)


def reap(folder: Path, hosts_pid: int | None) -> None:
    """stop()'s work from a process that is not the run's parent (leave()): the hosts first (none
    reconnects to a daemon going away), then the daemon, the sweep and the folder."""
    if hosts_pid is not None and _running(hosts_pid):
        _end_pid_group(hosts_pid, HOSTS_GRACE_S)
    reap_orphaned(folder)


def _end_pid_group(pid: int, grace: float) -> None:
    """SIGTERM the process, SIGKILL its group once it ended or after `grace` seconds."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _running(pid):
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _env(marker: str) -> dict[str, str]:
    # The children run this very checkout, whatever else is installed (and from any cwd).
    here = str(Path(mcpx.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, MARK: marker}


def _spawn(args: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [sys.executable, *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=env,
            cwd=log_path.parent,
            start_new_session=True,  # its own process group: stop() ends it with all its children
        )


def _wait_for_info(daemon: subprocess.Popen[bytes], state_dir: Path) -> dict[str, Any]:
    log = state_dir / "daemon.log"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        info = state_files.read_info(state_dir)
        if info is not None and info.get("pid") == daemon.pid:
            return info
        if daemon.poll() is not None:
            raise DemoError(f"the demo daemon exited with code {daemon.returncode}: {_tail(log)}")
        time.sleep(0.05)
    raise DemoError(f"the demo daemon did not start within {START_TIMEOUT_S:g} s: {_tail(log)}")


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-2000:].strip() or "(no output)"
    except OSError:
        return "(no log)"


def _end_group(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the process, SIGKILL its group after `grace` seconds (or at once if it is gone)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # whatever of its group is left (shims, a stuck child)
    if proc.poll() is None:
        proc.wait()


def _sweep(marker: str) -> None:
    """SIGTERM, then SIGKILL, any process still carrying the run's marker (e.g. an upstream whose
    daemon was killed before it could close its stdin)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = marked_pids(MARK, marker)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and marked_pids(MARK, marker):
            time.sleep(0.05)


def _running(pid: int) -> bool:
    """Alive and not a zombie: an orphan's zombie waits for a reaper that may never come (the
    container's pid 1), yet it is dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return state_files.pid_alive(pid)  # no /proc: kill(pid, 0) is all there is
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def marked_pids(name: str, value: str) -> list[int]:
    """Live processes whose environment has name=value (our own user's; Linux /proc)."""
    want = f"{name}={value}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone meanwhile, or not ours
        pid = int(entry.name)
        if want in environ.split(b"\0") and pid != os.getpid() and _running(pid):
            found.append(pid)
    return found


def main(argv: list[str] | None = None) -> int:
    """`python -m mcpx.demo.console_world --reap FOLDER [--hosts-pid N]`: leave()'s detached half."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m mcpx.demo.console_world")
    parser.add_argument("--reap", required=True, type=Path, help="the run's state folder")
    parser.add_argument("--hosts-pid", type=int, default=None, help="the demo hosts' process")
    args = parser.parse_args(argv)
    reap(args.reap, args.hosts_pid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
