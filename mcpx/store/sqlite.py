"""The embedded store: aiosqlite, WAL, one writer task that batches commits, one reader connection.

A write is queued to the writer, which runs a batch of writes in one transaction (each in its own
savepoint, so one bad write fails alone), writes each write's events in the same transaction
(the events table's key is the sequence number), commits, publishes the events, and only then
wakes the writers. Reads go through a second connection and so see committed data only.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from ..events.bus import StoredEvent
from ..records.connection_record import ConnectionRecord
from ..records.question import Question, QuestionStatus
from ..records.task import TERMINAL, Task
from . import codec
from .base import BeforeCommit, Claim, Durability, Snapshot, StoreError, TaskQuery
from .queue import BATCH_MAX, CommitTimer, QueuedWrites, Write, WriteQueue, WriteSql
from .sql import TASK_COLS, Params, connection_page, event_page, owner_page, question_page, task_page

__all__ = ["BATCH_MAX", "SqliteStore"]

log = logging.getLogger("mcpx.store")

SCHEMA_VERSION = 4
_V1 = """
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY, status TEXT NOT NULL, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL,
    ttl_ms INTEGER, expires_ms INTEGER, poll_ms INTEGER NOT NULL, owner TEXT NOT NULL,
    upstream TEXT NOT NULL, tool TEXT NOT NULL, era TEXT NOT NULL, body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_owner ON tasks(owner, created_ms, id);
CREATE INDEX IF NOT EXISTS tasks_expiry ON tasks(expires_ms);
CREATE TABLE IF NOT EXISTS questions (id TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, body TEXT NOT NULL);
"""
# v2: the operator plane (connection registry, events, queryable questions and task owners).
_V2 = """
ALTER TABLE tasks ADD COLUMN connection TEXT;
CREATE INDEX tasks_created ON tasks(created_ms, id);
CREATE INDEX tasks_connection ON tasks(connection, created_ms, id);
CREATE INDEX tasks_status ON tasks(status);
ALTER TABLE questions ADD COLUMN status TEXT NOT NULL DEFAULT 'expired';
ALTER TABLE questions ADD COLUMN created_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE questions ADD COLUMN task_id TEXT;
CREATE INDEX questions_status ON questions(status, created_ms);
CREATE INDEX questions_task ON questions(task_id);
CREATE TABLE connections (
    id TEXT PRIMARY KEY, opened_ms INTEGER NOT NULL, last_seen_ms INTEGER NOT NULL,
    closed_ms INTEGER, body TEXT NOT NULL
);
CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, ts_ms INTEGER NOT NULL, kind TEXT NOT NULL,
    task_id TEXT, connection_id TEXT, question_id TEXT, by_ TEXT, body TEXT NOT NULL
);
CREATE INDEX events_task ON events(task_id, seq);
"""


# v3: retention (store.keepClosedS) and a snapshot that reads only the open connections.
_V3 = """
CREATE INDEX connections_closed ON connections(closed_ms);
"""


# v4: sealed secrets (upstream OAuth credentials; upstream/auth/vault.py).
_V4 = """
CREATE TABLE secrets (name TEXT PRIMARY KEY, updated_ms INTEGER NOT NULL, body TEXT NOT NULL);
"""


def now_ms() -> int:
    return int(time.time() * 1000)


_WRITES = WriteSql(
    put_task=f"INSERT OR REPLACE INTO tasks ({TASK_COLS}) VALUES ({','.join('?' * 13)})",
    delete_task_events="DELETE FROM events WHERE task_id = ?1",
    delete_task="DELETE FROM tasks WHERE id = ?1",
    put_question="INSERT OR REPLACE INTO questions (id, body, status, created_ms, task_id) VALUES (?1,?2,?3,?4,?5)",
    settle_question="UPDATE questions SET body = ?2, status = ?3 WHERE id = ?1 AND status = 'open'",
    put_connection="INSERT OR REPLACE INTO connections (id, opened_ms, last_seen_ms, closed_ms, body)"
    " VALUES (?1,?2,?3,?4,?5)",
    touch_connection="UPDATE connections SET last_seen_ms = ?1, body = json_set(body, '$.last_seen_ms', ?1)"
    " WHERE id = ?2 AND closed_ms IS NULL",
    put_session="INSERT OR REPLACE INTO sessions VALUES (?1, ?2)",
    delete_session="DELETE FROM sessions WHERE id = ?1",
    trim_events="DELETE FROM events WHERE seq <= ?1",
    put_secret="INSERT OR REPLACE INTO secrets (name, updated_ms, body) VALUES (?1, ?2, ?3)",
    delete_secret="DELETE FROM secrets WHERE name = ?1",
    sweep_sessions="DELETE FROM sessions WHERE json_extract(body, '$.recordId') IN"
    " (SELECT id FROM connections WHERE closed_ms IS NOT NULL AND closed_ms < ?1)",
    sweep_connections="DELETE FROM connections WHERE closed_ms IS NOT NULL AND closed_ms < ?1"
    " AND NOT EXISTS (SELECT 1 FROM tasks WHERE tasks.connection = connections.id)",
    sweep_questions="DELETE FROM questions WHERE status != 'open' AND created_ms < ?1",
)


_INSERT_EVENT = (
    "INSERT INTO events (ts_ms, kind, task_id, connection_id, question_id, by_, body) VALUES (?,?,?,?,?,?,?)"
)


def _apply(conn: sqlite3.Connection, batch: list[Write], commit: bool) -> None:
    """On the writer connection's thread: one transaction for the batch, each write in a savepoint
    of its own so a bad write fails alone (its error kept on it), its events inserted beside it."""
    conn.execute("BEGIN")
    for write in batch:
        conn.execute("SAVEPOINT w")
        try:
            ts = now_ms()
            for i, (sql, args) in enumerate(write.ops):
                cur = conn.execute(sql, args)
                if write.guarded and i == 0 and cur.rowcount == 0:
                    write.refused = True
                    break
            for event in () if write.refused else write.events:
                cur = conn.execute(_INSERT_EVENT, (ts, *codec.event_row(event)))
                assert cur.lastrowid is not None
                write.stored.append(StoredEvent(cur.lastrowid, ts, event))
            conn.execute("RELEASE w")
        except sqlite3.Error as exc:  # this write alone fails; the rest of the batch goes on
            conn.execute("ROLLBACK TO w")
            conn.execute("RELEASE w")
            write.error, write.stored = exc, []
            log.error("store write failed: %s", exc)
    if commit:
        conn.execute("COMMIT")


async def _apply_on_writer_thread(db: aiosqlite.Connection, batch: list[Write], commit: bool) -> None:
    """`_apply` on the aiosqlite connection's own thread, the way its public methods run. aiosqlite
    has no public call for this: `_execute` and `_conn` are what each of its methods uses (0.20 to
    0.22); every store test that writes goes through here, so a change there fails them at once."""
    await db._execute(_apply, db._conn, batch, commit)  # type: ignore[no-untyped-call]  # aiosqlite leaves _execute untyped


class SqliteStore(QueuedWrites):
    def __init__(
        self,
        path: Path,
        on_commit: Callable[[list[StoredEvent]], None] | None = None,
        *,
        durability: Durability = "power-loss",
        before_commit: BeforeCommit | None = None,
        commit_timer: CommitTimer | None = None,
    ) -> None:
        self.path = path
        self.on_commit = on_commit  # the event bus's publish, called after each commit, in order
        self.durability = durability
        self.before_commit = before_commit  # tests only: a commit that fails or waits (store/faults.py)
        self.db: aiosqlite.Connection | None = None  # the writer's
        self.reader: aiosqlite.Connection | None = None
        self._queue = WriteQueue(commit_timer)  # commit_timer: the daemon's metrics
        self._sql = _WRITES

    # ---- lifecycle -----------------------------------------------------------------------
    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Results and answers live here. Created 0600 before SQLite opens it: SQLite gives the
        # -wal and -shm files the database file's mode, so they are private too.
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        self.path.chmod(0o600)  # a file from an older mcpx (0644)
        self.db = await aiosqlite.connect(self.path, isolation_level=None)  # transactions are ours
        await self.db.execute("PRAGMA journal_mode=WAL")
        # WAL + FULL: each COMMIT fsyncs the WAL before it returns, so a handle given out after it
        # survives a power loss; one commit (and one fsync) holds every write queued meanwhile.
        # WAL + NORMAL (the opt-out) syncs only at checkpoints: safe from a crash of mcpx, not of the OS.
        sync = "FULL" if self.durability == "power-loss" else "NORMAL"
        await self.db.execute(f"PRAGMA synchronous={sync}")
        await self._migrate(self.db)
        self.reader = await aiosqlite.connect(self.path, isolation_level=None)
        self._queue.open()

    async def _migrate(self, db: aiosqlite.Connection) -> None:
        """Bring the file to SCHEMA_VERSION (PRAGMA user_version), one version step at a time."""
        async with db.execute("PRAGMA user_version") as cur:
            row = await cur.fetchone()
        version = int(row[0]) if row else 0
        if version >= SCHEMA_VERSION:
            return
        await db.executescript(_V1)  # idempotent: files of mcpx 0.1 hold these tables at version 0
        await db.execute("BEGIN IMMEDIATE")
        try:
            if version < 2:
                for stmt in filter(str.strip, _V2.split(";")):
                    await db.execute(stmt)
                await db.execute(
                    "UPDATE questions SET status = COALESCE(json_extract(body, '$.status'), 'expired'),"
                    " created_ms = COALESCE(json_extract(body, '$.created_ms'), 0),"
                    # mcpx 0.1 named a question's task in its body as "call": "task:<id>"
                    " task_id = CASE WHEN json_extract(body, '$.call') LIKE 'task:%'"
                    " THEN substr(json_extract(body, '$.call'), 6) END"
                )
            if version < 3:
                for stmt in filter(str.strip, _V3.split(";")):
                    await db.execute(stmt)
            if version < 4:
                for stmt in filter(str.strip, _V4.split(";")):
                    await db.execute(stmt)
            await db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            await db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                await db.execute("ROLLBACK")
            raise

    async def close(self) -> None:
        await self._queue.shut()  # what was queued is committed before the connection goes
        for conn in (self.db, self.reader):
            if conn is not None:
                await conn.close()
        self.db = self.reader = None

    # ---- the writer ----------------------------------------------------------------------
    async def run_writer(self) -> None:
        """The one writer: drains queued writes, runs them in one transaction, wakes every waiter."""
        assert self.db is not None
        db = self.db

        async def commit(batch: list[Write]) -> None:
            await self._commit(db, batch)

        await self._queue.drain(commit)

    async def _commit(self, db: aiosqlite.Connection, batch: list[Write]) -> None:
        published: list[StoredEvent] = []
        try:
            # The whole batch (and its COMMIT, unless a test hook must run before it) in one hop to
            # the connection's thread: a hop per statement cost a thread handoff and a loop wake-up
            # each, about a fifth of the daemon's CPU per durable task (bench/README.md).
            await _apply_on_writer_thread(db, batch, self.before_commit is None)
            if self.before_commit is not None:
                await self.before_commit()
                await db.execute("COMMIT")
            published = [e for w in batch for e in w.stored]
        except Exception as exc:  # noqa: BLE001 - whatever failed the commit, every waiter must learn it
            log.error("store commit failed: %s", exc)
            try:
                if db.in_transaction:
                    await db.execute("ROLLBACK")
            except Exception as rollback_exc:  # noqa: BLE001 - the batch already failed; this is its aftermath
                log.warning("store rollback after a failed commit also failed: %s", rollback_exc)
            for write in batch:
                write.error, write.stored = write.error or exc, []
        if published and self.on_commit is not None:
            self.on_commit(published)
        for write in batch:
            write.done.set()

    # ---- reads ---------------------------------------------------------------------------
    def _r(self) -> aiosqlite.Connection:
        if self.reader is None:
            raise StoreError("the store is not open")
        return self.reader

    async def _all(
        self, sql: str, args: Sequence[Any] = (), db: aiosqlite.Connection | None = None
    ) -> list[sqlite3.Row]:
        # One call on the connection's thread, statement run to its end: as separate execute and
        # fetch calls, reads interleaved there and one read's open statement kept an older snapshot
        # for the next, so a row committed a moment ago could read as missing.
        return list(await (db or self._r()).execute_fetchall(sql, tuple(args)))

    async def get_task(self, task_id: str) -> Task | None:
        rows = await self._all("SELECT body FROM tasks WHERE id = ?", (task_id,))
        return codec.task_from(rows[0][0]) if rows else None

    async def list_owner(
        self, owner: str, after: tuple[int, str] | None, limit: int, *, now_ms: int | None = None
    ) -> list[Task]:
        """One owner's tasks in (created_ms, id) order, after the cursor `after`. With `now_ms`, rows
        past their TTL are left out in SQL, before the LIMIT, so a page is never short while live
        tasks follow (the caller asks for one row more than a page to decide on a next cursor)."""
        p = Params(numbered=False)
        sql = owner_page(p, owner, after, limit, now_ms)
        return [codec.task_from(r[0]) for r in await self._all(sql, p.values)]

    async def all_open(self) -> list[Task]:
        marks = ",".join("?" * len(TERMINAL))
        rows = await self._all(f"SELECT body FROM tasks WHERE status NOT IN ({marks})", tuple(TERMINAL))
        return [codec.task_from(r[0]) for r in rows]

    # ---- one daemon alone on its file: every open task is its own --------------------------
    async def renew_lease(self, now_ms: int, lease_ms: int) -> None:
        return None

    async def claim_open(self, now_ms: int, *, own: bool) -> list[Claim]:
        return [Claim(task) for task in await self.all_open()] if own else []

    async def end_lease(self, now_ms: int) -> None:
        return None

    async def forward(self, task_id: str, action: str) -> None:
        return None

    async def expired(self, now_ms: int) -> list[Task]:
        rows = await self._all("SELECT body FROM tasks WHERE expires_ms IS NOT NULL AND expires_ms <= ?", (now_ms,))
        return [codec.task_from(r[0]) for r in rows]

    async def tasks(self, query: TaskQuery) -> list[Task]:
        p = Params(numbered=False)
        sql = task_page(p, query, "json_extract(body, '$.status_message')")
        return [codec.task_from(r[0]) for r in await self._all(sql, p.values)]

    async def task_counts(self) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = {}
        for connection, status, n in await self._all(
            "SELECT COALESCE(connection, ''), status, COUNT(*) FROM tasks GROUP BY connection, status"
        ):
            counts.setdefault(connection, {})[status] = n
        return counts

    async def get_session(self, session_id: str) -> dict[str, Any] | None:
        rows = await self._all("SELECT body FROM sessions WHERE id = ?", (session_id,))
        if not rows:
            return None
        body: dict[str, Any] = json.loads(rows[0][0])
        return body

    async def get_secret(self, name: str) -> str | None:
        rows = await self._all("SELECT body FROM secrets WHERE name = ?", (name,))
        return str(rows[0][0]) if rows else None

    async def get_question(self, question_id: str) -> Question | None:
        rows = await self._all("SELECT body FROM questions WHERE id = ?", (question_id,))
        return codec.question_from(rows[0][0]) if rows else None

    async def questions(
        self,
        statuses: frozenset[QuestionStatus] = frozenset(),
        task_id: str | None = None,
        limit: int = 200,
        id_prefix: str | None = None,
    ) -> list[Question]:
        p = Params(numbered=False)
        sql = question_page(p, statuses, task_id, limit, "rowid", id_prefix)
        return [codec.question_from(r[0]) for r in await self._all(sql, p.values)]

    async def connections(
        self, open_only: bool = False, after: tuple[int, str] | None = None, limit: int | None = None
    ) -> list[ConnectionRecord]:
        p = Params(numbered=False)
        sql = connection_page(p, open_only, after, limit)
        rows = await self._all(sql, p.values)
        return [codec.connection_from(r[0]) for r in rows]

    async def get_connection(self, record_id: str) -> ConnectionRecord | None:
        rows = await self._all("SELECT body FROM connections WHERE id = ?", (record_id,))
        return codec.connection_from(rows[0][0]) if rows else None

    async def events_since(
        self, seq: int, limit: int, *, task_id: str | None = None, kinds: frozenset[str] = frozenset()
    ) -> list[StoredEvent]:
        p = Params(numbered=False)
        sql = event_page(p, seq, limit, task_id, kinds)
        return [codec.event_from(*r) for r in await self._all(sql, p.values)]

    async def first_seq(self) -> int:
        rows = await self._all("SELECT MIN(seq) FROM events")
        return int(rows[0][0] or 0)

    async def last_seq(self) -> int:
        # The sequence never goes back, even when the newest rows were deleted (AUTOINCREMENT).
        rows = await self._all("SELECT seq FROM sqlite_sequence WHERE name = 'events'")
        return int(rows[0][0]) if rows else 0

    async def snapshot(self, task_limit: int) -> Snapshot:
        """Open connections (and closed ones that still own tasks), every unfinished task and the
        newest `task_limit` tasks, and the open questions, all as of one sequence number."""
        self._r()  # open?
        # Its own connection: a read transaction held on the shared reader would show every other
        # reader (the engine's compare-and-set among them) this older state meanwhile.
        async with aiosqlite.connect(self.path, isolation_level=None) as db:
            await db.execute("BEGIN")
            try:
                seq_rows = await self._all("SELECT seq FROM sqlite_sequence WHERE name = 'events'", db=db)
                seq = int(seq_rows[0][0]) if seq_rows else 0
                marks = ",".join("?" * len(TERMINAL))
                rows = await self._all(
                    f"SELECT body FROM tasks WHERE status NOT IN ({marks}) UNION"
                    " SELECT body FROM (SELECT body FROM tasks ORDER BY created_ms DESC, id DESC LIMIT ?)",
                    (*TERMINAL, task_limit),
                    db,
                )
                tasks = sorted((codec.task_from(r[0]) for r in rows), key=lambda t: (t.created_ms, t.id))
                # The open ones and the closed owners of these tasks: not every closed one ever seen.
                owners = sorted({t.connection for t in tasks if t.connection is not None})
                crows = await self._all(
                    f"SELECT body FROM connections WHERE closed_ms IS NULL OR id IN ({','.join('?' * len(owners))})"
                    " ORDER BY opened_ms, id",
                    tuple(owners),
                    db,
                )
                conns = [codec.connection_from(r[0]) for r in crows]
                qrows = await self._all("SELECT body FROM questions WHERE status = 'open' ORDER BY created_ms", db=db)
                questions = [codec.question_from(r[0]) for r in qrows]
            finally:
                await db.execute("COMMIT")
        return Snapshot(seq, conns, tasks, questions)
