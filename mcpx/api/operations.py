"""What an operator can see and do, over the daemon's parts: the one service behind `/v1`.

Every action names who did it (`operator:<name>`) and lands in the event log with that name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..connections.registry import ConnectionRegistry
from ..events.bus import EventBus, StoredEvent
from ..host.approvals import Allowance, Approvals
from ..questions.answers import AnswerError, operator_answer
from ..questions.broker import Broker, NotOpen, NotRecorded, UnknownQuestion
from ..records.connection_record import ConnectionRecord
from ..records.question import Action, Question, QuestionStatus
from ..records.task import INPUT_REQUIRED, Task
from ..store import TaskQuery
from ..tasks import changes
from ..tasks.engine import TaskEngine, now_ms
from ..tasks.frame_log import Frame
from .answer_links import AnswerLinks

TIMELINE_MAX = 500


class NotFound(LookupError):
    pass


class Conflict(Exception):
    pass


class Unavailable(Exception):
    """The store could not record the change, so nothing changed; it may be tried again (503)."""


@dataclass(frozen=True)
class TaskPage:
    tasks: list[dict[str, Any]]
    next_cursor: str | None


# A page cursor names the last task seen: "<createdMs>.<taskId>" (any such string is a cursor).
CURSOR_PATTERN = r"^[0-9]{1,16}\.[A-Za-z0-9_-]{1,128}$"


def encode_cursor(task: Task) -> str:
    return f"{task.created_ms}.{task.id}"


def decode_connection_cursor(cursor: str) -> tuple[int, str]:
    """/v1/connections pages by "<openedMs>.<connectionId>" of the last connection seen."""
    return decode_cursor(cursor)


def decode_cursor(cursor: str) -> tuple[int, str]:
    created, _, task_id = cursor.partition(".")
    if not created.isdigit() or not task_id:
        raise ValueError("not a cursor: <createdMs>.<taskId>")
    return int(created), task_id


def task_summary(task: Task, needs_input: bool) -> dict[str, Any]:
    return {
        "id": task.id,
        "kind": task.kind,
        "status": task.status,
        "statusMessage": task.status_message,
        "tool": task.tool,
        "upstream": task.upstream,
        "era": task.era,
        "connectionId": task.connection,
        "owner": changes.owner_kind(task.owner),
        "createdMs": task.created_ms,
        "updatedMs": task.updated_ms,
        "ttlMs": task.ttl_ms,
        "expiresMs": task.expires_ms(),
        "pollIntervalMs": task.poll_ms,
        "upstreamTaskId": task.upstream_task_id,
        "needsInput": needs_input or task.status == INPUT_REQUIRED,
        "why": task.why,
    }


class Operations:
    def __init__(
        self,
        *,
        engine: TaskEngine,
        broker: Broker,
        registry: ConnectionRegistry,
        bus: EventBus,
        approvals: Approvals | None = None,
        links: AnswerLinks | None = None,
        link_base: str = "",
    ) -> None:
        self.approvals = approvals  # approval gates' allowances (host/approvals.py)
        self.links = links or AnswerLinks()  # one-time answer links (api/answer_links.py)
        self.link_base = link_base  # where they point: daemon.publicUrl, else the loopback address
        self.engine = engine
        self.broker = broker
        self.registry = registry
        self.bus = bus
        self.store = engine.store

    # ---- connections ---------------------------------------------------------------------
    async def connections(
        self, include_closed: bool = True, cursor: str | None = None, limit: int | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A page of connections in opening order, and the cursor of the next one (None: the last)."""
        after = decode_connection_cursor(cursor) if cursor else None
        records = await self.store.connections(
            open_only=not include_closed, after=after, limit=None if limit is None else limit + 1
        )
        more = limit is not None and len(records) > limit
        records = records[:limit] if limit is not None else records
        nxt = f"{records[-1].opened_ms}.{records[-1].id}" if more and records else None
        return await self._shown(records), nxt

    async def _shown(self, records: list[ConnectionRecord]) -> list[dict[str, Any]]:
        counts = await self.store.task_counts()
        asking = {q.connection for q in self.broker.open_questions()}
        live = {r.id: r for r in self.registry.live.values()}
        out = []
        for record in records:
            record = live.get(record.id, record)  # the registry's last-seen is fresher
            by_status = counts.get(record.id, {})
            out.append(
                {
                    **record.wire(),
                    "tasks": by_status,
                    "needsInput": record.id in asking or by_status.get(INPUT_REQUIRED, 0) > 0,
                }
            )
        return out

    async def connection(self, record_id: str) -> dict[str, Any]:
        record = self.registry.live.get(record_id) or await self.store.get_connection(record_id)
        if record is None:
            raise NotFound(f"no connection {record_id}")
        return (await self._shown([record]))[0]

    # ---- approval allowances -------------------------------------------------------------
    def allowances(self) -> list[Allowance]:
        return self.approvals.allowances() if self.approvals is not None else []

    def revoke_allowance(self, allowance_id: str) -> Allowance | None:
        return self.approvals.revoke(allowance_id) if self.approvals is not None else None

    # ---- tasks ---------------------------------------------------------------------------
    def _asking_tasks(self) -> set[str]:
        return {q.task_id for q in self.broker.open_questions() if q.task_id is not None}

    async def tasks(
        self,
        *,
        connection: str | None = None,
        statuses: frozenset[str] = frozenset(),
        tool: str | None = None,
        text: str | None = None,
        cursor: str | None = None,
        limit: int = 100,
        id_prefix: str | None = None,
    ) -> TaskPage:
        before = decode_cursor(cursor) if cursor else None
        query = TaskQuery(connection, statuses, tool, text, before, limit + 1, now_ms(), id_prefix)
        rows = await self.store.tasks(query)
        asking = self._asking_tasks()
        page = [task_summary(t, t.id in asking) for t in rows[:limit]]
        return TaskPage(page, encode_cursor(rows[limit - 1]) if len(rows) > limit else None)

    async def _task(self, task_id: str) -> Task:
        task = await self.engine.get(task_id)
        if task is None:
            raise NotFound(f"no task {task_id}")
        return task

    async def task(self, task_id: str) -> dict[str, Any]:
        task = await self._task(task_id)
        questions = [q for q in self.broker.open_questions() if q.task_id == task_id]
        events = await self.store.events_since(0, TIMELINE_MAX, task_id=task_id)
        return {
            **task_summary(task, bool(questions)),
            "arguments": task.arguments,
            "result": task.result,
            "error": task.error,
            "inputRequests": [_input_request(q) for q in questions],
            "events": [e.wire() for e in events],
        }

    async def cancel_task(self, task_id: str, by: str) -> dict[str, Any]:
        task = await self._task(task_id)
        if task.terminal:
            raise Conflict(f"task {task_id} already ended {task.status}")
        name = by.removeprefix("operator:")
        done = await self.engine.cancel(task, f"cancelled by operator {name}", by=by)
        if done is None:
            raise Conflict(f"task {task_id} ended before the cancel arrived")
        return await self.task(task_id)

    async def task_input(self, task_id: str, responses: dict[str, Any], by: str) -> dict[str, list[str]]:
        """Answers for a task's open questions, keyed as its inputRequests are (both eras):
        exactly what a 2026 host's tasks/update carries. Keys not outstanding are reported."""
        await self._task(task_id)
        checked: list[tuple[Question, Action, object, object]] = []
        errors: dict[str, str] = {}
        ignored: list[str] = []
        for key, value in responses.items():
            # Asked here, or (several daemons on one store) by the daemon running the task.
            q = self.broker.get(key) or await self.store.get_question(key)
            if q is None or q.task_id != task_id or q.status != "open":
                ignored.append(key)
                continue
            try:
                action, content, result = _from_input_response(q, value)
                operator_answer(q, action, content, result)  # check them all before answering any
            except AnswerError as exc:
                errors.update({f"inputResponses.{key}.{k}": v for k, v in exc.fields.items()})
            else:
                checked.append((q, action, content, result))
        if errors:
            raise AnswerError(errors)
        answered: list[str] = []
        for q, action, content, result in checked:
            try:
                await self.broker.answer_as_operator(q.id, action, content=content, result=result, by=by)
                answered.append(q.id)
            except (NotOpen, UnknownQuestion):
                ignored.append(q.id)
            except NotRecorded as exc:  # the ones before it stand: say which
                before = f"; answered before it: {', '.join(answered)}" if answered else ""
                raise Unavailable(f"{exc.message}{before}") from None
        return {"answered": answered, "ignored": ignored}

    def frames(self, task_id: str) -> list[Frame]:
        return self.engine.frames.frames(task_id)

    # ---- questions -----------------------------------------------------------------------
    async def questions(
        self, statuses: frozenset[QuestionStatus], task_id: str | None, limit: int, id_prefix: str | None = None
    ) -> list[Question]:
        if statuses == frozenset({"open"}) and task_id is None and not id_prefix and not self.engine.shares_store:
            # One daemon holds every open question in memory; on a shared store others hold some.
            return sorted(self.broker.open_questions(), key=lambda q: q.created_ms)
        return await self.store.questions(statuses, task_id, limit, id_prefix)

    async def question(self, qid: str) -> Question:
        q = self.broker.get(qid) or await self.store.get_question(qid)
        if q is None:
            raise NotFound(f"no question {qid}")
        return q

    async def answer_link(self, qid: str) -> tuple[str, int]:
        """A one-time link that answers this open question: (URL, when it expires)."""
        q = self.broker.get(qid)
        if q is None:
            stored = await self.store.get_question(qid)
            if stored is None:
                raise NotFound(f"no question {qid}")
            raise Conflict(f"question {qid} is {stored.status}")
        token = self.links.mint(qid, q.expires_ms)
        return f"{self.link_base.rstrip('/')}/answer/{token}", q.expires_ms

    async def answer(self, qid: str, action: Action, content: object, result: object, by: str) -> Question:
        try:
            return await self.broker.answer_as_operator(qid, action, content=content, result=result, by=by)
        except UnknownQuestion:
            raise NotFound(f"no question {qid}") from None
        except NotOpen as exc:
            raise Conflict(str(exc)) from None
        except NotRecorded as exc:
            raise Unavailable(exc.message) from None

    # ---- events --------------------------------------------------------------------------
    async def events(
        self, since: int, limit: int, task_id: str | None, kinds: frozenset[str]
    ) -> tuple[list[StoredEvent], int]:
        return await self.store.events_since(since, limit, task_id=task_id, kinds=kinds), await self.store.last_seq()


def _input_request(q: Question) -> dict[str, Any]:
    return {
        "key": q.id,
        "questionId": q.id,
        "kind": q.kind,
        "method": q.method,
        "upstream": q.upstream,
        "params": q.params,
    }


def _from_input_response(q: Question, value: object) -> tuple[Action, object, object]:
    """An inputResponses value (an ElicitResult, CreateMessageResult, ListRootsResult) as an
    operator's answer."""
    body = value if isinstance(value, dict) else {}
    if q.kind in ("elicitation", "url-elicitation"):
        action = body.get("action")
        if action == "accept" or action == "decline" or action == "cancel":
            return action, body.get("content"), None
        raise AnswerError({"action": 'must be "accept", "decline" or "cancel"'})
    return "accept", None, value
