"""What the console knows, folded from the daemon's feed. Pure: messages in, changes out.

A snapshot replaces everything; each event after it changes one thing and is applied once (an
event at or below the last sequence applied is ignored, so a resumed feed never doubles a row).
`apply` says what changed, so the screen updates only those rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

TERMINAL = frozenset({"completed", "failed", "cancelled"})
STATUSES = ("working", "input_required", "completed", "failed", "cancelled")
SortKey = Literal["age", "status", "tool", "upstream", "host"]


@dataclass(frozen=True)
class Host:
    id: str
    kind: str  # session | shim | stateless
    transport: str
    revision: str | None
    client_name: str
    client_version: str
    principal: str | None
    peer: str | None
    opened_ms: int
    closed_ms: int | None = None
    close_reason: str | None = None
    name: str | None = None  # the daemon's label: an explicit one, or the host's process

    @property
    def open(self) -> bool:
        return self.closed_ms is None

    @property
    def label(self) -> str:
        return self.name or f"{self.client_name} {self.client_version}".strip() or self.kind

    @staticmethod
    def from_wire(data: dict[str, Any]) -> Host:
        info = _obj(data.get("clientInfo"))
        return Host(
            id=str(data["id"]),
            kind=str(data.get("kind", "")),
            transport=str(data.get("transport", "")),
            revision=data.get("revision"),
            client_name=str(info.get("name", "") or ""),
            client_version=str(info.get("version", "") or ""),
            principal=data.get("principal"),
            peer=data.get("peer"),
            opened_ms=int(data.get("openedMs") or 0),
            closed_ms=data.get("closedMs"),
            close_reason=data.get("closeReason"),
            name=data["label"] if isinstance(data.get("label"), str) else None,
        )


CLOSED_KEPT = 1000


def closed_why(kind: str, by: object, data: Mapping[str, Any]) -> str:
    """What an open form of a question closed elsewhere says: who answered it, or why it closed."""
    if kind in ("question.expired", "question.abandoned"):
        return f"closed: {data.get('reason') or 'expired'}"
    who = str(by or "someone")
    if who.startswith("operator:"):
        who = who.removeprefix("operator:")
        who = who.removesuffix("@link") + " via link" if who.endswith("@link") else who
    elif who.startswith("host:"):
        who = "the host"
    return f"answered by {who}"


@dataclass(frozen=True)
class TaskRow:
    id: str
    status: str
    tool: str
    upstream: str
    era: str
    connection: str | None
    created_ms: int
    updated_ms: int
    status_message: str | None = None
    ttl_ms: int | None = None
    poll_ms: int | None = None
    cancel_requested_by: str | None = None
    kind: str = "task"  # "call": a host's plain tools/call, listed because it ran long or asked

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @staticmethod
    def from_summary(data: dict[str, Any]) -> TaskRow:
        return TaskRow(
            id=str(data["id"]),
            status=str(data["status"]),
            tool=str(data.get("tool", "")),
            upstream=str(data.get("upstream", "")),
            era=str(data.get("era", "")),
            connection=data.get("connectionId"),
            created_ms=int(data.get("createdMs") or 0),
            updated_ms=int(data.get("updatedMs") or 0),
            status_message=data.get("statusMessage"),
            ttl_ms=data.get("ttlMs"),
            poll_ms=data.get("pollIntervalMs"),
            kind=str(data.get("kind") or "task"),
        )


@dataclass(frozen=True)
class Question:
    id: str
    kind: str
    upstream: str
    created_ms: int
    task_id: str | None
    connection: str | None
    message: str
    wire: dict[str, Any] = field(compare=False, hash=False)

    @staticmethod
    def from_wire(data: dict[str, Any]) -> Question:
        params = _obj(data.get("params"))
        return Question(
            id=str(data["id"]),
            kind=str(data.get("kind", "")),
            upstream=str(data.get("upstream", "")),
            created_ms=int(data.get("createdMs") or 0),
            task_id=data.get("taskId"),
            connection=data.get("connectionId"),
            message=str(params.get("message", "") or data.get("method", "")),
            wire=data,
        )


@dataclass
class Changes:
    """What one message changed; `reset` means everything (a snapshot)."""

    reset: bool = False
    hosts: set[str] = field(default_factory=set)
    tasks: set[str] = field(default_factory=set)
    removed_tasks: set[str] = field(default_factory=set)
    questions: set[str] = field(default_factory=set)
    new_questions: list[str] = field(default_factory=list)  # opened by this message: worth a bell

    def merge(self, other: Changes) -> None:
        self.reset = self.reset or other.reset
        self.hosts |= other.hosts
        self.tasks |= other.tasks
        self.removed_tasks |= other.removed_tasks
        self.questions |= other.questions
        self.new_questions += other.new_questions

    @property
    def empty(self) -> bool:
        return not (self.reset or self.hosts or self.tasks or self.removed_tasks or self.questions)


@dataclass
class ConsoleState:
    seq: int | None = None  # the last sequence applied; None before the first snapshot
    hosts: dict[str, Host] = field(default_factory=dict)
    tasks: dict[str, TaskRow] = field(default_factory=dict)
    questions: dict[str, Question] = field(default_factory=dict)  # open ones
    operators: list[str] = field(default_factory=list)
    # Why each recently closed question closed ("answered by bob via link"), for a form still open on it.
    closed_why: dict[str, str] = field(default_factory=dict)
    applied: int = 0  # events applied (not counting ignored repeats)
    ignored: int = 0  # events skipped because their sequence was already applied
    # Tasks by (connection, status), kept as rows change: the hosts pane reads them often.
    _counts: Counter[tuple[str | None, str]] = field(default_factory=Counter)
    # Open questions by task id, kept as questions open and close: every table row asks.
    _asking: Counter[str] = field(default_factory=Counter)

    def _put(self, row: TaskRow) -> None:
        old = self.tasks.get(row.id)
        if old is not None:
            self._counts[(old.connection, old.status)] -= 1
        self.tasks[row.id] = row
        self._counts[(row.connection, row.status)] += 1

    def _drop(self, task_id: str) -> TaskRow | None:
        old = self.tasks.pop(task_id, None)
        if old is not None:
            self._counts[(old.connection, old.status)] -= 1
        return old

    def _open(self, q: Question) -> None:
        self._close(q.id)
        self.questions[q.id] = q
        if q.task_id:
            self._asking[q.task_id] += 1

    def _close(self, qid: str) -> Question | None:
        q = self.questions.pop(qid, None)
        if q is not None and q.task_id:
            self._asking[q.task_id] -= 1
            if self._asking[q.task_id] <= 0:
                del self._asking[q.task_id]
        return q

    # ---- folding ---------------------------------------------------------------------------
    def apply(self, message: Mapping[str, Any]) -> Changes:
        """One feed message (console/wire.py's FeedMessage, read leniently: a field missing is a default)."""
        kind = message.get("type")
        if kind == "snapshot":
            return self._snapshot(message)
        if kind == "event":
            return self._event(message)
        if kind == "reset":
            self.seq = None  # a snapshot follows
        if kind == "heartbeat" and isinstance(message.get("operators"), list):
            self.operators = [str(o) for o in message["operators"]]
        return Changes()

    def _snapshot(self, msg: Mapping[str, Any]) -> Changes:
        self.seq = int(msg["seq"])
        self.hosts = {h.id: h for h in map(Host.from_wire, msg.get("connections") or [])}
        self.tasks = {}
        self._counts = Counter()
        for row in map(TaskRow.from_summary, msg.get("tasks") or []):
            self._put(row)
        self.questions, self._asking = {}, Counter()
        for q in map(Question.from_wire, msg.get("questions") or []):
            self._open(q)
        self.operators = list(msg.get("operators") or [])
        return Changes(reset=True)

    def _event(self, ev: Mapping[str, Any]) -> Changes:
        seq = int(ev["seq"])
        if self.seq is not None and seq <= self.seq:
            self.ignored += 1
            return Changes()
        self.seq = seq
        self.applied += 1
        kind = str(ev.get("kind"))
        data = _obj(ev.get("data"))
        task_id, conn_id, qid = ev.get("taskId"), ev.get("connectionId"), ev.get("questionId")
        ch = Changes()
        if kind in ("connection.opened", "connection.updated"):
            host = Host.from_wire(data)
            self.hosts[host.id] = host
            ch.hosts.add(host.id)
        elif kind == "connection.closed" and conn_id in self.hosts:
            self.hosts[conn_id] = replace(self.hosts[conn_id], closed_ms=int(ev["ts"]), close_reason=data.get("reason"))
            ch.hosts.add(conn_id)
        elif kind == "task.created" and task_id:
            self._put(
                TaskRow(
                    id=task_id,
                    status=str(data.get("status", "working")),
                    tool=str(data.get("tool", "")),
                    upstream=str(data.get("upstream", "")),
                    era=str(data.get("era", "")),
                    connection=conn_id,
                    created_ms=int(data.get("createdMs") or ev["ts"]),  # as /v1 and the snapshot show it
                    updated_ms=int(ev["ts"]),
                    status_message=data.get("statusMessage"),
                    ttl_ms=data.get("ttlMs"),
                    poll_ms=data.get("pollIntervalMs"),
                    kind=str(data.get("kind") or "task"),
                )
            )
            ch.tasks.add(task_id)
            if conn_id:
                ch.hosts.add(conn_id)
        elif kind == "task.status" and task_id in self.tasks:
            row = self.tasks[task_id]
            self._put(
                replace(
                    row,
                    status=str(data.get("status")),
                    status_message=data.get("statusMessage"),
                    updated_ms=int(ev["ts"]),
                )
            )
            ch.tasks.add(task_id)
            if row.connection:
                ch.hosts.add(row.connection)
        elif kind == "task.cancel_requested" and task_id in self.tasks:
            self.tasks[task_id] = replace(self.tasks[task_id], cancel_requested_by=ev.get("by"))
            ch.tasks.add(task_id)
        elif kind == "task.expired" and task_id in self.tasks:
            gone = self._drop(task_id)
            ch.removed_tasks.add(task_id)
            if gone is not None and gone.connection:
                ch.hosts.add(gone.connection)
        elif kind == "question.opened" and qid:
            q = Question.from_wire(data)
            self._open(q)
            ch.questions.add(q.id)
            ch.new_questions.append(q.id)
            self._touch(ch, q)
        elif kind.startswith("question.") and kind != "question.opened" and qid in self.questions:  # closed
            closed = self._close(qid)
            assert closed is not None
            self.closed_why[qid] = closed_why(kind, ev.get("by"), data)
            while len(self.closed_why) > CLOSED_KEPT:
                del self.closed_why[next(iter(self.closed_why))]
            ch.questions.add(qid)
            self._touch(ch, closed)
        return ch

    def _touch(self, ch: Changes, q: Question) -> None:
        if q.task_id and q.task_id in self.tasks:
            ch.tasks.add(q.task_id)
        if q.connection:
            ch.hosts.add(q.connection)

    # ---- views -----------------------------------------------------------------------------
    def needs_input(self, task: TaskRow) -> bool:
        return task.status == "input_required" or task.id in self._asking

    def host_counts(self, host_id: str | None) -> dict[str, int]:
        """Tasks by status, for one host or (None) all of them."""
        counts = dict.fromkeys(STATUSES, 0)
        for (conn, status), n in self._counts.items():
            if n and (host_id is None or conn == host_id):
                counts[status] = counts.get(status, 0) + n
        return counts

    def host_needs_input(self, host_id: str) -> bool:
        if any(q.connection == host_id for q in self.questions.values()):
            return True
        return self._counts[(host_id, "input_required")] > 0

    def hosts_shown(self) -> list[Host]:
        """Open hosts, then closed ones while they still own tasks; oldest first within each."""
        owners = {conn for (conn, _status), n in self._counts.items() if n > 0}
        shown = [h for h in self.hosts.values() if h.open or h.id in owners]
        return sorted(shown, key=lambda h: (not h.open, h.opened_ms, h.id))  # open ones first

    def answer_queue(self) -> list[Question]:
        """Everything waiting for a person, across all hosts, oldest first."""
        return sorted(self.questions.values(), key=lambda q: (q.created_ms, q.id))

    def visible(
        self,
        *,
        host: str | None = None,
        statuses: Iterable[str] = (),
        text: str = "",
        sort: SortKey = "age",
        descending: bool = True,
    ) -> list[TaskRow]:
        wanted = frozenset(statuses)
        rows = [t for t in self.tasks.values() if self.matches(t, host=host, statuses=wanted, text=text)]
        rows.sort(key=_SORTS[sort], reverse=descending)
        return rows

    def matches(self, t: TaskRow, *, host: str | None, statuses: frozenset[str], text: str) -> bool:
        if host is not None and t.connection != host:
            return False
        if statuses and t.status not in statuses:
            return False
        return not text or text.lower() in _haystack(t, self.hosts.get(t.connection or ""))


def _obj(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _haystack(t: TaskRow, host: Host | None) -> str:
    parts = [t.id, t.tool, t.upstream, t.status, t.status_message or "", host.label if host else ""]
    return " ".join(parts).lower()


# Each ends with the id, so no two tasks tie: the table, re-sorting its own rows, and `visible`,
# sorting the state's, put them in the same order.
_SORTS: dict[SortKey, Callable[[TaskRow], tuple[Any, ...]]] = {
    "age": lambda t: (t.created_ms, t.id),
    "status": lambda t: (STATUSES.index(t.status) if t.status in STATUSES else 9, t.created_ms, t.id),
    "tool": lambda t: (t.tool, t.created_ms, t.id),
    "upstream": lambda t: (t.upstream, t.created_ms, t.id),
    "host": lambda t: (t.connection or "", t.created_ms, t.id),
}


def sort_key(sort: SortKey) -> Callable[[TaskRow], tuple[Any, ...]]:
    """The key `visible` sorts by (ascending)."""
    return _SORTS[sort]
