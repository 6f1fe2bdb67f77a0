"""Composition root and lifecycle of the daemon (phases in docs/daemon-behavior.md).

starting -> serving -> draining (stop accepting, cancel calls) -> stopping upstreams -> stopped
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import re
import secrets
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Route, WebSocketRoute

from .. import __version__
from ..api import config_routes, upstream_routes, v1
from ..api.answer_page import AnswerPage
from ..api.feed import FeedEndpoint
from ..api.models import DaemonPhase
from ..api.oauth_callback import OAuthCallback
from ..api.operations import Operations
from ..config.diff import ServerChanges
from ..config.model import CONFIG_SEARCH, Config, NotifyConfig
from ..connections.registry import ConnectionRegistry
from ..events.bus import Event, EventBus
from ..host import remote_changes
from ..host.auth import TokenTable
from ..host.dispatch import Dispatcher
from ..host.http.endpoint import McpEndpoint
from ..host.http.front import McpFirst, OneWriteHttp
from ..host.http.sessions import HttpHosts
from ..host.router import HostRouter
from ..host.shim_endpoint import ShimEndpoint
from ..host.shim_unix import ShimSocket
from ..host.shim_ws import ShimWebsocket
from ..host.subscriptions import Hub
from ..notify.notifier import Notifier
from ..protocol.errors import McpError
from ..questions import routing
from ..questions.broker import Broker, NotRecorded
from ..records.connection_record import ConnectionRecord
from ..records.question import Question
from ..records.task import Task
from ..store import Store, retention
from ..store.base import BeforeCommit, Claim
from ..store.postgres import PostgresStore
from ..store.sqlite import SqliteStore
from ..tasks.active import ActiveTasks
from ..tasks.engine import TaskEngine
from ..tasks.frame_log import FrameLog
from ..telemetry import tracing
from ..telemetry.metrics import Metrics
from ..telemetry.metrics_endpoint import MetricsEndpoint
from ..upstream import carry_on
from ..upstream.auth.desk import Desk
from ..upstream.auth.vault import KEY_FILE, Vault
from ..upstream.host_scoped import HostInstances
from ..upstream.http import session_record
from ..upstream.pool import UpstreamPool, UpstreamServer
from ..upstream.reconfigure import Reconfigurer
from ..upstream.stdio.send_fault import BeforeSend
from . import config_watch, state_folder
from .background import Background
from .reloader import Reloader

log = logging.getLogger("mcpx.daemon")
GRACEFUL_S = 3


def _instance_id(state_dir: Path) -> str:
    """This daemon's name on a shared store, kept in its state folder: a restarted daemon is the same
    instance, so it carries on its own tasks at once instead of waiting for its old lease to run out."""
    path = state_dir / "instance"
    if path.exists():
        return path.read_text().strip()
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # private from the start (state_folder.py)
    name = f"{socket.gethostname()[:24]}-{secrets.token_hex(4)}"
    name = re.sub(r"[^A-Za-z0-9_-]", "-", name)
    path.write_text(name + "\n")
    return name


class _Server(uvicorn.Server):
    """uvicorn without its own signal handlers: the daemon owns SIGINT/SIGTERM and shutdown order."""

    on_drain: Callable[[], Awaitable[None]] | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Running requests are answered (with an error) before uvicorn waits for them; otherwise
        # its grace timeout cancels them and the host gets a bare HTTP 500.
        if self.on_drain is not None:
            await self.on_drain()
        await super().shutdown(sockets)


class Daemon:
    """Builds every part with what it needs (constructors only: no part sets another's attributes)
    and runs them through the phases above. Where two parts need each other (the engine tells the
    hosts of a change, the hosts' era modules use the engine), the link is one of this class's
    small methods, passed in at construction and resolved when it is first called."""

    def __init__(
        self,
        config: Config,
        config_path: Path | None,
        state_dir: Path,
        port: int | None = None,
        *,
        before_commit: BeforeCommit | None = None,  # tests only (store/faults.py)
        before_send: BeforeSend | None = None,  # tests only (upstream/stdio/send_fault.py)
        background_faults: Path | None = None,  # tests only (daemon/background.py)
    ) -> None:
        self.config = config
        self.config_path = config_path
        self.state_dir = state_dir
        self.port = config.daemon.port if port is None else port
        self.started = time.time()
        self.hub = Hub()
        self.bus = EventBus()
        # Prometheus metrics (docs/telemetry.md): this daemon's own registry, told through constructors.
        self.metrics = Metrics(
            route_of=self._route_of,
            upstreams=self._upstream_rows,
            feed_subscribers=self._feed_subscribers,
            tool_labels=config.metrics.toolLabels,
        )
        self.tracing = False  # whether run() turned traces on (telemetry/tracing.py)
        store: Store
        self.instance: str | None = None
        if config.store.url:
            self.instance = config.store.instance or _instance_id(state_dir)
            store = PostgresStore(
                config.store.url,
                on_commit=self.bus.publish,
                commit_timer=self.metrics.observe_commit,
                instance=self.instance,
                on_forward=self._forwarded,
                on_lease_ended=self._lease_ended,
                durability=config.store.durability,
                before_commit=before_commit,
            )
        else:
            store = SqliteStore(
                state_dir / "mcpx.db",
                on_commit=self.bus.publish,
                commit_timer=self.metrics.observe_commit,
                durability=config.store.durability,
                before_commit=before_commit,
            )
        # Upstream OAuth (upstream/auth/): sign-ins sealed in the store with the key file's key.
        key_file = Path(config.store.secretsKeyFile).expanduser() if config.store.secretsKeyFile else None
        self.desk = Desk(Vault(store, key_file or state_dir / KEY_FILE), self._append_event)
        self.pool = UpstreamPool(
            config,
            state_dir / "logs",
            state_dir / "keepers",
            state_dir / session_record.FOLDER,
            on_change=self._on_list_changed,
            on_resource_updated=self._on_resource_updated,
            ask_operator=self._ask_operator,
            auth_for=self.desk.for_server,
            before_send=before_send,
        )
        f = config.frames
        tasks = config.tasks
        self.engine = TaskEngine(
            store,
            frames=FrameLog(f.maxTasks, f.perTask, f.maxFrameBytes, f.budgetBytes),
            events_cap=config.events.maxRows,
            active=ActiveTasks(tasks.maxActivePerOwner, tasks.maxActive),
            poll_floor_ms=tasks.pollFloorMs,
            lease_ms=config.store.leaseMs if config.store.url else None,
            on_change=self._task_changed,
            # Tasks whose upstream call was itself a task resume polling it after a restart, and
            # calls to stdio servers kept across the restart collect their replies.
            resume=carry_on.Resumer(self.pool),
            reclaim=carry_on.Reclaimer(self.pool),
            calls_keep_ms=tasks.ttlMs,
            on_claimed=self._claimed,
        )
        self.instances = HostInstances()  # `scope: host` servers' processes, one per host connection
        # Reloading the config (SIGHUP, the file changing, POST /v1/config/reload) changes the servers;
        # a leaving server's calls may keep it up to tasks.ttlMs (no task outlives that).
        self.reconfigurer = Reconfigurer(self.pool, self.instances, self.hub.list_changed, config.tasks.ttlMs / 1000)
        # Long-lived background work runs under one rule: a failure is logged, an event, and retried (background.py).
        self.background = Background(store.append, fault_folder=background_faults)
        self.reloader = Reloader(
            config_path, config, self._apply_config, store.append, apply_notify=self._reconfigure_notify
        )
        self.registry = ConnectionRegistry(
            store,
            config.connections.idleCloseS,
            in_use=self._session_in_use,
            on_idle_close=self._idle_closed,
            on_closed=self.instances.release,
        )
        q = config.questions
        self.broker = Broker(
            store,
            self.bus,
            wait_for_operator=q.waitForOperator,
            operator_grace_s=q.operatorGraceMs / 1000,
            expiry_s=q.expiryMs / 1000,
            max_pending_per_task=q.maxPendingPerTask,
            max_bytes=q.maxBytes,
            instance=self.instance,
        )
        self.dispatcher = Dispatcher(config, self.pool, self.hub, self.engine, self.broker, self.instances)
        self.router = HostRouter(
            self.dispatcher,
            self.registry,
            rate=config.connections.maxRequestsPerSecond,
            stall_s=config.connections.stallS,
            burst=config.connections.requestBurst,
            on_tool_call=self.metrics.observe_call,
        )
        tokens = TokenTable((t.digest, t.principal) for t in (config.auth.tokens if config.auth else []))
        self.http_hosts = HttpHosts(self.router, store, check_principal=tokens.enabled)
        self.endpoint = McpEndpoint(
            self.router,
            max_body=config.daemon.maxBodyBytes,
            allowed_origins=config.daemon.allowedOrigins,
            tokens=tokens,
            hosts=self.http_hosts,
            require_task_name=config.tasks.requireMcpName,
        )
        self.operations = Operations(
            engine=self.engine,
            broker=self.broker,
            registry=self.registry,
            bus=self.bus,
            approvals=self.dispatcher.calls.approvals,
        )
        # Webhooks and command hooks (docs/notify.md): fed from the bus, never holding it up.
        self.notifier = Notifier.from_config(
            config.notify, self.bus, httpx.AsyncClient(), answer_link=self._answer_link, report=self.background.report
        )
        self.phase: DaemonPhase = "starting"
        self.url: str | None = None
        self._server: _Server | None = None
        self._shim_socket: ShimSocket | None = None

    # ---- links between parts that need each other (see the class docstring) ----------------
    def _reconfigure_notify(self, notify: NotifyConfig) -> None:
        self.notifier.reconfigure(notify)

    async def _append_event(self, event: Event) -> None:
        await self.engine.store.append([event])

    async def _task_changed(self, task: Task) -> None:
        await self.dispatcher.eras.task_changed(task)

    def _session_in_use(self, record: ConnectionRecord) -> bool:
        return self.http_hosts.session_in_use(record)

    def _idle_closed(self, record: ConnectionRecord) -> None:
        self.http_hosts.forget_idle(record)

    async def _apply_config(self, changes: ServerChanges, new: Config) -> None:
        """A reload's config: the top-level approval gates at once (config/diff.py LIVE), then the
        servers that changed."""
        self.dispatcher.calls.approvals.config = new
        if changes.listing_changes:
            await self.reconfigurer.apply(changes, new)

    def _lease_ended(self, instance: str) -> None:
        self.engine.lease_ended(instance)

    async def _claimed(self, claims: list[Claim]) -> None:
        """Tasks this daemon now answers for: the questions their previous daemon left open (it
        was killed or crashed) have nobody waiting for them, and are closed as abandoned."""
        tasks = {c.task.id for c in claims}
        gone = {c.lost for c in claims if c.lost is not None}
        await self._abandon(lambda q: q.task_id in tasks or (q.task_id is None and q.instance in gone))

    async def _abandon(self, orphaned: Callable[[Question], bool]) -> None:
        try:
            await self.broker.abandon(orphaned)
        except NotRecorded as exc:  # they stay open; answering one still reaches no call
            log.error("questions left open by a stopped daemon could not be closed: %s", exc.reason)

    def _forwarded(self, action: str, task_id: str) -> None:
        """Another daemon sharing the store acted on a task this one runs (ids only; rows say the rest)."""
        if action == "cancel":
            self.engine.stop_work(task_id)
        elif action.startswith("answer:"):
            self.engine.spawn(self.broker.take_stored_answer, action.removeprefix("answer:"))

    async def _on_list_changed(self, server: UpstreamServer, kinds: tuple[str, ...]) -> None:
        await self.hub.list_changed(kinds)

    async def _ask_operator(
        self, upstream: str, method: str, params: dict[str, Any], candidates: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """A question a shared server asked while calls of several hosts were in flight: an operator's."""
        clean = {k: v for k, v in params.items() if k != "_meta"}
        hosts: list[str] = []
        for cid in dict.fromkeys(c.get("connectionId") for c in candidates):
            record = self.registry.get(cid) if isinstance(cid, str) else None
            hosts.append(record.shown_as if record is not None else str(cid or "unknown"))
        return await self.broker.ask(
            upstream=upstream,
            method=method,
            params=clean,
            task_id=None,
            connection=None,
            host_ask=None,
            candidates=candidates,
            why=routing.unattributable(len(candidates), hosts, self._transport_of(upstream)),
        )

    def _transport_of(self, upstream: str) -> str:
        server = self.pool.servers.get(upstream)
        return server.cfg.transport if server is not None else "stdio"

    async def _on_resource_updated(self, server: UpstreamServer, uri: str) -> None:
        await self.hub.resource_updated(server.naming.uri_out(uri))

    def _feed(self, token: str, origins: list[str]) -> FeedEndpoint:
        ev = self.config.events
        return FeedEndpoint(
            self.engine.store,
            self.bus,
            token,
            origins,
            queue_max=ev.subscriberQueue,
            heartbeat_s=ev.heartbeatS,
            on_gap=self.metrics.feed_gaps.inc,
        )

    def _route_of(self, exposed: object) -> tuple[str, str] | None:
        """The upstream and its own name behind a tool name a host called (metrics' labels)."""
        try:
            route = self.pool.resolve(exposed)
        except McpError:
            return None
        return route.server, route.name

    def _upstream_rows(self) -> list[tuple[str, str, int]]:
        return [(s.key, s.state, s.restarts) for s in self.pool.servers.values()]

    def _feed_subscribers(self) -> int:
        return sum(1 for s in self.bus.subscribers if not s.internal)

    def stop(self) -> None:
        """Begin the graceful shutdown, as SIGTERM would."""
        if self._server is not None:
            self._server.should_exit = True

    async def status(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "version": __version__,
            "phase": self.phase,
            "uptimeS": round(time.time() - self.started, 3),
            "config": str(self.config_path) if self.config_path else None,
            "stateDir": str(self.state_dir),
            "url": self.url,
            "upstreams": [upstream_routes.row(s) for s in self.pool.servers.values()],
            "connections": len(self.registry.live),
            "operators": self.bus.operators(),
            "subscribers": [
                {"operator": s.operator, "queued": len(s.queue), "overflowed": s.overflowed}
                for s in self.bus.subscribers
                if not s.internal
            ],
            "lastSeq": await self.engine.store.last_seq(),
            "instance": self.instance,
            "frames": self.engine.frames.usage(),
            "notify": self.notifier.status(),
            "lastReload": self.reloader.last.wire() if self.reloader.last is not None else None,
            "background": self.background.status(),
        }

    def _say_what_the_config_did(self) -> None:
        """A config that starts nothing, or ignores a key, is said out loud, never silently served."""
        if self.config_path is None and not self.config.mcpServers:  # `mcpx demo` brings its own upstreams
            log.warning("no config file found (searched: %s): serving with no upstreams", CONFIG_SEARCH)
        for note in self.config.warnings:
            log.warning("%s", note)
        for note in self.config.notes:
            log.info("%s", note)
        for key, server in self.config.mcpServers.items():
            if server.disabled:
                log.info("upstream %s is disabled in the config: not started", key)
        if self.config_path is not None and not self.config.active_servers:
            log.warning("%s configures no upstream to start: serving with none", self.config_path)

    async def run(self, ready: Callable[[int], None] | None = None) -> None:
        state_folder.prepare(self.state_dir)
        lock = state_folder.acquire_lock(self.state_dir)
        shims = ShimEndpoint(self.router)
        shim_socket = self._shim_socket = ShimSocket(shims, self.state_dir)
        try:
            token = state_folder.api_token(self.state_dir)
            self.tracing = tracing.start(self.config.traces, __version__)
            # Bound now, so a shim reconnecting across a restart waits in its backlog; served below.
            await shim_socket.listen()
            # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY on accepted sockets only when proto says TCP.
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", self.port))
            sock.listen(512)
            port = sock.getsockname()[1]
            self.url = f"http://127.0.0.1:{port}/mcp"
            self.desk.listening(port)  # sign-ins come back to http://127.0.0.1:<port>/oauth/callback
            self.operations.link_base = self.config.daemon.publicUrl or f"http://127.0.0.1:{port}"
            origins = self.config.daemon.allowedOrigins
            app = Starlette(
                routes=[
                    # McpFirst (below) serves /mcp itself; the route stays for what reaches the app
                    # anyway, e.g. /mcp/, which Starlette redirects to /mcp.
                    Route("/mcp", self.endpoint),
                    Route(
                        "/metrics",
                        MetricsEndpoint(
                            self.metrics.registry, token, public=self.config.metrics.public, allowed_origins=origins
                        ),
                    ),
                    # The answer links' page: the link is its own credential (api/answer_page.py).
                    Route(
                        "/answer/{token}",
                        AnswerPage(self.operations.links, self.operations).__call__,
                        methods=["GET", "POST"],
                    ),
                    # A bound method, so Starlette hands it a WebSocket (an instance would be taken as raw ASGI).
                    # Where a browser returns from an upstream's OAuth sign-in: its `state` is the credential.
                    Route("/oauth/callback", OAuthCallback(self.desk).__call__),
                    WebSocketRoute("/v1/stdio", ShimWebsocket(shims, token).__call__),
                    WebSocketRoute("/v1/events", self._feed(token, origins).__call__),
                ]
            )
            # Everything else is /v1's (FastAPI): its own 404s and errors are JSON, like the rest of it.
            api = v1.build(self.operations, token, self.status, origins, self.pool.servers)
            config_routes.add_routes(api, self.reloader.reload)  # `mcpx reload`
            app.router.default = api
            server = _Server(
                uvicorn.Config(
                    McpFirst(self.endpoint, app),
                    http=OneWriteHttp,
                    # A host's peer is its socket's: its label is read from the process that holds
                    # that socket (connections/naming.py); a forwarded header from any local
                    # process would stand in for it.
                    proxy_headers=False,
                    log_level="warning",
                    log_config=None,  # uvicorn's records go through the daemon's handler (text or JSON)
                    lifespan="off",
                    timeout_graceful_shutdown=GRACEFUL_S,
                    ws_max_size=64 * 1024 * 1024,
                )
            )
            server.on_drain = self._drain
            self._server = server
            async with anyio.create_task_group() as tg:
                # Every long-lived loop below runs under `keep` (background.py): no failure of one ends serving.
                bg = self.background
                bg.run_under(tg)
                keep = bg.keep
                await bg.keep_started("notifier", self.notifier.run)  # subscribed before anything makes an event
                await bg.keep_started("metrics", self.metrics.tap, self.bus)  # likewise: counts tasks and questions
                await bg.keep_started("oauth-desk", self.desk.run)  # sign-ins that come back to `oauth.callbackPort`
                self.router.run_under(tg)
                await self.engine.start(tg, keep)
                # Before anyone can answer: what the previous run left open waits for nobody now
                # (on a shared store, only this instance's own; _claimed takes its tasks').
                shared, me = self.engine.shares_store, self.instance
                await self._abandon(lambda q: not shared or (q.task_id is None and q.instance == me))
                keep("plain-calls", self.dispatcher.calls.plain.sweep)  # lists hosts' long plain calls
                keep("retention", retention.sweep_forever, self.engine.store, int(self.config.store.keepClosedS * 1000))
                if self.engine.shares_store:  # hosts here hear of changes other daemons make
                    eras = self.dispatcher.eras
                    keep("remote-changes", remote_changes.relay, self.bus, self.hub, self.engine.store.get_task,
                         eras.task_changed)  # fmt: skip
                await self.registry.restore()
                keep("registry", self.registry.run)
                await self.pool.run(tg, keep)
                await self.instances.run(tg, keep)
                self.reconfigurer.run(tg, keep)
                if self.config_path is not None:
                    self.reloader.note_current()
                    keep("config-watch", config_watch.watch, self.config_path, self.reloader.file_changed)
                keep("signals", self._signals, server)
                # Serve once every upstream had its (bounded) chance to start, so the capabilities
                # a host is given at initialize/discover already include what the upstreams offer.
                await self.pool.wait_started()
                state_folder.write_info(
                    self.state_dir,
                    {
                        "pid": os.getpid(),
                        "port": port,
                        "url": f"http://127.0.0.1:{port}/mcp",
                        "version": __version__,
                        "config": str(self.config_path) if self.config_path else None,
                        "started": self.started,
                    },
                )
                await shim_socket.serve()
                self.phase = "serving"
                log.info("mcpx %s serving on http://127.0.0.1:%d/mcp", __version__, port)
                self._say_what_the_config_did()
                if ready is not None:
                    ready(port)
                # What starting built (modules, models, routes, the config) lives as long as the
                # daemon: frozen out of the collector's reach, a full collection scans only what
                # serving has made since (bench/README.md: its pauses and CPU).
                gc.freeze()
                await server.serve(sockets=[sock])
                self.phase = "draining"
                self.http_hosts.close_all()
                await self.broker.close()
                # Tasks stop before upstreams, so a cut call stays `working` in the store and the
                # next daemon reports it as cut by the restart, not as an upstream failure.
                # Kept upstreams (SIGUSR1) wait for this instance's next run; otherwise the others
                # on a shared store take its tasks at once.
                await self.engine.close(hand_over=not self.pool.detached)
                self.phase = "stopping upstreams"
                await self.instances.aclose()
                await self.reconfigurer.aclose()  # servers a reload removed, still draining
                await self.pool.aclose()
                tg.cancel_scope.cancel()
            self.phase = "stopped"
        finally:
            await self.notifier.aclose()
            with anyio.CancelScope(shield=True):
                await shim_socket.aclose()
            if self.tracing:
                with anyio.CancelScope(shield=True):
                    await tracing.stop()  # exports the spans still batched
            state_folder.remove_info(self.state_dir)
            lock.close()

    def _answer_link(self, question: dict[str, Any]) -> str | None:
        """A notification's `answerUrl`: a one-time link for a form question (docs/answer-links.md)."""
        qid, expires = question.get("id"), question.get("expiresMs")
        if question.get("kind") != "elicitation" or not isinstance(qid, str) or not isinstance(expires, int):
            return None
        token = self.operations.links.mint(qid, expires)
        return f"{self.operations.link_base.rstrip('/')}/answer/{token}"

    async def _drain(self) -> None:
        self.phase = "draining"
        await self.broker.close()
        self.dispatcher.calls.plain.stopping("the mcpx daemon stopped while this call was running")
        cut = self.router.cut_all("the mcpx daemon is stopping; the call was cut")
        if cut:
            log.info("draining: %d running request(s) answered with an error", cut)
        with anyio.move_on_after(1):  # the cut calls end, their replies queued for their hosts
            while cut and self.router.running:  # noqa: ASYNC110 - no event for this; once, at a stop
                await anyio.sleep(0.01)
        if self._shim_socket is not None:  # shims get those replies, then see their socket end
            await self._shim_socket.aclose()

    async def _signals(self, server: _Server) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP) as signals:
            async for sig in signals:
                if sig == signal.SIGHUP:  # `kill -HUP`: read the config again (as `mcpx reload` asks)
                    await self.reloader.reload("signal", "mcpx")
                    continue
                if sig == signal.SIGUSR1:  # `mcpx stop --keep-upstreams`: an upgrade or a planned restart
                    log.info("signal SIGUSR1: shutting down, leaving the stdio upstreams to the next daemon")
                    self.pool.detach()
                else:
                    log.info("signal %s: shutting down", signal.Signals(sig).name)
                if server.should_exit:
                    server.force_exit = True
                server.should_exit = True
