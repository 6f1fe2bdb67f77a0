"""mcpx.protocol.jsonrpc: parsing and classifying inbound frames, building outbound ones. No sockets."""

from __future__ import annotations

import json

import pytest
from wire_schema import check_frame

from mcpx.protocol import jsonrpc
from mcpx.protocol.errors import INVALID_REQUEST, PARSE_ERROR, InvalidParams, InvalidRequest, ParseError

# ---- classification -----------------------------------------------------------------------


def test_frame_with_method_and_id_is_a_request() -> None:
    msg = jsonrpc.parse(b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":"x"}}')
    assert (msg.kind, msg.id, msg.method, msg.params) == ("request", 7, "tools/list", {"cursor": "x"})


def test_frame_with_method_and_no_id_is_a_notification() -> None:
    msg = jsonrpc.parse('{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert msg.kind == "notification" and msg.id is None


@pytest.mark.parametrize("rid", ["abc", "", 0, -1, 2**53])
def test_string_and_integer_request_ids_are_kept_verbatim(rid: object) -> None:
    msg = jsonrpc.classify({"jsonrpc": "2.0", "id": rid, "method": "ping"})
    assert msg.kind == "request" and msg.id == rid and type(msg.id) is type(rid)


def test_frame_with_result_and_id_is_a_response() -> None:
    msg = jsonrpc.classify({"jsonrpc": "2.0", "id": 3, "result": {}})
    assert msg.kind == "response" and msg.id == 3


def test_error_response_with_null_id_is_a_response() -> None:
    msg = jsonrpc.classify({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "x"}})
    assert msg.kind == "response" and msg.id is None


def test_error_response_without_id_is_a_response_because_both_schemas_make_id_optional_on_errors() -> None:
    # schema/2025-11-25 and 2026-07-28 JSONRPCErrorResponse require only `jsonrpc` and `error`.
    msg = jsonrpc.classify({"jsonrpc": "2.0", "error": {"code": -32603, "message": "x"}})
    assert msg.kind == "response" and msg.id is None


def test_missing_params_read_as_empty_object() -> None:
    assert jsonrpc.classify({"jsonrpc": "2.0", "id": 1, "method": "ping"}).params == {}


def test_method_of_a_response_reads_as_empty_string() -> None:
    assert jsonrpc.classify({"jsonrpc": "2.0", "id": 1, "result": {}}).method == ""


# ---- parse errors (-32700) ----------------------------------------------------------------


@pytest.mark.parametrize("body", [b"", b"{", b"{'jsonrpc': '2.0'}", b"\xff\xfe{}", "not json"])
def test_unparseable_body_is_parse_error_with_http_400(body: bytes | str) -> None:
    with pytest.raises(ParseError) as exc:
        jsonrpc.parse(body)
    assert exc.value.code == PARSE_ERROR == -32700 and exc.value.http_status == 400


def test_json_nested_too_deep_to_parse_is_parse_error_not_a_crash() -> None:
    # JSON-RPC 2.0 §5.1: -32700 when "an error occurred on the server while parsing the JSON text".
    with pytest.raises(ParseError):
        jsonrpc.parse(b"[" * 200_000 + b"]" * 200_000)


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_non_json_number_constants_are_parse_errors(token: str) -> None:
    # RFC 8259 6: NaN and Infinity are not JSON, though Python's json module accepts them.
    with pytest.raises(ParseError):
        jsonrpc.parse(f'{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"x":{token}}}}}')


def test_body_that_is_not_utf8_is_a_parse_error_even_if_it_is_valid_utf16() -> None:
    with pytest.raises(ParseError):
        jsonrpc.parse('{"jsonrpc":"2.0","id":1,"method":"ping"}'.encode("utf-16"))


def test_utf8_byte_order_mark_is_tolerated() -> None:
    assert jsonrpc.parse(b"\xef\xbb\xbf" + b'{"jsonrpc":"2.0","id":1,"method":"ping"}').kind == "request"


def test_lone_surrogate_escape_is_a_parse_error_but_a_paired_one_is_fine() -> None:
    with pytest.raises(ParseError):
        jsonrpc.parse(b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}')
    assert jsonrpc.parse(b'{"jsonrpc":"2.0","id":"\\ud83d\\ude42","method":"ping"}').id == "\U0001f642"


# ---- invalid requests (-32600) ------------------------------------------------------------


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], id="batch"),
        pytest.param([], id="empty-batch"),
        pytest.param("ping", id="string"),
        pytest.param(42, id="number"),
        pytest.param(None, id="null"),
        pytest.param({"id": 1, "method": "ping"}, id="no-jsonrpc"),
        pytest.param({"jsonrpc": "1.0", "id": 1, "method": "ping"}, id="jsonrpc-1.0"),
        pytest.param({"jsonrpc": 2.0, "id": 1, "method": "ping"}, id="jsonrpc-number"),
        pytest.param({"jsonrpc": "2.0", "id": 1, "method": 5}, id="method-not-string"),
        pytest.param({"jsonrpc": "2.0", "id": None, "method": "ping"}, id="request-id-null"),
        pytest.param({"jsonrpc": "2.0", "id": True, "method": "ping"}, id="request-id-bool"),
        pytest.param({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, id="request-id-float"),
        pytest.param({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}, id="request-id-object"),
        pytest.param({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1, 2]}, id="params-array"),
        pytest.param({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": None}, id="params-null"),
        pytest.param({"jsonrpc": "2.0", "id": 1}, id="response-without-result-or-error"),
        pytest.param({"jsonrpc": "2.0", "result": {}}, id="result-without-id"),
        pytest.param({"jsonrpc": "2.0"}, id="nothing"),
    ],
)
def test_malformed_message_is_invalid_request_with_http_400(frame: object) -> None:
    with pytest.raises(InvalidRequest) as exc:
        jsonrpc.classify(frame)
    assert exc.value.code == INVALID_REQUEST == -32600 and exc.value.http_status == 400


def test_parse_classifies_after_decoding() -> None:
    with pytest.raises(InvalidRequest, match="batches"):
        jsonrpc.parse(b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]')


# ---- outbound frames ----------------------------------------------------------------------


def test_result_frame_echoes_the_request_id() -> None:
    assert jsonrpc.result(5, {"tools": []}) == {"jsonrpc": "2.0", "id": 5, "result": {"tools": []}}


def test_error_frame_omits_id_when_unknown() -> None:
    frame = jsonrpc.error(None, {"code": -32700, "message": "Parse error"})
    assert "id" not in frame
    check_frame(frame, "2025-11-25")
    check_frame(frame, "2026-07-28")


@pytest.mark.parametrize("rid", [0, ""])
def test_error_frame_keeps_falsy_ids(rid: object) -> None:
    assert jsonrpc.error(rid, {"code": -32601, "message": "x"})["id"] == rid  # type: ignore[arg-type]  # parametrized ids are ints and strs


def test_error_from_uses_the_exception_code_message_and_data() -> None:
    frame = jsonrpc.error_from(9, InvalidParams("bad cursor", {"cursor": "x"}))
    assert frame == {
        "jsonrpc": "2.0",
        "id": 9,
        "error": {"code": -32602, "message": "bad cursor", "data": {"cursor": "x"}},
    }
    check_frame(frame, "2026-07-28")


def test_notification_and_request_omit_params_only_when_none() -> None:
    assert jsonrpc.notification("notifications/initialized") == {
        "jsonrpc": "2.0",
        "method": "notifications/initialized",
    }
    assert jsonrpc.notification("x", {})["params"] == {}
    assert jsonrpc.request(1, "ping") == {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert jsonrpc.request(1, "tools/list", {})["params"] == {}


def test_built_frames_are_schema_valid_in_both_eras() -> None:
    check_frame(jsonrpc.request(1, "ping"), "2025-11-25")
    check_frame(jsonrpc.notification("notifications/progress", {"progressToken": "t", "progress": 1}), "2025-11-25")
    check_frame(jsonrpc.result(1, {"resultType": "complete"}), "2026-07-28")


def test_dumps_is_one_line_so_stdio_framing_holds() -> None:
    # stdio: one message per line, no embedded newlines (2026-07-28/basic/transports/stdio.mdx:10-13).
    data = jsonrpc.dumps(jsonrpc.result(1, {"text": "a\nb\r\nc", "nested": {"k": ["x\ny"]}}))
    assert b"\n" not in data and b"\r" not in data


def test_dumps_escapes_a_lone_surrogate_instead_of_failing_the_reply() -> None:
    data = jsonrpc.dumps(jsonrpc.result(1, {"text": "cut \ud800 here"}))
    assert b"\\ud800" in data and json.loads(data)["result"]["text"] == "cut \ud800 here"


def test_dumps_is_compact_utf8_and_round_trips_through_parse() -> None:
    frame = jsonrpc.request("r-1", "tools/call", {"name": "grüß", "arguments": {"emoji": "🙂"}})
    data = jsonrpc.dumps(frame)
    assert b", " not in data and b": " not in data
    assert "grüß".encode() in data
    assert json.loads(data) == frame
    assert jsonrpc.parse(data).raw == frame
