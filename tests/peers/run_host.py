"""Running a peer host driver (``tests/peers/*_host.py``) from a test, in its peer venv.

The test side of the drivers' contract (README.md in this folder): a host gets its steps as
``--script JSON`` and prints one JSON line for the connection, then one per step; it exits 0, even
when steps fail. This module runs in mcpx's own test process, not in a peer venv (``peer_common.py``
is the drivers' side, stdlib-only and imported by them), so it may use the harness.

``run_host(python, "sdk2_host.py", ["--mode", "legacy", "--url", url], steps)`` runs a host to its
end and returns its lines; ``HostProcess`` is the same host started now and waited for later, for
a test that acts while the host runs. A host that fails, hangs or prints the wrong number of lines
fails the test with its stdout and (the end of) its stderr.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness import UNIT

PEERS = Path(__file__).resolve().parent
STDERR_SHOWN = 6000  # characters: the end of a host's stderr (its traceback) in a failure message


def host_argv(python: Path, driver: str, args: Sequence[str], script: list[dict[str, Any]]) -> list[str]:
    """``<python> tests/peers/<driver> ARGS --script JSON``; the script goes before a ``--`` in ARGS,
    since what follows ``--`` is the command a ``--stdio`` host spawns."""
    args = list(args)
    at = args.index("--") if "--" in args else len(args)
    return [str(python), str(PEERS / driver), *args[:at], "--script", json.dumps(script), *args[at:]]


def json_lines(out: str) -> list[dict[str, Any]]:
    """A host's stdout as its JSON lines (blank lines skipped)."""
    return [json.loads(line) for line in out.splitlines() if line.strip()]


class HostProcess:
    """One host driver process, started now in a session of its own: killing its process group
    also ends what it spawned (a ``--stdio`` host's server, e.g. the ``mcpx serve`` shim). Use it
    as a context manager, or wait for it with ``lines()``/``output()``: either kills the group
    once the host is done, so nothing it started outlives the test."""

    def __init__(
        self, python: Path, driver: str, args: Sequence[str], script: list[dict[str, Any]], *, timeout: float = 60
    ) -> None:
        """``timeout``: how long ``lines()``/``output()`` wait for the host to exit (s, times UNIT)."""
        self.name = Path(driver).stem
        self.steps = len(script)
        self.timeout = timeout
        self.elapsed = 0.0  # from the start to the host's exit, once waited for
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            host_argv(python, driver, args, script),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
        )

    def __enter__(self) -> HostProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def kill(self) -> None:
        """SIGKILL the host's process group (whatever of it is left) and reap the host."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(5)

    def report(self, out: str, err: str) -> str:
        """The host's exit code, stdout and the end of its stderr, for a failure message."""
        return f"exit {self.proc.returncode}\nstdout:\n{out}\nstderr:\n{err[-STDERR_SHOWN:]}"

    def output(self, timeout: float | None = None, *, overdue: str = "") -> tuple[str, str]:
        """Wait for the host to exit (at most ``timeout`` s times UNIT, default the one it was
        started with); its stdout and stderr. Past the timeout it is killed and the test fails,
        saying ``overdue`` (what the wait means) if given."""
        limit = (self.timeout if timeout is None else timeout) * UNIT
        try:
            out, err = self.proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            self.kill()
            out, err = self.proc.communicate()
            why = f"{overdue}: " if overdue else ""
            raise AssertionError(
                f"{why}{self.name} did not finish within {limit:g} s\n{self.report(out, err)}"
            ) from None
        finally:
            self.kill()  # what it spawned and left behind
        self.elapsed = time.monotonic() - self.started
        return out, err

    def lines(self) -> list[dict[str, Any]]:
        """Wait for the host; all its lines (the connect line, then one per step), once it exited
        0 after connecting and printing a line for every step."""
        out, err = self.output()
        report = self.report(out, err)
        assert self.proc.returncode == 0, f"{self.name} exited {self.proc.returncode}\n{report}"
        try:
            lines = json_lines(out)
        except ValueError as exc:
            raise AssertionError(f"{self.name} printed a line that is not JSON ({exc})\n{report}") from None
        assert lines and lines[0].get("op") == "connect" and lines[0].get("ok"), (
            f"{self.name} did not connect\n{report}"
        )
        assert len(lines) == 1 + self.steps, f"expected {1 + self.steps} lines, got {len(lines)}\n{report}"
        return lines

    def step_lines(self) -> list[dict[str, Any]]:
        """``lines()`` without the connect line: line N is step N + 1."""
        return self.lines()[1:]


def run_host(
    python: Path, driver: str, args: Sequence[str], script: list[dict[str, Any]], *, timeout: float = 60
) -> list[dict[str, Any]]:
    """Run a host driver to its end: ``HostProcess(...).lines()``."""
    return HostProcess(python, driver, args, script, timeout=timeout).lines()
