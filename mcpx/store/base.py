"""What every store offers (SQLite today): durable rows, each change written with its events.

Every write returns only after its transaction committed, and its events (events.py) were
written in that same transaction and then published on the bus, in sequence order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..events.bus import Event, StoredEvent
from ..records.connection_record import ConnectionRecord
from ..records.question import Question, QuestionStatus
from ..records.task import Task


class StoreError(Exception):
    """A write that did not commit (or a store that is not open); nothing of it was kept."""


@dataclass(frozen=True)
class TaskQuery:
    """A page of tasks, newest first, for /v1 and the console."""

    connection: str | None = None
    statuses: frozenset[str] = frozenset()
    tool: str | None = None
    text: str | None = None  # matched against id, tool, upstream and status message
    before: tuple[int, str] | None = None  # the cursor: (created_ms, id) of the last row seen
    limit: int = 100
    now_ms: int | None = None  # leave out rows past their TTL
    id_prefix: str | None = None  # ids that start with this (a short id, as the console shows it)


@dataclass(frozen=True)
class Snapshot:
    """What was true at one sequence number, read in one transaction."""

    seq: int
    connections: list[ConnectionRecord] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


@dataclass(frozen=True)
class Claim:
    """An unfinished task this daemon now answers for: its own from before a restart (`lost` None),
    or one of a daemon whose lease ran out (`lost` names it; `stopped`: it ended its lease itself,
    a clean stop, rather than going silent)."""

    task: Task
    lost: str | None = None
    stopped: bool = False


# What another daemon sharing the store asked of a task this one runs: (action, task id), the
# action "cancel" or "answer:<question id>".
OnForward = Callable[[str, str], None]
# Another daemon on the store stopped cleanly (its id): its tasks are free now.
OnLeaseEnded = Callable[[str], None]
# What an acknowledged write survives (config `store.durability`): "power-loss" (the default) has
# every commit on disk before its writers wake (SQLite synchronous=FULL, PostgreSQL
# synchronous_commit=on); "process-crash" leaves the last commits to the OS (or to PostgreSQL's WAL
# writer), which a crash of mcpx alone does not lose.
Durability = Literal["power-loss", "process-crash"]
# Awaited by the writer inside each batch's transaction, just before its COMMIT: raising fails the
# whole batch, as a failed fsync does. Only tests pass one (store/faults.py).
BeforeCommit = Callable[[], Awaitable[None]]


class Store(Protocol):
    async def open(self) -> None: ...
    async def run_writer(self) -> None: ...
    async def close(self) -> None: ...

    # ---- writes (each commits with its events) ----
    async def put_task(self, task: Task, events: Sequence[Event] = ()) -> list[StoredEvent]: ...
    async def delete_task(self, task_id: str, events: Sequence[Event] = ()) -> list[StoredEvent]: ...
    async def put_question(self, question: Question, events: Sequence[Event] = ()) -> list[StoredEvent]: ...
    async def settle_question(self, question: Question, events: Sequence[Event] = ()) -> bool: ...
    async def put_connection(self, record: ConnectionRecord, events: Sequence[Event] = ()) -> list[StoredEvent]: ...
    async def append(self, events: Sequence[Event]) -> list[StoredEvent]: ...
    async def touch_connections(self, last_seen: dict[str, int]) -> None: ...
    async def put_session(self, session_id: str, body: dict[str, Any]) -> None: ...
    async def delete_session(self, session_id: str) -> None: ...
    async def trim_events(self, keep: int) -> int: ...
    # Sealed secrets (upstream OAuth credentials, sealed by upstream/auth/seal.py): opaque text by name.
    async def put_secret(self, name: str, sealed: str, events: Sequence[Event] = ()) -> list[StoredEvent]: ...
    async def delete_secret(self, name: str, events: Sequence[Event] = ()) -> list[StoredEvent]: ...
    async def sweep_closed(self, before_ms: int) -> None: ...

    # ---- reads (see committed data only) ----
    async def get_task(self, task_id: str) -> Task | None: ...
    async def list_owner(
        self, owner: str, after: tuple[int, str] | None, limit: int, *, now_ms: int | None = None
    ) -> list[Task]: ...
    async def all_open(self) -> list[Task]: ...
    async def expired(self, now_ms: int) -> list[Task]: ...
    async def tasks(self, query: TaskQuery) -> list[Task]: ...
    async def task_counts(self) -> dict[str, dict[str, int]]: ...
    async def get_session(self, session_id: str) -> dict[str, Any] | None: ...
    async def get_secret(self, name: str) -> str | None: ...
    async def get_question(self, question_id: str) -> Question | None: ...
    async def questions(
        self,
        statuses: frozenset[QuestionStatus] = frozenset(),
        task_id: str | None = None,
        limit: int = 200,
        id_prefix: str | None = None,
    ) -> list[Question]: ...
    async def connections(
        self, open_only: bool = False, after: tuple[int, str] | None = None, limit: int | None = None
    ) -> list[ConnectionRecord]: ...
    async def get_connection(self, record_id: str) -> ConnectionRecord | None: ...
    async def events_since(
        self, seq: int, limit: int, *, task_id: str | None = None, kinds: frozenset[str] = frozenset()
    ) -> list[StoredEvent]: ...
    async def first_seq(self) -> int: ...
    async def last_seq(self) -> int: ...
    async def snapshot(self, task_limit: int) -> Snapshot: ...

    # ---- several daemons on one store (PostgreSQL; a SQLite store is one daemon's alone) ----
    async def renew_lease(self, now_ms: int, lease_ms: int) -> None: ...
    async def claim_open(self, now_ms: int, *, own: bool) -> list[Claim]: ...
    async def end_lease(self, now_ms: int) -> None: ...
    async def forward(self, task_id: str, action: str) -> None: ...
