"""Logs that mean what they say: a clean run of the real daemon with a stdio upstream logs no WARNING,
an upstream that exits while the daemon is connected is not reported as exiting while nobody was, and
`--log-format json` writes one JSON object per line."""

from __future__ import annotations

import json
import logging
from io import StringIO
from pathlib import Path
from typing import Any

from harness import RawHost, reply_of, stdio_server, wait_until

from mcpx.cli.log_setup import setup_logging


def json_lines(text: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in text.splitlines()]  # every line, or this raises
    for line in lines:
        assert {"ts", "level", "logger", "message"} <= set(line), line
    return lines


def test_a_clean_run_logs_no_warning_and_a_crash_is_not_called_a_missed_one(start_daemon: Any, tmp_path: Path) -> None:
    config = {"mcpServers": {"fx": stdio_server(tmp_path), "off": {"command": "/nonexistent/server", "disabled": True}}}
    d = start_daemon(config, extra_args=["--log-format", "json"])
    assert [u["name"] for u in d.status()["upstreams"]] == ["fx"]  # the disabled one is not started
    with RawHost(d.url) as host:
        assert reply_of(host.modern("tools/call", {"name": "fx__echo", "arguments": {"text": "hi"}}))["result"]
    assert d.stop() == 0

    clean = json_lines(d.stderr())
    assert [line for line in clean if line["level"] not in ("DEBUG", "INFO")] == []  # no "keeper went away"
    assert any("off is disabled" in line["message"] for line in clean)

    d.start()  # the same state folder: nothing stale is reported either
    with RawHost(d.url) as host:
        host.modern("tools/call", {"name": "fx__crash", "arguments": {}})
        wait_until(lambda: d.status()["upstreams"][0]["restarts"] >= 1, 20, "fx restarted")
        d.wait_upstreams()
        assert reply_of(host.modern("tools/call", {"name": "fx__echo", "arguments": {"text": "again"}}))["result"]
    assert d.stop() == 0
    after = json_lines(d.stderr())[len(clean) :]
    messages = [f"{line['level']} {line['message']}" for line in after]
    assert not [m for m in messages if "while no daemon was connected" in m or "went away" in m], messages
    assert any("exited" in m or "crash" in m or "code 3" in m for m in messages), messages  # the crash is said


def test_json_log_lines_carry_the_exception_text() -> None:
    out = StringIO()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level  # put back after: other tests share the process
    setup_logging("info", "json", out)
    try:
        log = logging.getLogger("mcpx.test")
        log.debug("below the level")
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("it failed: %s", "badly")
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    (line,) = json_lines(out.getvalue())
    assert (line["level"], line["logger"], line["message"]) == ("ERROR", "mcpx.test", "it failed: badly")
    assert "ValueError: boom" in line["exception"] and line["ts"].endswith("Z")
