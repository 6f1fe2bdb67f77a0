"""Shared by the unit tests of the store and of what writes through it (engine, broker, connection
registry): a real store (SqliteStore on a tmp_path file, or PostgresStore on a fresh database of the
session's throwaway cluster: a `Site`) with its one writer under a task group, task records, what
`on_commit` published, a bus subscriber to wait on, and a plain second connection's view of what
another process would see."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import asyncpg
from anyio.abc import TaskGroup

from mcpx.api.event_schemas import DATA
from mcpx.events.bus import EVENT_KINDS, EventBus, EventFilter, StoredEvent, Subscriber
from mcpx.records.task import WORKING, Status, Task, new_task_id
from mcpx.store.postgres import PostgresStore
from mcpx.store.sqlite import SqliteStore

OWNER = "conn:alpha"
NOW = 1_700_000_000_000
WAIT_S = 5  # every wait on an event is bounded by this


def task_record(
    *,
    id: str | None = None,
    owner: str = OWNER,
    created_ms: int = NOW,
    ttl_ms: int | None = None,
    status: Status = WORKING,
    **kw: Any,
) -> Task:
    return Task(
        id=id or new_task_id(),
        status=status,
        created_ms=created_ms,
        updated_ms=created_ms,
        ttl_ms=ttl_ms,
        poll_ms=1000,
        owner=owner,
        upstream=kw.pop("upstream", "up"),
        tool=kw.pop("tool", "echo"),
        **kw,
    )


class Published:
    """The store's `on_commit`: every batch it was handed, in order, and a way to wait for more."""

    def __init__(self, bus: EventBus | None = None) -> None:
        self.batches: list[list[StoredEvent]] = []
        self.bus = bus
        self.hook: Callable[[list[StoredEvent]], None] | None = None  # a test's own check, run first
        self._new = anyio.Event()

    def __call__(self, events: list[StoredEvent]) -> None:
        if self.hook is not None:
            self.hook(events)
        self.batches.append(list(events))
        if self.bus is not None:
            self.bus.publish(events)
        self._new.set()
        self._new = anyio.Event()

    @property
    def events(self) -> list[StoredEvent]:
        return [e for batch in self.batches for e in batch]

    def kinds(self) -> list[str]:
        return [e.event.kind for e in self.events]

    async def until(self, match: Callable[[StoredEvent], bool]) -> StoredEvent:
        """The first published event that matches, waiting for it if need be."""
        with anyio.fail_after(WAIT_S):
            while True:
                for stored in self.events:
                    if match(stored):
                        return stored
                await self._new.wait()


class Running:
    """A store whose one writer runs only once `start()` is called, so a test decides what is queued
    before it drains (the writer takes everything queued at that moment as one batch)."""

    def __init__(self, store: SqliteStore | PostgresStore, tg: TaskGroup, published: Published) -> None:
        self.store = store
        self.published = published
        self.tg = tg
        self.started = False

    def start(self) -> None:
        if not self.started:
            self.started = True
            self.tg.start_soon(self.store.run_writer)


class SqliteSite:
    """Where a SQLite store lives: one file."""

    kind = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path

    def store(self, on_commit: Callable[[list[StoredEvent]], None]) -> SqliteStore:
        return SqliteStore(self.path, on_commit=on_commit)

    def rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with contextlib.closing(sqlite3.connect(self.path)) as db:
            return list(db.execute(sql, args))


class PostgresSite:
    """Where a PostgreSQL store lives: one database of the test cluster."""

    kind = "postgres"

    def __init__(self, url: str) -> None:
        self.url = url

    def store(self, on_commit: Callable[[list[StoredEvent]], None]) -> PostgresStore:
        return PostgresStore(self.url, on_commit=on_commit)

    def rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        async def fetch() -> list[tuple[Any, ...]]:
            conn = await asyncpg.connect(self.url)
            try:
                return [tuple(r) for r in await conn.fetch(sql, *args)]
            finally:
                await conn.close()

        # Its own thread and loop: a plain blocking call, as another process would make it.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, fetch()).result()


Site = SqliteSite | PostgresSite


@contextlib.asynccontextmanager
async def opened(where: Path | Site, *, writer: bool = True, bus: EventBus | None = None) -> AsyncIterator[Running]:
    published = Published(bus)
    site = SqliteSite(where) if isinstance(where, Path) else where
    store = site.store(published)
    await store.open()
    async with anyio.create_task_group() as tg:
        running = Running(store, tg, published)
        if writer:
            running.start()
        try:
            yield running
        finally:  # also after a failed assertion: an open aiosqlite thread would keep pytest alive
            with anyio.CancelScope(shield=True):
                await store.close()


async def seed(path: Path, *tasks: Task) -> None:
    """Rows as a previous daemon left them."""
    async with opened(path) as w:
        for task in tasks:
            await w.store.put_task(task)


def query(where: Path | Site, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """What another process would see now: a second, plain connection."""
    return (SqliteSite(where) if isinstance(where, Path) else where).rows(sql, args)


def committed(where: Path | Site, table: str = "tasks") -> set[str]:
    return {row[0] for row in query(where, f"SELECT id FROM {table}")}  # a test-chosen table name


def check_event(stored: StoredEvent) -> None:
    """An event as the feed sends it: a known kind, a positive seq, data that fits its schema."""
    assert stored.seq >= 1 and stored.event.kind in EVENT_KINDS
    DATA[stored.event.kind].model_validate(stored.event.data)


class Watch:
    """A bus subscriber a test reads from: `next()` waits (bounded) for the next matching event."""

    def __init__(self, bus: EventBus, *, kinds: tuple[str, ...] = (), operator: str | None = None) -> None:
        self.bus = bus
        self.sub = bus.subscribe(Subscriber(EventFilter(kinds=frozenset(kinds)), operator=operator))
        self.seen: list[StoredEvent] = []

    async def next(self, match: Callable[[StoredEvent], bool] = lambda e: True) -> StoredEvent:
        with anyio.fail_after(WAIT_S):
            while True:
                while self.sub.queue:
                    stored = self.sub.queue.popleft()
                    self.seen.append(stored)
                    if match(stored):
                        return stored
                assert not self.sub.overflowed
                await self.sub.wait()

    def drain(self) -> list[StoredEvent]:
        """Everything received so far, read or not."""
        self.seen.extend(self.sub.queue)
        self.sub.queue.clear()
        return self.seen

    def close(self) -> None:
        self.bus.unsubscribe(self.sub)
