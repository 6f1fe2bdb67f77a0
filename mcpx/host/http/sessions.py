"""Who the HTTP hosts on `/mcp` are: 2025-11-25 sessions by their Mcp-Session-Id (stored, so a
session outlives a daemon restart) and stateless 2026-07-28 hosts by their identity (principal,
else `clientInfo` and peer address), each with its connection record. The endpoint (endpoint.py)
asks here for the host of each request; the connection registry asks whether a quiet session is
still in use and tells when it closed one."""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

from ...connections import naming
from ...protocol import jsonrpc
from ...protocol.ids import opaque_id
from ...records.connection_record import ConnectionRecord
from ...store import Store, StoreError
from ..connection import HostConnection
from ..router import HostRouter
from .peer_process import look_up_process

log = logging.getLogger("mcpx.host")

MAX_MODERN_IDENTITIES = 1024


class HttpHosts:
    def __init__(self, router: HostRouter, store: Store, *, check_principal: bool) -> None:
        """`check_principal`: bearer tokens are configured, so a session answers only the
        principal that opened it."""
        self.router = router
        self.store = store
        self.check_principal = check_principal
        self.sessions: dict[str, HostConnection] = {}
        self._modern: OrderedDict[str, HostConnection] = OrderedDict()

    async def start_session(self, conn: HostConnection) -> bool:
        """A host that initialized: give it a session id, stored before it is handed out. False
        when the store refused it (no durable session, no session id)."""
        conn.id = opaque_id(24)
        try:
            await self.store.put_session(
                conn.id,
                {
                    "revision": conn.revision,
                    "clientInfo": conn.client_info,
                    "clientCaps": conn.client_caps,
                    "principal": conn.principal,
                    "peer": conn.peer,
                    "recordId": conn.record_id,
                    "label": conn.label,
                },
            )
        except StoreError as exc:
            log.error("could not store the session: %s", exc)
            return False
        self.sessions[conn.id] = conn
        try:
            await self.router.open(conn, "session")
        except StoreError as exc:
            log.error("could not register the session: %s", exc)
        return True

    async def session(self, sid: str, principal: str | None) -> HostConnection | None:
        """A live session, or one a previous daemon stored; never another principal's."""
        conn = self.sessions.get(sid)
        if conn is None:
            saved = await self.store.get_session(sid)
            if saved is None:
                return None
            conn = HostConnection(
                "http",
                peer=saved.get("peer"),
                principal=saved.get("principal"),
                id=sid,
                era="legacy",
                revision=saved["revision"],
                client_info=saved.get("clientInfo") or {},
                client_caps=saved.get("clientCaps") or {},
                # Stored as it was shown: its clientInfo, the rest of it, is the session's own too.
                given_label=saved.get("label") if isinstance(saved.get("label"), str) else None,
            )
            if isinstance(saved.get("recordId"), str):
                conn.record_id = saved["recordId"]
            if sid in self.sessions:  # restored by a concurrent request meanwhile
                conn = self.sessions[sid]
            else:
                self.sessions[sid] = conn
                await self.router.open(conn, "session")
        if self.check_principal and conn.principal != principal:
            return None
        return conn

    async def delete_session(self, conn: HostConnection) -> None:
        """The host ended its session (DELETE)."""
        self.sessions.pop(conn.id, None)
        await self.store.delete_session(conn.id)
        await self.router.close(conn, "session deleted by the host")

    async def stateless(
        self, principal: str | None, params: dict[str, Any], peer: str | None, label_header: str | None = None
    ) -> HostConnection:
        """Stateless hosts, grouped for the console: principal, else clientInfo + peer address, and
        the explicit label a host sends (two agents alike in all else are two hosts then)."""
        info = jsonrpc.as_object(jsonrpc.as_object(params.get("_meta")).get("io.modelcontextprotocol/clientInfo"))
        host = (peer or "").rsplit(":", 1)[0]
        label = naming.from_header(label_header)
        key = f"principal:{principal}" if principal else f"{info.get('name', '?')}/{info.get('version', '?')}@{host}"
        if label is not None:
            key += f"#{label}"
        conn = self._modern.get(key)
        if conn is not None:
            self._modern.move_to_end(key)
            await conn.registered.wait()  # a concurrent first request is still registering it
            return conn
        conn = HostConnection("http", peer=host, principal=principal, client_info=info)
        self._modern[key] = conn  # before the lookup below yields: a concurrent request waits on it
        conn.given_label = label
        if label is None:
            await look_up_process(self.router, conn, peer)
        known = self.router.registry.find_stateless(key)  # the same host, seen before a restart
        if known is not None:
            conn.record_id = known.id
        try:
            await self.router.open(conn, "stateless", key)
        finally:
            conn.registered.set()
        if len(self._modern) > MAX_MODERN_IDENTITIES:
            _, old = self._modern.popitem(last=False)
            await self.router.close(old, f"more than {MAX_MODERN_IDENTITIES} stateless hosts")
        return conn

    def _session_of(self, record: ConnectionRecord) -> HostConnection | None:
        return next((c for c in self.sessions.values() if c.record_id == record.id), None)

    def session_in_use(self, record: ConnectionRecord) -> bool:
        """A quiet session with its GET stream open, or a question of mcpx's to answer, is in use."""
        conn = self._session_of(record)
        return conn is not None and (conn.send is not None or bool(conn.awaiting) or bool(conn.in_flight))

    def forget_idle(self, record: ConnectionRecord) -> None:
        """The registry closed a quiet host. A stateless host's next request starts a new record; a
        session's is restored from the store (as after a restart) and its record opened again."""
        if record.kind == "session":
            conn = self._session_of(record)
            if conn is not None:
                del self.sessions[conn.id]
                self.router.forget(conn)
            return
        if record.key is not None:
            conn = self._modern.get(record.key)
            if conn is not None and conn.record_id == record.id:
                del self._modern[record.key]
                self.router.forget(conn)

    def close_all(self) -> None:
        """At shutdown: sessions outlive the daemon (stored), so their records stay open."""
        for conn in list(self.sessions.values()):
            self.router.forget(conn)
        self.sessions.clear()
