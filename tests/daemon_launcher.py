"""Start `mcpx daemon` processes forked from one interpreter that has already imported the daemon.

Why: a cold `python -m mcpx daemon` spends about 0.6 s of CPU importing FastAPI, pydantic and
uvicorn before it serves anything, and the suite starts a daemon (often several) for nearly every
test, on each store. Forked, one is ready on 0.1 s of CPU, and the two-store run on two cores went
from 710 s to 580 s. The forked process runs the same code a cold one runs (`mcpx.cli.main.main` with the
same arguments, environment, working folder and stderr file: `daemon_forkserver.become`), as its
own process; only the imports were done before the fork. `MCPX_TEST_FORK=0` starts every daemon
cold instead (`python -m mcpx daemon`); the `mcpx serve` auto-start and tests/test_config.py always do.

One forkserver per test process, started on first use with the environment a cold daemon gets
(PYTHONPATH: the checkout under test first); it is each daemon's parent, reaps it and reports its
exit status, which `ForkedDaemon` hands out the way `subprocess.Popen` does."""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
ENABLED = os.environ.get("MCPX_TEST_FORK", "1") != "0"
SERVER = Path(__file__).with_name("daemon_forkserver.py")


class _Forkserver:
    def __init__(self) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
        # Its own stderr (an import that fails, a crash) goes to a file the errors below quote.
        self.log = Path(tempfile.gettempdir()) / f"mcpx-test-forkserver-{os.getpid()}.log"
        with open(self.log, "wb") as log:
            self._proc = subprocess.Popen(
                [sys.executable, str(SERVER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                cwd=ROOT,
            )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._requests: IO[bytes] = self._proc.stdin
        self._lock = threading.Lock()  # one start at a time: answers come back in request order
        self._changed = threading.Condition()
        self._started: list[int] = []
        self.exits: dict[int, int] = {}
        self.gone = False
        threading.Thread(target=self._read, args=(self._proc.stdout,), daemon=True, name="forkserver").start()
        atexit.register(self.close)

    def _read(self, answers: IO[bytes]) -> None:
        for line in answers:
            message = json.loads(line)
            with self._changed:
                if "started" in message:
                    self._started.append(message["started"])
                else:
                    self.exits[message["exit"]] = message["code"]
                self._changed.notify_all()
        with self._changed:
            self.gone = True
            self._changed.notify_all()

    def fork(self, argv: list[str], env: dict[str, str], cwd: Path, stderr_path: Path) -> int:
        request = {"argv": argv, "env": env, "cwd": str(cwd), "stderr": str(stderr_path)}
        with self._lock:
            self._requests.write(json.dumps(request).encode() + b"\n")
            self._requests.flush()
            with self._changed:
                if not self._changed.wait_for(lambda: self._started or self.gone, 30) or not self._started:
                    raise RuntimeError(
                        f"the daemon forkserver did not fork: {self.log.read_text(errors='replace')[-2000:]}"
                    )
                return self._started.pop(0)

    def wait(self, pid: int, timeout: float | None) -> int | None:
        with self._changed:
            self._changed.wait_for(lambda: pid in self.exits or self.gone, timeout)
            if pid not in self.exits and self.gone:
                raise RuntimeError("the daemon forkserver is gone: the daemon's exit status is lost")
            return self.exits.get(pid)

    def close(self) -> None:
        """Closing its stdin ends the server, and with it any daemon a test left running."""
        self._requests.close()
        self._proc.wait(10)
        self.log.unlink(missing_ok=True)


_server: _Forkserver | None = None


def _forkserver() -> _Forkserver:
    global _server
    if _server is None:
        _server = _Forkserver()
    return _server


class ForkedDaemon:
    """The part of `subprocess.Popen` the harness and tests use, for a forked daemon."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, stderr_path: Path) -> None:
        self.args = ["mcpx", *argv]
        self._server = _forkserver()
        self.pid = self._server.fork(argv, env, cwd, stderr_path)

    @property
    def returncode(self) -> int | None:
        return self._server.exits.get(self.pid)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        code = self._server.wait(self.pid, timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:  # not reported reaped, so the pid is still this daemon's...
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass  # ...or it was reaped a moment before the forkserver's report of it came in

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)
