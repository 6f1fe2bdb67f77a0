"""The write queue both stores' one writer drains (a write waits until its batch committed or failed),
and the writes both stores offer, as statements in each one's dialect."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..events.bus import Event, StoredEvent
from ..records.connection_record import ConnectionRecord
from ..records.question import Question
from ..records.task import Task
from . import codec
from .base import StoreError

BATCH_MAX = 256
DRAIN_S = 5.0  # at close, how long the writer may take to commit what was queued before it
Op = tuple[str, tuple[Any, ...]]


@dataclass
class Write:
    ops: Sequence[Op]
    events: Sequence[Event]
    done: anyio.Event = field(default_factory=anyio.Event)
    error: Exception | None = None
    stored: list[StoredEvent] = field(default_factory=list)
    # Guarded: the first statement must change a row, or the write is refused (its other
    # statements and its events are skipped). First answer wins across daemons this way.
    guarded: bool = False
    refused: bool = False


# Told how long each batch's commit took, in seconds (the daemon's metrics: store commit latency).
CommitTimer = Callable[[float], None]


class WriteQueue:
    def __init__(self, commit_timer: CommitTimer | None = None) -> None:
        self.commit_timer = commit_timer
        self._send: MemoryObjectSendStream[Write] | None = None
        self._recv: MemoryObjectReceiveStream[Write] | None = None
        self._draining = False
        self._closed_unread = False  # shut before a writer ran: a writer started later has nothing to do
        self._drained = anyio.Event()  # the writer's loop ended: everything queued was committed (or failed)

    def open(self) -> None:
        self._send, self._recv = anyio.create_memory_object_stream[Write](max_buffer_size=10_000)

    def close(self) -> None:
        if self._send is not None:
            self._send.close()

    async def shut(self, wait_s: float = DRAIN_S) -> None:
        """Take no more writes, and let the writer commit those already queued (a task's outcome
        written as the daemon stops must not be dropped with the connection), `wait_s` at most."""
        self.close()
        if self._draining:
            with anyio.move_on_after(wait_s, shield=True):
                await self._drained.wait()
        elif self._recv is not None:
            self._closed_unread = True  # no writer ran yet (a store opened only to be read)
        if self._recv is not None:
            self._recv.close()  # the queue is done (a writer cut by a cancel leaves it open to be restarted)

    async def submit(self, ops: Sequence[Op], events: Sequence[Event] = ()) -> list[StoredEvent]:
        """Queue one write and return its stored events once its batch committed."""
        return (await self.submit_write(Write(ops, events))).stored

    async def submit_write(self, write: Write) -> Write:
        """Queue `write` and return it once its batch committed (StoreError if it failed)."""
        if self._send is None:
            raise StoreError("the store is not open")
        try:
            await self._send.send(write)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise StoreError("the store is closed") from None
        await write.done.wait()
        if write.error is not None:
            raise StoreError(f"store write failed: {write.error}")
        return write

    async def drain(self, commit: Callable[[list[Write]], Awaitable[None]]) -> None:
        """The writer's loop: hands `commit` everything queued at the moment it looks, up to
        BATCH_MAX writes at a time, until the queue is closed."""
        assert self._recv is not None
        recv = self._recv
        self._draining = True
        batch: list[Write] = []
        try:
            if self._closed_unread:
                self._drained.set()
                return  # closed before any writer ran: nothing was (or can be) queued
            async for first in recv:
                batch = [first]
                while len(batch) < BATCH_MAX:
                    try:
                        batch.append(recv.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):  # EndOfStream: closed meanwhile
                        break
                if self.commit_timer is None:
                    await commit(batch)
                else:
                    began = time.perf_counter()
                    await commit(batch)
                    self.commit_timer(time.perf_counter() - began)
                batch = []
        except BaseException as exc:
            # The queue stays open, for the writer to be started again (daemon/background.py) after a
            # failure outside the commit's own handling; a stop closes it from the sending side (shut).
            if not isinstance(exc, Exception):
                self._drained.set()
            raise
        finally:
            for write in batch:  # cut mid-batch: its waiters learn it instead of waiting for ever
                if not write.done.is_set():
                    write.error = write.error or StoreError("the store's writer stopped before this write committed")
                    write.stored = []
                    write.done.set()
        recv.close()
        self._drained.set()


@dataclass(frozen=True)
class WriteSql:
    """One backend's statements for the writes both stores offer; each takes the same arguments in
    both dialects (SQLite's numbered `?1` placeholders, PostgreSQL's `$1`)."""

    put_task: str  # (*codec.task_columns(task), *extra task columns)
    delete_task_events: str  # (task_id,)
    delete_task: str  # (task_id,)
    put_question: str  # (id, body, status, created_ms, task_id)
    settle_question: str  # (id, body, status): only while the row is still open
    put_connection: str  # (id, opened_ms, last_seen_ms, closed_ms, body)
    touch_connection: str  # (last_seen_ms, id)
    put_session: str  # (id, body)
    delete_session: str  # (id,)
    trim_events: str  # (last seq to drop,)
    put_secret: str  # (name, updated_ms, sealed)
    delete_secret: str  # (name,)
    # Retention (before_ms,): sessions of connections closed before it, then those connections
    # that own no task any more, then questions closed and asked before it.
    sweep_sessions: str
    sweep_connections: str
    sweep_questions: str


class QueuedWrites:
    """The writes of the Store protocol, as statements queued to the backend's one writer."""

    _queue: WriteQueue
    _sql: WriteSql

    def _task_args(self, task: Task) -> tuple[object, ...]:
        return codec.task_columns(task)

    async def _write(self, ops: Sequence[Op], events: Sequence[Event] = ()) -> list[StoredEvent]:
        return await self._queue.submit(ops, events)

    async def _write_guarded(self, ops: Sequence[Op], events: Sequence[Event]) -> Write:
        return await self._queue.submit_write(Write(ops, events, guarded=True))

    async def put_task(self, task: Task, events: Sequence[Event] = ()) -> list[StoredEvent]:
        return await self._write([(self._sql.put_task, self._task_args(task))], events)

    async def delete_task(self, task_id: str, events: Sequence[Event] = ()) -> list[StoredEvent]:
        """The row and its events go together (retention); `events` (task.expired) come after.
        Guarded: when the row is gone already (every daemon on a shared store sweeps expiry), nothing
        is written, so a task expires once."""
        ops: list[Op] = [(self._sql.delete_task, (task_id,)), (self._sql.delete_task_events, (task_id,))]
        return (await self._write_guarded(ops, events)).stored

    async def put_question(self, question: Question, events: Sequence[Event] = ()) -> list[StoredEvent]:
        args = (question.id, codec.question_body(question), question.status, question.created_ms, question.task_id)
        return await self._write([(self._sql.put_question, args)], events)

    async def settle_question(self, question: Question, events: Sequence[Event] = ()) -> bool:
        """Write the closed question only if its row is still open: False when another daemon (or
        an earlier write) closed it first, and then nothing is written."""
        args = (question.id, codec.question_body(question), question.status)
        return not (await self._write_guarded([(self._sql.settle_question, args)], events)).refused

    async def put_connection(self, record: ConnectionRecord, events: Sequence[Event] = ()) -> list[StoredEvent]:
        args = (record.id, record.opened_ms, record.last_seen_ms, record.closed_ms, codec.connection_body(record))
        return await self._write([(self._sql.put_connection, args)], events)

    async def append(self, events: Sequence[Event]) -> list[StoredEvent]:
        return await self._write([], events)

    async def touch_connections(self, last_seen: dict[str, int]) -> None:
        await self._write([(self._sql.touch_connection, (ms, record_id)) for record_id, ms in last_seen.items()])

    async def put_session(self, session_id: str, body: dict[str, Any]) -> None:
        await self._write([(self._sql.put_session, (session_id, codec.dumps(body)))])

    async def delete_session(self, session_id: str) -> None:
        await self._write([(self._sql.delete_session, (session_id,))])

    async def put_secret(self, name: str, sealed: str, events: Sequence[Event] = ()) -> list[StoredEvent]:
        return await self._write([(self._sql.put_secret, (name, int(time.time() * 1000), sealed))], events)

    async def delete_secret(self, name: str, events: Sequence[Event] = ()) -> list[StoredEvent]:
        return await self._write([(self._sql.delete_secret, (name,))], events)

    async def sweep_closed(self, before_ms: int) -> None:
        """Retention (store.keepClosedS): what was closed before `before_ms` goes, in one write."""
        sql = self._sql
        await self._write([(q, (before_ms,)) for q in (sql.sweep_sessions, sql.sweep_connections, sql.sweep_questions)])

    async def first_seq(self) -> int:
        raise NotImplementedError

    async def last_seq(self) -> int:
        raise NotImplementedError

    async def trim_events(self, keep: int) -> int:
        """Drop the oldest events beyond the newest `keep` (the table's cap)."""
        last = await self.last_seq()
        if last - keep <= 0 or await self.first_seq() > last - keep:
            return 0
        await self._write([(self._sql.trim_events, (last - keep,))])
        return last - keep
