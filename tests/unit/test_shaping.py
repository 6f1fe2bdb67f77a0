"""mcpx.protocol.shaping: upstream tools and results trimmed to what the host's revision defines."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from wire_schema import check_definition, check_frame

from mcpx.protocol import jsonrpc, modern, shaping

MODERN = "2026-07-28"
ALL = ("2025-03-26", "2025-06-18", "2025-11-25", MODERN)

TOOL: dict[str, Any] = {
    "name": "get_weather",
    "title": "Weather",
    "description": "Current weather",
    "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}},
    "outputSchema": {"type": "object", "properties": {"temp": {"type": "number"}}},
    "annotations": {"readOnlyHint": True, "title": "Weather"},
    "icons": [{"src": "https://example.com/w.png", "mimeType": "image/png"}],
    "execution": {"taskSupport": "optional"},
    "_meta": {"vendor.example/k": 1},
    "x-vendor": {"kept": True},
}

RESULT: dict[str, Any] = {
    "content": [{"type": "text", "text": "21 C"}],
    "structuredContent": {"temp": 21},
    "isError": False,
    "_meta": {"vendor.example/k": 1},
    "x-vendor": 1,
}

LINK = {"type": "resource_link", "uri": "file:///reports/q1.pdf", "name": "q1.pdf", "mimeType": "application/pdf"}


# ---- tool_for -----------------------------------------------------------------------------


def test_tool_for_2025_03_26_loses_title_output_schema_icons_and_execution() -> None:
    out = shaping.tool_for(TOOL, "2025-03-26")
    assert set(out) == {"name", "description", "inputSchema", "annotations", "_meta", "x-vendor"}
    assert out["annotations"] == TOOL["annotations"]  # annotations.title existed in 2025-03-26


def test_tool_for_2025_06_18_keeps_title_and_output_schema_but_not_icons_or_execution() -> None:
    out = shaping.tool_for(TOOL, "2025-06-18")
    assert out["title"] == "Weather" and out["outputSchema"] == TOOL["outputSchema"]
    assert "icons" not in out
    # execution.taskSupport is 2025-11-25 tasks (2025-11-25/changelog.mdx:20): a 2025-06-18 host cannot use it.
    assert "execution" not in out


def test_tool_for_2025_11_25_keeps_everything_including_execution() -> None:
    assert shaping.tool_for(TOOL, "2025-11-25") == TOOL


def test_tool_for_modern_host_keeps_icons_and_loses_execution() -> None:
    # schema/2026-07-28 Tool has no `execution`; tasks moved to an extension (DIGEST 1.5, SEP-2663:975).
    out = shaping.tool_for(TOOL, MODERN)
    assert {k: v for k, v in TOOL.items() if k != "execution"} == out


@pytest.mark.parametrize("revision", ALL)
def test_tool_for_keeps_unknown_fields_and_does_not_mutate_its_input(revision: str) -> None:
    before = copy.deepcopy(TOOL)
    out = shaping.tool_for(TOOL, revision)
    assert before == TOOL
    assert out["x-vendor"] == {"kept": True} and out["_meta"] == {"vendor.example/k": 1}


@pytest.mark.parametrize("revision", ["2025-11-25", MODERN])
def test_shaped_tool_is_schema_valid_for_the_host_revision(revision: str) -> None:
    check_definition(shaping.tool_for(TOOL, revision), "Tool", revision)


def test_shaped_tool_list_is_schema_valid_for_every_revision() -> None:
    for revision in ALL:
        res: dict[str, Any] = {"tools": [shaping.tool_for(TOOL, revision)]}
        if revision == MODERN:
            res = modern.decorate(modern.cacheable(res, 0), {"name": "mcpx", "version": "0"})
        check_frame(jsonrpc.result(1, res), revision, request_method="tools/list")


# ---- result_for ---------------------------------------------------------------------------


def test_result_for_2025_03_26_loses_structured_content() -> None:
    out = shaping.result_for(RESULT, "2025-03-26")
    assert "structuredContent" not in out
    assert {k: v for k, v in RESULT.items() if k != "structuredContent"} == out


def test_result_for_2025_06_18_keeps_structured_content() -> None:
    assert shaping.result_for(RESULT, "2025-06-18") == RESULT


@pytest.mark.parametrize("revision", ["2025-03-26", "2025-06-18", "2025-11-25"])
def test_result_for_legacy_hosts_loses_result_type(revision: str) -> None:
    out = shaping.result_for({**RESULT, "resultType": "complete"}, revision)
    assert "resultType" not in out


def test_result_for_modern_host_gets_result_type_complete_when_the_upstream_was_legacy() -> None:
    # 2026-07-28/basic/index.mdx:73,85: every result carries resultType; a missing one means "complete".
    out = shaping.result_for(RESULT, MODERN)
    assert out == {**RESULT, "resultType": "complete"}


def test_result_for_modern_host_keeps_a_modern_upstream_result_type() -> None:
    out = shaping.result_for({"resultType": "input_required", "requestState": "s"}, MODERN)
    assert out["resultType"] == "input_required"


@pytest.mark.parametrize("revision", ALL)
def test_result_for_keeps_unknown_fields_and_meta_and_does_not_mutate_its_input(revision: str) -> None:
    before = copy.deepcopy(RESULT)
    out = shaping.result_for(RESULT, revision)
    assert before == RESULT
    assert out["x-vendor"] == 1 and out["_meta"] == {"vendor.example/k": 1} and out["isError"] is False


# ---- call_result_for ----------------------------------------------------------------------


def test_call_result_for_2025_03_26_turns_resource_links_into_text() -> None:
    res = {"content": [{"type": "text", "text": "see"}, LINK], "structuredContent": {"a": 1}}
    out = shaping.call_result_for(res, "2025-03-26")
    assert out == {
        "content": [{"type": "text", "text": "see"}, {"type": "text", "text": "q1.pdf: file:///reports/q1.pdf"}]
    }
    check_frame(jsonrpc.result(1, out), "2025-03-26", request_method="tools/call")


def test_resource_link_stand_in_tolerates_missing_name_and_uri() -> None:
    out = shaping.call_result_for({"content": [{"type": "resource_link"}]}, "2025-03-26")
    assert out["content"] == [{"type": "text", "text": "resource: "}]


@pytest.mark.parametrize("revision", ["2025-06-18", "2025-11-25", MODERN])
def test_call_result_for_keeps_resource_links_from_2025_06_18_on(revision: str) -> None:
    out = shaping.call_result_for({"content": [LINK]}, revision)
    assert out["content"] == [LINK]


def test_call_result_for_leaves_other_content_blocks_alone() -> None:
    blocks = [
        {"type": "image", "data": "aGk=", "mimeType": "image/png"},
        {"type": "audio", "data": "aGk=", "mimeType": "audio/wav"},
        {"type": "resource", "resource": {"uri": "file:///a", "text": "a"}},
        "not-a-block",
    ]
    assert shaping.call_result_for({"content": blocks}, "2025-03-26")["content"] == blocks


def test_call_result_for_does_not_mutate_the_upstream_content_list() -> None:
    res = {"content": [LINK]}
    shaping.call_result_for(res, "2025-03-26")
    assert res == {"content": [LINK]}


def test_call_result_for_tolerates_content_that_is_not_a_list() -> None:
    assert shaping.call_result_for({"content": None}, "2025-03-26") == {"content": None}


def test_call_result_for_modern_host_is_a_schema_valid_call_tool_result() -> None:
    out = modern.decorate(
        shaping.call_result_for({**RESULT, "content": [LINK]}, MODERN), {"name": "mcpx", "version": "0"}
    )
    assert out["resultType"] == "complete" and out["structuredContent"] == {"temp": 21}
    check_frame(jsonrpc.result(1, out), MODERN, request_method="tools/call")


@pytest.mark.parametrize("revision", ["2025-03-26", "2025-06-18", "2025-11-25"])
def test_call_result_for_legacy_host_is_schema_valid(revision: str) -> None:
    out = shaping.call_result_for({**RESULT, "content": [LINK], "resultType": "complete"}, revision)
    check_frame(jsonrpc.result(1, out), revision, request_method="tools/call")
