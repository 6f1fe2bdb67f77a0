"""A daemon's feed at scale, made up: `LoadBackend` gives the console a snapshot of many tasks over
a few hosts, then a live stream at a fixed rate, in the shapes the daemon sends (docs/api.md,
"/v1/events"; `check_event` and `check_snapshot` hold every message to the daemon's own schemas).
Used by tests/console/test_console_load.py and bench/console_load.py.

The stream is what a busy daemon says: tasks reporting progress, finishing (completed / failed),
new tasks, questions opened inside tasks (the task goes input_required) and answered by an
operator (back to working), a few operator cancels, finished tasks expiring. The backend keeps its
own record of every task (`truth`), so a test can compare what the console shows with it.

Pacing: every `batch_s` (on a fixed schedule from the stream's start) every event due by then goes
out at once, `rate` a second on average; a reader that falls behind gets what is due back to back
(the stream never slows down to its reader, as the daemon's feed does not).
"""

from __future__ import annotations

import base64
import random
import time
from collections import Counter, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import jsonschema

from mcpx.api.event_schemas import data_schema, envelope_schema
from mcpx.api.models import TaskSummary
from mcpx.events.bus import EVENT_KINDS

SNAPSHOT_SEQ = 50_000
TOOLS = ("build", "deploy", "report", "index", "sync", "watch", "migrate", "scan")
UPSTREAMS = ("demo", "ci", "search")
DEPLOY_SCHEMA = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Approve?"}},
    "required": ["approve"],
}

_ENVELOPE = jsonschema.Draft202012Validator(envelope_schema())
_DATA = {kind: jsonschema.Draft202012Validator(data_schema(kind)) for kind in EVENT_KINDS}
_CONNECTION = jsonschema.Draft202012Validator(data_schema("connection.opened"))  # the registry record
_QUESTION = jsonschema.Draft202012Validator(data_schema("question.opened"))  # as GET /v1/questions/{id}


def check_event(message: dict[str, Any]) -> None:
    """Raises jsonschema.ValidationError unless the daemon could have sent this event."""
    _ENVELOPE.validate(message)
    _DATA[message["kind"]].validate(message["data"])


def check_snapshot(message: dict[str, Any]) -> None:
    """The snapshot's parts, each in the shape its /v1 route returns."""
    assert set(message) == {"type", "seq", "connections", "tasks", "questions", "operators"}
    for conn in message["connections"]:
        _CONNECTION.validate(conn)
    fields = set(TaskSummary.model_fields)
    for task in message["tasks"]:
        assert set(task) == fields, set(task) ^ fields
        TaskSummary.model_validate(task, strict=True)
    for question in message["questions"]:
        _QUESTION.validate(question)


@dataclass
class Truth:
    """What the daemon would say of one task now."""

    status: str
    message: str | None
    connection: str
    era: str
    question: str | None = None  # its open question


@dataclass(frozen=True)
class Host:
    id: str
    kind: str
    transport: str
    revision: str | None
    name: str
    version: str

    @property
    def era(self) -> str:
        return "modern" if self.revision is None else "legacy"

    def wire(self, now: int) -> dict[str, Any]:
        return {
            "id": self.id, "kind": self.kind, "transport": self.transport, "revision": self.revision,
            "clientInfo": {"name": self.name, "version": self.version}, "principal": None,
            "peer": "127.0.0.1" if self.transport == "http" else None,
            "shimPid": 4242 if self.kind == "shim" else None, "openedMs": now - 3_600_000,
            "lastSeenMs": now - 1000, "closedMs": None, "closeReason": None, "label": None,
        }  # fmt: skip


HOSTS = (
    Host("c-ideAAAAAAAAAAAA", "session", "http", "2025-11-25", "load-ide", "1.4.0"),
    Host("c-agentAAAAAAAAAA", "stateless", "http", None, "load-agent", "2.3.0"),
    Host("c-cliAAAAAAAAAAAA", "shim", "stdio", "2025-11-25", "load-cli", "0.9.1"),
    Host("c-ciAAAAAAAAAAAAA", "session", "http", "2025-06-18", "load-ci", "7.0"),
)


class LoadBackend:
    """The Backend protocol (console/backend.py) over a made-up busy daemon.

    `tasks` in the snapshot, then `rate` events a second for `seconds` (None: until `stop()`; the
    last batch also takes the rest of a step it began, so a couple more may go out). Counters:
    `sent` (events by kind), `events_sent`, `batches` (sends of one or more events, each with no
    await inside), `last_seq`, `finished` (the stream ended; the feed then stays open and quiet),
    `max_lag_s`. `keep` keeps every event sent in `log`, for checking.
    """

    operator = "olga"

    def __init__(
        self,
        tasks: int = 10_000,
        *,
        rate: float = 200.0,
        seconds: float | None = 5.0,
        batch_s: float = 0.05,
        seed: int = 11,
        keep: bool = False,
    ) -> None:
        self.rng = random.Random(seed)
        self.rate = rate
        self.batch_s = batch_s
        self.keep = keep
        self.now = int(time.time() * 1000)
        self.truth: dict[str, Truth] = {}
        self.questions: dict[str, dict[str, Any]] = {}  # open ones, by id
        self.working: list[str] = []  # ids of working tasks without a question, to pick from
        self.finished_ids: deque[str] = deque()  # ended tasks, oldest first: the next to expire
        self.snapshot = self._snapshot(tasks)
        self.sent: Counter[str] = Counter()
        self.events_sent = 0
        self.batches = 0
        self.last_seq = SNAPSHOT_SEQ  # of the last event sent
        self._seq = SNAPSHOT_SEQ  # of the last event made (some wait in _pending)
        self.total: int | None = None if seconds is None else round(rate * seconds)  # (None: no end)
        self.finished = False
        self.max_lag_s = 0.0  # how late the latest batch was, at worst (the reader was busy)
        self.log: list[dict[str, Any]] = []
        self._pending: deque[dict[str, Any]] = deque()
        self._task_n = tasks

    # ---- the snapshot ----------------------------------------------------------------------
    def _id(self, nbytes: int = 32) -> str:
        return base64.urlsafe_b64encode(self.rng.randbytes(nbytes)).rstrip(b"=").decode()

    def _snapshot(self, n: int) -> dict[str, Any]:
        tasks: list[dict[str, Any]] = []
        questions: list[dict[str, Any]] = []
        for i in range(n):
            host = self.rng.choice(HOSTS)
            tid = self._id()
            status = self.rng.choices(
                ("working", "input_required", "completed", "failed", "cancelled"), (70, 4, 20, 5, 1)
            )[0]
            message = {
                "working": f"step {self.rng.randint(1, 8)}/8",
                "input_required": "waiting for input",
                "completed": None,
                "failed": "the tool reported an error",
                "cancelled": "cancelled by the host",
            }[status]
            created = self.now - (n - i) * 300  # one every 0.3 s, the last just now
            tasks.append(self._summary(tid, host, status, message, created, needs_input=status == "input_required"))
            truth = Truth(status, message, host.id, host.era)
            self.truth[tid] = truth
            if status == "input_required":
                q = self._question(tid, host, created + 100)
                questions.append(q)
                self.questions[q["id"]] = q
                truth.question = q["id"]
            elif status == "working":
                self.working.append(tid)
            else:
                self.finished_ids.append(tid)
        return {
            "type": "snapshot",
            "seq": SNAPSHOT_SEQ,
            "connections": [h.wire(self.now) for h in HOSTS],
            "tasks": tasks,
            "questions": questions,
            "operators": [self.operator],
        }

    def _summary(
        self, tid: str, host: Host, status: str, message: str | None, created: int, *, needs_input: bool
    ) -> dict[str, Any]:
        return {
            "id": tid, "kind": "task", "status": status, "statusMessage": message, "tool": self.rng.choice(TOOLS),
            "upstream": self.rng.choice(UPSTREAMS), "era": host.era, "connectionId": host.id,
            "owner": "modern" if host.era == "modern" else "conn", "createdMs": created,
            "updatedMs": created + 50, "ttlMs": 3_600_000, "expiresMs": created + 3_600_000,
            "pollIntervalMs": 1000, "upstreamTaskId": None, "needsInput": needs_input, "why": None,
        }  # fmt: skip

    def _question(self, tid: str | None, host: Host, created: int) -> dict[str, Any]:
        qid = self._id(12)
        return {
            "id": qid, "kind": "elicitation", "method": "elicitation/create", "upstream": self.rng.choice(UPSTREAMS),
            "params": {"message": "Approve the next step?", "requestedSchema": DEPLOY_SCHEMA}, "status": "open",
            "createdMs": created, "expiresMs": created + 600_000, "taskId": tid, "connectionId": host.id,
            "inputKey": qid if tid is not None and host.era == "modern" else None, "hostCanAnswer": False,
            "answeredBy": None, "answer": None, "error": None, "closedMs": None, "reason": None, "candidates": [],
        }  # fmt: skip

    # ---- the live stream -------------------------------------------------------------------
    def _emit(self, kind: str, data: dict[str, Any], **ids: str | None) -> None:
        self._seq += 1
        message: dict[str, Any] = {"type": "event", "seq": self._seq, "ts": self._ts(), "kind": kind}
        for key in ("taskId", "connectionId", "questionId", "by"):
            if ids.get(key) is not None:
                message[key] = ids[key]
        message["data"] = data
        self._pending.append(message)

    def _ts(self) -> int:
        return int(time.time() * 1000)

    def _status(self, tid: str, status: str, message: str | None, by: str | None = None, **extra: Any) -> None:
        t = self.truth[tid]
        data = {"status": status, "previous": t.status, "statusMessage": message, **extra}
        t.status, t.message = status, message
        self._emit("task.status", data, taskId=tid, connectionId=t.connection, by=by)

    def _take_working(self) -> str | None:
        """A random working task (without a question), taken off the list."""
        if not self.working:
            return None
        i = self.rng.randrange(len(self.working))
        self.working[i], self.working[-1] = self.working[-1], self.working[i]
        return self.working.pop()

    def _step(self) -> None:
        """One thing happens at the daemon: one to three events."""
        roll = self.rng.random()
        tid = self._take_working() if roll < 0.72 else None
        if tid is not None and roll < 0.36:  # progress within working
            self._status(tid, "working", f"step {self.rng.randint(1, 8)}/8")
            self.working.append(tid)
        elif tid is not None and roll < 0.56:
            self._status(tid, "completed", "done", isError=False)
            self.finished_ids.append(tid)
        elif tid is not None and roll < 0.62:
            error = {"code": -32603, "message": "upstream went away"}
            self._status(tid, "failed", "the upstream failed", error=error)
            self.finished_ids.append(tid)
        elif tid is not None and roll < 0.64:
            by = f"operator:{self.operator}"
            t = self.truth[tid]
            self._emit("task.cancel_requested", {"status": t.status}, taskId=tid, connectionId=t.connection, by=by)
            self._status(tid, "cancelled", f"cancelled by operator {self.operator}", by=by)
            self.finished_ids.append(tid)
        elif tid is not None:  # roll < 0.72: the upstream asks something inside the task
            self._ask(tid)
        elif roll < 0.80 and self.questions:
            self._answer(self.rng.choice(list(self.questions)))
        elif roll < 0.83 and len(self.finished_ids) > 100:
            gone = self.finished_ids.popleft()
            t = self.truth.pop(gone)
            self._emit("task.expired", {}, taskId=gone, connectionId=t.connection, by="mcpx")
        else:
            self._create()

    def _create(self) -> None:
        host = self.rng.choice(HOSTS)
        tid = self._id()
        now = self._ts()
        data = {
            "kind": "task", "upstream": self.rng.choice(UPSTREAMS), "tool": self.rng.choice(TOOLS),
            "arguments": {"n": self._task_n}, "era": host.era, "owner": "modern" if host.era == "modern" else "conn", "status": "working",
            "statusMessage": None, "createdMs": now, "ttlMs": 3_600_000, "pollIntervalMs": 1000, "why": None,
        }  # fmt: skip
        self._task_n += 1
        self.truth[tid] = Truth("working", None, host.id, host.era)
        self.working.append(tid)
        self._emit("task.created", data, taskId=tid, connectionId=host.id, by=f"host:{host.id}")

    def _ask(self, tid: str) -> None:
        t = self.truth[tid]
        host = next(h for h in HOSTS if h.id == t.connection)
        q = self._question(tid, host, self._ts())
        self.questions[q["id"]] = q
        t.question = q["id"]
        self._emit("question.opened", q, taskId=tid, connectionId=host.id, questionId=q["id"])
        self._status(tid, "input_required", "waiting for input")
        if host.era == "modern":
            request = {"method": q["method"], "params": q["params"]}
            data = {"requests": {q["id"]: request}, "added": [q["id"]]}
            self._emit("task.input_required", data, taskId=tid, connectionId=host.id)

    def _answer(self, qid: str) -> None:
        q = self.questions.pop(qid)
        by = f"operator:{self.operator}"
        answer = {"action": "accept", "content": {"approve": True}}
        data = {"by": by, "action": "accept", "answer": answer}
        self._emit("question.answered", data, taskId=q["taskId"], connectionId=q["connectionId"], questionId=qid, by=by)
        tid = q["taskId"]
        if tid in self.truth:
            self.truth[tid].question = None
            self._status(tid, "working", None)
            self.working.append(tid)

    def _next(self) -> dict[str, Any]:
        while not self._pending:
            self._step()
        message = self._pending.popleft()
        self.last_seq = message["seq"]
        if self.keep:
            self.log.append(message)
        self.sent[message["kind"]] += 1
        self.events_sent += 1
        return message

    def stop(self) -> None:
        """End the stream now (but for the rest of a step it began): `finished` follows."""
        self.total = self.events_sent + len(self._pending)

    async def feed(self, since: int | None) -> AsyncIterator[dict[str, Any]]:
        if since is None:
            yield self.snapshot
        start = anyio.current_time()
        ticks = 0
        while self.total is None or self.events_sent < self.total:
            ticks += 1
            wake = start + ticks * self.batch_s
            now = anyio.current_time()
            if wake > now:
                await anyio.sleep(wake - now)
            else:
                self.max_lag_s = max(self.max_lag_s, now - wake)
            due = int(self.rate * (anyio.current_time() - start))  # all the events due by now
            if self.total is not None:
                due = min(due, self.total)
            if due <= self.events_sent:
                continue
            self.batches += 1
            # No await within a batch: the console folds it in at once.
            for _ in range(due - self.events_sent):
                yield self._next()
            if due == self.total:  # the end: a step's events are never cut in two (`truth` has them all)
                while self._pending:
                    yield self._next()
        self.finished = True
        await anyio.sleep_forever()

    # ---- the rest of the Backend protocol ----------------------------------------------------
    def label(self) -> str:
        return "load:7435"

    async def task(self, task_id: str) -> dict[str, Any]:
        t = self.truth.get(task_id)
        return {
            "id": task_id, "status": t.status if t else "completed", "statusMessage": t.message if t else None,
            "tool": "build", "upstream": "demo", "era": t.era if t else "legacy",
            "connectionId": t.connection if t else None, "owner": "conn", "createdMs": self.now, "updatedMs": self.now,
            "ttlMs": 3_600_000, "expiresMs": self.now + 3_600_000, "pollIntervalMs": 1000, "upstreamTaskId": None,
            "needsInput": bool(t and t.question), "arguments": {}, "result": None, "error": None,
            "inputRequests": [], "events": [], "why": None,
        }  # fmt: skip

    async def frames(self, task_id: str) -> list[dict[str, Any]]:
        return []

    async def cancel(self, task_id: str) -> dict[str, Any]:
        return {}

    async def status(self) -> dict[str, Any]:
        return {"version": "0.9.0", "uptimeS": 60.0}

    async def allowances(self) -> list[dict[str, Any]]:
        return []

    async def revoke_allowance(self, allowance_id: str) -> None:
        return None

    async def answer(self, question_id: str, action: str, content: Any, result: Any) -> dict[str, Any]:
        return {}

    async def aclose(self) -> None:
        return None
