"""The console demo's three hosts, of different eras, calling the daemon at a human pace:

- "demo-legacy-ide": a 2025-11-25 HTTP session that runs every call as a task and polls it;
- "demo-agent": a stateless 2026-07-28 HTTP host declaring the tasks extension (slow calls become
  tasks it polls);
- "demo-cli": a 2025-11-25 host on stdio, through a `mcpx serve` it spawns.

None declares elicitation, so the upstream's questions wait for the console's operator. Each host
starts a call every 1–4 s, a few in parallel; when the daemon goes away it backs off and reconnects
(the URL re-read from the state folder, the legacy session resumed when the daemon still knows it).
SIGTERM/SIGINT end it cleanly, and so does the death of its parent.

    python -m mcpx.demo.paced_hosts --url URL --state-dir DIR
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import anyio
import httpx

from .. import __version__
from ..client.daemon_client import running_daemon
from ..protocol.revisions import TASKS_EXTENSION
from .calls import run_legacy, run_modern
from .host_client import HttpHost, RpcError, SessionLost
from .plan import AGENT, AGENT_OPENING, CLI, CLI_OPENING, LEGACY_IDE, LEGACY_IDE_OPENING, Call, Gate, Plan
from .stdio_host import StdioHost, open_stdio_host

log = logging.getLogger("mcpx.demo")
MAX_IN_FLIGHT = 3
PACE_S = (1.0, 4.0)
BACKOFF_S = (0.5, 10.0)
# What "the daemon is gone" looks like on each transport (tool errors are RpcError, and normal).
LOST = (httpx.TransportError, ConnectionError, SessionLost)


class Host(Protocol):
    name: str
    plan: Plan

    def connected(self) -> AbstractAsyncContextManager[None]:
        """Connected while inside; leaving it normally means the daemon was lost (reconnect
        later), leaving it by an exception (cancelled) means for good."""
        ...

    async def run(self, call: Call) -> str: ...


class Locator:
    """Where the daemon listens now: its info file (it may have restarted on another port)."""

    def __init__(self, url: str, state_dir: Path) -> None:
        self.url = url
        self.state_dir = state_dir

    def current(self) -> str:
        info = running_daemon(self.state_dir)
        if info is not None and isinstance(info.get("url"), str):
            self.url = info["url"]
        return self.url


def _info(name: str) -> dict[str, str]:
    return {"name": name, "version": __version__}


class LegacyIde:
    name = "demo-legacy-ide"

    def __init__(self, where: Locator, plan: Plan) -> None:
        self.where = where
        self.plan = plan
        self.http: HttpHost | None = None
        self.session: tuple[str, str] | None = None  # (session id, revision), kept across reconnects
        self.tokens = 0

    @asynccontextmanager
    async def connected(self) -> AsyncIterator[None]:
        http = await self._open(self.where.current())
        self.http, self.session = http, (str(http.session_id), http.revision)
        for_good = True
        try:
            yield
            for_good = False
        finally:
            self.http = None
            with anyio.CancelScope(shield=True), anyio.move_on_after(3):
                # For good: delete the session, so it shows as closed. Lost: keep it for the next daemon.
                await http.close(end_session=for_good)

    async def _open(self, url: str) -> HttpHost:
        if self.session is not None:
            sid, revision = self.session
            resumed = HttpHost(url, "legacy", client_info=_info(self.name), session_id=sid, revision=revision)
            try:
                await resumed.request("ping")  # sessions are stored: after a restart it is still ours
                return resumed
            except SessionLost:
                self.session = None
                await resumed.close(end_session=False)
            except BaseException:
                await resumed.close(end_session=False)
                raise
        host = HttpHost(url, "legacy", client_info=_info(self.name))
        try:
            return await host.__aenter__()
        except BaseException:
            await host.close(end_session=False)
            raise

    async def run(self, call: Call) -> str:
        assert self.http is not None
        self.tokens += 1
        return await run_legacy(self.http, call, f"{self.name}-{self.tokens}")


class Agent:
    name = "demo-agent"

    def __init__(self, where: Locator, plan: Plan) -> None:
        self.where = where
        self.plan = plan
        self.http: HttpHost | None = None

    @asynccontextmanager
    async def connected(self) -> AsyncIterator[None]:
        caps: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}
        async with HttpHost(self.where.current(), "modern", client_info=_info(self.name), capabilities=caps) as http:
            await http.request("server/discover")  # what a 2026 host does first
            self.http = http
            try:
                yield
            finally:
                self.http = None

    async def run(self, call: Call) -> str:
        assert self.http is not None
        return await run_modern(self.http, call)


class Cli:
    name = "demo-cli"

    def __init__(self, state_dir: Path, plan: Plan) -> None:
        self.state_dir = state_dir
        self.plan = plan
        self.stdio: StdioHost | None = None
        self.tokens = 0

    @asynccontextmanager
    async def connected(self) -> AsyncIterator[None]:
        # `mcpx serve` starts a daemon when none runs; the demo's daemon is the console's to start.
        if running_daemon(self.state_dir) is None:
            raise ConnectionError("the demo's daemon is not running")
        async with open_stdio_host(self.state_dir, _info(self.name), {}) as stdio:
            self.stdio = stdio
            try:
                yield
            finally:
                self.stdio = None

    async def run(self, call: Call) -> str:
        assert self.stdio is not None
        self.tokens += 1
        return await run_legacy(self.stdio, call, f"{self.name}-{self.tokens}")


async def drive(host: Host, rng: random.Random) -> None:
    """Keep the host calling; reconnect with backoff whenever the daemon goes away."""
    delay = BACKOFF_S[0]
    while True:
        connected = False
        try:
            async with host.connected():
                connected = True
                log.info("%s: connected", host.name)
                delay = BACKOFF_S[0]
                await _calls(host, rng)  # returns when the daemon has gone away
        except (*LOST, RpcError) as exc:
            if connected:
                raise  # not from connecting: a bug worth its traceback
            log.info("%s: cannot reach the daemon (%s); retrying in %.1f s", host.name, exc, delay)
        else:
            log.info("%s: lost the daemon; reconnecting", host.name)
        await anyio.sleep(delay)
        delay = min(delay * 2, BACKOFF_S[1])


async def _calls(host: Host, rng: random.Random) -> None:
    """Start calls at a human pace until one finds the daemon gone."""
    lost = anyio.Event()
    in_flight = 0

    async def one(call: Call) -> None:
        nonlocal in_flight
        try:
            log.info("%s → %s %s", host.name, call.tool, call.arguments)
            log.info("%s ← %s: %s", host.name, call.tool, await host.run(call))
        except LOST as exc:
            log.info("%s: %s cut short: %s", host.name, call.tool, exc)
            lost.set()
        except RpcError as exc:
            log.info("%s ← %s: JSON-RPC error %s", host.name, call.tool, exc)
        except Exception:  # one odd reply is logged; the host keeps calling
            log.exception("%s: %s failed", host.name, call.tool)
        finally:
            in_flight -= 1
            host.plan.done(call)

    async with anyio.create_task_group() as tg:
        while not lost.is_set():
            if in_flight < MAX_IN_FLIGHT:
                in_flight += 1
                tg.start_soon(one, host.plan.next())
            with anyio.move_on_after(rng.uniform(*PACE_S)):
                await lost.wait()
        tg.cancel_scope.cancel()


async def _until_signal_or_orphaned(parent: int) -> bool:
    """Returns on SIGTERM/SIGINT (False), or once the parent has died (True: we were re-parented)."""
    orphaned = False
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with anyio.create_task_group() as tg:

            async def on_signal() -> None:
                async for sig in signals:
                    log.info("signal %s: stopping the demo hosts", signal.Signals(sig).name)
                    break
                tg.cancel_scope.cancel()

            async def on_orphan() -> None:
                nonlocal orphaned
                # Polled: no portable event says the parent died (orphans get a new parent pid).
                while True:
                    await anyio.sleep(0.5)
                    if os.getppid() != parent:
                        break
                log.info("the parent (pid %d) is gone: stopping the demo hosts", parent)
                orphaned = True
                tg.cancel_scope.cancel()

            tg.start_soon(on_signal)
            tg.start_soon(on_orphan)
    return orphaned


async def run(url: str, state_dir: Path, parent: int) -> bool:
    """Drive the three hosts until a signal (False) or the parent's death (True)."""
    rng = random.Random()
    gate = Gate()  # one question at a time across the three hosts (demo_plan.Gate)
    where = Locator(url, state_dir)
    hosts: list[Host] = [
        LegacyIde(where, Plan(LEGACY_IDE, LEGACY_IDE_OPENING, rng, gate)),
        Agent(where, Plan(AGENT, AGENT_OPENING, rng, gate)),
        Cli(state_dir, Plan(CLI, CLI_OPENING, rng, gate)),
    ]
    async with anyio.create_task_group() as tg:
        for i, host in enumerate(hosts):
            tg.start_soon(_start_later, host, rng, i * 0.3)  # staggered, so the first calls spread out
        orphaned = await _until_signal_or_orphaned(parent)
        tg.cancel_scope.cancel()
    return orphaned


async def _start_later(host: Host, rng: random.Random, delay: float) -> None:
    await anyio.sleep(delay)
    await drive(host, rng)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcpx.demo.paced_hosts", description="the console demo's hosts")
    parser.add_argument("--url", required=True, help="the daemon's /mcp URL (re-read from the state folder later)")
    parser.add_argument("--state-dir", required=True, type=Path, help="the demo daemon's state folder")
    parser.add_argument(
        "--reap-on-orphan",
        action="store_true",
        help="when the parent dies, also stop the demo's daemon and remove the state folder (start_demo's run)",
    )
    parser.add_argument(
        "--parent",
        type=int,
        default=None,
        help="the pid whose death ends the hosts (default: the parent at start; given by start_demo, so a"
        " parent that died while the hosts were starting is noticed too)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per poll would drown the calls
    orphaned = anyio.run(run, args.url, args.state_dir, args.parent or os.getppid())
    if orphaned and args.reap_on_orphan:
        from .console_world import reap_orphaned

        reap_orphaned(args.state_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
