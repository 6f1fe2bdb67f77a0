"""A stdio upstream reached through its keeper (keeper.py), so that it outlives the daemon.

On start the transport looks for the server's keeper record: a live keeper for the same command,
args, env and cwd is reconnected (and its welcome says which server run it keeps, the handshake a
previous daemon made, the next free request id, the requests still unanswered and the replies it
replays); a keeper for
another configuration, a dead one, or a record left by a server that exited is retired (keeper and
server group stopped, files removed) and a new keeper is started.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import anyio
from anyio.abc import Process, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

import mcpx

from ...config.model import ServerConfig
from ...protocol.jsonrpc import Id
from ...protocol.revisions import Era
from ..fair_share import FairShare
from ..transport import Feed
from . import keeper_wire as wire
from .id_ranges import IdRanges
from .line_batches import LineBatches, LineTooLong, feed_batch
from .process import START_MARK
from .process_group import killpg
from .process_group import wait as wait_process
from .send_fault import BeforeSend

log = logging.getLogger("mcpx.upstream")
SPAWN_TIMEOUT_S = 15.0
STOP_WAIT_S = 6.0  # the keeper's own staged stop of its server takes up to 3 x 2 s
# The folder holding the mcpx package the daemon runs, so the keeper runs the same code.
PACKAGE_ROOT = str(Path(mcpx.__file__).resolve().parents[1])


class KeeperTransport:
    kind: Literal["stdio", "http"] = "stdio"

    def __init__(
        self,
        name: str,
        cfg: ServerConfig,
        log_dir: Path,
        folder: Path,
        *,
        grace_s: float,
        buffer_bytes: int,
        before_send: BeforeSend | None = None,
    ) -> None:
        self.name = name
        self.before_send = before_send  # tests only: a daemon that dies before sending (send_fault.py)
        self.cfg = cfg
        self.log_dir = log_dir
        self.folder = folder
        self.grace_s = grace_s
        self.buffer_bytes = buffer_bytes
        self.closed = anyio.Event()
        self.era: Era | None = None
        self.revision: str | None = None
        self.detach = False  # set for a daemon that stops but leaves its upstreams running
        self.run_id: str | None = None  # the server process the keeper keeps
        self.handshake: dict[str, Any] | None = None  # a previous daemon's, to adopt
        self.next_id = 1
        self.outstanding: list[tuple[Id, str]] = []  # a previous daemon's unanswered requests
        self.replayed: list[Id] = []  # a previous daemon's answered requests whose replies follow the welcome
        self.forwarded: IdRanges | None = None  # the ids the server got (None: an older keeper, nothing known)
        self.origins: dict[str, Id] | None = None  # host request -> the previous daemon's request id
        self.origins_complete = False  # no origin was let go: one not named was never sent
        # Called with the welcome read and before any line after it is fed: the session learns
        # which replies are its predecessor's before the first of them arrives.
        self.on_welcome: Callable[[], None] | None = None
        self.lost = 0  # lines the keeper dropped while no daemon was connected
        self.reconnected = False
        self.previous_exit: int | None = None  # a server that ended while no daemon was connected
        self._returncode: int | None = None
        self._stream: SocketStream | None = None
        self._keeper_pid: int | None = None
        self._keeper_proc: Process | None = None  # when this daemon started it
        self._write_lock = anyio.Lock()
        self._stopping = False  # close() was asked: the keeper's socket ending is expected, not news

    @property
    def returncode(self) -> int | None:
        return self._returncode

    # ---- attach --------------------------------------------------------------------------
    async def run(self, feed: Feed, started: Callable[[], None]) -> None:
        try:
            stream = await self._attach()
            self._stream = stream
            reader = BufferedByteReceiveStream(stream)
            welcome = json.loads(await reader.receive_until(b"\n", wire.MAX_LINE))
            if not isinstance(welcome, dict) or welcome.get(wire.CONTROL) != "welcome":
                raise RuntimeError(f"the keeper of {self.name!r} did not say welcome")
            self._welcomed(welcome)
            if self.on_welcome is not None:
                self.on_welcome()
            started()
            fair = FairShare()
            lines = LineBatches(self.name, wire.MAX_LINE)
            try:
                while True:
                    batch = lines.feed(await reader.receive())  # (what the welcome's read left first)
                    upstream: list[dict[str, Any]] = []  # the server's own, between the keeper's controls
                    for msg in batch:
                        if not wire.is_control(msg):
                            upstream.append(msg)
                            continue
                        await feed_batch(self.name, upstream, feed, fair)
                        upstream = []
                        if msg[wire.CONTROL] == "exit":
                            code = msg.get("code")
                            self._returncode = code if isinstance(code, int) else None
                            return
                    await feed_batch(self.name, upstream, feed, fair)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError):
                if self._stopping:
                    log.debug("upstream %s: its keeper's socket closed as asked", self.name)
                else:
                    log.warning("upstream %s: its keeper went away", self.name)
            except (anyio.DelimiterNotFound, LineTooLong):
                log.warning("upstream %s: a line over %d bytes; reconnecting", self.name, wire.MAX_LINE)
        finally:
            self.closed.set()
            await self.close()

    def _welcomed(self, welcome: dict[str, Any]) -> None:
        self.run_id = str(welcome.get("runId"))
        handshake = welcome.get("handshake")
        self.handshake = handshake if isinstance(handshake, dict) else None
        next_id = welcome.get("nextId")
        self.next_id = next_id if isinstance(next_id, int) and next_id > 0 else 1
        self.outstanding = [
            (item[0], str(item[1]))
            for item in welcome.get("outstanding") or []
            if isinstance(item, list) and len(item) == 2 and isinstance(item[0], (str, int))
        ]
        self.replayed = [rid for rid in welcome.get("replayed") or [] if isinstance(rid, (str, int))]
        self.forwarded = IdRanges.from_wire(welcome.get("forwarded"))
        origins = welcome.get("origins")
        self.origins = (
            {k: v for k, v in origins.items() if isinstance(k, str) and isinstance(v, (str, int))}
            if isinstance(origins, dict)
            else None
        )
        dropped = welcome.get("originsDropped")
        self.origins_complete = isinstance(origins, dict) and dropped == 0
        lost = welcome.get("lost")
        self.lost = lost if isinstance(lost, int) else 0
        if self.lost:
            log.warning("upstream %s: its keeper dropped %d lines while no daemon was connected", self.name, self.lost)

    async def _attach(self) -> SocketStream:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        record = wire.Record.read(self.folder, self.name)
        want = wire.config_hash(self.cfg)
        if record is not None:
            if record.exit_code is None and record.config_hash == want and wire.is_keeper(record.keeper_pid):
                try:
                    stream = await self._connect()
                    self._keeper_pid = record.keeper_pid
                    self.reconnected = True
                    log.info("upstream %s: reconnected to its keeper (pid %d)", self.name, record.keeper_pid)
                    return stream
                except OSError as exc:
                    log.warning("upstream %s: its keeper does not answer (%s); replacing it", self.name, exc)
            elif record.exit_code is not None:
                self.previous_exit = record.exit_code
                log.warning(
                    "upstream %s exited with code %s while no daemon was connected", self.name, record.exit_code
                )
            elif record.config_hash != want:
                log.info("upstream %s: its command, args, env or cwd changed; replacing its keeper", self.name)
            await retire(self.folder, record)
        await self._spawn()
        return await self._connect()

    async def _connect(self) -> SocketStream:
        path = wire.socket_path(self.folder, self.name)
        if len(os.fsencode(path)) <= wire.SUN_PATH_MAX:
            return await anyio.connect_unix(path)
        fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        try:  # too long for sockaddr_un: through the folder's fd, a short path to the same socket
            return await anyio.connect_unix(f"/proc/self/fd/{fd}/{path.name}")
        finally:
            os.close(fd)

    async def _spawn(self) -> None:
        env = dict(os.environ)
        env.update(self.cfg.env)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        stderr_log = self.log_dir / f"{self.name}.stderr.log"
        with open(stderr_log, "ab") as fh:  # noqa: ASYNC230 - a local append, once per start
            fh.write(f"{START_MARK} {time.strftime('%Y-%m-%dT%H:%M:%S')} {self.cfg.command}\n".encode())
        spec = wire.Spec(
            server=self.name,
            command=self.cfg.command or "",
            args=list(self.cfg.args),
            env=env,
            cwd=self.cfg.cwd or os.getcwd(),
            folder=str(self.folder),
            stderr_log=str(stderr_log),
            grace_s=self.grace_s,
            buffer_bytes=self.buffer_bytes,
            config_hash=wire.config_hash(self.cfg),
        )
        keeper_env = dict(os.environ)
        keeper_env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))
        with open(self.log_dir / f"{self.name}.keeper.log", "ab") as keeper_log:  # noqa: ASYNC230 - as above
            proc = await anyio.open_process(
                [sys.executable, "-m", "mcpx.upstream.stdio.keeper"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=keeper_log,
                env=keeper_env,
                start_new_session=True,  # not in the daemon's group: a Ctrl-C or group kill spares it
            )
        assert proc.stdin is not None and proc.stdout is not None
        self._keeper_proc = proc
        self._keeper_pid = proc.pid
        await proc.stdin.send(spec.to_json().encode())
        await proc.stdin.aclose()
        try:
            with anyio.fail_after(SPAWN_TIMEOUT_S):
                said = await BufferedByteReceiveStream(proc.stdout).receive_until(b"\n", 64 * 1024)
        except (TimeoutError, anyio.EndOfStream, anyio.IncompleteRead):
            said = b""
        await proc.stdout.aclose()
        if said != b"ready":
            await wait_process(proc, 2)
            text = said.decode(errors="replace") or "its keeper exited"
            raise RuntimeError(text.removeprefix("error: "))

    # ---- traffic -------------------------------------------------------------------------
    async def send(self, msg: dict[str, Any], origin: str | None = None) -> None:
        stream = self._stream
        if stream is None or self.closed.is_set():
            raise ConnectionError("process is not running")
        if self.before_send is not None:
            await self.before_send(msg)
        data = wire.encode(msg)
        if origin is not None and "id" in msg:  # (in the same write: the keeper learns both or neither)
            data = wire.encode(wire.control("origin", id=msg["id"], origin=origin)) + data
        async with self._write_lock:
            try:
                await stream.send(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                raise ConnectionError(f"write failed: {exc}") from None

    async def remember_handshake(self, handshake: dict[str, Any]) -> None:
        """Kept by the keeper, so the next daemon adopts this session without a new handshake."""
        try:
            await self.send(wire.control("handshake", handshake=handshake))
        except ConnectionError:
            log.info("upstream %s: could not hand its keeper the handshake", self.name)

    async def abort(self, request_id: Id) -> None:
        """As for stdio: cancellation is the notification alone."""

    async def open_listen_stream(self) -> None:
        """Everything the server pushes arrives on the one socket."""

    async def close(self) -> None:
        """Stop the keeper and its server, unless this daemon leaves them running (`detach`)."""
        self._stopping = True
        with anyio.CancelScope(shield=True):
            stream, self._stream = self._stream, None
            if not self.detach and stream is not None and self._returncode is None:
                try:
                    with anyio.move_on_after(1):
                        async with self._write_lock:
                            await stream.send(wire.encode(wire.control("stop")))
                        # The keeper closes its end as it stops. Ours is closed once the reader
                        # has seen that: closed while the reader's wakeup is already queued,
                        # anyio's socket stream on uvloop logs an InvalidStateError traceback.
                        await self.closed.wait()
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    pass
            if stream is not None:
                await stream.aclose()
            if self.detach or self._keeper_pid is None:
                return
            if not await _gone(self._keeper_pid, self._keeper_proc, STOP_WAIT_S):
                log.warning("upstream %s: its keeper did not stop; killing it and its server", self.name)
                record = wire.Record.read(self.folder, self.name)
                if record is not None:
                    await retire(self.folder, record)
                else:
                    _kill(self._keeper_pid, signal.SIGKILL)


async def _gone(pid: int, proc: Process | None, seconds: float) -> bool:
    if proc is not None:
        return await wait_process(proc, seconds)
    deadline = time.monotonic() + seconds
    while wire.alive(pid):  # not our child: nothing to wait on but its pid
        if time.monotonic() > deadline:
            return False
        await anyio.sleep(0.05)
    return True


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def retire(folder: Path, record: wire.Record) -> None:
    """Stop a keeper and its server group (whatever state they are in) and remove its files."""
    if wire.is_keeper(record.keeper_pid):
        _kill(record.keeper_pid, signal.SIGTERM)  # the keeper stops its server itself
        if not await _gone(record.keeper_pid, None, STOP_WAIT_S):
            _kill(record.keeper_pid, signal.SIGKILL)
    if wire.alive(record.server_pid) and _leads_group(record.server_pid):
        killpg(record.server_pid, signal.SIGTERM)
        if not await _gone(record.server_pid, None, 2.0):
            killpg(record.server_pid, signal.SIGKILL)
    for path in (wire.record_path(folder, record.server), wire.socket_path(folder, record.server)):
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def _leads_group(pid: int) -> bool:
    """Still the server's group (it led its own): a reused pid in someone else's group is spared."""
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


async def retire_unconfigured(folder: Path, configured: set[str]) -> None:
    """Keepers of servers no longer in the config (or disabled) have nobody to serve."""
    for record in wire.all_records(folder):
        if record.server not in configured:
            log.info("upstream %s is no longer configured: stopping its keeper", record.server)
            await retire(folder, record)
