"""The shared store: PostgreSQL through asyncpg, for several daemons on one task space.

asyncpg, chosen by measurement (bench/pg_drivers.py, one connection, local cluster, fsync on):
an upsert committed alone 498 us against psycopg 3's 525 us, a read by key 89 us against 106 us.

Same contract as the SQLite store: one writer connection runs each batch of queued writes in one
transaction and wakes the writers only after COMMIT; a write's events go in that transaction. The
events' `seq` comes from a one-row counter (`event_seq`) that the transaction writing events updates
last: its row lock is held to COMMIT, so commit order is sequence order across daemons (a reader that
saw 8 cannot later find a 7), and a rolled-back transaction gives its numbers back, so the sequence
has no holes (an identity column, version 1, kept what a failed commit had drawn). The commit then
NOTIFYs the new last sequence on EVENTS_CHANNEL (delivered only after the commit); every daemon
publishes on its bus, in order, the rows after the last one it published, so each bus sees every
daemon's events once, in sequence order.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import asyncpg

from ..events.bus import StoredEvent
from ..records.connection_record import ConnectionRecord
from ..records.question import Question, QuestionStatus
from ..records.task import TERMINAL, Task
from . import codec
from .base import BeforeCommit, Claim, Durability, OnForward, OnLeaseEnded, Snapshot, StoreError, TaskQuery
from .queue import CommitTimer, QueuedWrites, Write, WriteQueue, WriteSql
from .sql import EVENT_COLS, TASK_COLS, Params, connection_page, event_page, owner_page, question_page, task_page
from .sqlite import now_ms

log = logging.getLogger("mcpx.store")

EVENTS_CHANNEL = "mcpx_events"
LEASES_CHANNEL = "mcpx_leases"  # a daemon that stops cleanly says so here: the others claim its tasks at once
MIGRATE_LOCK = 0x6D637078_00000002  # held while one daemon migrates; the others wait, then find it done
READERS = 4

# Versioned migrations, applied in order at open, each in its own transaction with its version row.
# Ids compare bytewise (COLLATE "C"), as SQLite compares them, so cursors page the same way.
MIGRATIONS: tuple[tuple[int, str], ...] = (
    (
        1,
        """
CREATE TABLE tasks (
    id TEXT COLLATE "C" PRIMARY KEY, status TEXT NOT NULL, created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL, ttl_ms BIGINT, expires_ms BIGINT, poll_ms BIGINT NOT NULL,
    owner TEXT NOT NULL, upstream TEXT NOT NULL, tool TEXT NOT NULL, era TEXT NOT NULL,
    connection TEXT, instance TEXT, body TEXT NOT NULL
);
CREATE INDEX tasks_owner ON tasks(owner, created_ms, id);
CREATE INDEX tasks_expiry ON tasks(expires_ms);
CREATE INDEX tasks_created ON tasks(created_ms, id);
CREATE INDEX tasks_connection ON tasks(connection, created_ms, id);
CREATE INDEX tasks_status ON tasks(status);
CREATE INDEX tasks_instance ON tasks(instance) WHERE instance IS NOT NULL;
CREATE SEQUENCE question_writes;
CREATE TABLE questions (
    id TEXT COLLATE "C" PRIMARY KEY, status TEXT NOT NULL, created_ms BIGINT NOT NULL, task_id TEXT,
    written BIGINT NOT NULL DEFAULT nextval('question_writes'), body TEXT NOT NULL
);
CREATE INDEX questions_status ON questions(status, created_ms);
CREATE INDEX questions_task ON questions(task_id);
CREATE TABLE sessions (id TEXT COLLATE "C" PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE connections (
    id TEXT COLLATE "C" PRIMARY KEY, opened_ms BIGINT NOT NULL, last_seen_ms BIGINT NOT NULL,
    closed_ms BIGINT, body TEXT NOT NULL
);
CREATE TABLE events (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, ts_ms BIGINT NOT NULL, kind TEXT NOT NULL,
    task_id TEXT, connection_id TEXT, question_id TEXT, by_ TEXT, body TEXT NOT NULL
);
CREATE INDEX events_task ON events(task_id, seq);
CREATE TABLE instances (
    id TEXT COLLATE "C" PRIMARY KEY, url TEXT, started_ms BIGINT NOT NULL,
    lease_until_ms BIGINT NOT NULL, stopped_ms BIGINT
);
""",
    ),
    (
        2,
        """
CREATE TABLE event_seq (last BIGINT NOT NULL);
INSERT INTO event_seq SELECT coalesce(max(seq), 0) FROM events;
ALTER TABLE events ALTER COLUMN seq DROP IDENTITY;
""",
    ),
    (
        3,  # retention (store.keepClosedS) and a snapshot that reads only the open connections
        """
CREATE INDEX connections_closed ON connections(closed_ms);
""",
    ),
    (
        4,  # sealed secrets (upstream OAuth credentials; upstream/auth/vault.py), shared by the daemons
        """
CREATE TABLE secrets (name TEXT COLLATE "C" PRIMARY KEY, updated_ms BIGINT NOT NULL, body TEXT NOT NULL);
""",
    ),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]

_WRITES = WriteSql(
    put_task=f"INSERT INTO tasks ({TASK_COLS}, instance) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14)"
    " ON CONFLICT (id) DO UPDATE SET status = $2, created_ms = $3, updated_ms = $4, ttl_ms = $5,"
    " expires_ms = $6, poll_ms = $7, owner = $8, upstream = $9, tool = $10, era = $11, connection = $12,"
    " body = $13",  # not the instance: a row changes owner only by a claim (claim_open)
    delete_task_events="DELETE FROM events WHERE task_id = $1",
    delete_task="DELETE FROM tasks WHERE id = $1",
    put_question="INSERT INTO questions (id, body, status, created_ms, task_id) VALUES ($1,$2,$3,$4,$5)"
    " ON CONFLICT (id) DO UPDATE SET body = $2, status = $3, created_ms = $4, task_id = $5,"
    " written = nextval('question_writes')",
    settle_question="UPDATE questions SET body = $2, status = $3, written = nextval('question_writes')"
    " WHERE id = $1 AND status = 'open'",
    put_connection="INSERT INTO connections (id, opened_ms, last_seen_ms, closed_ms, body) VALUES ($1,$2,$3,$4,$5)"
    " ON CONFLICT (id) DO UPDATE SET opened_ms = $2, last_seen_ms = $3, closed_ms = $4, body = $5",
    touch_connection="UPDATE connections SET last_seen_ms = $1,"
    " body = jsonb_set(body::jsonb, '{last_seen_ms}', to_jsonb($1::bigint))::text"
    " WHERE id = $2 AND closed_ms IS NULL",
    put_session="INSERT INTO sessions VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET body = $2",
    delete_session="DELETE FROM sessions WHERE id = $1",
    trim_events="DELETE FROM events WHERE seq <= $1",
    put_secret="INSERT INTO secrets (name, updated_ms, body) VALUES ($1, $2, $3)"
    " ON CONFLICT (name) DO UPDATE SET updated_ms = $2, body = $3",
    delete_secret="DELETE FROM secrets WHERE name = $1",
    sweep_sessions="DELETE FROM sessions WHERE (body::jsonb ->> 'recordId') IN"
    " (SELECT id FROM connections WHERE closed_ms IS NOT NULL AND closed_ms < $1)",
    sweep_connections="DELETE FROM connections WHERE closed_ms IS NOT NULL AND closed_ms < $1"
    " AND NOT EXISTS (SELECT 1 FROM tasks WHERE tasks.connection = connections.id)",
    sweep_questions="DELETE FROM questions WHERE status != 'open' AND created_ms < $1",
)
_NEXT_SEQS = "UPDATE event_seq SET last = last + $1 RETURNING last"  # locks the row until COMMIT
_INSERT_EVENTS = (
    "INSERT INTO events (seq, ts_ms, kind, task_id, connection_id, question_id, by_, body)"
    " SELECT $2 + n - 1, $1, k, t, c, q, b, d"
    " FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])"
    " WITH ORDINALITY AS u(k, t, c, q, b, d, n)"
)


def pg_text(value: object) -> object:
    """PostgreSQL text cannot hold NUL (SQLite's can): a peer's string with one becomes U+FFFD.
    A lookup of it then finds nothing (no id we store holds either) instead of failing with a 500,
    and a write of it does not fail its batch. JSON bodies never carry a raw NUL (json escapes it)."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, (list, tuple)):
        return [pg_text(v) for v in value]
    return value


def owner_channel(instance: str) -> str:
    """The channel a daemon listens on for what others forward to it."""
    return f"mcpx_i_{instance}"


class PostgresStore(QueuedWrites):
    def __init__(
        self,
        url: str,
        on_commit: Callable[[list[StoredEvent]], None] | None = None,
        *,
        instance: str | None = None,
        on_forward: OnForward | None = None,
        on_lease_ended: OnLeaseEnded | None = None,
        durability: Durability = "power-loss",
        before_commit: BeforeCommit | None = None,
        commit_timer: CommitTimer | None = None,
    ) -> None:
        """`on_forward` and `on_lease_ended` hear, through NOTIFY, what the other daemons on the
        database ask of this one's tasks and when one of them stops."""
        self.url = url
        self.durability = durability
        self.before_commit = before_commit  # tests only: a commit that fails or waits (store/faults.py)
        self.on_commit = on_commit  # the event bus's publish: every daemon's events, in sequence order
        self.instance = instance  # this daemon's id in `instances`; a task row it writes names it
        self.db: asyncpg.Connection | None = None  # the writer's
        self.readers: asyncpg.Pool | None = None
        self._listener: asyncpg.Connection | None = None
        self._queue = WriteQueue(commit_timer)  # commit_timer: the daemon's metrics
        self._sql = _WRITES
        self.on_forward = on_forward
        self.on_lease_ended = on_lease_ended
        self._published = 0  # the last sequence handed to on_commit
        self._tail = anyio.Lock()  # one publisher at a time, so on_commit sees sequences in order
        self._heard = anyio.Event()  # set by a NOTIFY on EVENTS_CHANNEL
        self._heard_seq = 0

    # ---- lifecycle -----------------------------------------------------------------------
    async def open(self) -> None:
        try:
            self.db = await asyncpg.connect(self.url)
            # The writer's commits: "on" (PostgreSQL's default, set here whatever the server's or
            # role's default says) returns only once the WAL is flushed; "off" returns before, so a
            # crash of PostgreSQL or of the machine may lose the last moments' acknowledged writes.
            sync = "on" if self.durability == "power-loss" else "off"
            await self.db.execute(f"SET synchronous_commit TO {sync}")
            await self._migrate(self.db)
            self.readers = await asyncpg.create_pool(self.url, min_size=1, max_size=READERS)
            self._listener = await asyncpg.connect(self.url)
        except (OSError, asyncpg.PostgresError) as exc:
            await self.close()
            raise StoreError(f"cannot open the PostgreSQL store: {exc}") from exc
        await self._listener.add_listener(EVENTS_CHANNEL, self._on_events_notice)
        if self.instance is not None:
            await self._listener.add_listener(owner_channel(self.instance), self._on_forward_notice)
            await self._listener.add_listener(LEASES_CHANNEL, self._on_lease_notice)
        # The newest visible row, not the identity's counter: a value another daemon drew is not
        # committed yet, and that event must still be published when its NOTIFY comes.
        self._published = int(await self._pool().fetchval("SELECT COALESCE(MAX(seq), 0) FROM events"))
        self._queue.open()

    async def _migrate(self, db: asyncpg.Connection) -> None:
        """Bring the database to SCHEMA_VERSION, one migration per transaction; daemons starting
        together take turns on an advisory lock, so each migration runs once."""
        await db.execute("SELECT pg_advisory_lock($1)", MIGRATE_LOCK)
        try:
            await db.execute("CREATE TABLE IF NOT EXISTS schema_versions (version INTEGER PRIMARY KEY)")
            version = await db.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_versions")
            for number, script in MIGRATIONS:
                if number > version:
                    async with db.transaction():
                        await db.execute(script)
                        await db.execute("INSERT INTO schema_versions VALUES ($1)", number)
        finally:
            await db.execute("SELECT pg_advisory_unlock($1)", MIGRATE_LOCK)

    async def close(self) -> None:
        await self._queue.shut()  # what was queued is committed before the connection goes
        for conn in (self._listener, self.db):
            if conn is not None:
                await conn.close()
        if self.readers is not None:
            await self.readers.close()
        self.db = self._listener = None
        self.readers = None

    def _task_args(self, task: Task) -> tuple[object, ...]:
        return (*codec.task_columns(task), self.instance)

    def _on_events_notice(
        self, _conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy, _pid: int, _channel: str, payload: object
    ) -> None:
        self._heard_seq = max(self._heard_seq, int(str(payload)))
        self._heard.set()

    def _on_forward_notice(
        self, _conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy, _pid: int, _channel: str, payload: object
    ) -> None:
        action, _, task_id = str(payload).partition(" ")
        if self.on_forward is not None:
            self.on_forward(action, task_id)

    def _on_lease_notice(
        self, _conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy, _pid: int, _channel: str, payload: object
    ) -> None:
        if self.on_lease_ended is not None and str(payload) != self.instance:
            self.on_lease_ended(str(payload))

    # ---- several daemons: leases, claims, forwarding -------------------------------------------
    async def renew_lease(self, now_ms: int, lease_ms: int) -> None:
        await self._pool().execute(
            "INSERT INTO instances (id, started_ms, lease_until_ms) VALUES ($1, $2, $3)"
            " ON CONFLICT (id) DO UPDATE SET lease_until_ms = $3, stopped_ms = NULL",
            self.instance,
            now_ms,
            now_ms + lease_ms,
        )

    async def end_lease(self, now_ms: int) -> None:
        """A clean stop: this daemon's lease ends now, not when it would have run out, and the
        others hear it (after the commit) so one of them claims its unfinished tasks at once."""
        await self._pool().execute(
            "WITH ended AS (UPDATE instances SET lease_until_ms = 0, stopped_ms = $2 WHERE id = $1 RETURNING id)"
            f" SELECT pg_notify('{LEASES_CHANNEL}', id) FROM ended",
            self.instance,
            now_ms,
        )

    async def claim_open(self, now_ms: int, *, own: bool) -> list[Claim]:
        """Unfinished tasks of daemons whose lease ran out become this one's, and with `own` (at
        start) also those this daemon's previous run left. One conditional UPDATE: survivors
        claiming together each wait on the rows' locks, then find them owned by the winner."""
        terminal = sorted(TERMINAL)
        claims: list[Claim] = []
        if own:
            rows = await self._fetch(
                "UPDATE tasks SET instance = $1 WHERE (instance = $1 OR instance IS NULL)"
                " AND NOT (status = ANY($2::text[])) RETURNING body",
                (self.instance, terminal),
            )
            claims += [Claim(codec.task_from(r[0])) for r in rows]
        rows = await self._fetch(
            "UPDATE tasks AS t SET instance = $1 FROM instances AS i"
            " WHERE t.instance = i.id AND i.id <> $1 AND i.lease_until_ms < $2"
            " AND NOT (t.status = ANY($3::text[])) RETURNING t.body, i.id, i.stopped_ms IS NOT NULL",
            (self.instance, now_ms, terminal),
        )
        return claims + [Claim(codec.task_from(r[0]), lost=r[1], stopped=r[2]) for r in rows]

    async def forward(self, task_id: str, action: str) -> None:
        """Tell the daemon that runs the task (when it is another) what was asked of it: ids only
        on its channel; the rows carry the rest."""
        await self._pool().execute(
            "SELECT pg_notify('mcpx_i_' || instance, $2 || ' ' || id) FROM tasks"
            " WHERE id = $1 AND instance IS NOT NULL AND instance IS DISTINCT FROM $3",
            pg_text(task_id),
            action,
            self.instance,
        )

    # ---- the writer and the tail -----------------------------------------------------------
    async def run_writer(self) -> None:
        """The one writer, and beside it the tail that publishes other daemons' events."""
        assert self.db is not None
        db = self.db

        async def commit(batch: list[Write]) -> None:
            await self._commit(db, batch)

        async with anyio.create_task_group() as tg:
            tg.start_soon(self._follow)
            await self._queue.drain(commit)
            tg.cancel_scope.cancel()

    async def _follow(self) -> None:
        while True:
            await self._heard.wait()
            self._heard = anyio.Event()
            try:
                await self._publish_through(self._heard_seq)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("reading other daemons' events failed (the next notice retries): %s", exc)

    async def _publish_through(self, seq: int, own: Sequence[StoredEvent] = ()) -> None:
        """Hand on_commit every event up to `seq` not yet handed, in order. Every sequence up to a
        committed one is committed (event_seq), so reading the rows misses nothing."""
        async with self._tail:
            if seq <= self._published:
                return
            if own and own[0].seq == self._published + 1:
                fresh = list(own)  # nobody else wrote between: no need to read our own rows back
            else:
                p = Params(numbered=True)
                sql = (
                    f"SELECT {EVENT_COLS} FROM events WHERE seq > {p(self._published)} AND seq <= {p(seq)} ORDER BY seq"
                )
                fresh = [codec.event_from(*r) for r in await self._fetch(sql, p.values)]
            self._published = seq
            if fresh and self.on_commit is not None:
                self.on_commit(fresh)

    @staticmethod
    async def _run_ops(db: asyncpg.Connection, write: Write) -> None:
        for i, (sql, args) in enumerate(write.ops):
            status = await db.execute(sql, *map(pg_text, args))
            if write.guarded and i == 0 and status.endswith(" 0"):  # "UPDATE 0": closed already
                write.refused = True
                return

    async def _run_writes(self, db: asyncpg.Connection, batch: list[Write], *, alone: bool) -> None:
        """Every write's statements; with `alone`, each in a savepoint, so a bad one fails by itself."""
        for write in batch:
            if not alone:
                await self._run_ops(db, write)
                continue
            savepoint = db.transaction()
            await savepoint.start()
            try:
                await self._run_ops(db, write)
            except asyncpg.PostgresError as exc:
                await savepoint.rollback()
                write.error = exc
                log.error("store write failed: %s", exc)
            else:
                await savepoint.commit()

    async def _write_events(self, db: asyncpg.Connection, batch: list[Write]) -> None:
        pending = [
            (write, event) for write in batch if write.error is None and not write.refused for event in write.events
        ]
        if not pending:
            return
        ts = now_ms()
        columns = list(zip(*(codec.event_row(event) for _, event in pending), strict=True))
        first = int(await db.fetchval(_NEXT_SEQS, len(pending))) - len(pending) + 1
        await db.execute(_INSERT_EVENTS, ts, first, *(pg_text(list(c)) for c in columns))
        for n, (write, event) in enumerate(pending):
            write.stored.append(StoredEvent(first + n, ts, event))
        await db.execute("SELECT pg_notify($1, $2)", EVENTS_CHANNEL, str(write.stored[-1].seq))

    async def _commit(self, db: asyncpg.Connection, batch: list[Write]) -> None:
        try:
            if not await self._attempt(db, batch, alone=False):
                await self._attempt(db, batch, alone=True)  # a statement failed: again, write by write
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            self._fail(batch, exc)  # COMMIT itself failed, or the connection did: the batch fails whole
        stored = [e for w in batch for e in w.stored]
        if stored:
            await self._publish_through(stored[-1].seq, stored)
        for write in batch:
            write.done.set()

    async def _attempt(self, db: asyncpg.Connection, batch: list[Write], *, alone: bool) -> bool:
        """One transaction for the batch; False when a statement failed and it was rolled back
        (only when not `alone`: then each write has its savepoint and a bad one fails by itself)."""
        for write in batch:
            write.error, write.stored, write.refused = None, [], False
        transaction = db.transaction()
        await transaction.start()
        try:
            await self._run_writes(db, batch, alone=alone)
            await self._write_events(db, batch)
            if self.before_commit is not None:
                await self.before_commit()
        except asyncpg.PostgresError:
            await transaction.rollback()
            if alone:
                raise
            return False
        except BaseException:
            await transaction.rollback()
            raise
        await transaction.commit()
        return True

    def _fail(self, batch: list[Write], exc: Exception) -> None:
        log.error("store commit failed: %s", exc)
        for write in batch:
            write.error, write.stored = write.error or exc, []

    # ---- reads ---------------------------------------------------------------------------
    def _pool(self) -> asyncpg.Pool:
        if self.readers is None:
            raise StoreError("the store is not open")
        return self.readers

    async def _fetch(self, sql: str, args: Sequence[object] = ()) -> list[asyncpg.Record]:
        rows: list[asyncpg.Record] = await self._pool().fetch(sql, *map(pg_text, args))
        return rows

    async def _bodies(self, sql: str, args: Sequence[object] = ()) -> list[str]:
        return [r[0] for r in await self._fetch(sql, args)]

    async def get_task(self, task_id: str) -> Task | None:
        rows = await self._bodies("SELECT body FROM tasks WHERE id = $1", (task_id,))
        return codec.task_from(rows[0]) if rows else None

    async def list_owner(
        self, owner: str, after: tuple[int, str] | None, limit: int, *, now_ms: int | None = None
    ) -> list[Task]:
        p = Params(numbered=True)
        sql = owner_page(p, owner, after, limit, now_ms)
        return [codec.task_from(b) for b in await self._bodies(sql, p.values)]

    async def all_open(self) -> list[Task]:
        rows = await self._bodies("SELECT body FROM tasks WHERE NOT (status = ANY($1::text[]))", (sorted(TERMINAL),))
        return [codec.task_from(b) for b in rows]

    async def expired(self, now_ms: int) -> list[Task]:
        rows = await self._bodies("SELECT body FROM tasks WHERE expires_ms IS NOT NULL AND expires_ms <= $1", (now_ms,))
        return [codec.task_from(b) for b in rows]

    async def tasks(self, query: TaskQuery) -> list[Task]:
        p = Params(numbered=True)
        sql = task_page(p, query, "(body::json ->> 'status_message')", "ILIKE")
        return [codec.task_from(b) for b in await self._bodies(sql, p.values)]

    async def task_counts(self) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = {}
        for connection, status, n in await self._fetch(
            "SELECT COALESCE(connection, ''), status, COUNT(*) FROM tasks GROUP BY connection, status"
        ):
            counts.setdefault(connection, {})[status] = int(n)
        return counts

    async def get_session(self, session_id: str) -> dict[str, Any] | None:
        rows = await self._bodies("SELECT body FROM sessions WHERE id = $1", (session_id,))
        if not rows:
            return None
        body: dict[str, Any] = json.loads(rows[0])
        return body

    async def get_secret(self, name: str) -> str | None:
        rows = await self._bodies("SELECT body FROM secrets WHERE name = $1", (pg_text(name),))
        return rows[0] if rows else None

    async def get_question(self, question_id: str) -> Question | None:
        rows = await self._bodies("SELECT body FROM questions WHERE id = $1", (question_id,))
        return codec.question_from(rows[0]) if rows else None

    async def questions(
        self,
        statuses: frozenset[QuestionStatus] = frozenset(),
        task_id: str | None = None,
        limit: int = 200,
        id_prefix: str | None = None,
    ) -> list[Question]:
        p = Params(numbered=True)
        sql = question_page(p, statuses, task_id, limit, "written", id_prefix)
        return [codec.question_from(b) for b in await self._bodies(sql, p.values)]

    async def connections(
        self, open_only: bool = False, after: tuple[int, str] | None = None, limit: int | None = None
    ) -> list[ConnectionRecord]:
        p = Params(numbered=True)
        sql = connection_page(p, open_only, after, limit)
        rows = await self._bodies(sql, p.values)
        return [codec.connection_from(r) for r in rows]

    async def get_connection(self, record_id: str) -> ConnectionRecord | None:
        rows = await self._bodies("SELECT body FROM connections WHERE id = $1", (record_id,))
        return codec.connection_from(rows[0]) if rows else None

    async def events_since(
        self, seq: int, limit: int, *, task_id: str | None = None, kinds: frozenset[str] = frozenset()
    ) -> list[StoredEvent]:
        p = Params(numbered=True)
        sql = event_page(p, seq, limit, task_id, kinds)
        return [codec.event_from(*r) for r in await self._fetch(sql, p.values)]

    async def first_seq(self) -> int:
        return int(await self._pool().fetchval("SELECT COALESCE(MIN(seq), 0) FROM events"))

    async def last_seq(self) -> int:
        # The counter, not the newest row: it never goes back, even when the newest rows were deleted.
        return int(await self._pool().fetchval("SELECT last FROM event_seq"))

    async def snapshot(self, task_limit: int) -> Snapshot:
        """Open connections (and closed ones that still own tasks), every unfinished task and the
        newest `task_limit` tasks, and the open questions, all as of one sequence number."""
        async with self._pool().acquire() as db, db.transaction(isolation="repeatable_read", readonly=True):
            # Commits are in sequence order (event_seq), so the newest row seen is the moment seen.
            seq = int(await db.fetchval("SELECT COALESCE(MAX(seq), 0) FROM events"))
            rows = await db.fetch(
                "SELECT body FROM tasks WHERE NOT (status = ANY($1::text[])) UNION"
                " SELECT body FROM (SELECT body FROM tasks ORDER BY created_ms DESC, id DESC LIMIT $2) AS newest",
                sorted(TERMINAL),
                task_limit,
            )
            tasks = sorted((codec.task_from(r[0]) for r in rows), key=lambda t: (t.created_ms, t.id))
            # The open ones and the closed owners of these tasks: not every closed one ever seen.
            owners = sorted({t.connection for t in tasks if t.connection is not None})
            crows = await db.fetch(
                "SELECT body FROM connections WHERE closed_ms IS NULL OR id = ANY($1::text[]) ORDER BY opened_ms, id",
                owners,
            )
            conns = [codec.connection_from(r[0]) for r in crows]
            qrows = await db.fetch("SELECT body FROM questions WHERE status = 'open' ORDER BY created_ms")
            questions = [codec.question_from(r[0]) for r in qrows]
        return Snapshot(seq, conns, tasks, questions)
