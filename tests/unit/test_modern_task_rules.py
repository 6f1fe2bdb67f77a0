"""mcpx.protocol.modern_tasks: the 2026-07-28 tasks extension rules, fed plain records and `now`."""

from __future__ import annotations

from typing import Any

import pytest
from wire_schema import check_definition, check_frame

from mcpx.protocol import jsonrpc
from mcpx.protocol import modern_tasks as rules
from mcpx.protocol.errors import InvalidParams, MissingClientCapability
from mcpx.protocol.revisions import META_SUBSCRIPTION, TASKS_EXTENSION

from .taskfacts import CREATED, NOW, Facts

MODERN = "2026-07-28"
DECLARING: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}
QUESTION = {
    "method": "elicitation/create",
    "params": {"message": "Which?", "requestedSchema": {"type": "object", "properties": {}}},
}


def modern(**kw: Any) -> Facts:
    return Facts(era="modern", owner="modern:c1", **kw)


# ---- the extension and who may make a task -------------------------------------------------


@pytest.mark.parametrize(
    ("caps", "declares"),
    [(DECLARING, True), ({}, False), ({"extensions": {}}, False), ({"extensions": ["x"]}, False)],
)
def test_a_client_declares_the_extension_in_its_own_request(caps: dict[str, Any], declares: bool) -> None:
    assert rules.declares(caps) is declares


def test_tasks_methods_without_the_extension_are_missing_capability() -> None:
    with pytest.raises(MissingClientCapability) as exc:
        rules.require({})
    assert exc.value.code == -32021
    check_frame(jsonrpc.error_from(1, exc.value), MODERN)
    rules.require(DECLARING)


@pytest.mark.parametrize(
    ("caps", "support", "taskable"),
    [
        (DECLARING, "optional", True),
        (DECLARING, "required", True),
        (DECLARING, "forbidden", False),
        ({}, "optional", False),
        ({}, "forbidden", False),
    ],
)
def test_a_call_may_become_a_task_only_for_a_declaring_client_and_a_tool_that_allows_it(
    caps: dict[str, Any], support: str, taskable: bool
) -> None:
    assert rules.taskable(caps, support) is taskable


def test_a_required_tool_refuses_a_client_that_cannot_take_a_task() -> None:
    with pytest.raises(MissingClientCapability) as exc:
        rules.taskable({}, "required")
    assert exc.value.data == {"requiredCapabilities": DECLARING}


def test_the_owner_is_the_principal_when_authenticated_else_the_modern_host() -> None:
    assert rules.owner_key("alice", "c1") == "principal:alice"
    assert rules.owner_key(None, "c1") == "modern:c1"


# ---- finding a task ------------------------------------------------------------------------


def test_without_auth_the_task_id_alone_reaches_the_task() -> None:
    task = modern()
    assert rules.visible(task, task.id, "modern:someone-else", NOW) is task


def test_a_principals_task_is_visible_only_to_that_principal() -> None:
    task = Facts(era="modern", owner="principal:alice")
    assert rules.visible(task, task.id, "principal:alice", NOW) is task
    with pytest.raises(InvalidParams):
        rules.visible(task, task.id, "principal:bob", NOW)
    with pytest.raises(InvalidParams):
        rules.visible(task, task.id, "modern:c1", NOW)


@pytest.mark.parametrize(
    "task", [None, Facts(era="legacy"), modern(ttl_ms=NOW - CREATED)], ids=["missing", "legacy-task", "expired"]
)
def test_missing_legacy_and_expired_tasks_are_unknown(task: Facts | None) -> None:
    with pytest.raises(InvalidParams) as exc:
        rules.visible(task, "t-1", "modern:c1", NOW)
    assert exc.value.code == -32602 and exc.value.message == "Unknown task: t-1"


# ---- DetailedTask --------------------------------------------------------------------------


def test_a_working_task_is_detailed_with_the_modern_field_names() -> None:
    res = rules.detailed(modern())
    assert res["status"] == "working" and res["ttlMs"] == 600_000 and res["pollIntervalMs"] == 1000
    assert not {"ttl", "pollInterval", "result", "error", "inputRequests"} & res.keys()
    check_definition(res, "ext-tasks:DetailedTask", MODERN)


def test_a_completed_task_inlines_its_result_with_its_own_result_type() -> None:
    res = rules.detailed(modern(status="completed", result={"content": [{"type": "text", "text": "ok"}]}))
    assert res["result"] == {"content": [{"type": "text", "text": "ok"}], "resultType": "complete"}
    check_definition(res, "ext-tasks:DetailedTask", MODERN)


def test_a_failed_task_carries_its_error() -> None:
    res = rules.detailed(modern(status="failed", error={"code": -32000, "message": "boom"}))
    assert res["error"] == {"code": -32000, "message": "boom"}
    check_definition(res, "ext-tasks:DetailedTask", MODERN)


def test_a_failed_task_without_a_stored_error_gets_an_internal_error_from_its_message() -> None:
    res = rules.detailed(modern(status="failed", status_message="daemon restarted"))
    assert res["error"] == {"code": -32603, "message": "daemon restarted"}


def test_an_input_required_task_lists_every_outstanding_request() -> None:
    res = rules.detailed(modern(status="input_required", input_requests={"q1": QUESTION, "q2": QUESTION}))
    assert res["inputRequests"] == {"q1": QUESTION, "q2": QUESTION}
    check_definition(res, "ext-tasks:DetailedTask", MODERN)


def test_a_cancelled_task_carries_neither_result_nor_error() -> None:
    res = rules.detailed(modern(status="cancelled", status_message="cancelled by the host"))
    assert not {"result", "error", "inputRequests"} & res.keys()
    check_definition(res, "ext-tasks:DetailedTask", MODERN)


def test_a_call_that_became_a_task_answers_the_task_as_a_create_task_result() -> None:
    res = rules.task_handle(modern())
    assert res["resultType"] == "task" and res["taskId"] == "t-1"
    check_definition(res, "ext-tasks:CreateTaskResult", MODERN)


def test_an_input_round_before_any_task_names_the_held_call() -> None:
    res = rules.input_round({"q1": QUESTION}, "park-1")
    assert res == {
        "resultType": "input_required",
        "inputRequests": {"q1": QUESTION},
        "requestState": {"mcpxPark": "park-1"},
    }


# ---- tasks/update, tasks/cancel, listen ----------------------------------------------------


def test_tasks_update_takes_the_input_responses_object() -> None:
    answers = {"q1": {"action": "accept", "content": {}}}
    assert rules.update_responses({"taskId": "t-1", "inputResponses": answers}) == answers


@pytest.mark.parametrize("responses", [None, [], "yes"])
def test_tasks_update_without_an_input_responses_object_is_invalid_params(responses: object) -> None:
    with pytest.raises(InvalidParams):
        rules.update_responses({"taskId": "t-1", "inputResponses": responses})
    with pytest.raises(InvalidParams):
        rules.update_responses({"taskId": "t-1"})


@pytest.mark.parametrize(("status", "needed"), [("working", True), ("input_required", True)])
def test_modern_cancel_of_a_live_task_cancels_it(status: str, needed: bool) -> None:
    assert rules.cancel_needed(modern(status=status)) is needed


@pytest.mark.parametrize("status", ["completed", "failed", "cancelled"])
def test_modern_cancel_of_a_finished_task_is_only_an_ack(status: str) -> None:
    assert rules.cancel_needed(modern(status=status)) is False


def test_listen_task_ids_must_be_a_list_of_strings() -> None:
    assert rules.listen_ids(["a", "b"]) == ["a", "b"]
    assert rules.listen_ids([]) == []
    for bad in (None, "a", ["a", 1], {"a": 1}):
        with pytest.raises(InvalidParams):
            rules.listen_ids(bad)


def test_a_task_notification_is_the_detailed_task_tagged_with_the_subscription() -> None:
    note = rules.task_notification(modern(status="completed", result={"content": []}), "sub-1")
    assert note["method"] == "notifications/tasks"
    assert note["params"]["_meta"] == {META_SUBSCRIPTION: "sub-1"} and note["params"]["result"]["content"] == []
    check_frame(note, MODERN)
