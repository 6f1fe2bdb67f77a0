"""mcpx.protocol.fastjson and jsonrpc's fast path: orjson where it gives the stdlib's answer, the
stdlib where it would not (integers past 64 bits, 1e400, lone surrogates, a BOM, NaN)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpx.protocol import fastjson, jsonrpc
from mcpx.protocol.errors import ParseError

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_loads_gives_the_stdlibs_value_for_any_json(value: Any) -> None:
    text = json.dumps(value)
    assert fastjson.loads(text) == json.loads(text)
    assert fastjson.loads(text.encode()) == json.loads(text)


@given(JSON_VALUES)
def test_dumps_writes_json_that_reads_back_as_the_value(value: Any) -> None:
    assert json.loads(fastjson.dumps(value)) == value


def test_an_integer_past_64_bits_stays_an_exact_integer() -> None:
    big = 2**70 + 1
    assert fastjson.loads(f'{{"n":{big}}}') == {"n": big}
    assert fastjson.loads(f"[{big}]".encode()) == [big]
    assert fastjson.dumps({"n": big}) == f'{{"n":{big}}}'.encode()
    msg = jsonrpc.parse(f'{{"jsonrpc":"2.0","id":{big},"method":"ping"}}'.encode())
    assert msg.raw["id"] == big


def test_what_orjson_refuses_gets_the_stdlibs_verdict() -> None:
    assert fastjson.loads("1e400") == math.inf
    assert fastjson.loads(b'"\\ud800"') == "\ud800"
    with pytest.raises(ValueError):
        fastjson.loads(b"{")
    # Sent upstream or to a keeper, a lone surrogate is escaped: the bytes stay valid UTF-8 (they
    # were the raw surrogate's, which no peer can decode) and read back as the same string.
    sent = fastjson.dumps({"s": "cut \ud800 here", "n": 2**70})
    assert sent == b'{"s":"cut \\ud800 here","n":1180591620717411303424}'
    assert sent.decode("utf-8") and fastjson.loads(sent) == {"s": "cut \ud800 here", "n": 2**70}


def test_parse_takes_a_bom_and_refuses_nan_and_lone_surrogates_as_before() -> None:
    assert jsonrpc.parse(b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"ping"}').method == "ping"
    with pytest.raises(ParseError, match="NaN is not a JSON value"):
        jsonrpc.parse(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}')
    with pytest.raises(ParseError, match="unpaired UTF-16 surrogate"):
        jsonrpc.parse(b'{"jsonrpc":"2.0","id":1,"method":"p\\ud800"}')
    with pytest.raises(ParseError):
        jsonrpc.parse(b'{"jsonrpc":"2.0","id":1,"method":"\xff"}')


def test_a_reply_keeps_key_order_and_unknown_fields() -> None:
    frame = {"jsonrpc": "2.0", "id": 3, "result": {"z": 1, "a": {"x-unknown": [1, "two"]}, "m": None}}
    assert fastjson.dumps(frame) == json.dumps(frame, separators=(",", ":")).encode()
    assert jsonrpc.dumps(frame) == json.dumps(frame, separators=(",", ":")).encode()


def test_json_nested_past_any_limit_is_a_value_error_not_a_crash() -> None:
    """orjson 3.8 segfaulted here (pyproject asks for 3.10 or later, which has a depth limit)."""
    with pytest.raises(ValueError):
        fastjson.loads(b"[" * 200_000 + b"]" * 200_000)
    with pytest.raises(ValueError):
        fastjson.loads(b'{"a":' * 100_000 + b"1" + b"}" * 100_000)
