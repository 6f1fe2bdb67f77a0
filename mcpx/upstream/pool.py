"""The configured upstream servers: start, probe, restart with capped backoff, stop; tool catalogue."""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
from anyio.abc import TaskGroup, TaskStatus

from ..config.model import Config, ServerConfig
from ..events.keep import Keep, start_kept
from ..protocol import jsonrpc, param_headers
from ..protocol.errors import InvalidParams, LimitReached, McpError, UpstreamError, UpstreamUnavailable
from .auth.upstream_auth import UpstreamAuth
from .catalogue import CHANGED, KINDS, Naming, template_matches, valid_items
from .http import session_record
from .http.streamable import HttpTransport
from .session import AskOwner, UpstreamSession
from .stdio.keeper_transport import KeeperTransport, retire_unconfigured
from .stdio.process import START_MARK, StdioTransport
from .stdio.send_fault import BeforeSend
from .tasks.foreign_sessions import ForeignSessions
from .transport import Transport

PING_TIMEOUT_S = 5.0  # a carried-on HTTP session must answer a ping within this

log = logging.getLogger("mcpx.upstream")

BACKOFF_START_S = 0.25
BACKOFF_CAP_S = 30.0
STABLE_AFTER_S = 30.0  # an upstream that ran this long starts its backoff afresh
READY_WAIT_S = 10.0
RESTART_WAIT_S = 2.0
UpstreamState = Literal["starting", "ready", "restarting", "down", "stopped", "needs login"]
# An HTTP upstream's OAuth client (upstream/auth/desk.py), or None where mcpx never signs in.
AuthFor = Callable[[str, ServerConfig], "UpstreamAuth | None"]
OnListChanged = Callable[["UpstreamServer", tuple[str, ...]], Awaitable[None]]
OnResourceUpdated = Callable[["UpstreamServer", str], Awaitable[None]]  # (server, the upstream's uri)
# A question a server asked that no one call can be tied to, for an operator: (server key, method,
# params, the calls that may have asked it) -> the result the server gets (session.AskOperator).
AskOperator = Callable[[str, str, dict[str, Any], list[dict[str, Any]]], Awaitable[dict[str, Any]]]


def latest_run_lines(log_tail: str, lines: int) -> list[str]:
    """The last `lines` non-blank lines of the latest start (stdio.py marks each start in the log)
    that wrote any: a restart that has not written yet leaves the crash before it on show, which is
    what the status line beside it (`exited with code 3`) is about."""
    before_first, *after_marks = log_tail.split(START_MARK)
    runs = [before_first] + [run.partition("\n")[2] for run in after_marks]  # less the mark's own line
    for body in reversed(runs):
        written = [line for line in body.splitlines() if line.strip()]
        if written:
            return written[-lines:]
    return []


class RestartBackoff:
    """The wait before an upstream's next start: doubling from BACKOFF_START_S up to BACKOFF_CAP_S,
    and from the start again after a run that lasted STABLE_AFTER_S (it was not crash-looping)."""

    def __init__(
        self, start_s: float = BACKOFF_START_S, cap_s: float = BACKOFF_CAP_S, stable_after_s: float = STABLE_AFTER_S
    ) -> None:
        self.start_s = start_s
        self.cap_s = cap_s
        self.stable_after_s = stable_after_s
        self._next = start_s

    def delay(self, ran_for_s: float) -> float:
        if ran_for_s > self.stable_after_s:
            self._next = self.start_s
        delay = self._next
        self._next = min(delay * 2, self.cap_s)
        return delay


@dataclass(frozen=True)
class KeeperSettings:
    """Where and how stdio servers are kept across daemon restarts (config `keepers`)."""

    folder: Path
    grace_s: float
    buffer_bytes: int
    before_send: BeforeSend | None = None  # tests only (stdio/send_fault.py)


@dataclass(frozen=True)
class Route:
    server: str
    name: str  # the upstream's own name (or URI)
    item: dict[str, Any]  # as hosts see it

    @property
    def tool(self) -> dict[str, Any]:
        return self.item


class UpstreamServer:
    def __init__(
        self,
        key: str,
        cfg: ServerConfig,
        namespace: str | None,
        log_dir: Path,
        *,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        clock: Callable[[], float] = time.monotonic,
        keepers: KeeperSettings | None = None,
        sessions_folder: Path | None = None,
        on_change: OnListChanged | None = None,
        on_resource_updated: OnResourceUpdated | None = None,
        ask_operator: AskOperator | None = None,
        instance: str | None = None,
        auth: UpstreamAuth | None = None,
        ask_owner: AskOwner | None = None,
    ) -> None:
        """`instance` names one host's own process of a `scope: host` server (its log file's name);
        `auth` signs in to an HTTP upstream that asks for OAuth; `ask_owner` takes that process's
        questions that no call in flight can be tied to: its host's."""
        self.key = key
        self.auth = auth
        self.instance = instance
        self.ask_operator = ask_operator
        self.ask_owner = ask_owner
        # Where a 2025-11-25 HTTP upstream's session is remembered for the next daemon (http_session_record).
        self.sessions_folder = sessions_folder if cfg.transport == "http" else None
        self.keepers = keepers if cfg.transport == "stdio" else None
        self.detached = False  # the daemon stops but leaves this server (and its keeper) running
        self.previous_exit: int | None = None  # a kept server that ended while no daemon was connected
        self._sleep = sleep  # the restart loop's clock and sleep, replaceable in unit tests
        self._clock = clock
        self.cfg = cfg
        self.namespace = namespace
        self.log_dir = log_dir
        self.session: UpstreamSession | None = None
        self._state: UpstreamState = "starting"
        self.first_attempt = anyio.Event()  # set once its first start succeeded or failed
        self.last_error: str | None = None
        self.restarts = 0
        self.exit_code: int | None = None  # how its last stdio process ended
        self.lists: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
        self._stale: set[str] = set()  # lists a list_changed said changed, not fetched since
        # Tools it lists that mcpx leaves out, and why (an invalid `x-mcp-header`, SEP-2243).
        self.left_out: dict[str, str] = {}
        self._refreshing: set[str] = set()  # lists being fetched after a list_changed
        self.naming = Naming(namespace)
        self.on_change = on_change  # its lists changed: hosts are told
        self._ready = anyio.Event()
        self._stop = anyio.Event()
        self._transport: Transport | None = None
        self._last_capabilities: dict[str, Any] = {}
        self.watched: dict[str, int] = {}  # upstream URIs hosts subscribed to -> how many
        self._watch_changed = anyio.Event()
        self.on_resource_updated = on_resource_updated
        self.in_flight = 0  # host requests at this server now (mcpx.maxInFlight)
        self._went_idle = anyio.Event()  # set (and renewed) each time in_flight falls to 0
        # Tasks whose work runs on this process (`hold`): a `scope: host` process stays for them
        # after its host disconnects. A task between two requests (waiting for an approval, between
        # MRTR rounds) has none in flight, so in_flight alone cannot say so.
        self.holds = 0
        self._unheld = anyio.Event()  # set (and renewed) each time holds falls to 0
        self._stop_why: str | None = None  # why mcpx stopped it (stop()): what its cut calls are told
        # When its last host request ended, on time.monotonic (a `scope: host` process idles out);
        # not on `clock`, which is the restart loop's alone.
        self.last_used = time.monotonic()
        self._restart_asked: str | None = None  # who asked for a restart now (an operator), until it begins
        self._backoff_scope: anyio.CancelScope | None = None  # the wait before the next start

    def sibling(self, instance: str, ask_owner: AskOwner | None = None) -> UpstreamServer:
        """Another process of this server for one host alone (`scope: host`): never kept across a
        restart; its lists serve that host's calls, the shared process lists for everyone. Its
        questions are that host's (`ask_owner` takes those no call in flight can be tied to)."""
        return UpstreamServer(
            self.key,
            self.cfg,
            self.namespace,
            self.log_dir,
            on_resource_updated=self.on_resource_updated,
            ask_operator=self.ask_operator,
            instance=instance,
            ask_owner=ask_owner,
        )

    def call_refusal(self) -> LimitReached | None:
        """Why a host request may not go to this server now, or None."""
        limit = self.cfg.mcpx.maxInFlight
        if self.in_flight >= limit:
            return LimitReached(
                f"mcpServers.{self.key}.mcpx.maxInFlight", limit, "that many host requests are in flight at this server"
            )
        return None

    @contextlib.contextmanager
    def call_slot(self) -> Iterator[None]:
        """Hold one of the server's in-flight places for a host request, or raise the limit."""
        refused = self.call_refusal()
        if refused is not None:
            raise refused
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            self.last_used = time.monotonic()
            if self.in_flight == 0:
                self._went_idle.set()
                self._went_idle = anyio.Event()

    async def idle(self) -> None:
        """Until no host request is in flight here (a server a reload removes drains before it stops)."""
        while self.in_flight:
            await self._went_idle.wait()

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """A task's work runs on this process, from its start to its end (its TTL ends it at the
        latest): a `scope: host` process is not stopped under it when its host disconnects."""
        self.holds += 1
        try:
            yield
        finally:
            self.holds -= 1
            self.last_used = time.monotonic()
            if self.holds == 0:
                self._unheld.set()
                self._unheld = anyio.Event()

    async def unheld(self) -> None:
        """Until no task holds this process."""
        while self.holds:
            await self._unheld.wait()

    @property
    def state(self) -> UpstreamState:
        if self.auth is not None and self.auth.needs_login is not None and self._state != "stopped":
            return "needs login"
        return self._state

    @state.setter
    def state(self, value: UpstreamState) -> None:
        self._state = value
        if value != "starting":
            self.first_attempt.set()

    @property
    def log_path(self) -> Path | None:
        """Where a stdio upstream's stderr goes (stdio.py writes it)."""
        return self.log_dir / f"{self.log_name}.stderr.log" if self.cfg.transport == "stdio" else None

    @property
    def log_name(self) -> str:
        return self.key if self.instance is None else f"{self.key}.{self.instance}"

    def stderr_tail(self, lines: int = 10, max_bytes: int = 8192) -> list[str]:
        path = self.log_path
        if path is None:
            return []
        try:
            with open(path, "rb") as fh:
                fh.seek(0, 2)
                size = fh.tell()
                fh.seek(max(0, size - max_bytes))
                text = fh.read().decode("utf-8", errors="replace")
        except OSError:
            return []
        return latest_run_lines(text, lines)

    def stderr_log(self, lines: int, max_bytes: int = 512 * 1024) -> list[str]:
        """The log's last `lines` non-blank lines across starts (each start's mark line included),
        for an operator tailing it; [] for an HTTP server or before anything was written."""
        path = self.log_path
        if path is None:
            return []
        try:
            with open(path, "rb") as fh:
                fh.seek(0, 2)
                size = fh.tell()
                fh.seek(max(0, size - max_bytes))
                text = fh.read().decode("utf-8", errors="replace")
        except OSError:
            return []
        if size > max_bytes:
            text = text.partition("\n")[2]  # the first line read may be cut
        return [line for line in text.splitlines() if line.strip()][-lines:]

    @property
    def _stopping(self) -> bool:
        return self._stop.is_set()

    async def run(self) -> None:
        backoff = RestartBackoff()
        while not self._stopping:
            started_at = self._clock()
            try:
                await self._run_once()
            except Exception as exc:  # noqa: BLE001 - one upstream's failure never takes the daemon down
                self.last_error = _describe(exc)
                log.warning("upstream %s failed: %s", self.key, self.last_error)
            if self._stop.is_set():
                break
            if self.auth is not None and self.auth.needs_login is not None:
                await self._await_login()  # a person signs in (`mcpx login`): then at once, no backoff
                backoff = RestartBackoff()
                self.restarts += 1
                continue
            self.state = "restarting"
            delay = backoff.delay(self._clock() - started_at)
            if self._restart_asked is None:
                with anyio.CancelScope() as self._backoff_scope:
                    await self._sleep(delay)
                self._backoff_scope = None
            if self._restart_asked is not None:  # asked for: at once, and the backoff starts over
                log.info("upstream %s restarted by %s", self.key, self._restart_asked)
                self._restart_asked, backoff = None, RestartBackoff()
            self.restarts += 1

    async def _await_login(self) -> None:
        """Until the upstream's sign-in completes, the daemon stops, or an operator restarts it."""
        assert self.auth is not None
        self.first_attempt.set()
        with anyio.CancelScope() as self._backoff_scope:
            async with anyio.create_task_group() as tg:

                async def stopped() -> None:
                    await self._stop.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(stopped)
                await self.auth.wait_signed_in()
                tg.cancel_scope.cancel()
        self._backoff_scope = None
        self._restart_asked = None

    async def _run_once(self) -> None:
        transport: Transport
        keeper: KeeperTransport | None = None
        if self.keepers is not None:
            k = self.keepers
            transport = keeper = KeeperTransport(
                self.key,
                self.cfg,
                self.log_dir,
                k.folder,
                grace_s=k.grace_s,
                buffer_bytes=k.buffer_bytes,
                before_send=k.before_send,
            )
        elif self.cfg.transport == "stdio":
            transport = StdioTransport(self.log_name, self.cfg, self.log_dir)
        else:
            transport = HttpTransport(self.key, self.cfg, self.auth)
        self._transport = transport
        ask = functools.partial(self.ask_operator, self.key) if self.ask_operator is not None else None
        session = UpstreamSession(self.key, transport, self._on_event, ask, ask_owner=self.ask_owner)
        if self.cfg.mcpx.scope == "host" and self.instance is None:
            session.unattributed_fix = "this process only lists the server's tools; each host's calls run on its own"
        session.detached = self.detached
        if keeper is not None:
            keeper.detach = self.detached
            keeper.on_welcome = lambda: _inherit(keeper, session)
        async with anyio.create_task_group() as tg:
            session.tg = tg
            await tg.start(self._run_transport, transport, session)
            try:
                if keeper is not None:
                    await self._open_kept(keeper, session)
                elif isinstance(transport, HttpTransport) and self.sessions_folder is not None:
                    await self._open_http(transport, session, self.sessions_folder)
                else:
                    await session.start()
                if session.era == "legacy":
                    # What a 2025-11-25 server sends outside any request (list changes, updates, the
                    # requests a TypeScript server makes with no related call) comes on its GET
                    # stream, opened once initialized (a 405: it offers none).
                    await transport.open_listen_stream()
                for kind in KINDS:
                    self.lists[kind] = await self._fetch(session, kind)
            except BaseException:
                await transport.close()
                raise
            self.session = session
            self._last_capabilities = session.capabilities
            if session.era == "modern":
                tg.start_soon(self._listen_loop, session)
            elif self.watched:
                for uri in list(self.watched):  # a restarted legacy upstream forgot its subscriptions
                    await self._subscribe_legacy(session, "resources/subscribe", uri)
            self.state = "ready"
            self.last_error = None
            self._ready.set()
            log.info(
                "upstream %s ready (%s %s, %d tools)", self.key, session.era, session.revision, len(self.lists["tools"])
            )
            if self.on_change is not None and self.restarts:
                await self.on_change(self, tuple(KINDS))  # a restarted upstream may list other things
            await transport.closed.wait()
            tg.cancel_scope.cancel()
        if self.sessions_folder is not None and self._stopping and not self.detached:
            session_record.forget(self.sessions_folder, self.key)  # DELETEd upstream by close()
        code = transport.returncode
        self.exit_code = code
        reason = self._end_reason(code)
        self._down(session, reason)
        if not self._stopping:
            raise RuntimeError(reason)

    async def _open_kept(self, keeper: KeeperTransport, session: UpstreamSession) -> None:
        """A kept server: carry on the session a previous daemon opened, or open one and hand the
        keeper its handshake for the next daemon."""
        if keeper.previous_exit is not None:
            self.previous_exit = keeper.previous_exit
        if keeper.handshake is not None and session.adopt(keeper.handshake, keeper.next_id):
            log.info("upstream %s: carrying on its session (%d requests of the last daemon in flight)",
                     self.key, len(keeper.outstanding))  # fmt: skip
            for rid, method in keeper.outstanding:
                if method == "subscriptions/listen":  # nobody reads that stream now: a new one opens
                    await session.notify("notifications/cancelled", session.shape_params(
                        {"requestId": rid, "reason": "the daemon that listened is gone"}, client_caps={}, log_level=None
                    ))  # fmt: skip
            return
        session.continue_ids(keeper.next_id)
        await session.start()
        await keeper.remember_handshake(session.handshake())

    async def _open_http(self, transport: HttpTransport, session: UpstreamSession, folder: Path) -> None:
        """Carry on the 2025-11-25 session a previous daemon left (its tasks may be tied to it), or
        open one and remember it."""
        record = session_record.load(folder, self.key, self.cfg)
        session_record.forget(folder, self.key)  # tried once: a dead session is not tried again
        if record is not None and session.adopt(record["handshake"], 1) and session.era == "legacy":
            transport.session_id = record["sessionId"]
            # Ids above any the previous daemon used on this session (it numbered from 1).
            session.continue_ids(int(time.time() * 1000))
            try:
                await session.request("ping", {}, timeout=PING_TIMEOUT_S)
            except (UpstreamError, UpstreamUnavailable, TimeoutError) as exc:
                raise RuntimeError(
                    f"upstream {self.key!r}: the previous daemon's session is gone ({_describe(exc)}); opening a new one"
                ) from None
            log.info("upstream %s: carrying on the previous daemon's session", self.key)
        else:
            await session.start()
        if session.era == "legacy" and transport.session_id:
            session_record.save(folder, self.key, self.cfg, transport.session_id, session.handshake())

    def detach(self) -> None:
        """Leave this server running when the daemon stops (keepers only): no stop, no cancels.
        An HTTP upstream's 2025-11-25 session is not deleted either, so the next daemon carries it on."""
        self.detached = True
        if isinstance(self._transport, (KeeperTransport, HttpTransport)):
            self._transport.detach = True
        if self.session is not None:
            self.session.detached = True

    async def _run_transport(
        self, transport: Transport, session: UpstreamSession, *, task_status: TaskStatus[None]
    ) -> None:
        try:
            await transport.run(session.feed, task_status.started)
        finally:
            code = transport.returncode
            if code is not None:
                self.exit_code = code  # also when it died during its start, before any session
            self._down(session, session.dead_reason or self._end_reason(code))

    def _end_reason(self, code: int | None) -> str:
        """What the calls cut by this process's end are told. One mcpx ended itself (stop(), an
        operator's restart) is said in mcpx's words: the server did not fail, whatever its exit code."""
        if self._stopping or self._restart_asked is not None:
            whose = (
                f"upstream {self.key!r}" if self.instance is None else f"this host's process of upstream {self.key!r}"
            )
            if self._stopping:
                return f"mcpx stopped {whose}" + (f": {self._stop_why}" if self._stop_why else "")
            return f"mcpx restarted {whose} (asked by {self._restart_asked})"
        if self.cfg.transport != "stdio":
            return f"upstream {self.key!r} connection lost"
        return f"upstream {self.key!r} exited" + (f" with code {code}" if code is not None else "")

    def _down(self, session: UpstreamSession, reason: str) -> None:
        session.fail_all(reason)
        if self.session is session:
            self.session = None
            self._ready = anyio.Event()
            self.state = "down" if not self._stopping else "stopped"

    # ---- change notifications from upstreams -------------------------------------------------
    def _listen_filter(self, session: UpstreamSession) -> dict[str, Any]:
        caps = session.capabilities
        filt: dict[str, Any] = {}
        for cap, key in (
            ("tools", "toolsListChanged"),
            ("prompts", "promptsListChanged"),
            ("resources", "resourcesListChanged"),
        ):
            if isinstance(caps.get(cap), dict) and caps[cap].get("listChanged"):
                filt[key] = True
        if self.watched and isinstance(caps.get("resources"), dict) and caps["resources"].get("subscribe"):
            filt["resourceSubscriptions"] = sorted(self.watched)
        return filt

    async def _listen_loop(self, session: UpstreamSession) -> None:
        """A 2026 upstream pushes changes only on a subscriptions/listen stream: keep one open, and
        reopen it when the set of watched resources changes."""
        while True:
            filt = self._listen_filter(session)
            self._watch_changed = anyio.Event()
            if not filt:
                await self._watch_changed.wait()
                continue
            if await self._listen_once(session, filt, self._watch_changed):
                return  # the upstream offers no listen: nothing to reopen
            await anyio.sleep(0.2)

    async def _listen_once(self, session: UpstreamSession, filt: dict[str, Any], changed: anyio.Event) -> bool:
        """One listen stream, until it ends or the filter changes; True when the upstream refused it."""
        ended = anyio.Event()
        refused = False

        async def listen() -> None:
            nonlocal refused
            try:
                await session.request(
                    "subscriptions/listen",
                    session.shape_params({"notifications": filt}, client_caps={}, log_level=None),
                    on_notify=self._listen_note,
                )
            except UpstreamError as exc:
                refused = exc.error.get("code") == -32601
            except McpError as exc:
                log.info("upstream %s: listen stream ended: %s", self.key, exc)
            ended.set()

        async def on_change() -> None:
            await changed.wait()
            ended.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(listen)
            tg.start_soon(on_change)
            await ended.wait()  # the stream ended, or the filter changed: reopen it
            tg.cancel_scope.cancel()
        return refused

    async def _listen_note(self, msg: dict[str, Any]) -> None:
        """A change on the listen stream (HTTP: it arrives as this request's notification)."""
        method = msg.get("method")
        params = jsonrpc.as_object(msg.get("params"))
        session = self.session
        if isinstance(method, str) and session is not None and session.tg is not None:
            session.tg.start_soon(self._on_event, method, params)  # never on the reader

    async def _subscribe_legacy(self, session: UpstreamSession, method: str, uri: str) -> None:
        try:
            await session.request(method, {"uri": uri}, timeout=30)
        except Exception as exc:  # noqa: BLE001 - a failed subscription is reported, never fatal
            log.warning("upstream %s: %s %s failed: %s", self.key, method, uri, exc)

    async def watch(self, uri: str) -> None:
        """Hosts want updates for this (upstream) URI: subscribe upstream in its own era."""
        self.watched[uri] = self.watched.get(uri, 0) + 1
        if self.watched[uri] == 1:
            await self._watch_update("resources/subscribe", uri)

    async def unwatch(self, uri: str) -> None:
        if uri not in self.watched:
            return
        self.watched[uri] -= 1
        if self.watched[uri] <= 0:
            del self.watched[uri]
            await self._watch_update("resources/unsubscribe", uri)

    async def _watch_update(self, method: str, uri: str) -> None:
        session = self.session
        if session is None:
            return  # applied when it comes back
        if session.era == "modern":
            self._watch_changed.set()
        else:
            await self._subscribe_legacy(session, method, uri)

    @property
    def capabilities(self) -> dict[str, Any]:
        return self.session.capabilities if self.session is not None else self._last_capabilities

    @property
    def tools(self) -> list[dict[str, Any]]:
        return self.lists["tools"]

    async def _on_event(self, method: str, params: dict[str, Any]) -> None:
        kinds = CHANGED.get(method)
        session = self.session
        if kinds and session is not None:
            # One refresh per list at a time: a change that comes while one runs makes it run once
            # more, so a server that floods list_changed gets at most two list requests in flight.
            self._stale.update(kinds)
            mine = [kind for kind in kinds if kind not in self._refreshing]
            self._refreshing.update(mine)
            try:
                while refresh := [kind for kind in mine if kind in self._stale]:
                    self._stale.difference_update(refresh)
                    for kind in refresh:
                        try:
                            self.lists[kind] = await self._fetch(session, kind)
                        except Exception as exc:  # noqa: BLE001 - keep the old list; the next change retries
                            log.warning("upstream %s: %s after list_changed failed: %s", self.key, KINDS[kind][0], exc)
                    if self.on_change is not None:
                        await self.on_change(self, tuple(refresh))
            finally:
                self._refreshing.difference_update(mine)
        elif method == "notifications/resources/updated" and self.on_resource_updated is not None:
            uri = params.get("uri")
            if isinstance(uri, str):
                await self.on_resource_updated(self, uri)

    async def _fetch(self, session: UpstreamSession, kind: str) -> list[dict[str, Any]]:
        """The upstream's whole list of one kind (all pages), if it declares that capability."""
        method, key, _field, capability = KINDS[kind]
        if capability not in session.capabilities:
            return []
        items: list[dict[str, Any]] = []
        cursor = None
        for _ in range(1000):  # a cursor loop from a broken upstream must end
            params: dict[str, Any] = {"cursor": cursor} if cursor else {}
            try:
                res = await session.request(
                    method, session.shape_params(params, client_caps={}, log_level=None), timeout=30
                )
            except UpstreamError as exc:
                if exc.error.get("code") == -32601:
                    return items  # declared the capability but not this list (templates, often)
                raise
            items.extend(valid_items(kind, res.get(key)))
            cursor = res.get("nextCursor")
            if not cursor:
                break
        if kind == "tools" and session.era == "modern" and isinstance(session.transport, HttpTransport):
            items = self._header_checked(items, session.transport)
        elif kind == "tools":
            self.left_out = {}  # (an upstream that came back in the 2025 era: annotations mean nothing)
        return items

    def _header_checked(self, tools: list[dict[str, Any]], transport: HttpTransport) -> list[dict[str, Any]]:
        """A 2026 HTTP server's tools less those whose `x-mcp-header` annotations are invalid
        (SEP-2243: a client MUST leave them out), each logged once with why; the transport learns
        which arguments the others' calls mirror as Mcp-Param-* headers."""
        kept: list[dict[str, Any]] = []
        left_out: dict[str, str] = {}
        headers: dict[str, tuple[param_headers.HeaderParam, ...]] = {}
        for tool in tools:
            name = str(tool["name"])
            try:
                params = param_headers.header_params(tool.get("inputSchema"))
            except param_headers.InvalidAnnotation as exc:
                left_out[name] = str(exc)
                if self.left_out.get(name) != str(exc):
                    log.warning("upstream %s: tool %r left out: %s", self.key, name, exc)
                continue
            if params:
                headers[name] = params
            kept.append(tool)
        self.left_out = left_out
        transport.tool_headers = headers
        return kept

    async def ready_session(self) -> UpstreamSession:
        # A first start may take a while (npx, a cold interpreter); a restart gets a short grace.
        wait = READY_WAIT_S if self.state == "starting" else RESTART_WAIT_S
        if self.session is None and self.state != "needs login":
            with anyio.move_on_after(wait):
                await self._ready.wait()
        if self.session is None:
            if self.auth is not None and self.auth.needs_login is not None:
                raise UpstreamUnavailable(self.auth.refusal())
            detail = f": {self.last_error}" if self.last_error else ""
            raise UpstreamUnavailable(f"upstream {self.key!r} is not available ({self.state}){detail}")
        return self.session

    async def restart(self, by: str) -> None:
        """An operator's restart: its process (or connection) is closed and started again at once,
        also when it is down and waiting out its backoff."""
        if self._stopping:
            return
        self._restart_asked = by
        if self._backoff_scope is not None:
            self._backoff_scope.cancel()
        elif self._transport is not None:
            await self._transport.close()

    async def stop(self, why: str | None = None) -> None:
        """Stop it for good; `why` (mcpx's words) is what calls it cuts are told."""
        if not self._stop.is_set():
            self._stop_why = why
        self._stop.set()
        if self._transport is not None:
            await self._transport.close()


def _describe(exc: BaseException) -> str:
    """The first real error inside task-group wrappers, as one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__


class UpstreamPool:
    def __init__(
        self,
        config: Config,
        log_dir: Path,
        keepers_folder: Path | None = None,
        sessions_folder: Path | None = None,
        *,
        on_change: OnListChanged | None = None,
        on_resource_updated: OnResourceUpdated | None = None,
        ask_operator: AskOperator | None = None,
        before_send: BeforeSend | None = None,
        auth_for: AuthFor | None = None,
    ) -> None:
        """`on_change` and `on_resource_updated` hear what any server pushes (list changes, a
        subscribed resource updated), for the hosts; `ask_operator` takes a question a server asks
        that no one host's call can be tied to; `auth_for` gives an HTTP server its OAuth client."""
        self._auth_for = auth_for
        self.config = config
        k = config.keepers
        self.keepers = (
            KeeperSettings(keepers_folder, k.graceS, k.bufferBytes, before_send)
            if keepers_folder and k.enabled
            else None
        )
        self.keepers_folder = keepers_folder
        self._log_dir = log_dir
        self._sessions_folder = sessions_folder
        self._on_change = on_change
        self._on_resource_updated = on_resource_updated
        self._ask_operator = ask_operator
        self.servers = {
            key: self.make_server(key, cfg, config.namespace_of(key)) for key, cfg in config.active_servers.items()
        }
        self._listings: dict[str, tuple[list[list[dict[str, Any]]], list[Route], dict[str, Route]]] = {}
        self.foreign = ForeignSessions()  # other daemons' upstream sessions, to follow their tasks in
        self.detached = False  # `mcpx stop --keep-upstreams`: the kept servers wait for the next daemon

    def make_server(self, key: str, cfg: ServerConfig, namespace: str | None) -> UpstreamServer:
        """A server of this pool, not started (a reloaded config adds them too: upstream/reconfigure.py)."""
        return UpstreamServer(
            key,
            cfg,
            namespace,
            self._log_dir,
            keepers=self.keepers,
            sessions_folder=self._sessions_folder,
            on_change=self._on_change,
            on_resource_updated=self._on_resource_updated,
            ask_operator=self._ask_operator,
            auth=self._auth_for(key, cfg) if self._auth_for is not None else None,
        )

    async def run(self, tg: TaskGroup, keep: Keep | None = None) -> None:
        """Start every server's supervisor (under `keep`, the daemon's rule for background work, when given)."""
        self.foreign.start(tg)
        if self.keepers_folder is not None and self.keepers_folder.is_dir():
            # Keepers a previous daemon left for servers this config no longer runs under keepers.
            kept = {key for key, s in self.servers.items() if s.keepers is not None}
            await retire_unconfigured(self.keepers_folder, kept)
        for server in self.servers.values():
            start_kept(tg, keep, f"upstream:{server.key}", server.run)

    async def wait_started(self, wait: float = READY_WAIT_S) -> None:
        """Give every upstream a bounded chance to come up, so a first tools/list is complete."""
        with anyio.move_on_after(wait):
            for server in list(self.servers.values()):  # (a reload may change the dict meanwhile)
                await server.first_attempt.wait()

    def listing(self, kind: str) -> list[Route]:
        """Stable order: servers in config order, each server's items in its own order."""
        return self._listed(kind)[1]

    def _listed(self, kind: str) -> tuple[list[list[dict[str, Any]]], list[Route], dict[str, Route]]:
        """The routes of `kind`, rebuilt only when some server's list was replaced (servers assign a
        fresh list on every fetch, never edit one in place): every call resolves its tool here.
        The cache holds the lists it was built from, so identity can be trusted (no id reuse)."""
        sources = [server.lists[kind] for server in self.servers.values()]
        cached = self._listings.get(kind)
        if (
            cached is not None
            and len(cached[0]) == len(sources)
            and all(a is b for a, b in zip(cached[0], sources, strict=True))
        ):
            return cached
        field = KINDS[kind][2]
        routes: list[Route] = []
        by_name: dict[str, Route] = {}
        for server in self.servers.values():
            for item in server.lists[kind]:
                exposed = server.naming.item_out(kind, item)
                key = exposed[field]
                if key in by_name:
                    continue  # two passthrough servers with one name: the first configured wins
                route = Route(server.key, item[field], exposed)
                by_name[key] = route
                routes.append(route)
        built = (sources, routes, by_name)
        self._listings[kind] = built
        return built

    def catalogue(self) -> list[Route]:
        return self.listing("tools")

    def resolve(self, exposed: object, kind: str = "tools") -> Route:
        """The upstream behind an exposed tool or prompt name."""
        what = "tool" if kind == "tools" else "prompt"
        if not isinstance(exposed, str):
            raise InvalidParams(f"params.name must be a string naming a {what}")
        route = self._listed(kind)[2].get(exposed)
        if route is not None:
            return route
        # An upstream that is down still owns its namespace: say so rather than "unknown".
        for server in self.servers.values():
            if server.session is None and server.namespace is not None and server.naming.name_in(exposed) is not None:
                if server.auth is not None and server.auth.needs_login is not None:
                    raise UpstreamUnavailable(f"{server.auth.refusal()}; cannot use {exposed!r}")
                raise UpstreamUnavailable(
                    f"upstream {server.key!r} is not available ({server.state}); cannot use {exposed!r}"
                )
        waiting = [s.key for s in self.servers.values() if s.auth is not None and s.auth.needs_login is not None]
        if waiting:  # its tools are listed once it is signed in
            logins = ", ".join(f"`mcpx login {key}`" for key in waiting)
            raise InvalidParams(
                f"Unknown {what}: {exposed} (upstreams that need a sign-in are not listed yet: {logins})"
            )
        raise InvalidParams(f"Unknown {what}: {exposed}")

    def resolve_uri(self, exposed: object) -> tuple[UpstreamServer, str]:
        """The upstream (and its own URI) behind an exposed resource URI."""
        if not isinstance(exposed, str):
            raise InvalidParams("params.uri must be a string")
        passthrough = []
        for server in self.servers.values():
            if server.namespace is None:
                passthrough.append(server)
            else:
                uri = server.naming.uri_in(exposed)
                if uri is not None:
                    return server, uri
        # Passthrough URIs are not prefixed: a listed resource, then a matching template, decides.
        for server in passthrough:
            if any(r.get("uri") == exposed for r in server.lists["resources"]):
                return server, exposed
        for server in passthrough:
            if any(template_matches(t["uriTemplate"], exposed) for t in server.lists["resourceTemplates"]):
                return server, exposed
        if len(passthrough) == 1:
            return passthrough[0], exposed  # unlisted but possibly readable: let the upstream judge
        raise InvalidParams(f"Unknown resource: {exposed}")

    def detach(self) -> None:
        """The daemon stops, leaving its kept servers and their calls to the next one."""
        self.detached = any(server.keepers is not None for server in self.servers.values())
        for server in self.servers.values():
            if server.keepers is not None:
                server.detach()

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for server in self.servers.values():
                    tg.start_soon(server.stop, "the mcpx daemon stopped")


def _inherit(keeper: KeeperTransport, session: UpstreamSession) -> None:
    """What a kept server owes the previous daemon, known before any of it is read: the ids below
    `nextId` are that daemon's, and the unanswered and replayed ones are still to be claimed."""
    session.continue_ids(keeper.next_id)
    session.inherited = {rid for rid, _ in keeper.outstanding} | set(keeper.replayed)
    session.forwarded = keeper.forwarded
    session.origins, session.origins_complete = keeper.origins, keeper.origins_complete
