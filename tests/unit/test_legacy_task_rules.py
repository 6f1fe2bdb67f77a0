"""mcpx.protocol.legacy_tasks: the 2025-11-25 task rules, fed plain records and `now`."""

from __future__ import annotations

from typing import Any

import pytest
from wire_schema import check_definition, check_frame

from mcpx.protocol import jsonrpc
from mcpx.protocol import legacy_tasks as rules
from mcpx.protocol.errors import InvalidParams, MethodNotFound
from mcpx.protocol.revisions import META_RELATED_TASK

from .taskfacts import CREATED, NOW, Facts

LEGACY = "2025-11-25"
TERMINAL = ["completed", "failed", "cancelled"]
LIVE = ["working", "input_required"]


def reply_is_valid(res: dict[str, Any], method: str) -> None:
    check_frame(jsonrpc.result(1, res), LEGACY, request_method=method)


# ---- who has tasks, who owns them ----------------------------------------------------------


def test_only_2025_11_25_sessions_have_tasks() -> None:
    assert rules.enabled("legacy", "2025-11-25")
    assert not rules.enabled("legacy", "2025-06-18")
    assert not rules.enabled("legacy", "2025-03-26")
    assert not rules.enabled("modern", "2026-07-28")


def test_tasks_methods_in_an_older_session_are_method_not_found() -> None:
    err = rules.not_enabled("2025-06-18")
    assert err.code == -32601 and "2025-06-18" in err.message


def test_the_owner_is_the_principal_when_authenticated_else_the_connection() -> None:
    assert rules.owner_key("alice", "c1") == "principal:alice"
    assert rules.owner_key(None, "c1") == "conn:c1"


def test_an_owned_live_task_is_returned_as_it_is() -> None:
    task = Facts()
    assert rules.owned(task, task.id, "conn:c1", NOW) is task


@pytest.mark.parametrize(
    "task",
    [None, Facts(owner="conn:other"), Facts(owner="principal:bob"), Facts(ttl_ms=1000)],
    ids=["missing", "other-connection", "other-principal", "expired"],
)
def test_foreign_expired_and_missing_tasks_get_the_same_unknown_task_error(task: Facts | None) -> None:
    with pytest.raises(InvalidParams) as exc:
        rules.owned(task, "t-1", "conn:c1", NOW)
    assert exc.value.code == -32602 and exc.value.message == "Unknown task: t-1"


def test_a_task_expires_exactly_at_created_plus_ttl() -> None:
    task = Facts(ttl_ms=NOW - CREATED)
    with pytest.raises(InvalidParams):
        rules.owned(task, task.id, "conn:c1", NOW)
    assert rules.owned(task, task.id, "conn:c1", NOW - 1) is task


def test_a_task_without_ttl_never_expires() -> None:
    task = Facts(ttl_ms=None)
    assert rules.owned(task, task.id, "conn:c1", NOW * 10) is task


# ---- task support and params.task ----------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "support"), [(None, "optional"), ("forbidden", "forbidden"), ("required", "required")]
)
def test_task_support_is_the_override_else_optional_whatever_the_upstream_declared(
    override: str | None, support: str
) -> None:
    """mcpx holds a task for any tool, and follows an upstream's required one for a host holding none."""
    assert rules.task_support(override) == support


def test_a_forbidden_tool_called_as_a_task_is_method_not_found() -> None:
    with pytest.raises(MethodNotFound):
        rules.check_support("forbidden", {"name": "t", "task": {}})
    rules.check_support("forbidden", {"name": "t"})


def test_a_required_tool_called_without_a_task_is_method_not_found() -> None:
    with pytest.raises(MethodNotFound) as exc:
        rules.check_support("required", {"name": "t"})
    assert exc.value.code == -32601  # L1 (tasks.mdx:117)
    rules.check_support("required", {"name": "t", "task": {}})


def test_an_optional_tool_runs_either_way() -> None:
    rules.check_support("optional", {"name": "t"})
    rules.check_support("optional", {"name": "t", "task": {"ttl": 5}})


@pytest.mark.parametrize(
    ("task", "ttl"),
    [({}, 600_000), ({"ttl": 5_000}, 5_000), ({"ttl": 10**9}, 86_400_000), ({"ttl": None}, 600_000)],
    ids=["default", "asked", "capped", "null"],
)
def test_the_ttl_is_the_hosts_ask_up_to_the_maximum(task: dict[str, Any], ttl: int) -> None:
    assert rules.task_ttl({"task": task}, 600_000, 86_400_000) == ttl


@pytest.mark.parametrize("task", [None, [], "x", {"ttl": 0}, {"ttl": -1}, {"ttl": 1.5}, {"ttl": True}, {"ttl": "9"}])
def test_a_malformed_params_task_is_invalid_params(task: object) -> None:
    with pytest.raises(InvalidParams):
        rules.task_ttl({"task": task}, 600_000, 86_400_000)


# ---- replies -------------------------------------------------------------------------------


def test_a_created_task_reply_is_a_schema_valid_create_task_result() -> None:
    res = rules.created_reply(Facts())
    assert res["task"]["taskId"] == "t-1" and res["task"]["status"] == "working"
    check_definition(res, "CreateTaskResult", LEGACY)


@pytest.mark.parametrize("status", LIVE + TERMINAL)
def test_tasks_get_answers_the_task_with_legacy_field_names(status: str) -> None:
    res = rules.get_reply(Facts(status=status, status_message="busy"))
    assert res["status"] == status and res["ttl"] == 600_000 and res["pollInterval"] == 1000
    assert "ttlMs" not in res and res["statusMessage"] == "busy"
    reply_is_valid(res, "tasks/get")


def test_tasks_result_of_a_completed_task_is_its_result_tagged_with_the_task() -> None:
    task = Facts(status="completed", result={"content": [{"type": "text", "text": "ok"}], "_meta": {"k": 1}})
    res = rules.result_reply(task, task.id)
    assert res["content"] == [{"type": "text", "text": "ok"}]
    assert res["_meta"] == {"k": 1, META_RELATED_TASK: {"taskId": "t-1"}}
    reply_is_valid(res, "tasks/result")


def test_tasks_result_keeps_an_is_error_result_as_a_result() -> None:
    task = Facts(status="failed", result={"content": [], "isError": True})
    assert rules.result_reply(task, task.id)["isError"] is True


def test_tasks_result_of_a_failed_task_is_its_json_rpc_error_with_the_task_in_data() -> None:
    task = Facts(status="failed", error={"code": -32000, "message": "boom", "data": {"why": "x"}})
    with pytest.raises(rules.TaskErrorReply) as exc:
        rules.result_reply(task, task.id)
    assert exc.value.error == {
        "code": -32000,
        "message": "boom",
        "data": {"why": "x", "_meta": {META_RELATED_TASK: {"taskId": "t-1"}}},
    }
    check_frame(jsonrpc.error(1, exc.value.error), LEGACY)


def test_tasks_result_leaves_non_object_error_data_alone() -> None:
    task = Facts(status="failed", error={"code": -32000, "message": "boom", "data": "text"})
    with pytest.raises(rules.TaskErrorReply) as exc:
        rules.result_reply(task, task.id)
    assert exc.value.error["data"] == "text"


@pytest.mark.parametrize(("status", "message"), [("cancelled", "task cancelled"), ("failed", "task failed")])
def test_tasks_result_without_a_stored_error_is_an_internal_error(status: str, message: str) -> None:
    with pytest.raises(rules.TaskErrorReply) as exc:
        rules.result_reply(Facts(status=status), "t-1")
    assert exc.value.error["code"] == -32603 and exc.value.error["message"] == message


def test_tasks_result_of_a_task_that_expired_while_waiting_is_unknown() -> None:
    with pytest.raises(InvalidParams, match="expired"):
        rules.result_reply(None, "t-1")


def test_tasks_list_returns_one_page_and_a_cursor_after_its_last_task() -> None:
    tasks = [Facts(id=f"t-{i}", created_ms=CREATED + i) for i in range(4)]
    res = rules.list_reply(tasks, page=3)
    assert [t["taskId"] for t in res["tasks"]] == ["t-0", "t-1", "t-2"]
    assert rules.decode_cursor(res["nextCursor"]) == (CREATED + 2, "t-2")
    reply_is_valid(res, "tasks/list")


def test_the_last_page_of_tasks_list_has_no_cursor() -> None:
    res = rules.list_reply([Facts(id=f"t-{i}") for i in range(3)], page=3)
    assert len(res["tasks"]) == 3 and "nextCursor" not in res
    assert rules.list_reply([]) == {"tasks": []}


def test_a_tasks_list_cursor_round_trips() -> None:
    assert rules.decode_cursor(rules.encode_cursor(123, "abc")) == (123, "abc")
    assert rules.decode_cursor(None) is None


@pytest.mark.parametrize(
    "cursor", [1, "", "!!!", rules.encode_cursor(1, "a")[:-3], "WyJ0b29scyIsIDEsICJhIl0", "WyJ0YXNrcyIsIHRydWUsICJhIl0"]
)
def test_a_foreign_or_corrupt_tasks_list_cursor_is_invalid_params(cursor: object) -> None:
    with pytest.raises(InvalidParams):
        rules.decode_cursor(cursor)


# ---- cancel --------------------------------------------------------------------------------


@pytest.mark.parametrize("status", TERMINAL)
def test_legacy_cancel_of_a_finished_task_is_rejected(status: str) -> None:
    with pytest.raises(InvalidParams) as exc:
        rules.check_cancellable(Facts(status=status))
    assert exc.value.code == -32602 and status in exc.value.message
    check_frame(jsonrpc.error_from(1, exc.value), LEGACY)


@pytest.mark.parametrize("status", LIVE)
def test_legacy_cancel_of_a_live_task_goes_ahead(status: str) -> None:
    rules.check_cancellable(Facts(status=status))


def test_legacy_cancel_answers_the_cancelled_task() -> None:
    res = rules.cancel_reply("t-1", Facts(status="cancelled", status_message="cancelled by the host"))
    assert res["status"] == "cancelled"
    reply_is_valid(res, "tasks/cancel")


def test_legacy_cancel_that_loses_the_race_with_completion_is_rejected() -> None:
    with pytest.raises(InvalidParams, match="already finished"):
        rules.cancel_reply("t-1", None)


# ---- notifications -------------------------------------------------------------------------


def test_a_status_notification_carries_the_task() -> None:
    note = rules.status_notification(Facts(status="input_required"))
    assert note["method"] == "notifications/tasks/status" and note["params"]["status"] == "input_required"
    check_frame(note, LEGACY)


def test_a_question_inside_a_task_is_tagged_with_it() -> None:
    assert rules.related_meta("t-9") == {META_RELATED_TASK: {"taskId": "t-9"}}
