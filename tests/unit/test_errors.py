"""mcpx.protocol.errors: codes, HTTP statuses, error objects, upstream errors made legal per revision."""

from __future__ import annotations

import pytest
from wire_schema import check_frame

from mcpx.protocol import errors, jsonrpc
from mcpx.protocol.errors import (
    HeaderMismatch,
    InternalError,
    InvalidParams,
    InvalidRequest,
    McpError,
    MethodNotFound,
    MissingClientCapability,
    ParseError,
    UnsupportedProtocolVersion,
    UpstreamUnavailable,
    upstream_error_for,
)

MODERN = "2026-07-28"
LEGACY = ("2025-11-25", "2025-06-18", "2025-03-26")


@pytest.mark.parametrize(
    ("cls", "code", "http_status"),
    [
        (ParseError, -32700, 400),
        (InvalidRequest, -32600, 400),
        (MethodNotFound, -32601, 200),
        (InvalidParams, -32602, 200),
        (InternalError, -32603, 200),
        (HeaderMismatch, -32020, 400),
        (MissingClientCapability, -32021, 400),
        (UnsupportedProtocolVersion, -32022, 400),
    ],
)
def test_each_error_carries_its_json_rpc_code_and_default_http_status(
    cls: type[McpError], code: int, http_status: int
) -> None:
    exc = cls("m")
    assert (exc.code, exc.http_status) == (code, http_status)


def test_http_status_can_be_overridden_per_instance_without_touching_the_class() -> None:
    # e.g. -32602 for a missing required _meta key is 400 (2026-07-28/basic/index.mdx:380-382),
    # and -32601 is 404 on modern HTTP (streamable-http.mdx:271-275).
    assert InvalidParams("missing _meta", http_status=400).http_status == 400
    assert MethodNotFound("nope", http_status=404).http_status == 404
    assert InvalidParams("other").http_status == 200


def test_exception_text_is_the_message() -> None:
    exc = InvalidParams("Invalid cursor for tools")
    assert str(exc) == exc.message == "Invalid cursor for tools"


def test_to_error_omits_data_when_none() -> None:
    assert InvalidParams("x").to_error() == {"code": -32602, "message": "x"}


@pytest.mark.parametrize("data", [{}, [], 0, "", False, {"requiredCapabilities": {"sampling": {}}}])
def test_to_error_keeps_data_that_is_present_even_when_falsy(data: object) -> None:
    assert InvalidParams("x", data).to_error() == {"code": -32602, "message": "x", "data": data}


def test_missing_capability_error_is_schema_valid_for_modern_hosts() -> None:
    exc = MissingClientCapability(
        "needs the tasks extension", {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
    )
    check_frame(jsonrpc.error_from(1, exc), MODERN)


# ---- upstream errors forwarded to a 2026-07-28 host ---------------------------------------


def test_upstream_resource_not_found_32002_becomes_invalid_params_for_modern_hosts() -> None:
    # 2026-07-28/basic/index.mdx:138-140: -32002 MUST NOT be emitted; it was replaced by -32602.
    out = upstream_error_for({"code": -32002, "message": "Resource not found", "data": {"uri": "file:///x"}}, MODERN)
    assert out == {"code": -32602, "message": "Resource not found", "data": {"uri": "file:///x"}}
    check_frame(jsonrpc.error(1, out), MODERN)


@pytest.mark.parametrize("code", [-32042, -32023, -32050, -32098, -32099])
def test_upstream_code_undefined_in_the_reserved_mcp_range_becomes_internal_error_for_modern_hosts(code: int) -> None:
    # 2026-07-28/basic/index.mdx:122-126 (reserved -32020..-32099) and :138-142 (-32042 is legacy only).
    out = upstream_error_for({"code": code, "message": "upstream said no", "data": {"k": 1}}, MODERN)
    assert out == {"code": -32603, "message": "upstream said no", "data": {"k": 1}}
    check_frame(jsonrpc.error(1, out), MODERN)


@pytest.mark.parametrize(
    "err",
    [
        {"code": -32020, "message": "Header mismatch"},
        {"code": -32021, "message": "needs sampling", "data": {"requiredCapabilities": {"sampling": {}}}},
        {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2026-07-28"], "requested": "1900-01-01"},
        },
    ],
    ids=["-32020", "-32021", "-32022"],
)
def test_upstream_codes_the_2026_spec_defines_are_kept_for_modern_hosts(err: dict) -> None:
    # DIGEST 1.5: -32020, -32021 and -32022 are the reserved-range codes a modern client may receive.
    assert upstream_error_for(err, MODERN) == err
    check_frame(jsonrpc.error(1, err), MODERN)


@pytest.mark.parametrize(
    ("code", "data"),
    [
        (-32021, None),
        (-32021, {"requiredCapabilities": "sampling"}),
        (-32022, None),
        (-32022, {"supported": ["2026-07-28"]}),
        (-32022, {"supported": "2026-07-28", "requested": "x"}),
        (-32022, {"supported": [2026], "requested": "x"}),
        (-32022, {"supported": ["2026-07-28"], "requested": None}),
    ],
)
def test_upstream_32021_or_32022_without_the_data_its_schema_requires_becomes_internal_error_for_modern_hosts(
    code: int, data: object
) -> None:
    # schema/2026-07-28/schema.json MissingRequiredClientCapabilityError / UnsupportedProtocolVersionError
    # require `data`; forwarding such a frame would be invalid on the host's wire.
    err = {"code": code, "message": "m"} if data is None else {"code": code, "message": "m", "data": data}
    out = upstream_error_for(err, MODERN)
    assert out["code"] == -32603 and out["message"] == "m"
    check_frame(jsonrpc.error(1, out), MODERN)


@pytest.mark.parametrize("code", [-32700, -32600, -32601, -32602, -32603, -32000, -32019, -31999, -1, 0, 42])
def test_upstream_codes_outside_the_reserved_mcp_range_pass_unchanged_to_modern_hosts(code: int) -> None:
    err = {"code": code, "message": "m", "data": None}
    assert upstream_error_for(err, MODERN) == err


@pytest.mark.parametrize("revision", LEGACY)
@pytest.mark.parametrize("code", [-32002, -32050, -32020, -32603])
def test_upstream_errors_reach_legacy_hosts_unchanged(revision: str, code: int) -> None:
    err = {"code": code, "message": "m", "data": {"x": 1}}
    assert upstream_error_for(err, revision) == err


@pytest.mark.parametrize("revision", LEGACY)
def test_url_elicitation_error_keeps_its_code_only_with_its_elicitations(revision: str) -> None:
    good = {"code": -32042, "message": "m", "data": {"elicitations": []}}
    assert upstream_error_for(good, revision) == good
    assert upstream_error_for({"code": -32042, "message": "m", "data": {"x": 1}}, revision)["code"] == -32603


def test_upstream_error_mapping_does_not_mutate_its_input() -> None:
    err = {"code": -32002, "message": "m"}
    upstream_error_for(err, MODERN)
    assert err == {"code": -32002, "message": "m"}


@pytest.mark.parametrize("revision", (MODERN, *LEGACY))
@pytest.mark.parametrize("code", [None, "-32602", -32602.0, True, [1]])
def test_upstream_error_without_an_integer_code_becomes_internal_error(revision: str, code: object) -> None:
    # JSON-RPC 2.0 §5.1 and 2026-07-28/basic/index.mdx:105: error codes MUST be integers (a JSON bool is not).
    out = upstream_error_for({"code": code, "message": "m"}, revision)
    assert out["code"] == -32603 and type(out["code"]) is int


def test_upstream_error_without_a_code_becomes_internal_error() -> None:
    assert upstream_error_for({"message": "m"}, MODERN)["code"] == -32603


@pytest.mark.parametrize(
    ("err", "message"),
    [({"code": 1}, "upstream error"), ({"code": 1, "message": 7}, "7"), ({"code": 1, "message": None}, "None")],
)
def test_upstream_error_message_is_always_a_string(err: dict, message: str) -> None:
    assert upstream_error_for(err, "2025-11-25")["message"] == message


def test_every_mapped_upstream_error_is_schema_valid_for_a_modern_host() -> None:
    for code in range(-32110, -31990):
        check_frame(jsonrpc.error(1, upstream_error_for({"code": code, "message": "m"}, MODERN)), MODERN)


# ---- mcpx's own codes ---------------------------------------------------------------------


# 2026-07-28/basic/index.mdx:116-120,153-155 (DIGEST 3.6): no new codes in -32000..-32019.
def test_mcpx_upstream_unavailable_code_is_not_allocated_in_the_json_rpc_reserved_range() -> None:
    code = UpstreamUnavailable("x").code
    standard = {-32700, -32600, -32601, -32602, -32603}
    assert code in standard or not (-32768 <= code <= -32000)


def test_upstream_unavailable_is_a_plain_json_rpc_error_with_http_200() -> None:
    exc = UpstreamUnavailable("upstream 'fx' is not available")
    assert exc.code == errors.UPSTREAM_UNAVAILABLE and exc.http_status == 200
