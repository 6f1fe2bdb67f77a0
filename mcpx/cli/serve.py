"""`mcpx serve`: a stdio MCP server for hosts that spawn processes, relaying to the daemon.

The shim holds no MCP state of its own: each stdin line goes to the daemon and each frame from the
daemon becomes one stdout line, so calls and tasks outlive the host process. One thread polls
stdin and the daemon's socket; a line costs one read and one write each way (serve_links.py says
which socket). What it remembers is only what a reconnection needs: the host's requests still
waiting, and a 2025 host's initialize, replayed to a daemon that restarted so the host's session
goes on without it noticing. A request still waiting goes to the next daemon marked as resumed
(host/shim_wire.py): a call the previous daemon made on a kept server is collected, not made
again. With no daemon back within RECONNECT_S, each gets an error.
"""

from __future__ import annotations

import os
import secrets
import select
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from ..client.daemon_client import running_daemon
from ..connections import naming
from ..daemon import state_folder
from ..host import shim_wire
from .serve_links import Link, UnixLink, WebsocketLink

RECONNECT_S = 5.0  # how long a shim whose daemon went waits for one to come back
RETRY_S = 0.1
DRAIN_S = 0.5  # after the host's EOF: how long in-flight replies may still arrive
REINIT_ID = "mcpx-serve-reinit"
GONE = -32603


def connect(folder: Path, hello: shim_wire.Hello, transport: str | None) -> Link | None:
    """The daemon's socket, else (unless MCPX_SHIM_TRANSPORT=unix) its websocket; None: no daemon."""
    if transport != "ws":
        try:
            return UnixLink.connect(folder, hello)
        except OSError:
            if transport == "unix":
                return None
    info = running_daemon(folder)
    if info is None:
        return None
    try:
        return WebsocketLink.connect(int(info["port"]), state_folder.api_token(folder), hello)
    except Exception:  # noqa: BLE001 - refused, reset, a failed handshake: no daemon to talk to yet
        return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _say(text: str) -> None:
    print(f"mcpx serve: {text}", file=sys.stderr, flush=True)


class Relay:
    def __init__(self, connect: Callable[[], Link | None], stdin: int = 0, stdout: int = 1) -> None:
        self.connect = connect
        self.stdin, self.stdout = stdin, stdout
        self.pending: dict[Any, dict[str, Any]] = {}  # the host's requests not answered yet, by id
        self.initialize: dict[str, Any] | None = None  # a 2025 host's, replayed after a reconnection
        self.initialized: bytes | None = None
        self._partial = b""
        self._held: list[bytes] = []  # lines the host sent while no daemon was connected

    def run(self) -> int:
        link = self.connect()
        if link is None:
            _say("cannot reach the daemon")
            return 1
        while True:
            outcome = self._relay(link)
            link.close()
            if outcome is not None:
                return outcome
            _say(f"the daemon closed the connection; waiting up to {RECONNECT_S:g} s for it to come back")
            found = self._reconnect()
            if found is None:
                self._fail_pending()
                _say("no daemon came back; exiting")
                return 1
            link = found
            _say("reconnected to the daemon")

    def _relay(self, link: Link) -> int | None:
        """Relay until the host is done (its exit code) or the daemon went (None)."""
        poller = select.poll()
        poller.register(self.stdin, select.POLLIN)
        poller.register(link.sock, select.POLLIN)
        held, self._held = self._held, []
        if held and not _sent(link, held):
            return None
        stdin_open, deadline = True, 0.0
        while True:
            timeout = None if stdin_open else max(0.0, deadline - time.monotonic()) * 1000
            for fd, _event in poller.poll(timeout):
                if fd == self.stdin:
                    lines = self._read_stdin()
                    if lines is None:
                        stdin_open, deadline = False, time.monotonic() + DRAIN_S
                        poller.unregister(self.stdin)
                        lines = self._take_partial()
                    if lines and not _sent(link, lines):
                        return None if stdin_open else 0
                else:
                    lines = self._from_daemon(link.receive())
                    if lines:
                        try:
                            _write_all(self.stdout, b"\n".join(lines) + b"\n")
                        except OSError:  # the host closed our stdout: it is gone
                            return 0
                    if link.closed:
                        return 0 if not stdin_open else None
            if not stdin_open and (not self.pending or time.monotonic() >= deadline):
                return 0  # EOF from the host, and its replies are out (or had their moment)

    def _read_stdin(self) -> list[bytes] | None:
        """Whole lines from the host (tracked), or None at its EOF."""
        try:
            chunk = os.read(self.stdin, 256 * 1024)
        except OSError:
            chunk = b""
        if not chunk:
            return None
        *lines, self._partial = (self._partial + chunk).split(b"\n") if self._partial else chunk.split(b"\n")
        return self._to_daemon(lines)

    def _take_partial(self) -> list[bytes]:
        rest, self._partial = self._partial, b""
        return self._to_daemon([rest])

    def _to_daemon(self, lines: list[bytes]) -> list[bytes]:
        kept = []
        for raw in lines:
            line = raw.strip()
            if not line:
                continue
            kept.append(line)
            msg = _loads(line)
            if msg is None or "method" not in msg:
                continue
            if "id" in msg and _hashable(msg["id"]):
                self.pending[msg["id"]] = msg
                if msg["method"] == "initialize":
                    self.initialize = msg
            elif msg["method"] == "notifications/initialized":
                self.initialized = line
        return kept

    def _from_daemon(self, lines: list[bytes]) -> list[bytes]:
        kept = []
        for line in lines:
            if not line:
                continue
            msg = _loads(line)
            if msg is not None and "method" not in msg and _hashable(msg.get("id")):
                if msg.get("id") == REINIT_ID:
                    continue  # the daemon's answer to a replayed initialize: the host had its own
                self.pending.pop(msg.get("id"), None)
            kept.append(line)
        return kept

    def _fail_pending(self) -> None:
        """Every request still waiting gets an error now, rather than its host's timeout."""
        message = "mcpx serve: the connection to the mcpx daemon closed while this request ran"
        frames = [
            orjson.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": GONE, "message": message}})
            for rid in self.pending
        ]
        self.pending.clear()
        if frames:
            try:
                _write_all(self.stdout, b"\n".join(frames) + b"\n")
            except OSError:
                pass

    def _reconnect(self) -> Link | None:
        """A daemon again within RECONNECT_S, with the host's session replayed; None if none came
        (or the host left meanwhile). The host's lines meanwhile are held for the new daemon."""
        poller = select.poll()
        poller.register(self.stdin, select.POLLIN)
        deadline = time.monotonic() + RECONNECT_S
        while time.monotonic() < deadline:
            link = self.connect()
            if link is not None:
                self._held = self._replay() + self._held
                return link
            if poller.poll(RETRY_S * 1000):
                lines = self._read_stdin()
                if lines is None:
                    return None  # the host is gone too
                self._held += lines
        return None

    def _replay(self) -> list[bytes]:
        """For the next daemon: the host's session (its initialize, answered by this shim, unless
        the host still waits for it), then every request still waiting, marked as resumed."""
        replay = []
        if self.initialize is not None:
            waiting = self.pending.get(self.initialize.get("id")) is self.initialize
            replay.append(orjson.dumps(self.initialize if waiting else {**self.initialize, "id": REINIT_ID}))
            if self.initialized is not None:
                replay.append(self.initialized)
        replay += [
            orjson.dumps(shim_wire.resume_line(msg)) for msg in self.pending.values() if msg is not self.initialize
        ]
        return replay


def _sent(link: Link, lines: list[bytes]) -> bool:
    try:
        link.send(lines)
    except OSError:  # the daemon went: its end is read next, or was already
        return False
    return True


def _loads(line: bytes) -> dict[str, Any] | None:
    try:
        msg = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return msg if isinstance(msg, dict) else None


def _hashable(value: object) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def relay(folder: Path) -> int:
    """Serve the host on stdin/stdout until it leaves, or the daemon leaves and does not come back."""
    hello = shim_wire.Hello(
        label=os.environ.get(naming.LABEL_ENV), process=naming.parent_label(), instance=secrets.token_urlsafe(18)
    )
    transport = os.environ.get(shim_wire.TRANSPORT_ENV) or None
    try:
        return Relay(lambda: connect(folder, hello, transport)).run()
    except KeyboardInterrupt:
        return 130
