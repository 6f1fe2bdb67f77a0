"""mcpx.protocol.modern (+ revisions.is_modern): 2026-07-28 per-request checks and result decoration.

Headers come in as a plain dict with lower-case names (the HTTP layer lower-cases them; header names
are case-insensitive, 2026-07-28/basic/transports/streamable-http.mdx:570-576).
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from wire_schema import check_frame

from mcpx.protocol import jsonrpc, modern
from mcpx.protocol.errors import HeaderMismatch, InvalidParams, McpError, UnsupportedProtocolVersion
from mcpx.protocol.revisions import META_CAPS, META_CLIENT_INFO, META_SERVER_INFO, META_VERSION, is_modern

MODERN = "2026-07-28"
SERVER_INFO = {"name": "mcpx", "version": "0.1.0"}
TASK_ID = "786512e2-9e0d-44bd-8f29-789f320fe840"


def meta(**over: Any) -> dict[str, Any]:
    m: dict[str, Any] = {META_VERSION: MODERN, META_CAPS: {}, META_CLIENT_INFO: {"name": "host", "version": "1"}}
    m.update(over)
    return m


def params(**fields: Any) -> dict[str, Any]:
    return {**fields, "_meta": meta()}


def headers(method: str, name: str | None = None, *, version: str | None = MODERN, **extra: str) -> dict[str, str]:
    h = {"content-type": "application/json", "mcp-method": method}
    if version is not None:
        h["mcp-protocol-version"] = version
    if name is not None:
        h["mcp-name"] = name
    h.update({k.replace("_", "-"): v for k, v in extra.items()})
    return h


def b64(value: str) -> str:
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


def assert_modern_error(exc: McpError, code: int, http_status: int = 400) -> None:
    assert (exc.code, exc.http_status) == (code, http_status)
    check_frame(jsonrpc.error_from(1, exc), MODERN)


# ---- which era a request belongs to -------------------------------------------------------


def test_request_whose_meta_names_a_protocol_version_is_modern() -> None:
    assert is_modern({"_meta": {META_VERSION: MODERN}})
    # Even an unsupported version is modern: it gets -32022, not legacy handling.
    assert is_modern({"_meta": {META_VERSION: "1900-01-01"}})


@pytest.mark.parametrize(
    "p", [{}, {"_meta": {}}, {"_meta": {"progressToken": "t"}}, {"_meta": None}, {"_meta": "2026-07-28"}]
)
def test_request_with_meta_but_no_protocol_version_is_not_modern(p: dict[str, Any]) -> None:
    # DIGEST 1.2: a legacy request may carry _meta (e.g. progressToken); the version key decides.
    assert not is_modern(p)


def test_removed_methods_are_the_ones_2026_dropped_or_moved_to_the_tasks_extension() -> None:
    # 2026-07-28/changelog.mdx items 2, 4, 5, 6; DIGEST X11.
    for method in (
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "tasks/result",
        "tasks/list",
    ):
        assert method in modern.REMOVED_METHODS
    for method in ("tools/list", "tools/call", "server/discover", "tasks/get", "tasks/update", "tasks/cancel"):
        assert method not in modern.REMOVED_METHODS


# ---- check_meta ---------------------------------------------------------------------------


def test_modern_request_with_version_and_capabilities_yields_its_capabilities() -> None:
    caps = {"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}}
    assert modern.check_meta({"_meta": meta(**{META_CAPS: caps})}) == caps


def test_empty_capabilities_object_is_valid_and_declares_nothing() -> None:
    assert modern.check_meta({"_meta": meta(**{META_CAPS: {}})}) == {}


def test_client_info_is_optional() -> None:
    # 2026-07-28/basic/index.mdx:376,384-385: SHOULD, not MUST.
    assert modern.check_meta({"_meta": {META_VERSION: MODERN, META_CAPS: {}}}) == {}


@pytest.mark.parametrize(
    "p", [{}, {"_meta": None}, {"_meta": []}, {"_meta": "x"}], ids=["absent", "null", "array", "string"]
)
def test_modern_request_without_meta_object_is_invalid_params_with_http_400(p: dict[str, Any]) -> None:
    with pytest.raises(InvalidParams) as exc:
        modern.check_meta(p)
    assert_modern_error(exc.value, -32602)


def test_modern_request_without_capabilities_is_invalid_params_with_http_400() -> None:
    # 2026-07-28/basic/index.mdx:377,380-382.
    m = meta()
    del m[META_CAPS]
    with pytest.raises(InvalidParams) as exc:
        modern.check_meta({"_meta": m})
    assert_modern_error(exc.value, -32602)


@pytest.mark.parametrize("caps", [None, [], "all", 1, True])
def test_capabilities_that_are_not_an_object_are_invalid_params_with_http_400(caps: Any) -> None:
    with pytest.raises(InvalidParams) as exc:
        modern.check_meta({"_meta": meta(**{META_CAPS: caps})})
    assert_modern_error(exc.value, -32602)


def test_meta_without_protocol_version_is_invalid_params_with_http_400_not_unsupported_version() -> None:
    # protocolVersion is a required key (2026-07-28/basic/index.mdx:375,380-382): missing means malformed.
    m = meta()
    del m[META_VERSION]
    with pytest.raises(InvalidParams) as exc:
        modern.check_meta({"_meta": m})
    assert_modern_error(exc.value, -32602)


@pytest.mark.parametrize("version", [None, 20260728, ["2026-07-28"], {"v": "2026-07-28"}])
def test_protocol_version_that_is_not_a_string_is_invalid_params_with_http_400(version: Any) -> None:
    # schema/2026-07-28/schema.json RequestMetaObject: protocolVersion is a string.
    with pytest.raises(InvalidParams) as exc:
        modern.check_meta({"_meta": meta(**{META_VERSION: version})})
    assert_modern_error(exc.value, -32602)


@pytest.mark.parametrize("version", ["1900-01-01", "2030-01-01", "2025-11-25", "2025-06-18", "2026-07-28 ", ""])
def test_unsupported_protocol_version_is_32022_listing_supported_and_requested(version: str) -> None:
    # 2026-07-28/basic/versioning.mdx:48-67; a legacy version cannot be used per request (it needs initialize).
    with pytest.raises(UnsupportedProtocolVersion) as exc:
        modern.check_meta({"_meta": meta(**{META_VERSION: version})})
    assert_modern_error(exc.value, -32022)
    assert exc.value.data == {"supported": [MODERN, "2025-11-25"], "requested": version}


def test_version_is_checked_before_required_keys() -> None:
    with pytest.raises(UnsupportedProtocolVersion):
        modern.check_meta({"_meta": {META_VERSION: "1900-01-01"}})


# ---- check_headers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "p", "name"),
    [
        ("tools/call", {"name": "get_weather", "arguments": {}}, "get_weather"),
        ("prompts/get", {"name": "review"}, "review"),
        ("resources/read", {"uri": "file:///tmp/a.txt"}, "file:///tmp/a.txt"),
    ],
)
def test_headers_that_mirror_the_body_pass(method: str, p: dict[str, Any], name: str) -> None:
    modern.check_headers(method, params(**p), headers(method, name), tasks_extension=False)


@pytest.mark.parametrize("method", ["tools/list", "server/discover", "subscriptions/listen"])
def test_mcp_name_is_not_required_for_methods_without_a_name_source(method: str) -> None:
    modern.check_headers(method, params(), headers(method), tasks_extension=False)


def _mismatch(method: str, p: dict[str, Any], h: dict[str, str], *, tasks_extension: bool = False) -> HeaderMismatch:
    with pytest.raises(HeaderMismatch) as exc:
        modern.check_headers(method, p, h, tasks_extension=tasks_extension)
    assert_modern_error(exc.value, -32020)
    return exc.value


def test_missing_protocol_version_header_is_header_mismatch_with_http_400() -> None:
    _mismatch("tools/list", params(), headers("tools/list", version=None))


def test_protocol_version_header_that_differs_from_meta_is_header_mismatch() -> None:
    # streamable-http.mdx:252-261.
    _mismatch("tools/list", params(), headers("tools/list", version="2025-11-25"))


def test_missing_mcp_method_header_is_header_mismatch() -> None:
    h = headers("tools/list")
    del h["mcp-method"]
    _mismatch("tools/list", params(), h)


@pytest.mark.parametrize("got", ["tools/call", "Tools/List", "tools/list "])
def test_mcp_method_header_that_differs_from_body_is_header_mismatch_and_values_are_case_sensitive(got: str) -> None:
    _mismatch("tools/list", params(), {**headers("tools/list"), "mcp-method": got})


@pytest.mark.parametrize(
    ("method", "p"),
    [("tools/call", {"name": "t"}), ("prompts/get", {"name": "p"}), ("resources/read", {"uri": "file:///a"})],
)
def test_missing_mcp_name_on_named_requests_is_header_mismatch(method: str, p: dict[str, Any]) -> None:
    _mismatch(method, params(**p), headers(method))


@pytest.mark.parametrize(
    ("method", "p", "name"),
    [
        ("tools/call", {"name": "t"}, "u"),
        ("resources/read", {"uri": "file:///a"}, "file:///b"),
        ("tools/call", {"name": "T"}, "t"),
    ],
)
def test_mcp_name_that_differs_from_body_is_header_mismatch(method: str, p: dict[str, Any], name: str) -> None:
    _mismatch(method, params(**p), headers(method, name))


# Examples from streamable-http.mdx:509-515 (Value Encoding table).
@pytest.mark.parametrize(
    ("body", "header"),
    [
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
    ],
)
def test_base64_sentinel_mcp_name_is_decoded_before_comparing(body: str, header: str) -> None:
    # streamable-http.mdx:497-503: servers MUST decode an encoded Mcp-Name before comparing.
    modern.check_headers("tools/call", params(name=body), headers("tools/call", header), tasks_extension=False)


def test_base64_sentinel_resource_uri_is_decoded_before_comparing() -> None:
    uri = "file:///tmp/résumé.txt"
    modern.check_headers("resources/read", params(uri=uri), headers("resources/read", b64(uri)), tasks_extension=False)


def test_sentinel_that_decodes_to_a_different_value_is_header_mismatch() -> None:
    _mismatch("tools/call", params(name="Hello, 世界"), headers("tools/call", b64("Hello, world")))


def test_sentinel_value_is_not_compared_undecoded() -> None:
    # A tool literally named like a sentinel must itself be encoded (streamable-http.mdx:505-506).
    literal = "=?base64?SGk=?="
    _mismatch("tools/call", params(name=literal), headers("tools/call", literal))


def test_sentinel_markers_are_case_sensitive_so_upper_case_is_a_literal_value() -> None:
    # streamable-http.mdx:499-500: the markers MUST appear exactly as shown (lowercase).
    upper = "=?BASE64?SGk=?="
    _mismatch("tools/call", params(name="Hi"), headers("tools/call", upper))
    modern.check_headers("tools/call", params(name=upper), headers("tools/call", upper), tasks_extension=False)


@pytest.mark.parametrize(
    "payload", ["not base64!", "SGk", "SG=k", "//79"], ids=["junk", "unpadded", "bad-padding", "not-utf8"]
)
def test_malformed_base64_sentinel_is_header_mismatch(payload: str) -> None:
    _mismatch("tools/call", params(name="Hi"), headers("tools/call", f"=?base64?{payload}?="))


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("mcp-name", "cafÃ©"),  # UTF-8 bytes as the HTTP layer decodes them (latin-1)
        ("mcp-name", "a\x00b"),
        ("mcp-name", "a\nb"),
        ("mcp-name", "a\x7fb"),
        ("mcp-method", "tools/call\r"),
        ("mcp-protocol-version", "2026-07-28\x00"),
        ("mcp-param-region", "us-wést"),
    ],
)
def test_mcp_header_with_invalid_characters_is_header_mismatch(header: str, value: str) -> None:
    # streamable-http.mdx:478-483 (visible ASCII and space) and :630 ("contains invalid characters").
    h = headers("tools/call", "t")
    h[header] = value
    _mismatch("tools/call", params(name="t"), h)


def test_non_mcp_headers_are_not_checked_for_characters() -> None:
    h = headers("tools/call", "t", user_agent="cafÃ©\x7f")
    modern.check_headers("tools/call", params(name="t"), h, tasks_extension=False)


def test_mcp_param_headers_with_safe_values_are_accepted() -> None:
    h = headers("tools/call", "t", mcp_param_region="us-west1", mcp_param_greeting=b64("Hello, 世界"))
    modern.check_headers("tools/call", params(name="t"), h, tasks_extension=False)


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_task_methods_need_mcp_name_equal_to_task_id_when_the_extension_is_served(method: str) -> None:
    # DIGEST 1.4 / X13: ext-tasks adds tasks/* with Mcp-Name = params.taskId; missing or wrong is -32020.
    p = params(taskId=TASK_ID)
    modern.check_headers(method, p, headers(method, TASK_ID), tasks_extension=True)
    _mismatch(method, p, headers(method), tasks_extension=True)
    _mismatch(method, p, headers(method, "other-task"), tasks_extension=True)


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_the_missing_task_header_error_names_the_switch_that_relaxes_it(method: str) -> None:
    exc = _mismatch(method, params(taskId=TASK_ID), headers(method), tasks_extension=True)
    assert "tasks.requireMcpName" in str(exc)


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_relaxed_a_missing_task_header_passes_and_says_so_but_a_wrong_one_still_fails(method: str) -> None:
    p = params(taskId=TASK_ID)
    assert modern.check_headers(method, p, headers(method), tasks_extension=True, require_task_name=False) is True
    assert (
        modern.check_headers(method, p, headers(method, TASK_ID), tasks_extension=True, require_task_name=False)
        is False
    )
    with pytest.raises(HeaderMismatch):
        modern.check_headers(method, p, headers(method, "other-task"), tasks_extension=True, require_task_name=False)


def test_relaxing_task_headers_leaves_the_other_mcp_name_rules_alone() -> None:
    with pytest.raises(HeaderMismatch) as exc:
        modern.check_headers(
            "tools/call", params(name="t"), headers("tools/call"), tasks_extension=True, require_task_name=False
        )
    assert "requireMcpName" not in str(exc.value)


def test_task_methods_need_no_mcp_name_when_the_extension_is_not_served() -> None:
    modern.check_headers("tasks/get", params(taskId=TASK_ID), headers("tasks/get"), tasks_extension=False)


# ---- decorate -----------------------------------------------------------------------------


def test_decorate_adds_result_type_complete_and_names_mcpx_in_meta() -> None:
    out = modern.decorate({"tools": []}, SERVER_INFO)
    assert out == {"tools": [], "resultType": "complete", "_meta": {META_SERVER_INFO: SERVER_INFO}}
    check_frame(jsonrpc.result(1, out), MODERN)


def test_decorate_keeps_a_result_type_already_set() -> None:
    out = modern.decorate({"resultType": "input_required", "requestState": "s"}, SERVER_INFO)
    assert out["resultType"] == "input_required"


def test_decorate_keeps_other_meta_keys() -> None:
    out = modern.decorate({"_meta": {"vendor.example/trace": "abc"}}, SERVER_INFO)
    assert out["_meta"] == {"vendor.example/trace": "abc", META_SERVER_INFO: SERVER_INFO}


def test_decorate_names_mcpx_even_when_a_forwarded_upstream_result_named_the_upstream() -> None:
    # 2026-07-28/basic/index.mdx:396-398: a server identifies *itself* in every result's _meta. The host's
    # server is mcpx, so an upstream's serverInfo must not leak through as if it were mcpx's peer.
    upstream = {"content": [], "_meta": {META_SERVER_INFO: {"name": "weather", "version": "9"}}}
    assert modern.decorate(upstream, SERVER_INFO)["_meta"][META_SERVER_INFO] == SERVER_INFO


def test_decorate_tolerates_null_meta_and_does_not_mutate_its_input() -> None:
    res: dict[str, Any] = {"_meta": None}
    assert modern.decorate(res, SERVER_INFO)["_meta"] == {META_SERVER_INFO: SERVER_INFO}
    inner = {"k": 1}
    res2 = {"_meta": inner}
    modern.decorate(res2, SERVER_INFO)
    assert res == {"_meta": None} and res2 == {"_meta": {"k": 1}} and inner == {"k": 1}


# ---- cacheable ----------------------------------------------------------------------------


def test_cacheable_adds_ttl_and_private_scope_by_default() -> None:
    assert modern.cacheable({"tools": []}, 0) == {"tools": [], "ttlMs": 0, "cacheScope": "private"}
    assert modern.cacheable({"tools": []}, 30_000, "public")["cacheScope"] == "public"


def test_cacheable_list_result_is_a_schema_valid_list_tools_result_once_decorated() -> None:
    res = modern.decorate(
        modern.cacheable({"tools": [{"name": "t", "inputSchema": {"type": "object"}}], "nextCursor": "c"}, 0),
        SERVER_INFO,
    )
    check_frame(jsonrpc.result(1, res), MODERN, request_method="tools/list")


def test_cacheable_replaces_an_upstream_hint_and_does_not_mutate_its_input() -> None:
    res = {"tools": [], "ttlMs": 999, "cacheScope": "public"}
    assert modern.cacheable(res, 0) == {"tools": [], "ttlMs": 0, "cacheScope": "private"}
    assert res == {"tools": [], "ttlMs": 999, "cacheScope": "public"}


@pytest.mark.parametrize(("ttl", "scope"), [(-1, "private"), (0, "shared"), (0, "Public")])
def test_cacheable_refuses_hints_the_schema_forbids(ttl: int, scope: str) -> None:
    # caching.mdx:60 (ttlMs >= 0) and schema CacheableResult.cacheScope enum ["private", "public"].
    with pytest.raises(ValueError):
        modern.cacheable({}, ttl, scope)


# ---- discover_result ----------------------------------------------------------------------


def test_discover_result_is_schema_valid_and_lists_both_eras() -> None:
    caps = {"tools": {}, "logging": {}}
    res = modern.discover_result(caps, SERVER_INFO, "Use the tools.")
    check_frame(jsonrpc.result("d1", res), MODERN, request_method="server/discover")
    # DIGEST C3: mcpx is dual-era on both transports, so the legacy version is listed too.
    assert res["supportedVersions"] == [MODERN, "2025-11-25"]
    assert res["capabilities"] == caps and res["instructions"] == "Use the tools."
    assert res["resultType"] == "complete"


def test_discover_result_carries_the_caching_hints_the_schema_requires() -> None:
    # DIGEST C4: the page omits them but schema DiscoverResult requires ttlMs and cacheScope.
    res = modern.discover_result({}, SERVER_INFO, None)
    assert isinstance(res["ttlMs"], int) and res["ttlMs"] >= 0
    assert res["cacheScope"] in ("private", "public")


def test_discover_result_names_the_server_only_in_meta() -> None:
    res = modern.discover_result({}, SERVER_INFO, None)
    assert "serverInfo" not in res and res["_meta"] == {META_SERVER_INFO: SERVER_INFO}


@pytest.mark.parametrize("instructions", [None, ""])
def test_discover_result_omits_absent_instructions(instructions: str | None) -> None:
    assert "instructions" not in modern.discover_result({}, SERVER_INFO, instructions)
