"""mcpx.upstream.stdio.progress_hold: a keeper passes a call's progress on at most once per window,
the newest kept, and never lets a held line be overtaken by another line."""

from __future__ import annotations

import json

import pytest

from mcpx.upstream.stdio.progress_hold import ProgressHold, progress_token


def progress(token: object, n: int) -> bytes:
    note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": n}}
    return json.dumps(note).encode() + b"\n"


def reply(n: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": n, "result": {}}).encode() + b"\n"


def test_progress_after_a_quiet_window_passes_at_once() -> None:
    hold = ProgressHold(window_s=0.002)
    assert hold.take([progress("a", 1)], now=10.0) == [progress("a", 1)]
    assert not hold.holding
    assert hold.take([progress("a", 2)], now=10.003) == [progress("a", 2)]


def test_a_flood_is_held_per_token_and_its_newest_passes_when_the_window_ends() -> None:
    hold = ProgressHold(window_s=0.002)
    sent = hold.take([progress("a", 1), progress("a", 2), progress("b", 1), progress("a", 3)], now=10.0)
    assert sent == [progress("a", 1)]
    assert hold.holding
    assert hold.take([progress("b", 2)], now=10.001) == []
    assert hold.flush(now=10.002) == [progress("a", 3), progress("b", 2)]
    assert not hold.holding
    # Just passed on: the next progress waits for the next window.
    assert hold.take([progress("a", 4)], now=10.003) == []
    assert hold.flush(now=10.004) == [progress("a", 4)]


def test_any_other_line_takes_what_is_held_along_first_so_nothing_is_reordered() -> None:
    hold = ProgressHold(window_s=0.002)
    hold.take([progress("a", 1)], now=10.0)
    lines = [progress("a", 2), progress("a", 3), reply(7), progress("a", 4)]
    # A call's last progress still comes before its reply; progress after the reply waits again.
    assert hold.take(lines, now=10.001) == [progress("a", 3), reply(7)]
    assert hold.flush(now=10.002) == [progress("a", 4)]
    assert hold.flush(now=10.005) == []


@pytest.mark.parametrize(
    "line",
    [
        progress(1, 1),  # mcpx's own tokens are strings: a number token is not held
        progress(None, 1),
        b'{"jsonrpc":"2.0","id":1,"method":"notifications/progress","params":{"progressToken":"a"}}\n',
        b'{"jsonrpc":"2.0","id":1,"result":{"notifications/progress":{"progressToken":"a"}}}\n',
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":"a"}\n',
        b'{"jsonrpc":"2.0","method":"notifications/progress", not json\n',
        b'[{"method":"notifications/progress","params":{"progressToken":"a"}}]\n',
    ],
)
def test_what_is_not_string_tokened_progress_is_never_held(line: bytes) -> None:
    assert progress_token(line) is None
    hold = ProgressHold(window_s=0.002)
    hold.take([progress("a", 1)], now=10.0)
    assert hold.take([line, line], now=10.001) == [line, line]


def test_the_token_is_read_whatever_the_servers_spacing_and_key_order() -> None:
    line = b'{ "params" : { "progress" : 3, "progressToken" : "mcpx-7" }, "method" : "notifications/progress" }\n'
    assert progress_token(line) == "mcpx-7"
