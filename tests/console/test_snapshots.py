"""The console's screens as SVG snapshots (pytest-textual-snapshot), grouped by feature, from the
dedicated snapshot app (tests/console/snapshot_app.py: the real app, a recorded feed, a frozen
clock). Update after a deliberate change: `python3 -m pytest tests/console --snapshot-update`."""

from __future__ import annotations

from typing import Any

from pilot_wait import until
from snapshot_app import make_app
from textual.pilot import Pilot

from console.app import ConsoleApp

SIZE = (180, 48)


def _app(pilot: Pilot[None]) -> ConsoleApp:
    app = pilot.app
    assert isinstance(app, ConsoleApp)
    return app


def _settled(app: ConsoleApp) -> bool:
    """The feed's snapshot folded in and painted by a flush (they run every 0.1 s), and the
    selected task's detail fetched (none selected: nothing to fetch)."""
    if app.state.seq is None or app.flushes == 0:
        return False
    selected = app.table.selected()
    return selected is None or (app.detail.shown_task or {}).get("id") == selected


async def settle(pilot: Pilot[None]) -> None:
    app = _app(pilot)
    await until(pilot, lambda: _settled(app), "the snapshot flushed and the selected task's detail shown")
    await pilot.pause()


def test_empty_console(snap_compare: Any) -> None:
    assert snap_compare(make_app("empty"), terminal_size=SIZE, run_before=settle)


def test_three_hosts_with_tasks_in_every_status(snap_compare: Any) -> None:
    assert snap_compare(make_app("hosts"), terminal_size=SIZE, run_before=settle)


def test_the_answer_queue_oldest_first(snap_compare: Any) -> None:
    async def open_queue(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("a")
        await pilot.pause()

    assert snap_compare(make_app("queue"), terminal_size=SIZE, run_before=open_queue)


def test_a_question_form_with_a_validation_error(snap_compare: Any) -> None:
    async def answer_badly(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("a", "enter")  # the oldest question: the deploy form
        await pilot.pause()
        await pilot.click("#field-contact")
        await pilot.press(*"not-an-email")
        await pilot.press("ctrl+s")
        await pilot.pause()

    assert snap_compare(make_app("form"), terminal_size=SIZE, run_before=answer_badly)


def test_an_approval_is_mcpx_asking_with_every_argument_in_a_box_that_scrolls(snap_compare: Any) -> None:
    """#37 item 5 and #39 item 6: headed as mcpx's question, the arguments whole and their size said."""

    async def open_approval(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("a", "enter")
        await until(pilot, lambda: pilot.app.screen.query("#arguments"), "the approval's form")
        await pilot.pause()

    assert snap_compare(make_app("approval"), terminal_size=SIZE, run_before=open_approval)


def test_after_a_cancel(snap_compare: Any) -> None:
    async def cancel_first(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("c")
        await pilot.pause()
        await pilot.press("y")
        app = _app(pilot)
        await until(pilot, lambda: app.screen.query("Toast"), "the toast saying the cancel was sent")
        await pilot.pause()

    assert snap_compare(make_app("cancelled"), terminal_size=SIZE, run_before=cancel_first)


def test_reconnecting_after_the_feed_dropped(snap_compare: Any) -> None:
    async def dropped(pilot: Pilot[None]) -> None:
        app = _app(pilot)
        await until(pilot, lambda: app.link == "reconnecting", "the drop noticed")
        await pilot.pause()

    assert snap_compare(make_app("reconnecting"), terminal_size=SIZE, run_before=dropped)
