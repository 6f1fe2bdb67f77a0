"""Tests for tests/wire_schema.py: it accepts the upstream examples and known-good frames, and it
rejects frames that break the schema (or a spec MUST the schema cannot express)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import wire_schema
from shared_folder import SPEC
from wire_schema import check_definition, check_frame, check_wire_log, result_definitions

EXAMPLES_2026 = SPEC / "schema" / "2026-07-28" / "examples"

TASK_ID = "786512e2-9e0d-44bd-8f29-789f320fe840"
META_2026 = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "host", "version": "1.0.0"},
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
}


def request(method: str, params: dict, id_: object = "ex-1") -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def notification(method: str, params: dict) -> dict:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def response(result: dict, id_: object = "ex-1") -> dict:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def error(err: dict, id_: object = 1) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "error": err}


def rejected(frame: dict, revision: str, request_method: str | None = None) -> str:
    """Assert the frame is rejected; return the failure message."""
    with pytest.raises(AssertionError) as info:
        check_frame(frame, revision, request_method=request_method)
    return str(info.value)


# ---------------------------------------------------------------------------------------------
# Upstream 2026-07-28 examples: folder name = schema definition. Each example is turned into a
# full JSON-RPC frame (if it is not one already) the way that definition travels on the wire.
# ---------------------------------------------------------------------------------------------


def _input_required(input_requests: dict) -> dict:
    return response({"resultType": "input_required", "inputRequests": input_requests})


def _retry_with(input_responses: dict) -> dict:
    return request(
        "tools/call", {"_meta": META_2026, "name": "t", "inputResponses": input_responses, "requestState": "s"}
    )


def _discover(capabilities: dict) -> dict:
    return response(
        {
            "resultType": "complete",
            "supportedVersions": ["2026-07-28"],
            "capabilities": capabilities,
            "ttlMs": 0,
            "cacheScope": "public",
        }
    )


# folder -> function(example) -> (frame, request_method)
WRAPPERS = {
    "CallToolRequest": lambda ex: (ex, None),
    "CallToolRequestParams": lambda ex: (request("tools/call", ex), None),
    "CallToolResult": lambda ex: (response(ex), "tools/call"),
    "CallToolResultResponse": lambda ex: (ex, "tools/call"),
    "CancelledNotification": lambda ex: (ex, None),
    "CancelledNotificationParams": lambda ex: (notification("notifications/cancelled", ex), None),
    "ClientCapabilities": lambda ex: (
        request("tools/list", {"_meta": {**META_2026, "io.modelcontextprotocol/clientCapabilities": ex}}),
        None,
    ),
    "DiscoverRequest": lambda ex: (ex, None),
    "DiscoverResult": lambda ex: (response(ex), "server/discover"),
    "DiscoverResultResponse": lambda ex: (ex, "server/discover"),
    # In 2026 a server never sends requests; elicitation travels as an MRTR input request.
    "ElicitRequest": lambda ex: (_input_required({"k": ex}), "tools/call"),
    "ElicitRequestFormParams": lambda ex: (
        _input_required({"k": {"method": "elicitation/create", "params": ex}}),
        "tools/call",
    ),
    "ElicitRequestURLParams": lambda ex: (
        _input_required({"k": {"method": "elicitation/create", "params": ex}}),
        "tools/call",
    ),
    "ElicitResult": lambda ex: (_retry_with({"k": ex}), None),
    "HeaderMismatchError": lambda ex: (ex, None),
    "InputRequests": lambda ex: (_input_required(ex), "tools/call"),
    "InputRequiredResult": lambda ex: (response(ex), "tools/call"),
    "InputResponses": lambda ex: (_retry_with(ex), None),
    "InternalError": lambda ex: (error(ex), None),
    "InvalidParamsError": lambda ex: (error(ex), None),
    "MethodNotFoundError": lambda ex: (error(ex), None),
    "MissingRequiredClientCapabilityError": lambda ex: (ex, None),
    # JSON-RPC 2.0 answers a parse error with "id": null, but the MCP schemas type RequestId as
    # string|integer and make `id` optional on error responses: omit it instead.
    "ParseError": lambda ex: ({"jsonrpc": "2.0", "error": ex}, None),
    "ProgressNotification": lambda ex: (ex, None),
    "ServerCapabilities": lambda ex: (_discover(ex), "server/discover"),
    "SubscriptionsAcknowledgedNotification": lambda ex: (ex, None),
    "SubscriptionsListenRequest": lambda ex: (ex, None),
    "SubscriptionsListenResult": lambda ex: (
        response(ex, id_=ex["_meta"]["io.modelcontextprotocol/subscriptionId"]),
        "subscriptions/listen",
    ),
    "SubscriptionsListenResultResponse": lambda ex: (ex, "subscriptions/listen"),
    "ToolListChangedNotification": lambda ex: (ex, None),
    "UnsupportedProtocolVersionError": lambda ex: (ex, None),
}

EXAMPLE_FILES = sorted(EXAMPLES_2026.glob("*/*.json")) if EXAMPLES_2026.is_dir() else []


def test_all_48_upstream_2026_examples_are_collected():
    # Fails, not skips, without the spec copy: the examples below would silently be none.
    assert len(EXAMPLE_FILES) == 48, f"{len(EXAMPLE_FILES)} spec examples under {EXAMPLES_2026}: set MCPX_SHARED"


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_upstream_2026_example_validates_as_its_definition_and_as_a_wire_frame(path: Path):
    folder = path.parent.name
    example = json.loads(path.read_text(encoding="utf-8"))
    check_definition(example, folder, "2026-07-28")
    assert folder in WRAPPERS, f"new example folder {folder}: add a wrapper to WRAPPERS"
    frame, request_method = WRAPPERS[folder](copy.deepcopy(example))
    check_frame(frame, "2026-07-28", request_method=request_method)


# ---------------------------------------------------------------------------------------------
# Known-good frames (from DIGEST §5 and the spec pages)
# ---------------------------------------------------------------------------------------------

INIT_RESULT_2025 = response(
    {
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}, "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}},
        "serverInfo": {"name": "mcpx", "version": "0.1.0"},
    },
    id_=1,
)
TASK_2025 = {
    "taskId": TASK_ID,
    "status": "working",
    "createdAt": "2025-11-25T10:30:00Z",
    "lastUpdatedAt": "2025-11-25T10:40:00Z",
    "ttl": 60000,
    "pollInterval": 5000,
}
CREATE_TASK_2025 = response({"task": dict(TASK_2025)}, id_=2)
CREATE_TASK_2026 = response(
    {
        "resultType": "task",
        "taskId": TASK_ID,
        "status": "working",
        "createdAt": "2025-11-25T10:30:00Z",
        "lastUpdatedAt": "2025-11-25T10:40:00Z",
        "ttlMs": 60000,
        "pollIntervalMs": 5000,
    },
    id_=2,
)
GET_TASK_COMPLETED_2026 = response(
    {
        "resultType": "complete",
        "taskId": TASK_ID,
        "status": "completed",
        "createdAt": "2025-11-25T10:30:00Z",
        "lastUpdatedAt": "2025-11-25T10:40:00Z",
        "ttlMs": 60000,
        "result": {"resultType": "complete", "content": [{"type": "text", "text": "Hello, Luca!"}], "isError": False},
    },
    id_=8,
)
GET_TASK_INPUT_REQUIRED_2026 = response(
    {
        "resultType": "complete",
        "taskId": TASK_ID,
        "status": "input_required",
        "createdAt": "2025-11-25T10:30:00Z",
        "lastUpdatedAt": "2025-11-25T10:40:00Z",
        "ttlMs": 60000,
        "pollIntervalMs": 5000,
        "inputRequests": {
            "name": {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": "Please enter your name.",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}},
                        "required": ["name"],
                    },
                },
            }
        },
    },
    id_=4,
)
DISCOVER_2026 = response(
    {
        "resultType": "complete",
        "supportedVersions": ["2026-07-28", "2025-11-25"],
        "capabilities": {"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
        "ttlMs": 0,
        "cacheScope": "public",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "mcpx", "version": "0.1.0"}},
    },
    id_="d1",
)
TASK_NOTIFICATION_2026 = notification(
    "notifications/tasks",
    {
        "taskId": TASK_ID,
        "status": "completed",
        "createdAt": "2025-11-25T10:30:00Z",
        "lastUpdatedAt": "2025-11-25T10:40:00Z",
        "ttlMs": 60000,
        "result": {"resultType": "complete", "content": [{"type": "text", "text": "done"}], "isError": False},
        "_meta": {"io.modelcontextprotocol/subscriptionId": "L1"},
    },
)

VALID = [
    pytest.param(INIT_RESULT_2025, "2025-11-25", "initialize", id="2025 initialize result"),
    pytest.param(CREATE_TASK_2025, "2025-11-25", "tools/call", id="2025 CreateTaskResult for tools/call"),
    pytest.param(
        response({"content": [{"type": "text", "text": "hi"}], "isError": False}),
        "2025-11-25",
        "tools/call",
        id="2025 CallToolResult",
    ),
    pytest.param(response(dict(TASK_2025), id_=3), "2025-11-25", "tasks/get", id="2025 tasks/get result"),
    pytest.param(
        response({**TASK_2025, "status": "cancelled"}, id_=10),
        "2025-11-25",
        "tasks/cancel",
        id="2025 tasks/cancel result",
    ),
    pytest.param(
        response({"tasks": [dict(TASK_2025)], "nextCursor": "c2"}),
        "2025-11-25",
        "tasks/list",
        id="2025 tasks/list result",
    ),
    pytest.param(
        response(
            {
                "content": [{"type": "text", "text": "Hello, Luca!"}],
                "isError": False,
                "_meta": {"io.modelcontextprotocol/related-task": {"taskId": TASK_ID}},
            },
            id_=5,
        ),
        "2025-11-25",
        "tasks/result",
        id="2025 tasks/result with related-task",
    ),
    pytest.param(
        notification("notifications/tasks/status", {**TASK_2025, "status": "completed"}),
        "2025-11-25",
        None,
        id="2025 notifications/tasks/status",
    ),
    pytest.param(response({}), "2025-11-25", "ping", id="2025 ping result"),
    pytest.param(
        error({"code": -32602, "message": "Cannot cancel task: already in terminal status 'completed'"}),
        "2025-11-25",
        "tasks/cancel",
        id="2025 -32602 error",
    ),
    pytest.param(
        request(
            "elicitation/create",
            {
                "mode": "form",
                "message": "Please enter your name.",
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
                "_meta": {"io.modelcontextprotocol/related-task": {"taskId": TASK_ID}},
            },
            id_="s-1",
        ),
        "2025-11-25",
        None,
        id="2025 server-to-client elicitation request",
    ),
    pytest.param(
        {**INIT_RESULT_2025, "result": {**INIT_RESULT_2025["result"], "protocolVersion": "2025-03-26"}},
        "2025-03-26",
        "initialize",
        id="2025-03-26 initialize result (checked with 2025-11-25 schema)",
    ),
    pytest.param(CREATE_TASK_2026, "2026-07-28", "tools/call", id="2026 CreateTaskResult"),
    pytest.param(GET_TASK_COMPLETED_2026, "2026-07-28", "tasks/get", id="2026 GetTaskResult with inline result"),
    pytest.param(GET_TASK_INPUT_REQUIRED_2026, "2026-07-28", "tasks/get", id="2026 GetTaskResult input_required"),
    pytest.param(
        response(
            {
                "resultType": "complete",
                "taskId": TASK_ID,
                "status": "failed",
                "createdAt": "2025-11-25T10:30:00Z",
                "lastUpdatedAt": "2025-11-25T10:40:00Z",
                "ttlMs": 60000,
                "error": {"code": -32603, "message": "API rate limit exceeded"},
            },
            id_=9,
        ),
        "2026-07-28",
        "tasks/get",
        id="2026 GetTaskResult failed with inline error",
    ),
    pytest.param(response({"resultType": "complete"}, id_=5), "2026-07-28", "tasks/update", id="2026 UpdateTaskResult"),
    pytest.param(
        response({"resultType": "complete"}, id_=10), "2026-07-28", "tasks/cancel", id="2026 CancelTaskResult"
    ),
    pytest.param(TASK_NOTIFICATION_2026, "2026-07-28", None, id="2026 notifications/tasks with subscriptionId"),
    pytest.param(DISCOVER_2026, "2026-07-28", "server/discover", id="2026 DiscoverResult"),
    pytest.param(
        request("tasks/get", {"taskId": TASK_ID, "_meta": META_2026}, id_=3),
        "2026-07-28",
        None,
        id="2026 tasks/get request",
    ),
    pytest.param(
        error(
            {
                "code": -32021,
                "message": "Missing required client capability",
                "data": {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}},
            },
            id_=12,
        ),
        "2026-07-28",
        "tasks/get",
        id="2026 -32021 error",
    ),
    pytest.param(
        error({"code": -32601, "message": "Method not found"}, id_=11),
        "2026-07-28",
        "tasks/list",
        id="2026 -32601 for removed tasks/list",
    ),
]


@pytest.mark.parametrize(("frame", "revision", "request_method"), VALID)
def test_valid_frame_is_accepted(frame, revision, request_method):
    check_frame(frame, revision, request_method=request_method)


# ---------------------------------------------------------------------------------------------
# Frames the validator must reject
# ---------------------------------------------------------------------------------------------


def test_2026_tools_call_result_without_result_type_is_rejected():
    msg = rejected(
        response({"content": [{"type": "text", "text": "hi"}], "isError": False}), "2026-07-28", "tools/call"
    )
    assert "resultType" in msg


def test_2026_result_without_result_type_is_rejected_even_for_an_unmapped_method():
    rejected(response({}), "2026-07-28", None)
    rejected(response({"x": 1}), "2026-07-28", "vendor/thing")


def test_2025_create_task_result_missing_created_at_is_rejected_with_path_and_definition():
    frame = copy.deepcopy(CREATE_TASK_2025)
    del frame["result"]["task"]["createdAt"]
    msg = rejected(frame, "2025-11-25", "tools/call")
    assert "$defs/CreateTaskResult" in msg
    assert "$.result.task" in msg
    assert "'createdAt' is a required property" in msg
    assert TASK_ID in msg  # the frame itself is shown


def test_2026_create_task_result_with_ttl_instead_of_ttl_ms_is_rejected():
    # The schema does not forbid an extra `ttl` key (Result is open); it rejects the frame
    # because the required `ttlMs` is missing.
    frame = copy.deepcopy(CREATE_TASK_2026)
    frame["result"]["ttl"] = frame["result"].pop("ttlMs")
    msg = rejected(frame, "2026-07-28", "tools/call")
    assert "'ttlMs' is a required property" in msg


def test_2026_create_task_result_with_legacy_nested_task_shape_is_rejected():
    rejected(response({"resultType": "task", "task": dict(TASK_2025)}), "2026-07-28", "tools/call")


def test_2026_discover_result_missing_ttl_ms_is_rejected():
    frame = copy.deepcopy(DISCOVER_2026)
    del frame["result"]["ttlMs"]
    msg = rejected(frame, "2026-07-28", "server/discover")
    assert "$defs/DiscoverResult" in msg and "'ttlMs' is a required property" in msg


def test_2026_unsupported_version_error_without_data_supported_is_rejected():
    frame = error({"code": -32022, "message": "Unsupported protocol version", "data": {"requested": "1900-01-01"}})
    msg = rejected(frame, "2026-07-28")
    assert "UnsupportedProtocolVersionError" in msg and "'supported' is a required property" in msg


def test_2026_missing_capability_error_without_required_capabilities_is_rejected():
    msg = rejected(error({"code": -32021, "message": "Missing capability", "data": {}}), "2026-07-28")
    assert "MissingRequiredClientCapabilityError" in msg


def test_2026_header_mismatch_error_is_checked_against_its_definition():
    check_frame(error({"code": -32020, "message": "Header mismatch"}), "2026-07-28")
    rejected(error({"code": -32020}), "2026-07-28")


def test_2026_legacy_error_codes_are_rejected():
    assert "-32042" in rejected(
        error({"code": -32042, "message": "URL elicitation required", "data": {"elicitations": []}}), "2026-07-28"
    )
    rejected(error({"code": -32002, "message": "Resource not found"}), "2026-07-28")
    rejected(error({"code": -32050, "message": "made-up reserved code"}), "2026-07-28")


def test_2025_url_elicitation_error_requires_elicitations():
    check_frame(
        error({"code": -32042, "message": "URL elicitation required", "data": {"elicitations": []}}), "2025-11-25"
    )
    rejected(error({"code": -32042, "message": "URL elicitation required"}), "2025-11-25")


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_progress_notification_without_progress_token_is_rejected(revision):
    msg = rejected(notification("notifications/progress", {"progress": 50, "total": 100}), revision)
    assert "$defs/ProgressNotification" in msg and "progressToken" in msg


def test_2025_initialize_result_without_server_info_is_rejected():
    frame = copy.deepcopy(INIT_RESULT_2025)
    del frame["result"]["serverInfo"]
    rejected(frame, "2025-11-25", "initialize")


def test_2025_create_task_result_is_rejected_for_hosts_older_than_2025_11_25():
    check_frame(CREATE_TASK_2025, "2025-11-25", request_method="tools/call")
    rejected(CREATE_TASK_2025, "2025-06-18", "tools/call")


def test_2025_tasks_result_without_related_task_meta_is_rejected():
    msg = rejected(
        response({"content": [{"type": "text", "text": "x"}], "isError": False}), "2025-11-25", "tasks/result"
    )
    assert "related-task" in msg


def test_2025_tasks_result_must_be_a_call_tool_result():
    rejected(
        response({"_meta": {"io.modelcontextprotocol/related-task": {"taskId": TASK_ID}}}), "2025-11-25", "tasks/result"
    )


def test_2026_get_task_result_with_result_type_task_is_rejected():
    # DIGEST X1: the examples show "task" on tasks/get, the prose says "complete".
    frame = copy.deepcopy(GET_TASK_COMPLETED_2026)
    frame["result"]["resultType"] = "task"
    assert "X1" in rejected(frame, "2026-07-28", "tasks/get")


def test_2026_completed_task_without_inline_result_is_rejected():
    frame = copy.deepcopy(GET_TASK_COMPLETED_2026)
    del frame["result"]["result"]
    rejected(frame, "2026-07-28", "tasks/get")


def test_2026_input_required_task_without_input_requests_is_rejected():
    frame = copy.deepcopy(GET_TASK_INPUT_REQUIRED_2026)
    del frame["result"]["inputRequests"]
    assert "'inputRequests' is a required property" in rejected(frame, "2026-07-28", "tasks/get")


def test_2026_inline_task_result_without_result_type_is_rejected():
    # DIGEST X10: mcpx as a server includes resultType inside the inlined CallToolResult.
    frame = copy.deepcopy(GET_TASK_COMPLETED_2026)
    del frame["result"]["result"]["resultType"]
    assert "$.result.result" in rejected(frame, "2026-07-28", "tasks/get")
    note = copy.deepcopy(TASK_NOTIFICATION_2026)
    del note["params"]["result"]["resultType"]
    assert "$.params.result" in rejected(note, "2026-07-28")


def test_2026_task_notification_without_subscription_id_is_rejected():
    note = copy.deepcopy(TASK_NOTIFICATION_2026)
    del note["params"]["_meta"]
    assert "subscriptionId" in rejected(note, "2026-07-28")


def test_2026_unknown_result_type_is_rejected():
    assert "unrecognized resultType" in rejected(response({"resultType": "partial"}), "2026-07-28", "tools/call")


def test_2026_input_required_is_rejected_for_methods_outside_mrtr():
    frame = response({"resultType": "input_required", "requestState": "abc"})
    check_frame(frame, "2026-07-28", request_method="tools/call")
    assert "mrtr" in rejected(frame, "2026-07-28", "tools/list")


def test_2026_input_required_result_with_neither_requests_nor_state_is_rejected():
    rejected(response({"resultType": "input_required"}), "2026-07-28", "tools/call")


def test_2026_request_without_meta_is_rejected():
    rejected(request("tools/call", {"name": "greet"}), "2026-07-28")


def test_2026_tasks_get_request_is_checked_against_the_extension_schema():
    assert "ext-tasks schema, $defs/GetTaskRequest" in rejected(
        request("tasks/get", {"_meta": META_2026}), "2026-07-28"
    )


def test_2026_task_request_without_meta_is_rejected_although_the_extension_schema_allows_it():
    # DIGEST X7: core requires _meta on every request; ext-tasks' GetTaskRequest does not.
    msg = rejected(request("tasks/cancel", {"taskId": TASK_ID}), "2026-07-28")
    assert "$defs/RequestParams" in msg and "'_meta' is a required property" in msg


def test_2026_listen_task_ids_must_be_a_list_of_strings():
    listen = request("subscriptions/listen", {"_meta": META_2026, "notifications": {"taskIds": [TASK_ID]}}, id_="L1")
    check_frame(listen, "2026-07-28")
    listen["params"]["notifications"]["taskIds"] = TASK_ID
    assert "TaskSubscriptionNotifications" in rejected(listen, "2026-07-28")
    ack = notification(
        "notifications/subscriptions/acknowledged",
        {"notifications": {"taskIds": [1]}, "_meta": {"io.modelcontextprotocol/subscriptionId": "L1"}},
    )
    assert "TaskSubscriptionAcknowledgedNotifications" in rejected(ack, "2026-07-28")


def test_notification_method_sent_with_an_id_is_rejected():
    frame = {**notification("notifications/progress", {"progressToken": "t", "progress": 1}), "id": 1}
    rejected(frame, "2026-07-28")


def test_frame_that_is_not_json_rpc_is_rejected():
    rejected({"jsonrpc": "2.0", "id": 1}, "2025-11-25")
    rejected({"id": 1, "result": {}}, "2025-11-25")  # no jsonrpc
    rejected({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "m"}}, "2025-11-25")


def test_error_response_with_null_id_is_rejected_and_without_id_is_accepted():
    parse_error = {"code": -32700, "message": "Parse error"}
    check_frame({"jsonrpc": "2.0", "error": parse_error}, "2026-07-28")
    rejected({"jsonrpc": "2.0", "id": None, "error": parse_error}, "2026-07-28")


def test_unknown_revision_is_rejected():
    assert "unknown MCP revision" in rejected(INIT_RESULT_2025, "2024-11-05", "initialize")


def test_failure_message_truncates_large_frames():
    frame = response({"content": [{"type": "text", "text": "x" * 10_000}]})
    msg = rejected(frame, "2026-07-28", "tools/call")
    assert "truncated" in msg and len(msg) < 5_000


# ---------------------------------------------------------------------------------------------
# Maps and wire logs
# ---------------------------------------------------------------------------------------------


def test_result_map_pairs_methods_with_their_result_definitions():
    m25, m26 = result_definitions("2025-11-25"), result_definitions("2026-07-28")
    assert m25["initialize"] == "InitializeResult"
    assert m25["tools/call"] == "CallToolResult"
    assert m25["tasks/get"] == "GetTaskResult"
    assert m25["tasks/result"] == "GetTaskPayloadResult"
    assert m25["ping"] == "EmptyResult"
    assert m26["tools/call"] == "CallToolResult"
    assert m26["server/discover"] == "DiscoverResult"
    assert m26["tools/list"] == "ListToolsResult"
    assert m26["subscriptions/listen"] == "SubscriptionsListenResult"
    assert m26["tasks/get"] == "ext-tasks:GetTaskResult"
    assert m26["tasks/update"] == "ext-tasks:UpdateTaskResult"
    assert m26["tasks/cancel"] == "ext-tasks:CancelTaskResult"
    assert "tasks/result" not in m26 and "initialize" not in m26
    assert result_definitions("2025-06-18") == m25


def test_compiled_validators_are_cached():
    assert wire_schema._validator("2026-07-28", "CallToolResult") is wire_schema._validator(
        "2026-07-28", "CallToolResult"
    )


def _write_log(tmp_path: Path, entries: list) -> Path:
    path = tmp_path / "wire.jsonl"
    path.write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in entries), encoding="utf-8")
    return path


def test_wire_log_with_valid_frames_returns_the_count(tmp_path):
    path = _write_log(
        tmp_path,
        [
            {"rev": "2025-11-25", "method": "initialize", "frame": INIT_RESULT_2025},
            {"rev": "2026-07-28", "method": "tools/call", "frame": CREATE_TASK_2026},
            {"method": "notifications/tasks", "frame": TASK_NOTIFICATION_2026},
            "",
        ],
    )
    assert check_wire_log(path, default_revision="2026-07-28") == 3


def test_wire_log_collects_every_failure_into_one_error(tmp_path):
    bad_create = copy.deepcopy(CREATE_TASK_2025)
    del bad_create["result"]["task"]["createdAt"]
    path = _write_log(
        tmp_path,
        [
            {"rev": "2025-11-25", "method": "tools/call", "frame": bad_create},
            {"rev": "2026-07-28", "method": "server/discover", "frame": DISCOVER_2026},
            {"rev": "2026-07-28", "method": "tools/call", "frame": response({"content": []})},
            "{not json",
            {"method": "tools/call", "frame": CREATE_TASK_2026},  # no rev and no default
        ],
    )
    with pytest.raises(AssertionError) as info:
        check_wire_log(path)
    msg = str(info.value)
    assert msg.startswith("4 wire-log failure(s)")
    for lineno in (1, 3, 4, 5):
        assert f"line {lineno}" in msg
    assert "line 2" not in msg
