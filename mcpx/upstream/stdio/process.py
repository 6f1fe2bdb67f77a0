"""A stdio upstream: one child process in its own process group, one JSON-RPC message per line."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import anyio
from anyio.abc import Process

from ...config.model import ServerConfig
from ...protocol.jsonrpc import Id
from ...protocol.revisions import Era
from ..fair_share import FairShare
from ..transport import Feed
from .line_batches import LineBatches, LineTooLong, feed_batch
from .process_group import stop_group

log = logging.getLogger("mcpx.upstream")

START_MARK = "--- mcpx: started"  # the line each start writes to the stderr log
MAX_LINE = 64 * 1024 * 1024


class StdioTransport:
    kind: Literal["stdio", "http"] = "stdio"
    run_id: str | None = None  # the server does not outlive the daemon

    def __init__(self, name: str, cfg: ServerConfig, log_dir: Path) -> None:
        self.name = name
        self.cfg = cfg
        self.log_dir = log_dir
        self.proc: Process | None = None
        self._write_lock = anyio.Lock()
        self.closed = anyio.Event()
        self.era: Era | None = None
        self.revision: str | None = None

    async def run(self, feed: Feed, started: Callable[[], None]) -> None:
        """Start the child, feed every line it writes, return when it exits."""
        env = dict(os.environ)
        env.update(self.cfg.env)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        stderr = open(self.log_dir / f"{self.name}.stderr.log", "ab")  # noqa: ASYNC230, SIM115 - a local append-open; lives as long as the child (closed below)
        stderr.write(f"{START_MARK} {time.strftime('%Y-%m-%dT%H:%M:%S')} {self.cfg.command}\n".encode())
        stderr.flush()
        try:
            self.proc = await anyio.open_process(
                [self.cfg.command or "", *self.cfg.args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=self.cfg.cwd,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            stderr.close()
            self.closed.set()
            raise RuntimeError(f"cannot start {self.cfg.command!r}: {exc.strerror or exc}") from None
        started()
        try:
            assert self.proc.stdout is not None
            lines = LineBatches(self.name, MAX_LINE)
            fair = FairShare()
            async for chunk in self.proc.stdout:
                try:
                    batch = lines.feed(chunk)
                except LineTooLong as exc:
                    log.warning("upstream %s: %s, dropped", self.name, exc)
                    continue
                await feed_batch(self.name, batch, feed, fair)
            await self.proc.wait()
        finally:
            self.closed.set()
            await self.close()  # shielded: a cancelled reader must not orphan the child
            stderr.close()

    async def send(self, msg: dict[str, Any], origin: str | None = None) -> None:
        if self.proc is None or self.proc.stdin is None or self.closed.is_set():
            raise ConnectionError("process is not running")
        data = json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        async with self._write_lock:
            try:
                await self.proc.stdin.send(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                raise ConnectionError(f"write failed: {exc}") from None

    async def abort(self, request_id: Id) -> None:
        """stdio has no per-request stream to close; cancellation is the notification alone."""

    async def open_listen_stream(self) -> None:
        """Everything a stdio server pushes already arrives on its one stdout."""

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.returncode

    async def close(self) -> None:
        if self.proc is not None:
            await stop_group(self.proc, self.name)
