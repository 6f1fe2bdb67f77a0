"""The SQL both stores share: the filtered pages of tasks, questions and events, written once with
placeholders in either style (`?` for SQLite, `$n` for PostgreSQL). Pure: text and values only."""

from __future__ import annotations

from collections.abc import Iterable

from .base import TaskQuery

TASK_COLS = (
    "id, status, created_ms, updated_ms, ttl_ms, expires_ms, poll_ms, owner, upstream, tool, era, connection, body"
)
EVENT_COLS = "seq, ts_ms, kind, task_id, connection_id, question_id, by_, body"


class Params:
    """Placeholders and their values, in order of use."""

    def __init__(self, *, numbered: bool) -> None:
        self.numbered = numbered
        self.values: list[object] = []

    def __call__(self, value: object) -> str:
        self.values.append(value)
        return f"${len(self.values)}" if self.numbered else "?"

    def many(self, values: Iterable[object]) -> str:
        return ",".join(self(v) for v in values)


def _where(clauses: list[str]) -> str:
    return f"WHERE {' AND '.join(clauses)}" if clauses else ""


def owner_page(p: Params, owner: str, after: tuple[int, str] | None, limit: int, now_ms: int | None) -> str:
    """One owner's tasks in (created_ms, id) order after the cursor; rows past their TTL are left out
    before the LIMIT, so a page is never short while live tasks follow."""
    where = [f"owner = {p(owner)}"]
    if after is not None:
        where.append(f"(created_ms, id) > ({p(after[0])}, {p(after[1])})")
    if now_ms is not None:
        where.append(f"(expires_ms IS NULL OR expires_ms > {p(now_ms)})")
    return f"SELECT body FROM tasks {_where(where)} ORDER BY created_ms, id LIMIT {p(limit)}"


def task_page(p: Params, query: TaskQuery, status_message: str, like: str = "LIKE") -> str:
    """/v1's task list, newest first; `status_message` is the backend's expression for that body
    field, `like` its case-blind LIKE (SQLite's LIKE is; PostgreSQL's ILIKE)."""
    where: list[str] = []
    if query.connection is not None:
        where.append(f"connection = {p(query.connection)}")
    if query.statuses:
        where.append(f"status IN ({p.many(sorted(query.statuses))})")
    if query.tool is not None:
        where.append(f"tool = {p(query.tool)}")
    if query.id_prefix:
        where.append(_starts_with(p, query.id_prefix))
    if query.text:
        # A NUL cannot be searched on either store (SQLite's LIKE ends the pattern there, PostgreSQL's
        # text cannot hold it): it becomes U+FFFD on both, so both find the same (nothing, usually).
        text = query.text.replace("\x00", "\ufffd")
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        columns = ("id", "tool", "upstream", status_message)
        where.append("(" + " OR ".join(f"{c} {like} {p(pattern)} ESCAPE '\\'" for c in columns) + ")")
    if query.before is not None:
        where.append(f"(created_ms, id) < ({p(query.before[0])}, {p(query.before[1])})")
    if query.now_ms is not None:
        where.append(f"(expires_ms IS NULL OR expires_ms > {p(query.now_ms)})")
    return f"SELECT body FROM tasks {_where(where)} ORDER BY created_ms DESC, id DESC LIMIT {p(query.limit)}"


def question_page(
    p: Params, statuses: Iterable[str], task_id: str | None, limit: int, written: str, id_prefix: str | None = None
) -> str:
    """Questions newest first; `written` orders those of one millisecond, the latest written first."""
    where: list[str] = []
    wanted = sorted(statuses)
    if wanted:
        where.append(f"status IN ({p.many(wanted)})")
    if task_id is not None:
        where.append(f"task_id = {p(task_id)}")
    if id_prefix:
        where.append(_starts_with(p, id_prefix))
    return f"SELECT body FROM questions {_where(where)} ORDER BY created_ms DESC, {written} DESC LIMIT {p(limit)}"


def connection_page(p: Params, open_only: bool, after: tuple[int, str] | None, limit: int | None) -> str:
    """Connections in (opened_ms, id) order after the cursor (/v1/connections pages)."""
    where: list[str] = []
    if open_only:
        where.append("closed_ms IS NULL")
    if after is not None:
        where.append(f"(opened_ms, id) > ({p(after[0])}, {p(after[1])})")
    tail = f" LIMIT {p(limit)}" if limit is not None else ""
    return f"SELECT body FROM connections {_where(where)} ORDER BY opened_ms, id{tail}"


def event_page(p: Params, seq: int, limit: int, task_id: str | None, kinds: Iterable[str]) -> str:
    where = [f"seq > {p(seq)}"]
    if task_id is not None:
        where.append(f"task_id = {p(task_id)}")
    wanted = sorted(kinds)
    if wanted:
        where.append(f"kind IN ({p.many(wanted)})")
    return f"SELECT {EVENT_COLS} FROM events {_where(where)} ORDER BY seq LIMIT {p(limit)}"


def _starts_with(p: Params, prefix: str) -> str:
    """Ids that start with `prefix`, case and all (LIKE is case-blind on SQLite). A NUL becomes U+FFFD
    as in the text search: PostgreSQL text cannot hold it, and no id has either."""
    prefix = prefix.replace("\x00", "\ufffd")
    return f"substr(id, 1, {p(len(prefix))}) = {p(prefix)}"
