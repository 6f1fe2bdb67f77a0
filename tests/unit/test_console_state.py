"""console/state.py: the feed folded into what the console shows, with plain asserts."""

from __future__ import annotations

from typing import Any

from console.state import ConsoleState


def conn(cid: str, kind: str = "session", name: str = "ide", opened: int = 1) -> dict[str, Any]:
    return {
        "id": cid,
        "kind": kind,
        "transport": "http",
        "revision": "2025-11-25" if kind == "session" else None,
        "clientInfo": {"name": name, "version": "1"},
        "principal": None,
        "peer": "127.0.0.1",
        "shimPid": None,
        "openedMs": opened,
        "lastSeenMs": opened,
        "closedMs": None,
        "closeReason": None,
    }


def summary(tid: str, cid: str, status: str = "working", created: int = 10) -> dict[str, Any]:
    return {
        "id": tid,
        "status": status,
        "statusMessage": None,
        "tool": "slow",
        "upstream": "fx",
        "era": "legacy",
        "connectionId": cid,
        "owner": "conn",
        "createdMs": created,
        "updatedMs": created,
        "ttlMs": 60_000,
        "expiresMs": created + 60_000,
        "pollIntervalMs": 1000,
        "upstreamTaskId": None,
        "needsInput": False,
    }


def question(qid: str, cid: str, task: str | None = None, created: int = 20) -> dict[str, Any]:
    return {
        "id": qid,
        "kind": "elicitation",
        "method": "elicitation/create",
        "upstream": "fx",
        "params": {"message": "Deploy?", "requestedSchema": {"type": "object", "properties": {}}},
        "status": "open",
        "createdMs": created,
        "expiresMs": created + 600_000,
        "taskId": task,
        "connectionId": cid,
        "inputKey": None,
        "hostCanAnswer": False,
        "answeredBy": None,
        "answer": None,
        "error": None,
        "closedMs": None,
        "reason": None,
    }


def snapshot(seq: int = 5, **kw: Any) -> dict[str, Any]:
    return {"type": "snapshot", "seq": seq, "connections": [], "tasks": [], "questions": [], "operators": [], **kw}


def event(seq: int, kind: str, data: dict[str, Any], **ids: str) -> dict[str, Any]:
    return {"type": "event", "seq": seq, "ts": 1000 + seq, "kind": kind, "data": data, **ids}


def test_a_snapshot_replaces_everything_and_says_so() -> None:
    s = ConsoleState()
    s.apply(snapshot(connections=[conn("c1")], tasks=[summary("t1", "c1")]))
    changes = s.apply(snapshot(seq=9, connections=[conn("c2")], tasks=[summary("t2", "c2")]))
    assert changes.reset and s.seq == 9
    assert set(s.hosts) == {"c2"} and set(s.tasks) == {"t2"}
    assert s.host_counts("c1")["working"] == 0 and s.host_counts("c2")["working"] == 1


def test_an_event_at_or_below_the_last_sequence_is_applied_once_only() -> None:
    s = ConsoleState()
    s.apply(snapshot(seq=5, connections=[conn("c1")]))
    created = event(
        6, "task.created", {"status": "working", "tool": "slow", "upstream": "fx"}, taskId="t1", connectionId="c1"
    )
    assert s.apply(created).tasks == {"t1"}
    assert s.tasks["t1"].created_ms == 1006  # no createdMs (an event from before it had one): the event's time
    assert s.apply(created).empty  # a resumed feed repeating itself changes nothing
    assert s.apply(event(5, "task.created", {}, taskId="old")).empty
    assert (s.applied, s.ignored) == (1, 2) and list(s.tasks) == ["t1"]


def test_task_events_move_a_row_and_its_hosts_counts() -> None:
    s = ConsoleState()
    s.apply(snapshot(connections=[conn("c1")]))
    data = {"status": "working", "tool": "slow", "upstream": "fx", "createdMs": 1001}
    s.apply(event(6, "task.created", data, taskId="t1", connectionId="c1"))
    assert s.tasks["t1"].created_ms == 1001  # the row's own time, as /v1 and a snapshot show it
    ch = s.apply(
        event(
            7,
            "task.status",
            {"status": "input_required", "previous": "working", "statusMessage": "waiting"},
            taskId="t1",
        )
    )
    assert ch.tasks == {"t1"} and ch.hosts == {"c1"}
    assert s.tasks["t1"].status_message == "waiting" and s.host_needs_input("c1")
    s.apply(
        event(
            8, "task.status", {"status": "completed", "previous": "input_required", "statusMessage": None}, taskId="t1"
        )
    )
    assert s.host_counts("c1") == {"working": 0, "input_required": 0, "completed": 1, "failed": 0, "cancelled": 0}
    assert s.host_counts(None)["completed"] == 1 and not s.host_needs_input("c1")


def test_a_cancel_request_is_shown_until_the_final_status_arrives() -> None:
    s = ConsoleState()
    s.apply(snapshot(connections=[conn("c1")], tasks=[summary("t1", "c1")]))
    s.apply(event(6, "task.cancel_requested", {"status": "working"}, taskId="t1", by="operator:olga"))
    assert s.tasks["t1"].cancel_requested_by == "operator:olga" and not s.tasks["t1"].terminal
    s.apply(
        event(7, "task.status", {"status": "cancelled", "previous": "working", "statusMessage": "by olga"}, taskId="t1")
    )
    assert s.tasks["t1"].terminal


def test_an_expired_task_leaves_the_table_and_its_hosts_counts() -> None:
    s = ConsoleState()
    s.apply(snapshot(connections=[conn("c1")], tasks=[summary("t1", "c1", "completed")]))
    ch = s.apply(event(6, "task.expired", {}, taskId="t1", connectionId="c1"))
    assert ch.removed_tasks == {"t1"} and "t1" not in s.tasks and s.host_counts("c1")["completed"] == 0


def test_questions_open_and_close_and_the_queue_is_oldest_first() -> None:
    s = ConsoleState()
    s.apply(snapshot(connections=[conn("c1"), conn("c2", "stateless", "agent", 2)], tasks=[summary("t1", "c2")]))
    ch = s.apply(event(6, "question.opened", question("q-late", "c1", created=50), questionId="q-late"))
    assert ch.new_questions == ["q-late"] and ch.hosts == {"c1"}
    s.apply(event(7, "question.opened", question("q-early", "c2", task="t1", created=30), questionId="q-early"))
    assert [q.id for q in s.answer_queue()] == ["q-early", "q-late"]
    assert s.needs_input(s.tasks["t1"]) and s.host_needs_input("c2")
    ch = s.apply(event(8, "question.answered", {"by": "operator:olga", "action": "accept"}, questionId="q-early"))
    assert ch.tasks == {"t1"} and "q-early" not in s.questions and not s.needs_input(s.tasks["t1"])
    s.apply(event(9, "question.expired", {"reason": "the call ended"}, questionId="q-late"))
    assert s.answer_queue() == []


def test_a_closed_host_stays_shown_while_it_owns_tasks() -> None:
    s = ConsoleState()
    s.apply(snapshot(connections=[conn("c1"), conn("c2", opened=2)], tasks=[summary("t1", "c1")]))
    s.apply(event(6, "connection.closed", {"reason": "session deleted by the host"}, connectionId="c1"))
    s.apply(event(7, "connection.closed", {"reason": "idle"}, connectionId="c2"))
    shown = s.hosts_shown()
    assert (
        [h.id for h in shown] == ["c1"] and not shown[0].open and shown[0].close_reason == "session deleted by the host"
    )


def test_the_visible_tasks_filter_by_host_status_and_text_and_sort() -> None:
    s = ConsoleState()
    tasks = [summary("a1", "c1", "working", 10), summary("b2", "c1", "failed", 20), summary("c3", "c2", "working", 30)]
    tasks[1]["tool"] = "deploy"
    s.apply(snapshot(connections=[conn("c1"), conn("c2", name="agent")], tasks=tasks))
    assert [t.id for t in s.visible()] == ["c3", "b2", "a1"]  # newest first
    assert [t.id for t in s.visible(descending=False)] == ["a1", "b2", "c3"]
    assert [t.id for t in s.visible(host="c1")] == ["b2", "a1"]
    assert [t.id for t in s.visible(statuses=["working"])] == ["c3", "a1"]
    assert [t.id for t in s.visible(text="DEPLOY")] == ["b2"]
    assert [t.id for t in s.visible(text="agent")] == ["c3"]  # the host's name counts too
    assert [t.id for t in s.visible(sort="status", descending=False)] == ["a1", "c3", "b2"]


def test_a_reset_clears_the_sequence_so_the_next_snapshot_is_taken() -> None:
    s = ConsoleState()
    s.apply(snapshot(seq=40))
    s.apply({"type": "reset", "reason": "trimmed"})
    assert s.seq is None
    s.apply(snapshot(seq=3))
    assert s.seq == 3
