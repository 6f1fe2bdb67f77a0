"""`/mcp` error paths, frame by frame: every error code and every bad input, both eras, one real daemon.

Statuses and codes follow DIGEST 1.4 (modern table), 1.5, 3.6 and 7 (C3: the legacy version is listed
as supported because mcpx is dual-era on HTTP; C5: ordinary JSON-RPC errors ride on HTTP 200).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import (
    LEGACY,
    MODERN,
    Api,
    Daemon,
    RawHost,
    SuiteStore,
    modern_meta,
    read_jsonl,
    reply_of,
    run_for_module,
    stdio_server,
)

pytestmark = [pytest.mark.sqlite_only("HTTP statuses and JSON-RPC errors: the front")]

ORIGIN_OK = "https://app.example"
MAX_BODY = 2048
TOKEN = "x" * 24
BOB_TOKEN = "bob-" + "y" * 28  # configured only as its SHA-256 (tokenSha256)
BOB_SHA256 = hashlib.sha256(BOB_TOKEN.encode()).hexdigest()
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, suite_store: SuiteStore) -> Iterator[Daemon]:
    tmp = tmp_path_factory.mktemp("http-errors")
    config = {
        "daemon": {"maxBodyBytes": MAX_BODY, "allowedOrigins": [ORIGIN_OK]},
        "mcpServers": {"fx": stdio_server(tmp)},
    }
    yield from run_for_module(Daemon(tmp, config, store=suite_store))


@pytest.fixture(scope="module")
def auth_daemon(tmp_path_factory: pytest.TempPathFactory, suite_store: SuiteStore) -> Iterator[Daemon]:
    tmp = tmp_path_factory.mktemp("http-errors-auth")
    tokens = [{"principal": "alice", "token": TOKEN}, {"principal": "bob", "tokenSha256": BOB_SHA256.upper()}]
    config = {"auth": {"tokens": tokens}, "mcpServers": {"fx": stdio_server(tmp)}}
    yield from run_for_module(Daemon(tmp, config, store=suite_store))


@pytest.fixture
def host(daemon: Daemon) -> Iterator[RawHost]:
    h = RawHost(daemon.url)
    yield h
    h.close()


@pytest.fixture
def session(host: RawHost) -> RawHost:
    host.initialize()
    return host


def modern_headers(method: str, **extra: str) -> dict[str, str]:
    return {"MCP-Protocol-Version": MODERN, "Mcp-Method": method, **extra}


def modern_request(
    rid: Any, method: str, params: dict[str, Any] | None = None, meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    p = dict(params or {})
    p["_meta"] = modern_meta() if meta is None else meta
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": p}


def error_of(resp: httpx.Response, status: int, code: int) -> dict[str, Any]:
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"].startswith("application/json"), resp.headers
    frame = resp.json()
    assert frame["jsonrpc"] == "2.0" and "result" not in frame, frame
    assert frame["error"]["code"] == code, frame
    assert isinstance(frame["error"]["message"], str) and frame["error"]["message"], frame
    return frame


def b64_sentinel(value: str) -> str:
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


ECHO = {"name": "fx__echo", "arguments": {"text": "still here"}}


# ---- 2026-07-28: version and _meta ---------------------------------------------------------


@pytest.mark.parametrize("version", ["2099-01-01", "2026-07-27"])
def test_modern_unsupported_meta_version_is_400_32022_listing_supported_and_requested(
    host: RawHost, version: str
) -> None:
    meta = {**modern_meta(), "io.modelcontextprotocol/protocolVersion": version}
    resp = host.post(
        modern_request(7, "tools/list", meta=meta), {"MCP-Protocol-Version": version, "Mcp-Method": "tools/list"}
    )
    frame = error_of(resp, 400, -32022)
    assert frame["id"] == 7
    assert MODERN in frame["error"]["data"]["supported"]
    assert frame["error"]["data"]["requested"] == version


@pytest.mark.parametrize("version", [20260728, None, ["2026-07-28"]], ids=["number", "null", "list"])
def test_modern_non_string_meta_version_is_400_invalid_params(host: RawHost, version: Any) -> None:
    # RequestMetaObject types protocolVersion as a string: a wrong type is a bad required key (-32602),
    # not a version the server could list alternatives to.
    meta = {**modern_meta(), "io.modelcontextprotocol/protocolVersion": version}
    resp = host.post(
        modern_request(1, "tools/list", meta=meta), {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}
    )
    assert error_of(resp, 400, -32602)["id"] == 1


@pytest.mark.parametrize("caps", ["absent", [], "none"])
def test_modern_missing_or_non_object_client_capabilities_is_400_invalid_params(host: RawHost, caps: Any) -> None:
    meta = modern_meta()
    if caps == "absent":
        del meta["io.modelcontextprotocol/clientCapabilities"]
    else:
        meta["io.modelcontextprotocol/clientCapabilities"] = caps
    frame = error_of(host.post(modern_request(3, "tools/list", meta=meta), modern_headers("tools/list")), 400, -32602)
    assert frame["id"] == 3
    assert "clientCapabilities" in frame["error"]["message"]


def test_modern_empty_client_capabilities_object_is_accepted(host: RawHost) -> None:
    resp = host.post(modern_request(1, "tools/list"), modern_headers("tools/list"))
    assert resp.status_code == 200 and "tools" in resp.json()["result"]


@pytest.mark.parametrize(
    "params",
    [None, {}, {"_meta": {}}, {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}],
    ids=["no-params", "no-meta", "empty-meta", "meta-without-version"],
)
def test_modern_header_with_no_meta_version_in_body_is_400_invalid_params(host: RawHost, params: Any) -> None:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}
    if params is not None:
        body["params"] = params
    frame = error_of(host.post(body, modern_headers("tools/list")), 400, -32602)
    assert frame["id"] == 4


# ---- 2026-07-28: mirrored headers (-32020) -----------------------------------------------


@pytest.mark.parametrize(
    ("headers", "what"),
    [
        ({"MCP-Protocol-Version": None}, "protocol version header missing"),
        ({"MCP-Protocol-Version": LEGACY}, "protocol version header differs from _meta"),
        ({"MCP-Protocol-Version": "2026-07-28.1"}, "protocol version header with trailing junk"),
        ({"Mcp-Method": None}, "Mcp-Method missing"),
        ({"Mcp-Method": "tools/call"}, "Mcp-Method differs from body"),
        ({"Mcp-Method": "Tools/List"}, "Mcp-Method differs only in case (values are case-sensitive)"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_modern_protocol_version_and_method_headers_must_match_the_body(
    host: RawHost, headers: dict[str, Any], what: str
) -> None:
    frame = error_of(host.modern("tools/list", headers=headers), 400, -32020)
    assert frame["id"] == host._id, what


@pytest.mark.parametrize(
    ("method", "params", "lines"),
    [
        ("tools/list", {}, [("Mcp-Method", "tools/call"), ("Mcp-Method", "tools/list")]),
        ("tools/list", {}, [("Mcp-Method", "tools/list"), ("Mcp-Method", "tools/call")]),
        ("tools/call", ECHO, [("Mcp-Method", "tools/call"), ("Mcp-Name", "fx__slow"), ("Mcp-Name", "fx__echo")]),
        ("tools/call", ECHO, [("Mcp-Method", "tools/call"), ("Mcp-Name", "fx__echo"), ("Mcp-Name", "fx__echo")]),
    ],
    ids=["method-other-first", "method-other-last", "name-other-first", "name-repeated"],
)
def test_modern_repeated_mirrored_header_is_400_header_mismatch(
    host: RawHost, method: str, params: dict[str, Any], lines: list[tuple[str, str]]
) -> None:
    # An intermediary may route on either line; only one line per mirrored header can agree with the body.
    base = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", MODERN),
    ]
    resp = host.client.post(host.url, content=json.dumps(modern_request(8, method, params)), headers=base + lines)
    assert error_of(resp, 400, -32020)["id"] == 8


@pytest.mark.parametrize(
    "name_header", [None, "fx__slow", "FX__ECHO", ""], ids=["missing", "other-tool", "case-differs", "empty"]
)
def test_modern_tools_call_mcp_name_must_be_present_and_match(host: RawHost, name_header: str | None) -> None:
    frame = error_of(host.modern("tools/call", ECHO, headers={"Mcp-Name": name_header}), 400, -32020)
    assert "Mcp-Name" in frame["error"]["message"]


def test_modern_mcp_name_base64_sentinel_is_decoded_before_comparing(host: RawHost) -> None:
    # A name that cannot be a plain header value and does not exist: the headers pass, the call fails.
    name = "fx__café☕"
    resp = host.modern("tools/call", {"name": name, "arguments": {}}, headers={"Mcp-Name": b64_sentinel(name)})
    frame = error_of(resp, 200, -32602)  # DIGEST C5: an ordinary JSON-RPC error rides on 200
    assert name in frame["error"]["message"]


def test_modern_mcp_name_base64_sentinel_of_an_existing_tool_calls_it(host: RawHost) -> None:
    resp = host.modern("tools/call", ECHO, headers={"Mcp-Name": b64_sentinel("fx__echo")})
    assert resp.status_code == 200
    assert reply_of(resp)["result"]["content"] == [{"type": "text", "text": "still here"}]


@pytest.mark.parametrize(
    "header",
    [
        b64_sentinel("fx__slow"),
        "=?base64?not base64!?=",
        "=?base64?" + base64.b64encode(b"\xff\xfe").decode() + "?=",
        "=?BASE64?" + base64.b64encode(b"fx__echo").decode() + "?=",
    ],
    ids=["decodes-to-other-name", "invalid-base64", "not-utf8", "uppercase-markers-are-not-a-sentinel"],
)
def test_modern_mcp_name_sentinel_that_does_not_decode_to_the_body_name_is_400(host: RawHost, header: str) -> None:
    error_of(host.modern("tools/call", ECHO, headers={"Mcp-Name": header}), 400, -32020)


@pytest.mark.parametrize(
    ("header", "value"),
    [("Mcp-Name", "fx__café".encode()), ("Mcp-Method", "tools/callé".encode()), ("Mcp-Param-Text", b"\xe2\x98\x95")],
    ids=["utf8-in-mcp-name", "utf8-in-mcp-method", "utf8-in-mcp-param"],
)
def test_modern_mcp_header_with_invalid_characters_is_400_header_mismatch(
    host: RawHost, header: str, value: bytes
) -> None:
    name = "fx__café" if header == "Mcp-Name" else "fx__echo"
    method = "tools/call"
    body = modern_request(5, method, {"name": name, "arguments": {"text": "x"}})
    headers: dict[str, Any] = modern_headers(method, **{"Mcp-Name": name.encode()})
    headers[header] = value
    frame = error_of(host.post(body, headers), 400, -32020)
    assert frame["id"] == 5


# ---- 2026-07-28: methods ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("ping", {}),
        ("logging/setLevel", {"level": "info"}),
        ("tasks/list", {}),
        ("tasks/result", {"taskId": "t-1"}),
        ("resources/subscribe", {"uri": "file:///x"}),
        ("initialize", {"protocolVersion": MODERN, "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}),
    ],
)
def test_modern_methods_removed_in_2026_are_404_method_not_found(
    host: RawHost, method: str, params: dict[str, Any]
) -> None:
    resp = host.modern(method, params)
    frame = error_of(resp, 404, -32601)
    assert frame["id"] == host._id
    assert "mcp-session-id" not in resp.headers


def test_modern_unknown_method_is_404_method_not_found(host: RawHost) -> None:
    error_of(host.modern("no/such/method"), 404, -32601)


@pytest.mark.parametrize("verb", ["GET", "DELETE"])
def test_modern_get_and_delete_without_a_session_are_405(host: RawHost, verb: str) -> None:
    resp = host.client.request(verb, host.url, headers={"MCP-Protocol-Version": MODERN, "Accept": "text/event-stream"})
    assert resp.status_code == 405 and resp.content == b""
    assert "POST" in resp.headers["allow"]


def test_modern_request_ignores_mcp_session_id_and_mints_none(host: RawHost) -> None:
    bogus = host.modern("tools/list", headers={"Mcp-Session-Id": "no-such-session"})
    assert bogus.status_code == 200 and "tools" in bogus.json()["result"]
    assert "mcp-session-id" not in bogus.headers
    # A real legacy session id neither turns the request legacy nor is echoed; the session lives on.
    legacy_host = RawHost(host.url)
    legacy_host.initialize()
    resp = host.modern("tools/call", ECHO, headers={"Mcp-Session-Id": legacy_host.session_id})
    assert resp.status_code == 200 and "mcp-session-id" not in resp.headers
    assert reply_of(resp)["result"]["resultType"] == "complete"
    assert legacy_host.legacy("ping").json()["result"] == {}
    legacy_host.close()


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/list", {}),
        ("tools/call", ECHO),
        ("tools/call", {"name": "fx__fail", "arguments": {}}),
        ("server/discover", {}),
    ],
)
def test_every_modern_result_has_result_type_and_server_info(
    host: RawHost, method: str, params: dict[str, Any]
) -> None:
    resp = host.modern(method, params)
    assert resp.status_code == 200
    res = reply_of(resp)["result"]
    assert res["resultType"] == "complete"
    assert res["_meta"][SERVER_INFO_KEY]["name"] == "mcpx" and isinstance(res["_meta"][SERVER_INFO_KEY]["version"], str)


def test_server_discover_lists_versions_and_modern_capabilities_and_is_cacheable(host: RawHost) -> None:
    res = host.modern("server/discover").json()["result"]
    # DIGEST C3: mcpx is dual-era on HTTP, so the legacy version is listed too.
    assert res["supportedVersions"][0] == MODERN and LEGACY in res["supportedVersions"]
    caps = res["capabilities"]
    assert "tools" in caps and "tasks" not in caps  # DIGEST 1.5: no legacy tasks.* under 2026
    assert isinstance(res["ttlMs"], int) and res["ttlMs"] >= 0
    assert res["cacheScope"] in ("private", "public")
    assert "serverInfo" not in res and res["_meta"][SERVER_INFO_KEY]["name"] == "mcpx"


# ---- 2025-11-25 sessions -----------------------------------------------------------------


def test_legacy_initialize_mints_a_visible_ascii_session_id(host: RawHost) -> None:
    result = host.initialize()
    assert result["protocolVersion"] == LEGACY
    sid = host.session_id
    assert sid and all(0x21 <= ord(c) <= 0x7E for c in sid)
    other = RawHost(host.url)
    other.initialize()
    assert other.session_id != sid
    other.close()


@pytest.mark.parametrize(
    "params",
    [
        {"protocolVersion": LEGACY, "capabilities": "all"},
        {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": "me"},
    ],
    ids=["capabilities", "clientInfo"],
)
def test_legacy_initialize_with_bad_params_is_invalid_params_and_mints_no_session(
    tmp_path: Path, suite_store: SuiteStore, params: dict[str, Any]
) -> None:
    # A daemon of its own: the module daemon's wire log must stay clean of the frame below.
    d = Daemon(tmp_path, {"mcpServers": {}}, store=suite_store)
    try:
        d.start()
        host = RawHost(d.url)
        resp = host.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        host.close()
        assert error_of(resp, 200, -32602)["id"] == 1
        assert "mcp-session-id" not in resp.headers
    finally:
        d.stop()
    d.check_wire()


def test_legacy_request_without_session_id_is_400(host: RawHost) -> None:
    resp = host.post(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}, {"MCP-Protocol-Version": LEGACY}
    )
    frame = error_of(resp, 400, -32600)
    assert frame["id"] == 1


def test_request_with_neither_session_nor_version_header_is_400(host: RawHost) -> None:
    error_of(host.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}), 400, -32600)


def test_legacy_unknown_session_id_is_404(host: RawHost) -> None:
    resp = host.post(
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"MCP-Protocol-Version": LEGACY, "Mcp-Session-Id": "no-such-session"},
    )
    assert error_of(resp, 404, -32600)["id"] == 2


@pytest.mark.parametrize("version", ["2025-06-18", MODERN, "garbage"])
def test_legacy_wrong_protocol_version_header_on_a_session_is_400(session: RawHost, version: str) -> None:
    resp = session.legacy("tools/list", headers={"MCP-Protocol-Version": version})
    assert error_of(resp, 400, -32600)["id"] == session._id
    assert session.legacy("ping").json()["result"] == {}  # the session itself is unharmed


def test_legacy_delete_ends_the_session(session: RawHost) -> None:
    assert session.legacy("ping").status_code == 200
    resp = session.client.delete(
        session.url, headers={"Mcp-Session-Id": session.session_id, "MCP-Protocol-Version": LEGACY}
    )
    assert resp.status_code == 200
    error_of(session.legacy("ping"), 404, -32600)
    again = session.client.delete(session.url, headers={"Mcp-Session-Id": session.session_id})
    assert again.status_code == 404


def test_legacy_delete_of_unknown_session_is_404(host: RawHost) -> None:
    assert host.client.delete(host.url, headers={"Mcp-Session-Id": "no-such-session"}).status_code == 404


def test_legacy_get_of_unknown_session_is_404(host: RawHost) -> None:
    resp = host.client.get(host.url, headers={"Mcp-Session-Id": "no-such-session", "Accept": "text/event-stream"})
    assert resp.status_code == 404


def test_legacy_ping_answers_empty_result(session: RawHost) -> None:
    resp = session.legacy("ping")
    assert resp.status_code == 200 and resp.json() == {"jsonrpc": "2.0", "id": session._id, "result": {}}


@pytest.mark.parametrize("level", ["verbose", None, 3, "INFO"])
def test_legacy_set_level_with_bad_level_is_invalid_params(session: RawHost, level: Any) -> None:
    error_of(session.legacy("logging/setLevel", {"level": level}), 200, -32602)


def test_legacy_set_level_with_good_level_is_accepted(session: RawHost) -> None:
    assert session.legacy("logging/setLevel", {"level": "warning"}).json()["result"] == {}


def test_legacy_unknown_method_is_200_method_not_found(session: RawHost) -> None:
    error_of(session.legacy("no/such/method"), 200, -32601)


def test_legacy_server_discover_is_a_modern_only_method(session: RawHost) -> None:
    error_of(session.legacy("server/discover"), 200, -32601)


@pytest.mark.parametrize("arguments", [[], "text", 1, None], ids=["list", "string", "number", "null"])
@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_tools_call_arguments_not_an_object_is_invalid_params(host: RawHost, era: str, arguments: Any) -> None:
    params = {"name": "fx__echo", "arguments": arguments}
    if era == "legacy":
        host.initialize()
        resp = host.legacy("tools/call", params)
    else:
        resp = host.modern("tools/call", params)
    error_of(resp, 200, -32602)


@pytest.mark.parametrize("name", [42, None, ["fx__echo"], {"n": "fx__echo"}], ids=["int", "null", "list", "object"])
def test_legacy_tools_call_name_not_a_string_is_invalid_params(session: RawHost, name: Any) -> None:
    error_of(session.legacy("tools/call", {"name": name, "arguments": {}}), 200, -32602)


def test_legacy_tools_call_without_name_is_invalid_params(session: RawHost) -> None:
    error_of(session.legacy("tools/call", {"arguments": {}}), 200, -32602)


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage!",
        "",
        17,
        base64.urlsafe_b64encode(b'["prompts", 0]').decode(),
        base64.urlsafe_b64encode(b'["tools", -1]').decode(),
        base64.urlsafe_b64encode(b'["tools", 999999]').decode(),
    ],
    ids=["not-base64", "empty", "number", "other-list", "negative", "past-the-end"],
)
@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_tools_list_with_a_garbage_cursor_is_invalid_params(host: RawHost, era: str, cursor: Any) -> None:
    if era == "legacy":
        host.initialize()
        resp = host.legacy("tools/list", {"cursor": cursor})
    else:
        resp = host.modern("tools/list", {"cursor": cursor})
    error_of(resp, 200, -32602)


# ---- bad input on any era ----------------------------------------------------------------


@pytest.fixture(params=["legacy-session", "modern-headers"])
def era_headers(request: Any, host: RawHost) -> dict[str, str]:
    if request.param == "legacy-session":
        host.initialize()
        return host._legacy_headers()
    return modern_headers("tools/list")


WITH_X = '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":%s}}'


@pytest.mark.parametrize(
    "raw",
    [
        b"{",
        b"",
        b"not json",
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping"',
        b'{"jsonrpc":"2.0","id":1,"method":"ping\xff"}',
        (WITH_X % "1").encode("utf-16"),
        (WITH_X % "1").encode("utf-32"),
        (WITH_X % "NaN").encode(),
        (WITH_X % "Infinity").encode(),
        (WITH_X % "-Infinity").encode(),
        (WITH_X % '"\\ud800"').encode(),
        (WITH_X % '"a\\uDC00b"').encode(),
        (WITH_X % '{"\\udbff": 1}').encode(),
        b'{"jsonrpc":"2.0","id":"\\ud83d","method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":1,"method":"\\ud83dx"}',
    ],
    ids=[
        "open-brace",
        "empty",
        "text",
        "truncated",
        "not-utf8",
        "utf16",
        "utf32",
        "nan",
        "infinity",
        "minus-infinity",
        "lone-high-surrogate",
        "lone-low-surrogate",
        "lone-surrogate-key",
        "lone-surrogate-id",
        "lone-surrogate-method",
    ],
)
def test_malformed_json_is_400_parse_error_without_id(host: RawHost, era_headers: dict[str, str], raw: bytes) -> None:
    frame = error_of(host.post(None, era_headers, raw=raw), 400, -32700)
    assert "id" not in frame  # the schema types id as string|integer: null is not an option


def test_surrogate_pairs_and_escaped_backslashes_are_not_mistaken_for_lone_surrogates(host: RawHost) -> None:
    text = "😀 \\ud800"  # a real pair, then a literal backslash followed by "ud800"
    resp = host.post(
        None,
        modern_headers("tools/call", **{"Mcp-Name": "fx__echo"}),
        raw=json.dumps(modern_request(9, "tools/call", {"name": "fx__echo", "arguments": {"text": text}})).encode(),
    )
    assert reply_of(resp)["result"]["content"][0]["text"] == text


def test_reply_with_an_upstream_lone_surrogate_is_still_json_text() -> None:
    # Not reachable from a host any more (parse rejects it), but an upstream may send one.
    from mcpx.protocol import jsonrpc

    frame = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "cut \ud83d"}]}}
    assert json.loads(jsonrpc.dumps(frame)) == frame
    assert (
        jsonrpc.dumps({"jsonrpc": "2.0", "id": 1, "result": {"t": "é"}})
        == '{"jsonrpc":"2.0","id":1,"result":{"t":"é"}}'.encode()
    )


@pytest.mark.parametrize(
    "body",
    [
        [{"jsonrpc": "2.0", "id": 1, "method": "ping"}],
        [],
        "ping",
        42,
        None,
        True,
        {"jsonrpc": "1.0", "id": 1, "method": "tools/list"},
        {"id": 1, "method": "tools/list"},
        {"jsonrpc": 2.0, "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 1, "method": 7},
        {"jsonrpc": "2.0", "id": 1, "method": None},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": []},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": "x"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": None},
        {"jsonrpc": "2.0", "id": True, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 1.0, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": [1], "method": "tools/list"},
        {"jsonrpc": "2.0", "id": None, "method": "tools/list"},
        {"jsonrpc": "2.0"},
        {"jsonrpc": "2.0", "id": 1},
    ],
    ids=[
        "batch",
        "empty-batch",
        "string",
        "number",
        "null",
        "bool",
        "jsonrpc-1.0",
        "jsonrpc-missing",
        "jsonrpc-number",
        "method-int",
        "method-null",
        "params-list",
        "params-string",
        "params-null",
        "id-bool",
        "id-float",
        "id-integral-float",
        "id-object",
        "id-list",
        "id-null",
        "nothing",
        "id-only",
    ],
)
def test_invalid_request_shapes_are_400_invalid_request_without_id(
    host: RawHost, era_headers: dict[str, str], body: Any
) -> None:
    if "Mcp-Method" in era_headers and isinstance(body, dict) and "method" in body and "params" not in body:
        body = dict(body, params={"_meta": modern_meta()})  # a modern body: only the checked field is wrong
    frame = error_of(host.post(None, era_headers, raw=json.dumps(body).encode()), 400, -32600)
    assert "id" not in frame  # an id we rejected is never echoed


def test_body_over_max_body_bytes_is_413(host: RawHost) -> None:
    big = modern_request(1, "tools/call", {"name": "fx__echo", "arguments": {"text": "x" * (MAX_BODY * 2)}})
    resp = host.post(big, modern_headers("tools/call", **{"Mcp-Name": "fx__echo"}))
    assert "id" not in error_of(resp, 413, -32600)


def test_chunked_body_over_max_body_bytes_is_413(host: RawHost) -> None:
    # No Content-Length: the limit must hold while reading the chunks too.
    raw = json.dumps(
        modern_request(1, "tools/call", {"name": "fx__echo", "arguments": {"text": "x" * (MAX_BODY * 2)}})
    ).encode()

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(raw), 512):
            yield raw[i : i + 512]

    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        **modern_headers("tools/call", **{"Mcp-Name": "fx__echo"}),
    }
    resp = host.client.post(host.url, content=chunks(), headers=headers)
    assert "content-length" not in resp.request.headers
    assert "id" not in error_of(resp, 413, -32600)


def test_body_just_under_max_body_bytes_is_served(host: RawHost) -> None:
    body = modern_request(1, "tools/call", {"name": "fx__echo", "arguments": {"text": ""}})
    pad = MAX_BODY - len(json.dumps(body).encode()) - 8
    body["params"]["arguments"]["text"] = "y" * pad
    assert len(json.dumps(body).encode()) <= MAX_BODY
    resp = host.post(body, modern_headers("tools/call", **{"Mcp-Name": "fx__echo"}))
    assert resp.status_code == 200 and reply_of(resp)["result"]["content"][0]["text"] == "y" * pad


@pytest.mark.parametrize(
    "origin",
    [
        "https://evil.example",
        "null",
        "http://localhost.evil.example",
        "http://localhost@evil.example",
        "https://app.example.evil",
        "file://",
        "http://localhost:1 http://evil.example",
        "http://localhost:1,http://evil.example",
        "http://localhost:99999",
        "http://localhost/evil",
        "https://app.example https://evil.example",
    ],
)
def test_foreign_origin_is_403(daemon: Daemon, host: RawHost, origin: str) -> None:
    resp = host.modern("tools/list", headers={"Origin": origin})
    assert resp.status_code == 403
    frame = error_of(resp, 403, -32600)
    assert "id" not in frame
    # Like every other frame, the refusal is in the wire log, so teardown schema-checks it.
    assert daemon.wire_log is not None
    assert any(line["frame"] == frame for line in read_jsonl(daemon.wire_log))


@pytest.mark.parametrize(
    "lines",
    [["https://evil.example", "http://localhost:1"], ["http://localhost:1", "https://evil.example"]],
    ids=["evil-first", "evil-last"],
)
def test_repeated_origin_lines_with_a_foreign_one_are_403(host: RawHost, lines: list[str]) -> None:
    headers = [("Content-Type", "application/json"), ("MCP-Protocol-Version", MODERN), ("Mcp-Method", "tools/list")] + [
        ("Origin", o) for o in lines
    ]
    resp = host.client.post(host.url, content=json.dumps(modern_request(1, "tools/list")), headers=headers)
    assert resp.status_code == 403


@pytest.mark.parametrize(
    "origin", ["http://localhost:1234", "http://127.0.0.1:8080", "http://[::1]:9", "https://localhost", ORIGIN_OK]
)
def test_loopback_and_configured_origins_are_accepted(host: RawHost, origin: str) -> None:
    resp = host.modern("tools/list", headers={"Origin": origin})
    assert resp.status_code == 200 and "tools" in resp.json()["result"]


def test_foreign_origin_is_403_on_get_and_delete_too(session: RawHost) -> None:
    for verb in ("GET", "DELETE"):
        resp = session.client.request(
            verb,
            session.url,
            headers={**session._legacy_headers(), "Origin": "https://evil.example", "Accept": "text/event-stream"},
        )
        assert resp.status_code == 403, verb
    assert session.legacy("ping").status_code == 200  # the DELETE did not end the session


@pytest.mark.parametrize("verb", ["PUT", "PATCH"])
def test_other_http_methods_are_405(host: RawHost, verb: str) -> None:
    resp = host.client.request(verb, host.url, content=b"{}", headers=modern_headers("tools/list"))
    assert resp.status_code == 405 and resp.content == b""
    assert "POST" in resp.headers["allow"]


def test_modern_notification_is_202_with_empty_body(host: RawHost) -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99, "_meta": modern_meta()}}
    resp = host.post(note, {"MCP-Protocol-Version": MODERN, "Mcp-Method": "notifications/cancelled"})
    assert resp.status_code == 202 and resp.content == b""


def test_legacy_notification_is_202_with_empty_body(session: RawHost) -> None:
    resp = session.post({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}, session._legacy_headers())
    assert resp.status_code == 202 and resp.content == b""


def test_legacy_notification_for_unknown_session_is_404(host: RawHost) -> None:
    resp = host.post(
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"MCP-Protocol-Version": LEGACY, "Mcp-Session-Id": "no-such-session"},
    )
    assert resp.status_code == 404


def test_daemon_survives_every_bad_input_and_still_answers(daemon: Daemon, host: RawHost) -> None:
    bad: list[tuple[bytes, dict[str, str]]] = [
        (b"{", {}),
        (b"[]", {}),
        (b'"x"', modern_headers("tools/list")),
        (b'{"jsonrpc":"1.0","id":1,"method":"ping"}', {}),
        (b'{"jsonrpc":"2.0","id":{},"method":"ping"}', {}),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[]}', modern_headers("tools/list")),
        (
            json.dumps(modern_request(1, "tools/call", {"name": 5})).encode(),
            modern_headers("tools/call", **{"Mcp-Name": "5"}),
        ),
        (json.dumps(modern_request(1, "tools/list", meta={})).encode(), modern_headers("tools/list")),
        (b"\x00" * (MAX_BODY + 1), {}),
    ]
    for raw, headers in bad:
        assert 400 <= host.post(None, headers, raw=raw).status_code < 500
    assert host.client.put(host.url).status_code == 405
    assert host.modern("tools/list", headers={"Origin": "https://evil.example"}).status_code == 403
    assert daemon.proc is not None and daemon.proc.poll() is None
    resp = host.modern("tools/call", ECHO)
    assert reply_of(resp)["result"]["content"] == [{"type": "text", "text": "still here"}]
    host.initialize()
    assert reply_of(host.legacy("tools/call", ECHO))["result"]["content"][0]["text"] == "still here"


# ---- auth --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer wrong-token-wrong-token",
        f"Basic {TOKEN}",
        "Bearer",
        f"Bearer {TOKEN[:-1]}",
        f"Bearer {TOKEN}x",
        TOKEN,
        f"Bearer {BOB_SHA256}",
    ],
    ids=["none", "wrong", "basic-scheme", "empty-bearer", "prefix", "suffix", "no-scheme", "digest-as-token"],
)
def test_auth_missing_or_wrong_bearer_is_401_with_www_authenticate(
    auth_daemon: Daemon, authorization: str | None
) -> None:
    host = RawHost(auth_daemon.url)
    try:
        resp = host.modern("tools/list", headers={"Authorization": authorization})
        assert resp.status_code == 401
        assert resp.headers["www-authenticate"].lower().startswith("bearer")
        assert "tools" not in resp.text
        init = host.post(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}},
            },
            {"Authorization": authorization} if authorization else None,
        )
        assert init.status_code == 401 and "mcp-session-id" not in init.headers
    finally:
        host.close()


def test_a_token_configured_only_by_its_sha256_is_served_as_its_principal(auth_daemon: Daemon) -> None:
    host = RawHost(auth_daemon.url)
    try:
        resp = host.modern("tools/call", ECHO, headers={"Authorization": f"Bearer {BOB_TOKEN}"})
        assert reply_of(resp)["result"]["content"][0]["text"] == "still here"
        with Api(auth_daemon) as api:
            principals = {c["principal"] for c in api.get("/v1/connections").json()["connections"]}
        assert "bob" in principals, principals
    finally:
        host.close()


@pytest.mark.parametrize("scheme", ["Bearer", "bearer"])
def test_auth_right_bearer_is_served_in_both_eras(auth_daemon: Daemon, scheme: str) -> None:
    host = RawHost(auth_daemon.url)
    auth = {"Authorization": f"{scheme} {TOKEN}"}
    try:
        resp = host.modern("tools/call", ECHO, headers=auth)
        assert reply_of(resp)["result"]["content"][0]["text"] == "still here"
        init = host.post(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}},
            },
            auth,
        )
        assert init.status_code == 200
        sid = init.headers["mcp-session-id"]
        ok = host.post(
            {"jsonrpc": "2.0", "id": 2, "method": "ping"},
            {**auth, "MCP-Protocol-Version": LEGACY, "Mcp-Session-Id": sid},
        )
        assert ok.json()["result"] == {}
        # A session id is not a credential: the bearer is still required on every request.
        denied = host.post(
            {"jsonrpc": "2.0", "id": 3, "method": "ping"}, {"MCP-Protocol-Version": LEGACY, "Mcp-Session-Id": sid}
        )
        assert denied.status_code == 401
    finally:
        host.close()
