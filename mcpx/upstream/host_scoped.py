"""The processes of `scope: host` servers: one per host connection, for its calls alone.

A server shared by several hosts cannot always tell whose call asked a question, and keeps state
(a login, a working folder, a cache) that one host may not want another to see. With
`mcpx.scope: host`, each host connection gets a process of the server of its own, started on its
first request and stopped when the connection closes or leaves it idle for `idleStopS`; at most
`maxInstances` of them run at once. The pool's own process of the server still lists its tools,
prompts and resources for every host.

A task outlives its host (tasks are durable; another connection of the same principal, or an
operator, collects its result), so a process that tasks run on is not stopped when its host
disconnects: it stops when the last of them ends (a task's TTL ends it at the latest). Every
question the process asks is its host's: one no call in flight explains goes to that host too
(`ask_owner`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio
from anyio.abc import TaskGroup

from ..events.keep import Keep, start_kept
from ..protocol.errors import LimitReached
from .pool import UpstreamServer
from .session import AskOwner

log = logging.getLogger("mcpx.upstream")

SWEEP_EVERY_S = 5.0

# (the shared server, connection id, who answers the process's questions no call explains)
MakeInstance = Callable[[UpstreamServer, str, AskOwner | None], UpstreamServer]


class HostInstances:
    def __init__(
        self, make: MakeInstance = UpstreamServer.sibling, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.make = make
        self.clock = clock
        self.tg: TaskGroup | None = None
        self.keep: Keep | None = None
        self._running: dict[str, dict[str, UpstreamServer]] = {}  # server key -> connection id -> process
        self._left: set[str] = set()  # connections that closed while tasks ran on a process of theirs
        self._freed = anyio.Event()  # some process stopped: a waiting host may have room now

    async def run(self, tg: TaskGroup, keep: Keep | None = None) -> None:
        """Under the daemon's task group: start processes there, and stop the idle ones (under `keep`,
        the daemon's rule for background work, when given)."""
        self.tg = tg
        self.keep = keep
        start_kept(tg, keep, "host-instances", self._sweep)

    def count(self, key: str) -> int:
        return len(self._running.get(key, {}))

    def left(self, connection: str) -> bool:
        """This connection closed, and a process of its still runs its tasks."""
        return connection in self._left

    async def for_host(
        self, shared: UpstreamServer, connection: str, ask_owner: AskOwner | None = None
    ) -> UpstreamServer:
        """The process that serves this host's requests to `shared`: the shared one, or (scope:
        host) the host's own, started now if it has none (its questions no call explains go to
        `ask_owner`)."""
        if shared.cfg.mcpx.scope != "host":
            return shared
        running = self._running.setdefault(shared.key, {})
        own = running.get(connection)
        if own is not None:
            self._left.discard(connection)  # (a 2025 session closed as idle comes back under its id)
            return own
        limit, wait_s = shared.cfg.mcpx.maxInstances, shared.cfg.mcpx.roomWaitS
        with anyio.move_on_after(wait_s):
            while len(running) >= limit and connection not in running:
                freed = self._freed
                await freed.wait()
        own = running.get(connection)  # started by a request of the same host meanwhile
        if own is not None:
            self._left.discard(connection)
            return own
        if len(running) >= limit:
            raise LimitReached(
                f"mcpServers.{shared.key}.mcpx.maxInstances",
                limit,
                "that many hosts have a process of this server of their own; none stopped within"
                f" {wait_s:g} s (roomWaitS; each stops when its host disconnects or after idleStopS)",
            )
        own = self.make(shared, connection, ask_owner)
        running[connection] = own
        assert self.tg is not None, "host instances not started"
        start_kept(self.tg, self.keep, f"upstream:{shared.key}@{connection}", own.run)
        log.info("upstream %s: started a process for connection %s (%d running)", shared.key, connection, len(running))
        return own

    async def release(self, connection: str) -> None:
        """The host connection closed: its processes stop, but for one its tasks still run on,
        which stops when the last of them ends (each task's TTL ends it at the latest)."""
        for key, running in list(self._running.items()):
            own = running.get(connection)
            if own is None:
                continue
            if own.holds:
                self._left.add(connection)
                log.info(
                    "upstream %s: connection %s closed; its process stays for its %d task(s)",
                    key,
                    connection,
                    own.holds,
                )
                assert self.tg is not None, "host instances not started"
                self.tg.start_soon(self._stop_when_unheld, key, connection, own)
                continue
            del running[connection]
            await self._stop(key, connection, own, "its host connection closed")

    async def _stop_when_unheld(self, key: str, connection: str, own: UpstreamServer) -> None:
        await own.unheld()
        if connection not in self._left:
            return  # its host came back: it idles out as any host's process does
        running = self._running.get(key, {})
        if running.get(connection) is own:  # (a reload may have taken it meanwhile)
            del running[connection]
            await self._stop(key, connection, own, "its host connection closed and its last task ended")
        self._forget_left(connection)

    def _forget_left(self, connection: str) -> None:
        if not any(connection in running for running in self._running.values()):
            self._left.discard(connection)

    def take(self, key: str) -> list[UpstreamServer]:
        """The hosts' processes of a server the config no longer runs as it was (a reload removed or
        changed it): handed to the caller to stop once drained; a host's next call starts a new one."""
        taken = self._running.pop(key, {})
        for connection in taken:
            self._forget_left(connection)
        return list(taken.values())

    async def _stop(self, key: str, connection: str, own: UpstreamServer, why: str) -> None:
        log.info("upstream %s: stopping the process of connection %s: %s", key, connection, why)
        await own.stop(why)
        freed, self._freed = self._freed, anyio.Event()
        freed.set()

    async def _sweep(self) -> None:
        while True:
            await anyio.sleep(SWEEP_EVERY_S)
            now = self.clock()
            for key, running in list(self._running.items()):
                for connection, own in list(running.items()):
                    if connection in self._left or own.in_flight or own.holds:
                        continue  # in use (a task may be between two requests), or stops when its tasks end
                    if now - own.last_used >= own.cfg.mcpx.idleStopS:
                        del running[connection]
                        await self._stop(key, connection, own, f"idle for {own.cfg.mcpx.idleStopS:g} s")

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            for key, running in list(self._running.items()):
                for connection, own in list(running.items()):
                    del running[connection]
                    await self._stop(key, connection, own, "the mcpx daemon stopped")
            self._left.clear()
