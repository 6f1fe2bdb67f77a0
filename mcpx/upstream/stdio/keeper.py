"""`python -m mcpx.upstream.stdio.keeper`: one stdio upstream server kept alive across daemon restarts.

The daemon starts a keeper per stdio server (keeper_transport.py) and hands it a Spec on stdin.
The keeper leads its own session (a signal to the daemon's group does not reach it), starts the
server in a session of its own, and relays lines between the server's pipes and whichever daemon
is connected to its unix socket (0600, in the state folder's keepers/). While no daemon is
connected it answers the server's pings itself and holds what the server writes, up to
`buffer_bytes` (beyond that lines are dropped and counted: the next daemon is told). It also keeps
the last replies it relayed, because a daemon killed mid-read loses what sat in its socket buffer;
a new daemon gets those again first. Its welcome names the ids of every reply it is about to
replay, so the daemon knows which of its predecessor's calls still have a reply coming before it
reads them (replies nobody claims are dropped there).

It ends, stopping its server by process group, when the server exits (recording the exit code for
the next daemon), when a daemon says `stop` or on SIGTERM, or when no daemon has been connected
for `grace_s`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import signal
import sys
import time
from collections import OrderedDict, deque
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import Process, SocketAttribute, SocketListener, SocketStream

from . import keeper_wire as wire
from .fd_io import LineReader, Writer
from .id_ranges import IdRanges
from .process_group import stop_group
from .progress_hold import ProgressHold

log = logging.getLogger("mcpx.keeper")
REPLAY_REPLIES = 1000  # replies kept for a daemon that died before reading them
REPLAY_BYTES = 4 * 1024 * 1024
# A server's line, the id of the request it asks (JSON text), the id of the request it answers.
_Line = tuple[bytes, str | None, wire.Id | None]
MAX_ORIGINS = 1000  # host requests remembered for a restarted daemon (the oldest go first)
SLICE_LINES = 64  # a server's lines handled before the daemon's socket is looked at again
MAX_OUTSTANDING = 10_000  # requests a server never answered (cancelled ones) must not pile up


class Keeper:
    def __init__(self, spec: wire.Spec) -> None:
        self.spec = spec
        self.folder = Path(spec.folder)
        self.run_id = secrets.token_hex(8)
        self.proc: Process | None = None
        self.conn: SocketStream | None = None
        # The connected daemon's socket, written from the loop's callbacks (fd_io.py); every
        # line to it and to the server goes out in the callback that has it, in order.
        self._link: _Link | None = None
        self._stdin: Writer | None = None
        self._server_out: LineReader | None = None
        self._progress = ProgressHold()  # a flood's progress, passed on once per window
        self._progress_timer: asyncio.TimerHandle | None = None
        # Server lines while no daemon is connected: (line, its id if it is a request, its id if a reply).
        self.backlog: deque[_Line] = deque()
        # The server's requests a daemon got but did not answer: a daemon that died owes them,
        # so the next one gets them again (and answers, if only to say it cannot).
        self.asked: dict[str, bytes] = {}
        self.backlog_bytes = 0
        self.lost = 0
        self.recent: deque[tuple[bytes, wire.Id]] = deque()  # replies relayed lately, with their ids
        self.recent_bytes = 0
        self.handshake: dict[str, Any] | None = None
        self.next_id = 1
        self.outstanding: dict[str, list[Any]] = {}  # json(id) -> [id, method]: sent, unanswered
        # Every (integer) request id given to the server: a restarted daemon tells from it a request
        # the server got (its reply lost, if not replayed) from one that never arrived (sent again).
        self.forwarded = IdRanges()
        # The host request each recent tools/call was made for (a `mcpx serve` host's), so the next
        # daemon, asked again by that host, collects the reply instead of calling again.
        self.origins: OrderedDict[str, wire.Id] = OrderedDict()
        self.origins_dropped = 0
        self._connected = anyio.Event()
        self._disconnected = anyio.Event()
        self._disconnected.set()
        self.done = anyio.Event()
        self.why = ""

    def finish(self, why: str) -> None:
        if not self.done.is_set():
            self.why = why
            self.done.set()

    # ---- life ----------------------------------------------------------------------------
    async def main(self) -> None:
        os.umask(0o077)
        os.chdir(self.folder)  # the socket is bound by its short relative name
        sock_name = f"{self.spec.stem}.sock"
        try:
            os.unlink(sock_name)
        except FileNotFoundError:
            pass
        listener = await anyio.create_unix_listener(sock_name)
        os.chmod(sock_name, 0o600)
        # The server's pipes are ours, read and written from the loop's callbacks (fd_io.py).
        child_in, stdin_fd = os.pipe()
        stdout_fd, child_out = os.pipe()
        with open(self.spec.stderr_log, "ab") as stderr:  # noqa: ASYNC230 - a local append-open, once
            try:
                self.proc = await anyio.open_process(
                    [self.spec.command, *self.spec.args],
                    stdin=child_in,
                    stdout=child_out,
                    stderr=stderr,
                    cwd=self.spec.cwd,
                    env=self.spec.env,
                    start_new_session=True,
                )
            except OSError as exc:
                await listener.aclose()
                _unlink(sock_name)
                _say(f"error: cannot start {self.spec.command!r}: {exc.strerror or exc}")
                raise SystemExit(127) from None
            finally:
                os.close(child_in)
                os.close(child_out)
        for fd in (stdin_fd, stdout_fd):
            os.set_blocking(fd, False)
        loop = asyncio.get_running_loop()
        self._stdin = Writer(loop, stdin_fd, on_pressure=self._server_pressed, on_broken=self._stdin_broken)
        record = wire.Record(
            self.spec.server, os.getpid(), self.proc.pid, self.run_id, self.spec.config_hash, time.time()
        )
        record.write(self.folder)
        _say("ready")
        log.info("keeping %s (pid %d), run %s", self.spec.server, self.proc.pid, self.run_id)
        exit_code: int | None = None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._accept, listener)
                tg.start_soon(self._read_server, stdout_fd)
                tg.start_soon(self._grace)
                tg.start_soon(self._signals)
                await self.done.wait()
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await listener.aclose()
                self._stdin.close()
                os.close(stdin_fd)  # EOF on the server's stdin: stop_group's polite first step
                if self._server_out is not None:
                    self._server_out.close()
                os.close(stdout_fd)
                await stop_group(self.proc, self.spec.server)
                exit_code = self.proc.returncode
                unheard = self.why == "exited"
                if unheard:
                    record.exit_code = exit_code  # the next daemon says how the server ended
                wire.leave_record(self.folder, record, heard=not unheard)
        log.info("keeper for %s ends (%s; server code %s)", self.spec.server, self.why, exit_code)

    async def _signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                self.finish("signal")
                return

    async def _grace(self) -> None:
        """No daemon for grace_s (from the start, or since the last one left): stop."""
        while True:
            await self._disconnected.wait()
            with anyio.move_on_after(self.spec.grace_s):
                await self._connected.wait()
            if self.conn is None:
                self.finish(f"no daemon for {self.spec.grace_s:g} s")
                return
            await anyio.lowlevel.checkpoint()  # connected again: wait for the next disconnect

    # ---- server side ---------------------------------------------------------------------
    async def _read_server(self, stdout_fd: int) -> None:
        ended = anyio.Event()
        too_long = False

        def end(over: bool) -> None:
            nonlocal too_long
            too_long = over
            ended.set()

        self._server_out = LineReader(asyncio.get_running_loop(), stdout_fd, self._from_server, end, wire.MAX_LINE)
        self._server_out.resume()
        await ended.wait()
        if self._progress_timer is not None:
            self._progress_timer.cancel()
        self._pass_progress()
        assert self.proc is not None
        if too_long:
            # Nothing it writes can be read any more: stopped, not waited on (a server that then
            # sleeps held its calls for ever).
            log.warning("%s wrote a line over %d bytes; stopping it", self.spec.server, wire.MAX_LINE)
            await stop_group(self.proc, self.spec.server)
        code = await self.proc.wait()
        told = self._to_daemon(wire.encode(wire.control("exit", code=code)), hold=False)
        if told and self._link is not None:
            told = await self._link.writer.drained()
        # A daemon that heard the exit handles it now; only an unheard one is left for the next daemon.
        self.finish("exited, the daemon told" if told else "exited")

    def _from_server(self, lines: list[bytes]) -> None:
        """One read's lines from the server, to the daemon a slice at a time. A long read (what
        a flooding server wrote while the keeper waited for a CPU) is handled in slices, and the
        daemon's socket is looked at between them: a request waiting there goes to the server
        after one slice, not after the whole read."""
        if len(lines) <= SLICE_LINES:
            self._from_server_slice(lines)
            return
        for at in range(0, len(lines), SLICE_LINES):
            if at and self._link is not None:
                self._link.reader.poll()
            self._from_server_slice(lines[at : at + SLICE_LINES])

    def _from_server_slice(self, lines: list[bytes]) -> None:
        """Lines from the server, to the daemon in one write (a flooding server's notifications
        would otherwise cost a send each, and every reply behind them would wait)."""
        out: list[_Line] = []
        for line in self._progress.take(lines, time.monotonic()):
            if b'"id"' not in line:  # a notification: no id to track (most of a flood), no parse
                out.append((line, None, None))
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                msg = None
            asked = None
            reply: wire.Id | None = None
            if isinstance(msg, dict) and "id" in msg and "method" not in msg:
                self.outstanding.pop(json.dumps(msg["id"]), None)
                reply = msg["id"] if isinstance(msg["id"], (str, int)) else None
            elif isinstance(msg, dict) and "id" in msg:
                if msg.get("method") == "ping" and self.conn is None:
                    # Nobody to ask: a server that pings its client must not think it is gone.
                    self._to_server(wire.encode({"jsonrpc": "2.0", "id": msg["id"], "result": {}}))
                    continue
                asked = json.dumps(msg["id"])
            out.append((line, asked, reply))
        self._to_daemon_all(out)
        if self._progress.holding and self._progress_timer is None:
            self._progress_timer = asyncio.get_running_loop().call_later(self._progress.window_s, self._pass_progress)

    def _pass_progress(self) -> None:
        """The hold's window ended: its newest progress goes on."""
        self._progress_timer = None
        self._to_daemon_all([(line, None, None) for line in self._progress.flush(time.monotonic())])

    def _remember_reply(self, line: bytes, rid: wire.Id) -> None:
        self.recent.append((line, rid))
        self.recent_bytes += len(line)
        while len(self.recent) > REPLAY_REPLIES or self.recent_bytes > REPLAY_BYTES:
            self.recent_bytes -= len(self.recent.popleft()[0])

    def _to_server(self, line: bytes) -> None:
        assert self._stdin is not None
        if not self._stdin.write(line):
            log.info("%s: its stdin is closed; a line from the daemon was not delivered", self.spec.server)

    def _stdin_broken(self) -> None:
        log.info("%s: its stdin is closed", self.spec.server)
        self._server_pressed(False)

    def _server_pressed(self, pressed: bool) -> None:
        """The server is not reading its stdin: stop reading the daemon until it has (an awaited
        write held the daemon back the same way)."""
        if self._link is not None:
            (self._link.reader.pause if pressed else self._link.reader.resume)()

    def _daemon_pressed(self, pressed: bool) -> None:
        """The daemon is not reading: stop reading the server until it has."""
        if self._server_out is not None:
            (self._server_out.pause if pressed else self._server_out.resume)()

    def _to_daemon(
        self, line: bytes, asked: str | None = None, *, reply: wire.Id | None = None, hold: bool = True
    ) -> bool:
        """Send `line` to the connected daemon, else hold it (`hold`); True when a daemon got it."""
        return self._to_daemon_all([(line, asked, reply)], hold=hold)

    def _to_daemon_all(self, lines: list[_Line], *, hold: bool = True) -> bool:
        """Send `lines` to the connected daemon in one write, else hold them (`hold`); True when a
        daemon got them (its socket took them, or will as it drains)."""
        if not lines:
            return True
        link = self._link
        if link is not None and link.writer.write(b"".join(line for line, _, _ in lines)):
            for line, asked, reply in lines:
                if reply is not None:
                    self._remember_reply(line, reply)
                if asked is not None:
                    self.asked[asked] = line
                    if len(self.asked) > MAX_OUTSTANDING:
                        del self.asked[next(iter(self.asked))]
            return True
        if not hold:
            return False
        for line, asked, reply in lines:
            if self.backlog_bytes + len(line) > self.spec.buffer_bytes:
                self.lost += 1
                if self.lost == 1:
                    log.warning("%s: no daemon and %d bytes held; dropping lines", self.spec.server, self.backlog_bytes)
                continue
            self.backlog.append((line, asked, reply))
            self.backlog_bytes += len(line)
        return False

    # ---- daemon side ---------------------------------------------------------------------
    async def _accept(self, listener: SocketListener) -> None:
        async with anyio.create_task_group() as tg:
            while True:
                conn = await listener.accept()
                tg.start_soon(self._serve_daemon, conn)

    async def _serve_daemon(self, conn: SocketStream) -> None:
        if self._link is not None:
            await self._let_go(self._link)  # a newer daemon took over
        loop = asyncio.get_running_loop()
        sock = conn.extra(SocketAttribute.raw_socket)
        link = _Link(conn)
        link.writer = Writer(loop, sock, on_pressure=self._daemon_pressed, on_broken=lambda: self._dropped(link))
        link.reader = LineReader(loop, sock, self._from_daemon_lines, link.end, wire.MAX_LINE)
        # Every reply about to be replayed, named up front: the daemon must know a reply is
        # coming before it reads one, or a task could look for it too early and give up.
        replayed = [rid for _, rid in self.recent] + [rid for _, _, rid in self.backlog if rid is not None]
        welcome = wire.control(
            "welcome",
            runId=self.run_id,
            serverPid=self.proc.pid if self.proc else None,
            handshake=self.handshake,
            nextId=self.next_id,
            outstanding=list(self.outstanding.values()),
            forwarded=self.forwarded.wire(),
            origins=dict(self.origins),
            originsDropped=self.origins_dropped,
            replayed=replayed,
            lost=self.lost,
        )
        recent = b"".join(line for line, _ in self.recent)
        backlog = b"".join(line for line, _, _ in self.backlog)
        # No await from here on: the welcome and what it names go out before any line relayed after.
        if not link.writer.write(wire.encode(welcome) + recent + b"".join(self.asked.values()) + backlog):
            await conn.aclose()
            return
        for line, asked, reply in self.backlog:
            if asked is not None:
                self.asked[asked] = line
            if reply is not None:  # relayed now: replayed again if this daemon dies unread
                self._remember_reply(line, reply)
        self.backlog.clear()
        self.backlog_bytes = 0
        self.lost = 0
        self._link = link
        self.conn = conn
        self._disconnected = anyio.Event()
        self._connected.set()
        if not (
            self._stdin is not None and self._stdin.pressed
        ):  # else once the server has read the last daemon's lines
            link.reader.resume()
        log.info("a daemon connected (%d outstanding requests)", len(self.outstanding))
        try:
            await link.ended.wait()
            if link.too_long:
                log.warning("a daemon sent a line over %d bytes; dropping that connection", wire.MAX_LINE)
        finally:
            with anyio.CancelScope(shield=True):
                await self._let_go(link)

    async def _let_go(self, link: _Link) -> None:
        self._dropped(link)
        await link.conn.aclose()

    def _dropped(self, link: _Link) -> None:
        """This daemon's link is done (it went away, broke, or another took over): stop using it."""
        link.reader.close()
        link.writer.close()
        link.ended.set()
        if self._link is link:
            self._link = None
            self.conn = None
            self._daemon_pressed(False)  # what the server writes now is held for the next daemon
            self._connected = anyio.Event()
            self._disconnected.set()
            log.info("the daemon went away")

    def _from_daemon_lines(self, lines: list[bytes]) -> None:
        for line in lines:
            self._from_daemon(line)

    def _from_daemon(self, line: bytes) -> None:
        try:
            msg = json.loads(line)
        except ValueError:
            msg = None
        if isinstance(msg, dict):
            if wire.is_control(msg):
                kind = msg[wire.CONTROL]
                if kind == "handshake" and isinstance(msg.get("handshake"), dict):
                    self.handshake = msg["handshake"]
                elif kind == "stop":
                    self.finish("stopped by the daemon")
                elif kind == "origin" and isinstance(msg.get("origin"), str) and isinstance(msg.get("id"), (str, int)):
                    self.origins[msg["origin"]] = msg["id"]
                    self.origins.move_to_end(msg["origin"])
                    if len(self.origins) > MAX_ORIGINS:
                        self.origins.popitem(last=False)
                        self.origins_dropped += 1
                return
            if "id" in msg and "method" not in msg:
                self.asked.pop(json.dumps(msg["id"]), None)  # the daemon answered the server
            elif "method" in msg and "id" in msg:
                rid = msg["id"]
                self.outstanding[json.dumps(rid)] = [rid, msg["method"]]
                if len(self.outstanding) > MAX_OUTSTANDING:
                    del self.outstanding[next(iter(self.outstanding))]  # the oldest
                if isinstance(rid, int) and not isinstance(rid, bool):
                    self.forwarded.add(rid)
                    if rid >= self.next_id:
                        self.next_id = rid + 1
        self._to_server(line)


class _Link:
    """A connected daemon: its socket, read and written from the loop's callbacks."""

    writer: Writer
    reader: LineReader

    def __init__(self, conn: SocketStream) -> None:
        self.conn = conn
        self.ended = anyio.Event()
        self.too_long = False

    def end(self, too_long: bool) -> None:
        """The reader's end: EOF, an error, or a line past the bound."""
        self.too_long = too_long
        self.ended.set()


def _say(line: str) -> None:
    """Tell the daemon (on the stdout pipe it holds) that the socket is up, or why not; then let
    stdout go, so a daemon gone later is no broken pipe to us."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def _unlink(path: str | Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s keeper[%(process)d] %(message)s")
    spec = wire.Spec.from_json(sys.stdin.read())
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the spec is read; the daemon's pipe is not ours to keep
    os.close(devnull)
    anyio.run(Keeper(spec).main)


if __name__ == "__main__":
    main()
