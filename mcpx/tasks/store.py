"""Durable task store: aiosqlite, WAL, one writer task that batches commits.

A write returns only after its transaction committed, so a handle handed to a host always names a
row that a later `tasks/get` (even after a crash) can read.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiosqlite
import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .model import TERMINAL, Task

log = logging.getLogger("mcpx.tasks")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    ttl_ms INTEGER,
    expires_ms INTEGER,
    poll_ms INTEGER NOT NULL,
    owner TEXT NOT NULL,
    upstream TEXT NOT NULL,
    tool TEXT NOT NULL,
    era TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_owner ON tasks(owner, created_ms, id);
CREATE INDEX IF NOT EXISTS tasks_expiry ON tasks(expires_ms);
CREATE TABLE IF NOT EXISTS questions (
    id TEXT PRIMARY KEY,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    body TEXT NOT NULL
);
"""
BATCH_MAX = 256


class StoreError(Exception):
    pass


def _row(task: Task) -> tuple[Any, ...]:
    body = asdict(task)
    return (
        task.id,
        task.status,
        task.created_ms,
        task.updated_ms,
        task.ttl_ms,
        task.expires_ms(),
        task.poll_ms,
        task.owner,
        task.upstream,
        task.tool,
        task.era,
        json.dumps(body, separators=(",", ":")),
    )


def _task(body: str) -> Task:
    return Task(**json.loads(body))


@dataclass
class _Write:
    """One queued statement and the waiter the writer wakes once its batch committed (or failed)."""

    sql: str
    args: tuple[Any, ...]
    done: anyio.Event = field(default_factory=anyio.Event)
    error: Exception | None = None


class TaskStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.db: aiosqlite.Connection | None = None
        self._send: MemoryObjectSendStream[_Write] | None = None
        self._recv: MemoryObjectReceiveStream[_Write] | None = None

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = await aiosqlite.connect(self.path)
        await self.db.execute("PRAGMA journal_mode=WAL")
        await self.db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across process crashes
        await self.db.executescript(_SCHEMA)
        await self.db.commit()
        self._send, self._recv = anyio.create_memory_object_stream[_Write](max_buffer_size=10_000)

    async def run_writer(self) -> None:
        """The one writer: drains queued writes, runs them in one transaction, wakes every waiter."""
        assert self.db is not None and self._recv is not None
        recv = self._recv
        async with recv:
            async for first in recv:
                batch = [first]
                while len(batch) < BATCH_MAX:
                    try:
                        batch.append(recv.receive_nowait())
                    except anyio.WouldBlock:
                        break
                error: Exception | None = None
                try:
                    for write in batch:
                        await self.db.execute(write.sql, write.args)
                    await self.db.commit()
                except Exception as exc:  # noqa: BLE001 - whatever failed the batch, every waiter must learn it
                    error = exc
                    log.error("task store write failed: %s", exc)
                    try:
                        await self.db.rollback()
                    except Exception as rollback_exc:  # noqa: BLE001 - the batch already failed; this is its aftermath
                        log.warning("task store rollback after a failed write also failed: %s", rollback_exc)
                for write in batch:
                    write.error = error
                    write.done.set()

    async def _write(self, sql: str, args: tuple[Any, ...]) -> None:
        if self._send is None:
            raise StoreError("task store is not open")
        write = _Write(sql, args)
        try:
            await self._send.send(write)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise StoreError("task store is closed") from None
        await write.done.wait()
        if write.error is not None:
            raise StoreError(f"task store write failed: {write.error}")

    async def put(self, task: Task) -> None:
        await self._write("INSERT OR REPLACE INTO tasks VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", _row(task))

    async def delete(self, task_id: str) -> None:
        await self._write("DELETE FROM tasks WHERE id = ?", (task_id,))

    async def get(self, task_id: str) -> Task | None:
        assert self.db is not None
        async with self.db.execute("SELECT body FROM tasks WHERE id = ?", (task_id,)) as cur:
            row = await cur.fetchone()
        return _task(row[0]) if row else None

    async def list_owner(
        self, owner: str, after: tuple[int, str] | None, limit: int, *, now_ms: int | None = None
    ) -> list[Task]:
        """One owner's tasks in (created_ms, id) order, after the cursor `after`. With `now_ms`, rows
        past their TTL are left out in SQL, before the LIMIT, so a page is never short while live
        tasks follow (the caller asks for one row more than a page to decide on a next cursor)."""
        assert self.db is not None
        where = ["owner = ?"]
        args: list[object] = [owner]
        if after is not None:
            where.append("(created_ms, id) > (?, ?)")
            args += [after[0], after[1]]
        if now_ms is not None:
            where.append("(expires_ms IS NULL OR expires_ms > ?)")
            args.append(now_ms)
        sql = f"SELECT body FROM tasks WHERE {' AND '.join(where)} ORDER BY created_ms, id LIMIT ?"
        async with self.db.execute(sql, (*args, limit)) as cur:
            return [_task(r[0]) for r in await cur.fetchall()]

    async def all_open(self) -> list[Task]:
        assert self.db is not None
        marks = ",".join("?" * len(TERMINAL))
        async with self.db.execute(f"SELECT body FROM tasks WHERE status NOT IN ({marks})", tuple(TERMINAL)) as cur:
            return [_task(r[0]) for r in await cur.fetchall()]

    async def expired(self, now_ms: int) -> list[str]:
        assert self.db is not None
        async with self.db.execute(
            "SELECT id FROM tasks WHERE expires_ms IS NOT NULL AND expires_ms <= ?", (now_ms,)
        ) as cur:
            return [r[0] for r in await cur.fetchall()]

    # Legacy sessions are stored too, so a host keeps its Mcp-Session-Id (and so reaches its
    # tasks) across a daemon restart.
    async def put_session(self, session_id: str, body: dict[str, Any]) -> None:
        await self._write("INSERT OR REPLACE INTO sessions VALUES (?, ?)", (session_id, json.dumps(body)))

    async def delete_session(self, session_id: str) -> None:
        await self._write("DELETE FROM sessions WHERE id = ?", (session_id,))

    async def get_session(self, session_id: str) -> dict[str, Any] | None:
        assert self.db is not None
        async with self.db.execute("SELECT body FROM sessions WHERE id = ?", (session_id,)) as cur:
            row = await cur.fetchone()
        return json.loads(row[0]) if row else None

    async def put_question(self, qid: str, body: dict[str, Any]) -> None:
        await self._write("INSERT OR REPLACE INTO questions VALUES (?, ?)", (qid, json.dumps(body)))

    async def questions(self, limit: int = 200) -> list[dict[str, Any]]:
        assert self.db is not None
        async with self.db.execute("SELECT body FROM questions ORDER BY rowid DESC LIMIT ?", (limit,)) as cur:
            return [json.loads(r[0]) for r in await cur.fetchall()]

    async def close(self) -> None:
        if self._send is not None:
            self._send.close()
        if self.db is not None:
            await self.db.close()
            self.db = None
