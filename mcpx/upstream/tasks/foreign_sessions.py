"""Following an upstream task in the 2025-11-25 HTTP session it was made in.

Some task servers scope their task ids to the session that created them (the official SDK 1.30
does: another session asking gets -32602). The session an mcpx task's upstream task was made in
is on the task row (Task.upstream_session), so whichever daemon follows it later asks in that
session: its own when it is the same one (the usual case, and after a restart that carried the
session on); else that one, reopened beside its own while tasks made in it are followed. That is
how a daemon that took over a lost instance's tasks (several daemons on one store) polls them.

A session reopened here is never DELETEd upstream: other tasks of the lost daemon may live in it,
followed by another survivor at the same time.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import AsyncIterator
from typing import Protocol

import anyio
from anyio.abc import TaskGroup, TaskStatus

from ...config.model import ServerConfig
from ...protocol.errors import UpstreamUnavailable
from ..http.streamable import HttpTransport
from ..session import UpstreamSession
from .follow import GetSession, TaskSession


class ServerHandle(Protocol):
    """What following tasks in another daemon's session needs of a server (pool.UpstreamServer)."""

    key: str
    cfg: ServerConfig

    async def ready_session(self) -> UpstreamSession: ...


log = logging.getLogger("mcpx.upstream")
_IDS = random.SystemRandom()


def session_id_of(session: TaskSession) -> str | None:
    """The HTTP session a 2025-11-25 upstream session speaks in (None for stdio and 2026 servers)."""
    if not isinstance(session, UpstreamSession) or session.era != "legacy":
        return None
    transport = session.transport
    return transport.session_id if isinstance(transport, HttpTransport) else None


class _Reopened:
    """Another daemon's session with this server, carried on with this one's handshake (same
    server, same config); reopened if its connection drops."""

    def __init__(self, server: ServerHandle, session_id: str, sessions: ForeignSessions) -> None:
        self.server = server
        self.session_id = session_id
        self.sessions = sessions
        self.session: UpstreamSession | None = None
        self.users = 0
        self._opening = anyio.Lock()

    async def get(self) -> UpstreamSession:
        # Decided on each call: at a start this daemon's own session is not ready yet, and a
        # restart may have carried the very session on (upstream/pool.py, http_session_record).
        own = await self.server.ready_session()
        if session_id_of(own) in (None, self.session_id):
            return own
        async with self._opening:
            if self.session is None or self.session.transport.closed.is_set():
                self.session = await self._open(own)
            return self.session

    async def _open(self, own: UpstreamSession) -> UpstreamSession:
        tg = self.sessions.tg
        if tg is None:  # (the pool runs before any upstream is ready, so before this)
            raise UpstreamUnavailable(f"upstream {self.server.key!r}: the pool is not running")
        log.info("upstream %s: following tasks in a session another daemon made them in", self.server.key)
        transport = HttpTransport(self.server.key, self.server.cfg)
        transport.session_id = self.session_id
        transport.detach = True  # close() leaves the session to the server (see above)
        session = UpstreamSession(self.server.key, transport)
        session.tg = tg
        # A session routes replies by request id: ids far from those of the daemon that made it
        # (it counted from 1) and from another survivor's, which may follow tasks in it too.
        session.adopt(own.handshake(), _IDS.randrange(1 << 40, 1 << 52))
        await tg.start(self._run, transport, session)
        return session

    @staticmethod
    async def _run(transport: HttpTransport, session: UpstreamSession, *, task_status: TaskStatus[None]) -> None:
        await transport.run(session.feed, task_status.started)

    async def close(self) -> None:
        if self.session is not None:
            await self.session.transport.close()


class ForeignSessions:
    """The sessions of other daemons this one follows upstream tasks in: one connection per server
    and session, shared by every task followed in it (a session routes replies by request id, so
    two followers numbering their requests alike in one session would get each other's)."""

    def __init__(self) -> None:
        self.tg: TaskGroup | None = None  # where their connections run: the pool's (UpstreamPool.run)
        self._open: dict[tuple[str, str], _Reopened] = {}

    def start(self, tg: TaskGroup) -> None:
        self.tg = tg

    @contextlib.asynccontextmanager
    async def session_for(self, server: ServerHandle, session_id: str | None) -> AsyncIterator[GetSession]:
        """Where to follow an upstream task made in HTTP session `session_id` (None: any session)."""
        if session_id is None:
            yield server.ready_session
            return
        key = (server.key, session_id)
        reopened = self._open.get(key)
        if reopened is None:
            reopened = self._open[key] = _Reopened(server, session_id, self)
        reopened.users += 1
        try:
            yield reopened.get
        finally:
            reopened.users -= 1
            if not reopened.users:
                del self._open[key]
                await reopened.close()
