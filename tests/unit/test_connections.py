"""mcpx.connections.registry: the registry of host connections, stored with connection.opened/closed events;
after a restart shims are closed (their socket died with the old daemon) while sessions and
stateless hosts carry on; stateless hosts close when idle; last-seen times reach the store in
flushes. A real SqliteStore file."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcpx.connections import registry as connections_module
from mcpx.connections.registry import RESTARTED, ConnectionRegistry, now_ms
from mcpx.records.connection_record import ConnectionRecord
from mcpx.store import StoreError

from .storekit import Published, Running, check_event, opened

pytestmark = pytest.mark.anyio

MINUTE_MS = 60_000


def rec(cid: str, kind: str = "session", *, last_seen_ms: int | None = None, **kw: object) -> ConnectionRecord:
    opened_ms = now_ms() - 10 * MINUTE_MS
    return ConnectionRecord(
        cid,
        kind,  # type: ignore[arg-type]  # test kinds
        "stdio" if kind == "shim" else "http",
        opened_ms,
        opened_ms if last_seen_ms is None else last_seen_ms,
        **kw,  # type: ignore[arg-type]  # test fields
    )


@contextlib.asynccontextmanager
async def registry_on(
    path: Path, idle_close_s: float = 600, **hooks: Any
) -> AsyncIterator[tuple[ConnectionRegistry, Running]]:
    async with opened(path) as w:
        yield ConnectionRegistry(w.store, idle_close_s, **hooks), w


def closed_events(published: Published) -> dict[str, str]:
    return {
        e.event.connection_id or "": e.event.data["reason"]
        for e in published.events
        if e.event.kind == "connection.closed"
    }


# ---- open and close --------------------------------------------------------------------------


async def test_opening_stores_the_record_with_its_opened_event_once(tmp_path: Path) -> None:
    record = rec("c-1", "stateless", key="host/1@127.0.0.1", client_info={"name": "host"}, peer="127.0.0.1")
    async with registry_on(tmp_path / "mcpx.db") as (registry, w):
        assert await registry.open(record) is record
        again = await registry.open(replace(record, peer="elsewhere"))  # taken back, not stored twice
        assert again is record
        assert await w.store.get_connection("c-1") == record
        assert registry.get("c-1") is record and registry.find_stateless("host/1@127.0.0.1") is record
    (event,) = w.published.events
    assert (event.event.kind, event.event.connection_id, event.event.data) == (
        "connection.opened",
        "c-1",
        record.wire(),
    )
    check_event(event)


async def test_closing_stores_when_and_why_with_the_last_time_it_was_seen(tmp_path: Path) -> None:
    async with registry_on(tmp_path / "mcpx.db") as (registry, w):
        await registry.open(rec("c-1", "stateless", key="k"))
        registry.seen("c-1")
        seen_ms = registry._seen["c-1"]
        await registry.close("c-1", "session deleted")
        await registry.close("c-1", "again")  # already closed: nothing more
        stored = await w.store.get_connection("c-1")
        assert registry.get("c-1") is None
        came_back = registry.find_stateless("k")  # a closed stateless host comes back as itself
        assert came_back is not None and came_back.id == "c-1"
        assert await w.store.connections(open_only=True) == []
    assert stored is not None and not stored.open
    assert (stored.close_reason, stored.last_seen_ms) == ("session deleted", seen_ms)
    assert stored.closed_ms is not None and stored.closed_ms >= seen_ms
    assert closed_events(w.published) == {"c-1": "session deleted"}
    for event in w.published.events:
        check_event(event)


async def test_closing_an_old_record_keeps_a_newer_one_of_the_same_stateless_host(tmp_path: Path) -> None:
    async with registry_on(tmp_path / "mcpx.db") as (registry, _):
        await registry.open(rec("c-old", "stateless", key="k"))
        newer = await registry.open(rec("c-new", "stateless", key="k"))
        await registry.close("c-old", "replaced")
        assert registry.find_stateless("k") is newer


async def test_update_stores_details_learnt_later_with_an_updated_event(tmp_path: Path) -> None:
    async with registry_on(tmp_path / "mcpx.db") as (registry, w):
        await registry.open(rec("c-1"))
        await registry.update(
            "c-1", revision="2025-11-25", client_info={"name": "ide"}, capabilities={}, label="ide · node in ~/x"
        )
        # Not a live connection: ignored.
        await registry.update("c-unknown", revision="x", client_info={}, capabilities=None, label=None)
        stored = await w.store.get_connection("c-1")
        assert registry.get("c-1") == stored
    assert stored is not None and (stored.revision, stored.client_info) == ("2025-11-25", {"name": "ide"})
    assert stored.label == "ide · node in ~/x"
    kinds = [e.event.kind for e in w.published.events]
    assert kinds == ["connection.opened", "connection.updated"]  # the unknown id wrote nothing
    assert w.published.events[-1].event.data["revision"] == "2025-11-25"


async def test_an_update_while_the_record_is_still_being_stored_waits_for_it(tmp_path: Path) -> None:
    """A host's process found while its record's opening write is under way (peer_process.py's
    late scan, on a busy machine) is not lost: the update waits for the record, then applies."""
    async with registry_on(tmp_path / "mcpx.db") as (registry, w):
        async with anyio.create_task_group() as tg:
            tg.start_soon(registry.open, rec("c-1", client_info={"name": "research-agent"}))
            await anyio.sleep(0)  # the open is storing the record: not live yet
            assert registry.get("c-1") is None
            label = "research-agent · python3 in ~/x"
            await registry.update(
                "c-1", revision=None, client_info={"name": "research-agent"}, capabilities=None, label=label
            )
        stored = await w.store.get_connection("c-1")
    assert registry.get("c-1") == stored and stored is not None and stored.label == label
    assert [e.event.kind for e in w.published.events] == ["connection.opened", "connection.updated"]


# ---- a restart ---------------------------------------------------------------------------------


async def test_restore_closes_shims_and_keeps_sessions_and_stateless_hosts(tmp_path: Path) -> None:
    db = tmp_path / "mcpx.db"
    shim = rec("c-shim", "shim", shim_pid=4242)
    session = rec("c-session")
    stateless = rec("c-stateless", "stateless", key="host/1@127.0.0.1")
    gone = rec("c-gone", closed_ms=now_ms(), close_reason="session deleted")
    async with registry_on(db) as (before, _):
        for record in (shim, session, stateless):
            await before.open(record)
        await before.store.put_connection(gone)
    async with registry_on(db) as (after, w):  # the next daemon
        await after.restore()
        closed_shim = await w.store.get_connection("c-shim")
        open_ids = [c.id for c in await w.store.connections(open_only=True)]
    assert sorted(after.live) == ["c-session", "c-stateless"]
    assert after.find_stateless("host/1@127.0.0.1") == stateless and after.get("c-gone") is None
    assert closed_shim is not None and closed_shim.close_reason == RESTARTED and not closed_shim.open
    assert sorted(open_ids) == ["c-session", "c-stateless"]
    assert closed_events(w.published) == {"c-shim": RESTARTED}


# ---- last seen and idle hosts ------------------------------------------------------------------


async def test_flush_stores_last_seen_times_and_writes_nothing_when_nobody_was_seen(tmp_path: Path) -> None:
    async with registry_on(tmp_path / "mcpx.db") as (registry, w):
        await registry.open(rec("c-1"))
        quiet = await registry.open(rec("c-2"))
        assert w.store.db is not None
        statements: list[str] = []
        await w.store.db.set_trace_callback(statements.append)
        await registry.flush()
        assert statements == []  # nothing seen: no write at all
        registry.seen("c-1")
        registry.seen("c-unknown")  # not a live connection: ignored
        seen_ms = registry._seen["c-1"]
        await registry.flush()
        await w.store.db.set_trace_callback(None)
        stored = {c.id: c.last_seen_ms for c in await w.store.connections()}
        assert registry.get("c-1") is not None and registry.get("c-1").last_seen_ms == seen_ms  # type: ignore[union-attr]  # checked not None just before
    assert stored == {"c-1": seen_ms, "c-2": quiet.last_seen_ms}
    assert [e.event.kind for e in w.published.events] == ["connection.opened"] * 2  # bookkeeping, no events


async def test_quiet_stateless_hosts_and_unused_sessions_are_closed_and_listeners_told(tmp_path: Path) -> None:
    old = now_ms() - 10 * MINUTE_MS
    told: list[str] = []
    async with registry_on(
        tmp_path / "mcpx.db",
        idle_close_s=60,
        on_idle_close=lambda record: told.append(record.id),
        in_use=lambda record: record.id == "c-session-streaming",
    ) as (registry, w):
        await registry.open(rec("c-idle", "stateless", last_seen_ms=old, key="idle"))
        await registry.open(rec("c-fresh", "stateless", last_seen_ms=now_ms(), key="fresh"))
        await registry.open(rec("c-just-seen", "stateless", last_seen_ms=old, key="seen"))
        await registry.open(rec("c-session", last_seen_ms=old))
        await registry.open(rec("c-session-streaming", last_seen_ms=old))  # quiet, its stream open
        await registry.open(rec("c-session-fresh", last_seen_ms=now_ms()))
        await registry.open(rec("c-shim", "shim", last_seen_ms=old))  # a shim closes when its process ends
        registry.seen("c-just-seen")  # a request since the last flush
        await registry._close_idle()
        idle = await w.store.get_connection("c-idle")
    assert sorted(registry.live) == ["c-fresh", "c-just-seen", "c-session-fresh", "c-session-streaming", "c-shim"]
    assert sorted(told) == ["c-idle", "c-session"] and "c-idle" not in registry.live
    came_back = registry.find_stateless("idle")  # its next request takes the record up again
    assert came_back is not None and came_back.id == "c-idle"
    assert closed_events(w.published) == {"c-idle": "idle for 60 s", "c-session": "idle for 60 s"}
    assert idle is not None and idle.close_reason == "idle for 60 s"


async def test_the_upkeep_loop_flushes_and_closes_idle_stateless_hosts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connections_module, "FLUSH_EVERY_S", 0.01)
    # The session's stream is open: in use.
    async with registry_on(tmp_path / "mcpx.db", idle_close_s=0.01, in_use=lambda record: True) as (registry, w):
        await registry.open(rec("c-session"))
        await registry.open(rec("c-idle", "stateless", key="idle"))
        registry.seen("c-session")
        seen_ms = registry._seen["c-session"]
        async with anyio.create_task_group() as tg:
            tg.start_soon(registry.run)
            await w.published.until(lambda e: e.event.kind == "connection.closed")
            with anyio.fail_after(5):  # bounded polling of the flush, which writes no event
                while (await w.store.get_connection("c-session")).last_seen_ms != seen_ms:  # type: ignore[union-attr]  # the record was opened above
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    assert closed_events(w.published) == {"c-idle": "idle for 0.01 s"} and list(registry.live) == ["c-session"]


async def test_a_failed_flush_does_not_make_an_active_stateless_host_look_idle(tmp_path: Path) -> None:
    async with registry_on(tmp_path / "mcpx.db", idle_close_s=60) as (registry, w):
        await registry.open(rec("c-active", "stateless", last_seen_ms=now_ms() - 10 * MINUTE_MS, key="active"))
        registry.seen("c-active")  # it made a request just now
        assert w.store.db is not None
        await w.store.db.execute("PRAGMA query_only = ON")  # the flush's write fails
        with pytest.raises(StoreError):
            await registry.flush()
        await w.store.db.execute("PRAGMA query_only = OFF")
        await registry._close_idle()  # the upkeep loop's next round
    assert list(registry.live) == ["c-active"] and closed_events(w.published) == {}
