"""Issue #29's operator conveniences, driven by Textual's pilot over the snapshot app's recorded
feed: read-only mode, `y` copying the row's `mcpx` command, the theme remembered per user, the
filter applied while it is typed, and `s` re-ordering the rows it has instead of making them again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pilot_wait import until
from snapshot_app import CONNECTIONS, QUESTIONS, TASKS, ReplayBackend, make_app, snapshot
from textual.command import CommandPalette

from console.app import ConsoleApp
from console.commands import ConsoleCommands
from console.screens import QueueScreen
from console.settings import settings_path

pytestmark = pytest.mark.anyio
SIZE = (180, 48)
WORKING = TASKS[0]["id"]  # Tk1build, working, no question
DEPLOY = TASKS[1]["id"]  # input_required, asked q-deploy


async def loaded(app: ConsoleApp, pilot: object) -> None:
    await until(pilot, lambda: app.table.row_count == len(TASKS) and app.flushes > 0, "the snapshot's rows")  # type: ignore[arg-type]  # a Pilot


def footer_keys(app: ConsoleApp) -> set[str]:
    """The actions the footer offers now (what it is built from)."""
    return {b.binding.action for b in app.screen.active_bindings.values() if b.enabled and b.binding.show}


# ---- read-only ---------------------------------------------------------------------------------


async def test_read_only_cancels_nothing_answers_nothing_and_offers_neither() -> None:
    app = make_app("hosts", read_only=True)
    backend = app.backend
    assert isinstance(backend, ReplayBackend)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        assert "READ-ONLY" in str(app.query_one("#topbar").content)  # type: ignore[attr-defined]  # a Static
        assert "cancel" not in footer_keys(app) and "copy_command" in footer_keys(app)
        app.table.move_cursor(row=app.table.get_row_index(WORKING))
        await pilot.press("c")  # no confirmation offered
        await pilot.press("C")
        await pilot.pause()
        assert not isinstance(app.screen, QueueScreen) and len(app.screen_stack) == 1
        app.table.move_cursor(row=app.table.get_row_index(DEPLOY))
        await pilot.press("enter")  # no form offered for its question
        await pilot.pause()
        assert len(app.screen_stack) == 1
        await pilot.press("a")  # the queue can be looked at, not answered from
        await until(pilot, lambda: isinstance(app.screen, QueueScreen), "the queue")
        await pilot.press("enter", "y", "d")
        await pilot.pause()
        assert isinstance(app.screen, QueueScreen)
        assert backend.cancelled == [] and backend.answers == []
        names = [name for name, _action, _help in ConsoleCommands._actions(_provider(app))]
        assert not any(n.startswith(("Cancel", "Answer the selected")) for n in names)


def _provider(app: ConsoleApp) -> ConsoleCommands:
    return ConsoleCommands(app.screen, None)


async def test_without_read_only_the_same_keys_do_cancel() -> None:
    """The read-only test above can fail: here c then y does send a cancel."""
    app = make_app("hosts")
    backend = app.backend
    assert isinstance(backend, ReplayBackend)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        assert "cancel" in footer_keys(app)
        app.table.move_cursor(row=app.table.get_row_index(WORKING))
        await pilot.press("c", "y")
        await until(pilot, lambda: backend.cancelled == [WORKING], "the cancel sent")


# ---- y copies the row's mcpx command -----------------------------------------------------------


async def test_y_copies_the_rows_mcpx_command_and_toasts_it() -> None:
    app = make_app("hosts")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        app.table.move_cursor(row=app.table.get_row_index(WORKING))
        await pilot.press("y")
        assert app.clipboard == f"mcpx tasks cancel {WORKING}"
        assert any(n.message == app.clipboard and n.title == "copied" for n in app._notifications)
        app.table.move_cursor(row=app.table.get_row_index(DEPLOY))
        await pilot.press("y")
        want = "mcpx questions answer q-deploy --accept 'approve=true|false' 'environment=staging|production'"
        assert app.clipboard == want + " contact=EMAIL"
        app.table.move_cursor(row=app.table.get_row_index(TASKS[2]["id"]))  # completed
        await pilot.press("y")
        assert app.clipboard == f"mcpx tasks show {TASKS[2]['id']}"


# ---- themes ------------------------------------------------------------------------------------


async def test_a_theme_chosen_with_ctrl_t_is_remembered_for_the_next_run(tmp_path: Path) -> None:
    path = settings_path()
    assert str(path).startswith(str(tmp_path))  # the test's own XDG_CONFIG_HOME (conftest.py)
    app = ConsoleApp(ReplayBackend([snapshot(TASKS, QUESTIONS, CONNECTIONS)]), bell=False)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        assert app.theme != "nord"
        await pilot.press("ctrl+t")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the theme picker")
        await pilot.press(*"nord")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await until(pilot, lambda: path.exists() and json.loads(path.read_text()).get("theme") == "nord", "saved")
        assert app.theme == "nord"
    again = ConsoleApp(ReplayBackend([snapshot(TASKS, QUESTIONS, CONNECTIONS)]), bell=False)
    async with again.run_test(size=SIZE) as pilot:
        await loaded(again, pilot)
        assert again.theme == "nord"


# ---- the filter, live ----------------------------------------------------------------------------


async def test_the_list_filters_while_the_filter_is_typed_before_enter() -> None:
    app = make_app("hosts")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await pilot.press("slash", *"watch")
        await until(pilot, lambda: app.table.row_count == 2, "only the two watch tasks, enter not pressed")
        assert {app.state.tasks[t].tool for t in app.table.shown()} == {"watch"}
        assert app.focused is not None and app.focused.id == "filter"  # still typing
        await pilot.press("backspace", *"xyz")
        await until(pilot, lambda: app.table.row_count == 0, "nothing matches 'watcxyz'")


# ---- sorting -----------------------------------------------------------------------------------


async def test_s_reorders_the_rows_without_making_them_again() -> None:
    app = make_app("hosts")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        rebuilds = app.table.stats.rebuilds
        for _ in range(5):
            await pilot.press("s")
            v = app.table.view
            want = app.state.visible(sort=v.sort, descending=v.descending)
            assert app.table.shown() == [r.id for r in want]
        await pilot.press("S")
        v = app.table.view
        assert app.table.shown() == [r.id for r in app.state.visible(sort=v.sort, descending=v.descending)]
        assert app.table.stats.rebuilds == rebuilds


# ---- read-only against the real daemon -------------------------------------------------------


async def test_a_read_only_console_is_not_counted_as_an_operator(start_daemon: object) -> None:
    """Attached as an operator, a console that cannot answer would have questions wait for it."""
    from harness import Api

    from console.client import DaemonClient, locate_in

    d = start_daemon({"mcpServers": {}})  # type: ignore[operator]  # the conftest fixture: a callable
    watcher = ConsoleApp(
        DaemonClient(locate_in(d.state_dir), "wanda", attach_as_operator=False), bell=False, read_only=True
    )
    olga = ConsoleApp(DaemonClient(locate_in(d.state_dir), "olga"), bell=False)
    async with watcher.run_test(size=SIZE) as p1, olga.run_test(size=SIZE) as p2:
        await until(p1, lambda: watcher.link == "connected" and watcher.daemon_version is not None, "the feed")
        await until(p2, lambda: "olga" in olga.state.operators, "olga attached")
        with Api(d) as api:
            operators = api.get("/v1/status").json()["operators"]
        assert operators == ["olga"]
        assert "olga" in watcher.state.operators and "wanda" not in watcher.state.operators
