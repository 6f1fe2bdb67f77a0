"""mcpx.protocol.progress_batch and the stdio line batches: within one read, a progress
notification superseded by a later one of the same token is dropped; everything else keeps its
place."""

from __future__ import annotations

from typing import Any

import pytest

from mcpx.protocol.progress_batch import without_superseded
from mcpx.upstream.stdio.line_batches import LineBatches, LineTooLong


def progress(token: object, n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": n}}


def reply(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": n, "result": {}}


def test_each_tokens_newest_progress_is_kept_in_place_with_everything_else() -> None:
    batch = [progress("a", 1), progress("b", 1), reply(1), progress("a", 2), progress("a", 3), reply(2)]
    kept, dropped = without_superseded(batch)
    assert kept == [progress("b", 1), reply(1), progress("a", 3), reply(2)] and dropped == 2


def test_a_string_and_a_number_token_of_the_same_text_are_two_tokens() -> None:
    batch = [progress("1", 1), progress(1, 2)]
    assert without_superseded(batch) == (batch, 0)


@pytest.mark.parametrize(
    "odd",
    [
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": True}},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": "x"},
        {"jsonrpc": "2.0", "id": 1, "method": "notifications/progress", "params": {"progressToken": "a"}},
    ],
)
def test_what_is_not_a_tokened_progress_notification_is_never_dropped(odd: dict[str, Any]) -> None:
    batch = [odd, odd, progress("a", 1)]
    assert without_superseded(batch) == (batch, 0)


def test_line_batches_split_once_and_carry_the_rest_to_the_next_read() -> None:
    lines = LineBatches("up", max_line=1000)
    assert lines.feed(b'{"a":1}\n{"b":') == [{"a": 1}]
    assert lines.feed(b"2}\n\n  \nnot json\n[1]\n") == [{"b": 2}]  # blank, non-JSON and non-object skipped
    with pytest.raises(LineTooLong):
        lines.feed(b"x" * 1001)
    assert lines.feed(b'{"c":3}\n') == [{"c": 3}]  # the long line was let go
