"""Reloading the config, its pure parts: which servers a new config adds, removes and changes, which
settings need a restart, how a reload is told (the CLI, the console), and the reloader itself
against a real file (a bad one refused, the running config kept; a touched one reloads nothing)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from console.notices import config_notice
from mcpx.cli.text_format import reload_text
from mcpx.config.diff import ReloadOutcome, ServerChanges, diff_servers, needs_restart
from mcpx.config.model import Config, parse_config
from mcpx.daemon import config_watch
from mcpx.daemon.reloader import Reloader
from mcpx.events.bus import Event


def _config(servers: dict[str, Any], **top: Any) -> Config:
    return parse_config({"mcpServers": servers, **top}, "test")


A = {"command": "a-server"}
B = {"command": "b-server", "args": ["--x"]}
C = {"url": "http://127.0.0.1:9/mcp"}


# ---- which servers change ------------------------------------------------------------------------


def test_added_removed_changed_and_unchanged_servers_are_told_apart_in_config_order() -> None:
    old = _config({"a": A, "b": B, "gone": C}).active_servers
    new = _config({"new": C, "b": {**B, "args": ["--y"]}, "a": A}).active_servers
    assert diff_servers(old, new) == ServerChanges(added=("new",), removed=("gone",), changed=("b",), unchanged=("a",))


@pytest.mark.parametrize(
    "edit",
    [
        {"env": {"K": "v"}},
        {"cwd": "/tmp"},
        {"mcpx": {"namespace": "other"}},
        {"mcpx": {"tools": {"t": {"taskSupport": "required"}}}},
    ],
    ids=["env", "cwd", "namespace", "tool-override"],
)
def test_any_edit_to_a_server_entry_changes_it(edit: dict[str, Any]) -> None:
    old = _config({"a": A}).active_servers
    new = _config({"a": {**A, **edit}}).active_servers
    assert diff_servers(old, new).changed == ("a",)


def test_an_entry_written_differently_but_meaning_the_same_is_unchanged() -> None:
    old = _config({"a": A}).active_servers
    new = _config({"a": {**A, "args": [], "env": {}}}).active_servers  # the defaults, spelt out
    changes = diff_servers(old, new)
    assert changes.unchanged == ("a",) and not changes.listing_changes


def test_disabling_a_server_removes_it_and_enabling_it_adds_it() -> None:
    on = _config({"a": A, "b": B}).active_servers
    off = _config({"a": A, "b": {**B, "disabled": True}}).active_servers
    assert diff_servers(on, off).removed == ("b",)
    assert diff_servers(off, on).added == ("b",)


# ---- what needs a restart ------------------------------------------------------------------------


def test_settings_outside_mcpservers_that_differ_are_named_as_needing_a_restart() -> None:
    running = _config({"a": A})
    new = _config({"b": B}, daemon={"port": 9999}, tasks={"ttlMs": 5000}, approve=["x*"], approveTimeoutMs=5)
    # Top-level `approve` and `approveTimeoutMs` are live (#39 item 9): no restart for them.
    assert needs_restart(running, new) == ("daemon.port", "tasks.ttlMs")


def test_a_config_with_only_server_changes_needs_no_restart() -> None:
    assert needs_restart(_config({"a": A}), _config({"b": B})) == ()
    tokens = {"tokens": [{"principal": "p", "token": "x" * 16}]}
    assert needs_restart(_config({}), _config({}, auth=tokens)) == ("auth",)


# ---- how a reload is told ------------------------------------------------------------------------


def _applied(**kw: Any) -> ReloadOutcome:
    return ReloadOutcome("api", 1_000, "/c.json", ServerChanges(**kw), ("daemon.port",))


def test_an_applied_reload_on_the_wire_and_in_words() -> None:
    wire = _applied(added=("n",), removed=("g",)).wire()
    assert wire == {
        "result": "applied",
        "atMs": 1_000,
        "error": None,
        "trigger": "api",
        "path": "/c.json",
        "added": ["n"],
        "removed": ["g"],
        "changed": [],
        "needsRestart": ["daemon.port"],
    }
    assert reload_text(wire) == "applied: added n; removed g\nneeds a restart (ignored until then): daemon.port"


def test_a_refused_reload_says_why_and_that_the_old_config_serves() -> None:
    refused = ReloadOutcome("file", 1, "/c.json", error="/c.json: not valid JSON at line 1 column 2")
    assert not refused.applied and refused.wire()["result"] == "refused"
    assert (
        reload_text(refused.wire())
        == "refused, still serving the config it had: /c.json: not valid JSON at line 1 column 2"
    )


def _event(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"type": "event", "seq": 1, "ts": 1, "kind": kind, "data": data}


def test_the_console_toasts_a_reload_and_a_refusal_and_nothing_else() -> None:
    reloaded = config_notice(_event("config.reloaded", {"added": ["web"], "removed": [], "changed": ["db"]}))
    assert reloaded is not None and reloaded.severity == "information"
    assert reloaded.text == "added: web\nchanged: db"
    restart = config_notice(_event("config.reloaded", {"added": [], "needsRestart": ["daemon.port"]}))
    assert restart is not None and restart.severity == "warning" and "daemon.port" in restart.text
    refused = config_notice(_event("config.refused", {"error": "bad key"}))
    assert refused is not None and refused.severity == "error" and refused.text.startswith("bad key")
    failed = config_notice(_event("daemon.background_failed", {"task": "notifier", "error": "E: x",
                                                               "action": "restarting", "retryInS": 0.5}))  # fmt: skip
    assert failed is not None and failed.title == "notifier failed" and failed.severity == "error"
    assert failed.text == "E: x\nstarting it again in 0.5 s; the daemon serves on"
    assert config_notice(_event("task.status", {})) is None
    assert config_notice({"type": "heartbeat"}) is None


# ---- the reloader, on a real file ----------------------------------------------------------------


class _Recorder:
    def __init__(self) -> None:
        self.applied: list[tuple[ServerChanges, Config]] = []
        self.events: list[Event] = []

    async def apply(self, changes: ServerChanges, config: Config) -> None:
        self.applied.append((changes, config))

    async def record(self, events: Sequence[Event]) -> None:
        self.events.extend(events)


def _reloader(tmp_path: Path, servers: dict[str, Any]) -> tuple[Reloader, _Recorder, Path]:
    path = tmp_path / "mcpx.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    rec = _Recorder()
    reloader = Reloader(path, _config(servers), rec.apply, rec.record, clock=lambda: 2.0)
    reloader.note_current()
    return reloader, rec, path


@pytest.mark.anyio
async def test_a_bad_file_is_refused_and_the_next_good_one_is_compared_with_what_runs(tmp_path: Path) -> None:
    reloader, rec, path = _reloader(tmp_path, {"a": A})
    path.write_text('{"mcpServers": {"b": ')
    refused = await reloader.reload("signal", "mcpx")
    assert refused.error is not None and "not valid JSON" in refused.error
    assert rec.applied == [] and reloader.last is refused
    assert [(e.kind, e.data["trigger"], e.by) for e in rec.events] == [("config.refused", "signal", "mcpx")]
    path.write_text(json.dumps({"mcpServers": {"a": A, "b": B}}))
    applied = await reloader.reload("api", "operator:olga")
    assert applied.applied and applied.at_ms == 2000
    assert [c for c, _ in rec.applied] == [ServerChanges(added=("b",), unchanged=("a",))]
    assert rec.events[-1].kind == "config.reloaded" and rec.events[-1].data["added"] == ["b"]


@pytest.mark.anyio
async def test_an_unknown_server_key_is_refused_naming_it(tmp_path: Path) -> None:
    reloader, rec, path = _reloader(tmp_path, {"a": A})
    path.write_text(json.dumps({"mcpServers": {"a": {**A, "mcpx": {"namespase": "x"}}}}))
    refused = await reloader.reload("file", "mcpx")
    assert refused.error is not None and "namespase" in refused.error and rec.applied == []


@pytest.mark.anyio
async def test_a_touched_file_that_reads_the_same_reloads_nothing(tmp_path: Path) -> None:
    reloader, rec, path = _reloader(tmp_path, {"a": A})
    path.write_text(path.read_text())
    assert await reloader.file_changed() is None and rec.events == []
    path.write_text(json.dumps({"mcpServers": {}}))
    outcome = await reloader.file_changed()
    assert outcome is not None and outcome.changes.removed == ("a",)


@pytest.mark.anyio
async def test_the_watcher_sees_an_edit_in_place_and_a_file_renamed_over_it(tmp_path: Path) -> None:
    path = tmp_path / "mcpx.json"
    path.write_text("{}")
    seen: list[str] = []

    async def changed() -> None:
        seen.append(path.read_text())

    async with anyio.create_task_group() as tg:
        tg.start_soon(config_watch.watch, path, changed, 0.02)
        await anyio.sleep(0.1)
        path.write_text('{"a": 1}')  # a new size
        with anyio.fail_after(5):
            while len(seen) < 1:
                await anyio.sleep(0.01)
        spare = tmp_path / "new.json"
        spare.write_text('{"b": 2}')  # the same size: the inode tells
        spare.replace(path)
        with anyio.fail_after(5):
            while len(seen) < 2:
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert seen == ['{"a": 1}', '{"b": 2}']
