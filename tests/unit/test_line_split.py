"""mcpx.upstream.stdio.line_split: reads split into the lines they complete, a long line's pieces
kept apart until its newline, and the bound on an unfinished line."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpx.upstream.stdio.line_split import LineSplitter, LineTooLong


def test_lines_across_reads_come_out_whole_and_once() -> None:
    lines = LineSplitter(max_line=100)
    assert lines.feed(b'{"a":1}\n{"b"') == [b'{"a":1}']
    assert lines.feed(b":2") == []
    assert lines.feed(b"}\n\n{}\n") == [b'{"b":2}', b"", b"{}"]
    assert lines.feed(b"\n") == [b""]


def test_a_line_past_the_bound_is_refused_and_let_go() -> None:
    lines = LineSplitter(max_line=10)
    assert lines.feed(b"x" * 6) == []
    with pytest.raises(LineTooLong):
        lines.feed(b"x" * 5)  # 11 bytes without a newline
    assert lines.feed(b"ok\n") == [b"ok"]  # the next line starts fresh
    with pytest.raises(LineTooLong):
        lines.feed(b"done\n" + b"y" * 11)  # what follows the last newline counts too


@given(st.lists(st.binary(max_size=40), max_size=30))
def test_any_cut_of_a_stream_gives_the_lines_one_split_would(chunks: list[bytes]) -> None:
    lines = LineSplitter(max_line=10_000)
    got = [line for chunk in chunks for line in lines.feed(chunk)]
    stream = b"".join(chunks)
    assert got == stream.split(b"\n")[:-1]  # every line a newline ended, in order
