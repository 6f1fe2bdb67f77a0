"""Issue #29's first list, each fixed item as a snapshot named for what was wrong, grouped by
feature (the snapshot app: the real ConsoleApp on a recorded feed, a frozen clock). Update after a
deliberate change: `python3 -m pytest tests/console --snapshot-update`, then look at the SVGs."""

from __future__ import annotations

from typing import Any

from pilot_wait import until
from snapshot_app import CONNECTIONS, LONG_NAMES, NOW, ReplayBackend, make_app, snapshot
from test_snapshots import SIZE, settle
from textual.pilot import Pilot

from console import render
from console.app import ConsoleApp

NARROW = (80, 24)


def _app(pilot: Pilot[None]) -> ConsoleApp:
    assert isinstance(pilot.app, ConsoleApp)
    return pilot.app


# ---- the hosts pane and the layout --------------------------------------------------------------


def test_host_counts_break_between_counts_not_mid_phrase_and_a_short_list_leaves_no_empty_half(
    snap_compare: Any,
) -> None:
    # Was: "2 completed 1 failed 1" / "cancelled" in the pane, and 20 blank lines under 8 rows.
    assert snap_compare(make_app("hosts"), terminal_size=SIZE, run_before=settle)


def test_at_80x24_the_hosts_pane_folds_away_and_upstream_host_and_age_stay_on_screen(snap_compare: Any) -> None:
    # Was: the hosts pane took half the width; upstream, host and age were off the screen.
    assert snap_compare(make_app("hosts"), terminal_size=NARROW, run_before=settle)


# ---- the tasks table's columns -------------------------------------------------------------------


def test_tool_and_upstream_columns_end_with_an_ellipsis_not_a_cut(snap_compare: Any) -> None:
    # Was: "trigger-long-r", and "everything-http" read as "everything".
    assert snap_compare(make_app("long"), terminal_size=(150, 30), run_before=settle)


def test_the_sorted_column_is_marked_with_its_direction(snap_compare: Any) -> None:
    # Was: nothing showed which column was sorted. `s` sorts by status, `S` turns it ascending.
    async def sort(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("s", "S")
        await pilot.pause()

    assert snap_compare(make_app("hosts"), terminal_size=SIZE, run_before=sort)


# ---- the detail pane and the filter --------------------------------------------------------------


def test_the_detail_age_ticks_with_the_list(snap_compare: Any) -> None:
    # Was: the detail said 4s while the list said 1m46s. A minute and a half later, both move on.
    async def later(pilot: Pilot[None]) -> None:
        await settle(pilot)
        app = _app(pilot)
        render.clock = lambda: NOW + 94_000
        selected = app.table.selected() or ""
        # The list's age and the detail's tick together (the snapshot shows whether the detail did).
        await until(pilot, lambda: app.table.get_cell(selected, "age") == "1m46s", "the ages ticked")
        await pilot.pause()

    assert snap_compare(make_app("hosts"), terminal_size=SIZE, run_before=later)


def test_typing_a_filter_narrows_the_list_before_enter(snap_compare: Any) -> None:
    # Was: the list kept showing every task, unrelated older ones too, until Enter.
    async def typing(pilot: Pilot[None]) -> None:
        await settle(pilot)
        app = _app(pilot)
        await pilot.press("slash", *"watch")
        await until(pilot, lambda: app.table.row_count == 2, "the list filtered as typed")
        await pilot.pause()

    assert snap_compare(make_app("hosts"), terminal_size=SIZE, run_before=typing)


# ---- forms and modals ----------------------------------------------------------------------------


def test_a_boolean_field_is_a_labelled_checkbox_and_the_email_hint_sits_under_its_own_label(
    snap_compare: Any,
) -> None:
    # Was: the boolean a bare coloured block; the hint "email" under the field, as if the next one's.
    async def open_form(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("a", "enter")  # the oldest question: the deploy form
        await pilot.pause()

    assert snap_compare(make_app("form"), terminal_size=SIZE, run_before=open_form)


def test_the_answer_queue_with_one_question_is_sized_to_it(snap_compare: Any) -> None:
    # Was: the queue's modal filled the screen for one item.
    async def open_queue(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("a")
        await pilot.pause()

    assert snap_compare(make_app("one-question"), terminal_size=SIZE, run_before=open_queue)


# ---- the header and read-only ------------------------------------------------------------------


def test_the_header_counts_working_waiting_failed_with_version_uptime_and_event_rate(snap_compare: Any) -> None:
    async def status_shown(pilot: Pilot[None]) -> None:
        await settle(pilot)
        app = _app(pilot)
        await until(pilot, lambda: app.daemon_version is not None, "/v1/status read")
        await pilot.pause()

    assert snap_compare(make_app("hosts"), terminal_size=(120, 12), run_before=status_shown)


def test_read_only_says_so_in_the_header_and_offers_no_cancel(snap_compare: Any) -> None:
    assert snap_compare(make_app("hosts", read_only=True), terminal_size=NARROW, run_before=settle)


# ---- the confirm dialog ------------------------------------------------------------------------

LONG_LABEL = "research-agent · python in ~/src/monorepo/services/billing-reconciliation"


def long_confirm_app() -> ConsoleApp:
    """Long names everywhere a confirmation names them: the tool, the upstream, the host's label."""
    conns = [{**c, "label": LONG_LABEL if c["id"] == "c-ide" else c["label"]} for c in CONNECTIONS]
    render.clock = lambda: NOW
    return ConsoleApp(ReplayBackend([snapshot(LONG_NAMES, [], conns)]), bell=False)


async def ask_to_cancel_the_long_one(pilot: Pilot[None]) -> None:
    app = _app(pilot)
    await until(pilot, lambda: app.table.row_count == len(LONG_NAMES) and app.flushes > 0, "the rows")
    app.table.move_cursor(row=app.table.get_row_index(LONG_NAMES[0]["id"]))
    await pilot.press("c")
    await until(pilot, lambda: app.screen.query("#confirm-question"), "the confirm dialog")
    await pilot.pause()


def test_at_80x24_the_confirm_dialog_wraps_its_question_instead_of_cutting_it(snap_compare: Any) -> None:
    # Was: "Cancel task Tl1longA (trigger-long-running-operation on everythi", the rest cut at the border.
    assert snap_compare(long_confirm_app(), terminal_size=NARROW, run_before=ask_to_cancel_the_long_one)
