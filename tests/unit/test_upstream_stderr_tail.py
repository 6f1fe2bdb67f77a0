"""The stderr lines `mcpx status` and /v1/status show under an upstream that is not ready: the
latest start's (stdio.py marks each start in the log), or the crash before a restart that has not
written yet."""

from __future__ import annotations

from mcpx.upstream.pool import latest_run_lines
from mcpx.upstream.stdio.process import START_MARK


def _start(n: int) -> str:
    return f"{START_MARK} 2026-12-05T10:00:0{n} python boom.py\n"


def test_the_stderr_tail_is_the_latest_starts_lines() -> None:
    log = "old half line\n" + _start(1) + "boom\nexit 3\n" + _start(2) + "boom again\n"
    assert latest_run_lines(log, 10) == ["boom again"]
    assert latest_run_lines(log + "\n  \n", 10) == ["boom again"]  # blank lines are not lines


def test_a_restart_that_has_not_written_yet_leaves_the_crash_before_it_on_show() -> None:
    crashed = _start(1) + "boom\n"
    assert latest_run_lines(crashed + _start(2), 10) == ["boom"]
    assert latest_run_lines(crashed + _start(2)[:20], 10) == ["boom"]  # the mark itself half written


def test_the_stderr_tail_keeps_the_last_lines_and_reads_a_log_without_marks() -> None:
    assert latest_run_lines(_start(1) + "".join(f"l{i}\n" for i in range(30)), 3) == ["l27", "l28", "l29"]
    assert latest_run_lines("written before marks existed\n", 10) == ["written before marks existed"]
    assert latest_run_lines("", 10) == [] and latest_run_lines(_start(1), 10) == []
