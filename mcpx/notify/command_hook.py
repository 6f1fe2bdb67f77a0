"""A command hook: run the configured argv (never through a shell) with the event's JSON on stdin.

One process per event, in its own process group so that a timeout kills whatever it started too.
"""

from __future__ import annotations

import os
import signal
import subprocess

import anyio
from anyio.abc import Process

from .outbox import SinkStats
from .payload import Undelivered

TIMEOUT_S = 30.0
STDERR_KEPT = 400  # characters of a failed run's stderr shown as its last error


class CommandHook:
    kind = "command"

    def __init__(self, argv: list[str], *, timeout_s: float = TIMEOUT_S) -> None:
        self.argv = argv
        self._timeout = timeout_s

    @property
    def target(self) -> str:
        return self.argv[0]

    async def deliver(self, body: bytes, stats: SinkStats) -> None:
        try:
            process = await anyio.open_process(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise Undelivered(f"cannot run {self.argv[0]}: {exc.strerror or exc}") from None
        stderr = bytearray()
        try:
            with anyio.fail_after(self._timeout):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_feed, process, body)
                    tg.start_soon(_drain, process, stderr)
                code = await process.wait()
        except TimeoutError:
            _kill_group(process)
            with anyio.CancelScope(shield=True):
                await process.wait()
            raise Undelivered(f"{self.argv[0]} still running after {self._timeout:g} s: killed") from None
        finally:
            if process.returncode is None:  # cancelled (the daemon stops): leave nothing behind
                _kill_group(process)
        if code != 0:
            tail = stderr.decode(errors="replace").strip()[-STDERR_KEPT:]
            raise Undelivered(f"{self.argv[0]} exited with {code}" + (f": {tail}" if tail else ""))


async def _feed(process: Process, body: bytes) -> None:
    assert process.stdin is not None  # opened with stdin=PIPE
    try:
        await process.stdin.send(body)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass  # a program that does not read its stdin still ran: its exit status says how it went
    finally:
        await process.stdin.aclose()


async def _drain(process: Process, into: bytearray) -> None:
    assert process.stderr is not None  # opened with stderr=PIPE
    async for chunk in process.stderr:
        into += chunk
        del into[: -STDERR_KEPT * 4]


def _kill_group(process: Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
