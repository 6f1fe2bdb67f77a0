"""A reloaded config's server changes, applied to the running pool (docs/daemon-behavior.md).

Added servers start. A removed server leaves the pool at once, so hosts no longer see its tools and
no new call reaches it, while the calls already in flight at it run to their end (bounded by
`drain_limit_s`); then it stops. A changed server is both: the old process drains and stops, then
the new one starts under the same key (a stdio server's keeper and log are named by its key, so the
two never run side by side). Unchanged servers are not touched. Hosts are told their lists changed
when servers leave, and again as each new one comes up.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

import anyio
from anyio.abc import TaskGroup

from ..config.diff import ServerChanges
from ..config.model import Config
from ..events.keep import Keep, start_kept
from .catalogue import KINDS
from .host_scoped import HostInstances
from .pool import UpstreamPool, UpstreamServer

log = logging.getLogger("mcpx.upstream")

ListingChanged = Callable[[tuple[str, ...]], Awaitable[None]]


class Reconfigurer:
    def __init__(
        self, pool: UpstreamPool, instances: HostInstances, on_listing_changed: ListingChanged, drain_limit_s: float
    ) -> None:
        """`on_listing_changed` tells the hosts; `drain_limit_s` bounds how long a leaving server's
        calls may keep it (the daemon gives tasks.ttlMs: no task outlives that)."""
        self.pool = pool
        self.instances = instances
        self.on_listing_changed = on_listing_changed
        self.drain_limit_s = drain_limit_s
        self.draining: set[UpstreamServer] = set()  # left the pool, not stopped yet
        self._tg: TaskGroup | None = None
        self._keep: Keep | None = None
        self._locks: dict[str, anyio.Lock] = {}

    def run(self, tg: TaskGroup, keep: Keep | None = None) -> None:
        """Start (and drain) servers under the daemon's task group (each under `keep`, the daemon's
        rule for background work, when given: a server is started again, a retirement not repeated)."""
        self._tg = tg
        self._keep = keep

    async def apply(self, changes: ServerChanges, config: Config) -> None:
        """Swap the pool's servers for the new config's in one step, then start, drain and stop."""
        assert self._tg is not None, "reconfigurer not started"
        tg = self._tg
        old = dict(self.pool.servers)
        leaving = {key: old[key] for key in (*changes.removed, *changes.changed) if key in old}
        fresh: dict[str, UpstreamServer] = {}
        for key, cfg in config.active_servers.items():
            kept = old.get(key) if key in changes.unchanged else None
            fresh[key] = kept or self.pool.make_server(key, cfg, config.namespace_of(key))
        # In place (others hold the dict), with no await between: a host's next request sees the new set whole.
        self.pool.servers.clear()
        self.pool.servers.update(fresh)
        for key, server in leaving.items():
            hosts_own = self.instances.take(key)  # `scope: host` processes of the old entry
            self.draining.update([server, *hosts_own])
            why = "its config entry changed" if key in changes.changed else "it was removed from the config"
            start_kept(tg, self._keep, f"reload:retire {key}", self._retire, server, hosts_own, why, restart=False)
        for key in (*changes.added, *changes.changed):
            start_kept(tg, self._keep, f"upstream:{key}", self._start, fresh[key])
        gone = _listed_kinds(leaving.values())
        if gone:
            await self.on_listing_changed(gone)

    def _order(self, key: str) -> anyio.Lock:
        """One process per key at a time: the next starts only once the one before it stopped."""
        return self._locks.setdefault(key, anyio.Lock())

    async def _retire(self, server: UpstreamServer, hosts_own: list[UpstreamServer], why: str) -> None:
        async with self._order(server.key):
            for each in (server, *hosts_own):
                await self._drained(each, why)
                await each.stop(why)
                self.draining.discard(each)
            log.info("upstream %s stopped: %s", server.key, why)

    async def _start(self, server: UpstreamServer) -> None:
        async with self._order(server.key):
            pass  # the process it replaces has stopped
        if server is not self.pool.servers.get(server.key):
            return  # a later reload replaced or removed it meanwhile
        assert self._tg is not None
        self._tg.start_soon(self._announce_when_up, server)
        await server.run()

    async def _drained(self, server: UpstreamServer, why: str) -> None:
        if server.in_flight:
            log.info("upstream %s: %s; stopping after its %d call(s) in flight", server.key, why, server.in_flight)
        with anyio.move_on_after(self.drain_limit_s) as waited:
            await server.idle()
        if waited.cancelled_caught:
            log.warning(
                "upstream %s: %d call(s) still in flight after %g s; stopping it anyway",
                server.key,
                server.in_flight,
                self.drain_limit_s,
            )

    async def _announce_when_up(self, server: UpstreamServer) -> None:
        """A new server's first lists are news to the hosts (a restart's are told by the pool)."""
        await server.first_attempt.wait()
        came = _listed_kinds([server])
        if came and server.state == "ready" and server is self.pool.servers.get(server.key):
            await self.on_listing_changed(came)

    async def aclose(self) -> None:
        """The daemon stops: servers still draining stop now with the rest."""
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for server in list(self.draining):
                    tg.start_soon(server.stop)
            self.draining.clear()


def _listed_kinds(servers: Iterable[UpstreamServer]) -> tuple[str, ...]:
    """The kinds of list (tools, prompts, ...) these servers have something in."""
    return tuple(kind for kind in KINDS if any(server.lists[kind] for server in servers))
