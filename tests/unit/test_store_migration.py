"""mcpx.store.sqlite schema versions: a database file an older mcpx wrote (the v1 schema, `_V1`, at
user_version 0) is brought to the current version (v3) in one transaction on open, keeping its tasks, questions and
sessions readable and queryable; a current file is left alone; a migration that fails leaves the
file as it was."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from mcpx.events.bus import Event
from mcpx.store import TaskQuery
from mcpx.store.sqlite import _V1, SCHEMA_VERSION, SqliteStore

from .storekit import NOW, opened, query

pytestmark = pytest.mark.anyio

# Rows exactly as mcpx 0.1 wrote them: its Task had owner_info and keys_used; its question bodies
# were the old broker's Question with call/host/kind.
OLD_TASK: dict[str, Any] = {
    "id": "t-old",
    "status": "completed",
    "created_ms": NOW,
    "updated_ms": NOW + 5,
    "ttl_ms": 60_000,
    "poll_ms": 1000,
    "owner": "conn:abc",
    "upstream": "up",
    "tool": "echo",
    "arguments": {"text": "hi"},
    "era": "legacy",
    "status_message": None,
    "result": {"content": [{"type": "text", "text": "hi"}]},
    "error": None,
    "upstream_task_id": None,
    "owner_info": {"clientInfo": {"name": "old-host"}},
    "input_requests": {},
    "keys_used": 2,
}
OLD_OPEN_QUESTION = {
    "id": "q-open",
    "upstream": "up",
    "method": "roots/list",
    "params": {},
    "created_ms": NOW + 2,
    "expires_ms": NOW + 600_000,
    "call": "task:t-old",
    "host": None,
    "status": "open",
    "answered_by": None,
    "answer": None,
    "kind": "roots",
}
OLD_ANSWERED_QUESTION = {
    **OLD_OPEN_QUESTION,
    "id": "q-answered",
    "created_ms": NOW + 1,
    "status": "answered",
    "answered_by": "operator:ann",
    "answer": {"roots": []},
}


def write_v1(path: Path, *, extra_sql: str = "") -> None:
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.executescript(_V1 + extra_sql)
        t = OLD_TASK
        db.execute(
            "INSERT INTO tasks VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                t["id"],
                t["status"],
                t["created_ms"],
                t["updated_ms"],
                t["ttl_ms"],
                t["created_ms"] + t["ttl_ms"],
                t["poll_ms"],
                t["owner"],
                t["upstream"],
                t["tool"],
                t["era"],
                json.dumps(t),
            ),
        )
        for q in (OLD_OPEN_QUESTION, OLD_ANSWERED_QUESTION):
            db.execute("INSERT INTO questions VALUES (?, ?)", (q["id"], json.dumps(q)))
        db.execute("INSERT INTO sessions VALUES (?, ?)", ("s-1", json.dumps({"owner": "conn:abc"})))
        db.commit()


def user_version(path: Path) -> int:
    return int(query(path, "PRAGMA user_version")[0][0])


def columns(path: Path, table: str) -> list[str]:
    return [row[1] for row in query(path, f"PRAGMA table_info({table})")]  # a test-chosen table name


async def test_a_v1_file_is_migrated_to_the_current_version_and_its_rows_stay_readable(tmp_path: Path) -> None:
    db = tmp_path / "mcpx.db"
    write_v1(db)
    assert user_version(db) == 0 and "connection" not in columns(db, "tasks")
    async with opened(db) as w:
        assert user_version(db) == SCHEMA_VERSION == 4
        # v3: the index the snapshot finds the open connections by (retention, #26).
        assert query(db, "SELECT name FROM sqlite_master WHERE name = 'connections_closed'")
        # v4: sealed upstream sign-ins (#36).
        assert columns(db, "secrets") == ["name", "updated_ms", "body"]
        assert await w.store.get_secret("oauth:x") is None
        task = await w.store.get_task("t-old")
        assert task is not None and task.connection is None  # fields the old mcpx wrote are left behind
        assert (task.status, task.arguments, task.result) == ("completed", {"text": "hi"}, OLD_TASK["result"])
        assert [t.id for t in await w.store.list_owner("conn:abc", None, 10)] == ["t-old"]
        assert [t.id for t in await w.store.tasks(TaskQuery(text="echo"))] == ["t-old"]
        assert await w.store.get_session("s-1") == {"owner": "conn:abc"}
        # The new status and created_ms columns were filled from each question's body.
        assert [q.id for q in await w.store.questions(frozenset({"open"}))] == ["q-open"]
        assert [q.id for q in await w.store.questions(frozenset({"answered"}))] == ["q-answered"]
        assert [q.id for q in await w.store.questions()] == ["q-open", "q-answered"]  # newest first
        answered = await w.store.get_question("q-answered")
        assert answered is not None and (answered.answered_by, answered.answer) == ("operator:ann", {"roots": []})
        # The operator plane's tables work on the migrated file.
        assert await w.store.last_seq() == 0 and await w.store.connections() == []
        (first,) = await w.store.append([Event("task.expired", {}, task_id="t-old")])
        assert first.seq == 1


async def test_a_current_file_is_opened_without_migrating_again(tmp_path: Path) -> None:
    db = tmp_path / "mcpx.db"
    write_v1(db)
    async with opened(db) as w:
        await w.store.append([Event("connection.opened", {})])
    schema = query(db, "SELECT sql FROM sqlite_master ORDER BY name")
    async with opened(db) as w:
        assert await w.store.last_seq() == 1 and await w.store.get_task("t-old") is not None
    assert user_version(db) == 4 and query(db, "SELECT sql FROM sqlite_master ORDER BY name") == schema


async def test_a_new_file_starts_at_the_current_schema(tmp_path: Path) -> None:
    db = tmp_path / "mcpx.db"
    async with opened(db):
        pass
    assert user_version(db) == SCHEMA_VERSION
    assert {"connections", "events", "questions", "sessions", "tasks"} <= {
        row[0] for row in query(db, "SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    assert "connection" in columns(db, "tasks") and "status" in columns(db, "questions")


async def test_a_migration_that_fails_leaves_the_file_at_its_old_version(tmp_path: Path) -> None:
    db = tmp_path / "mcpx.db"
    write_v1(db, extra_sql="CREATE TABLE events (x);")  # v2 cannot create its events table
    store = SqliteStore(db)
    try:
        with pytest.raises(sqlite3.OperationalError, match="events"):
            await store.open()
    finally:
        await store.close()
    assert user_version(db) == 0
    assert "connection" not in columns(db, "tasks") and "status" not in columns(db, "questions")
    assert query(db, "SELECT id FROM tasks") == [("t-old",)]
