"""A keeper's pipes and socket, read and written from the event loop's own readiness callbacks.

A keeper sits on the path of every call to its server. Under a flood (a server writing progress at
full speed) its loop is busy, and a line's wait is counted in loop iterations: through anyio
streams, each read and each write cost a task wakeup and a checkpoint, three iterations or so per
line, each of them possibly a whole read of the flood to handle (bench/flood_latency.py: a request
waited 0.7-1.2 ms to be read, a reply as long). Here a line is handled in the callback that finds
it readable, and written at once when the pipe or socket takes it: a request waits at most for the
one read being handled.

What a pipe or socket does not take at once is kept, in order, and written as it drains; a writer
past `high_water` tells its owner to stop reading what feeds it (backpressure, as an awaited send
gave), and again once it has drained.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable

from .line_split import LineSplitter, LineTooLong

log = logging.getLogger("mcpx.keeper")
READ_BYTES = 64 * 1024  # a pipe's default size: one read handled at a time stays short
HIGH_WATER = 1024 * 1024


def _read_fd(fd: int) -> Callable[[int], bytes]:
    return lambda n: os.read(fd, n)


def _write_fd(fd: int) -> Callable[[bytes | memoryview], int]:
    return lambda data: os.write(fd, data)


class LineReader:
    """Hands each read's complete non-empty lines (newline kept) to `on_lines`, together, from the
    loop's reader callback; `on_end(too_long)` once, at EOF, an error, or a line past `max_line`."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        source: int | socket.socket,
        on_lines: Callable[[list[bytes]], None],
        on_end: Callable[[bool], None],
        max_line: int,
    ) -> None:
        self._loop = loop
        self._source = source
        self._read = source.recv if isinstance(source, socket.socket) else _read_fd(source)
        self._on_lines = on_lines
        self._on_end = on_end
        self._lines = LineSplitter(max_line)
        self._reading = False
        self._ended = False

    def resume(self) -> None:
        if not self._reading and not self._ended:
            self._loop.add_reader(self._source, self._readable)
            self._reading = True

    def pause(self) -> None:
        if self._reading:
            self._loop.remove_reader(self._source)
            self._reading = False

    def close(self) -> None:
        self.pause()
        self._ended = True

    def poll(self) -> None:
        """Handle what is readable now, if reading, without waiting for the loop to say so."""
        if self._reading:
            self._readable()

    def _end(self, too_long: bool) -> None:
        self.close()
        self._on_end(too_long)

    def _readable(self) -> None:
        try:
            chunk = self._read(READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            log.debug("read failed: %s", exc)
            self._end(False)
            return
        if not chunk:
            self._end(False)
            return
        try:
            lines = self._lines.feed(chunk)
        except LineTooLong:
            self._end(True)
            return
        batch = [line + b"\n" for line in lines if line.strip()]
        if batch:
            self._on_lines(batch)


class Writer:
    """Writes `data` at once where the pipe or socket takes it, the rest as it drains, in order.
    `on_pressure(True)` when more than `high_water` bytes wait, `on_pressure(False)` once they are
    written; `on_broken()` once, when the peer is gone (what waited is dropped)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        target: int | socket.socket,
        *,
        on_pressure: Callable[[bool], None] = lambda _: None,
        on_broken: Callable[[], None] = lambda: None,
        high_water: int = HIGH_WATER,
    ) -> None:
        self._loop = loop
        self._target = target
        self._write = target.send if isinstance(target, socket.socket) else _write_fd(target)
        self._on_pressure = on_pressure
        self._on_broken = on_broken
        self._high_water = high_water
        self._waiting = bytearray()
        self._pressed = False
        self._drained: asyncio.Event | None = None
        self.broken = False

    @property
    def pressed(self) -> bool:
        """More than `high_water` bytes wait (on_pressure(True) was the last call)."""
        return self._pressed

    def write(self, data: bytes) -> bool:
        """False when the peer is gone (nothing is written then)."""
        if self.broken:
            return False
        if self._waiting:
            self._waiting += data
        else:
            sent = self._send(data)
            if sent is None:
                self._break()
                return False
            if sent < len(data):
                self._waiting += data[sent:]
                self._loop.add_writer(self._target, self._writable)
        if not self._pressed and len(self._waiting) > self._high_water:
            self._pressed = True
            self._on_pressure(True)
        return True

    async def drained(self) -> bool:
        """Wait until everything written has gone out: True, or False when the peer went first."""
        if self._waiting and not self.broken:
            if self._drained is None:
                self._drained = asyncio.Event()
            await self._drained.wait()
        return not self.broken

    def close(self) -> None:
        """Stop writing (what waits is dropped); the owner closes the pipe or socket itself."""
        if self._waiting:
            self._loop.remove_writer(self._target)
            self._waiting.clear()
        self.broken = True
        self._wake()

    def _send(self, data: bytes | memoryview) -> int | None:
        try:
            return self._write(data)
        except (BlockingIOError, InterruptedError):
            return 0
        except OSError as exc:
            log.debug("write failed: %s", exc)
            return None

    def _break(self) -> None:
        self.close()
        self._on_broken()

    def _writable(self) -> None:
        with memoryview(self._waiting) as view:
            sent = self._send(view)
        if sent is None:
            self._break()
            return
        del self._waiting[:sent]
        if self._waiting:
            return
        self._loop.remove_writer(self._target)
        if self._pressed:
            self._pressed = False
            self._on_pressure(False)
        self._wake()

    def _wake(self) -> None:
        if self._drained is not None:
            self._drained.set()
            self._drained = None
