"""tests/daemon_launcher.py, the harness's forked daemons: signalling one that has just exited (and
been reaped by the forkserver) before the forkserver's report of its exit came in is no error
(`mcpx stop` ended one so, and the fixture's teardown stop failed a clean-clone CI run)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

from daemon_launcher import ForkedDaemon


class _Server:
    """A forkserver whose report of the exit has not arrived yet."""

    def __init__(self) -> None:
        self.exits: dict[int, int] = {}
        self._changed = threading.Condition()


def test_a_daemon_reaped_before_its_exit_was_reported_can_still_be_told_to_stop() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # reaped: its pid names no process now
    daemon = object.__new__(ForkedDaemon)
    daemon._server = _Server()  # type: ignore[assignment]  # the part send_signal reads
    daemon.pid = gone.pid
    assert daemon.returncode is None
    daemon.send_signal(signal.SIGTERM)
    daemon.kill()
