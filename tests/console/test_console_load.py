"""The console keeps up with a busy daemon (issue #11): 10,000 tasks in the snapshot, then 200
events a second for 5 s or more, into the real ConsoleApp, while keys are pressed. Everything asserted is
a count (events applied, rows shown, flushes, rebuilds), never a time: the speed goals are
bench/console_load.py's. The feed is tests/console/load_feed.py's, and every message it sends is
held to the daemon's own schemas first.

What the table does at this size, as asserted here: it holds every row the view shows (10,000 of
them; no paging), draws only what is on screen, and after the snapshot is never rebuilt by the
feed: each flush updates, adds and drops only the rows the events touched.
"""

from __future__ import annotations

import pytest
from load_feed import LoadBackend, check_event, check_snapshot
from pilot_wait import until

from console.app import ConsoleApp

pytestmark = pytest.mark.anyio
SIZE = (180, 48)
TASKS = 10_000
RATE = 200.0
EVENTS = 1000  # at least: 5 s of the stream


def wanted(app: ConsoleApp) -> list[str]:
    """The ids the table should show, in order: the state's tasks through the table's view."""
    v = app.table.view
    rows = app.state.visible(host=v.host, statuses=v.statuses, text=v.text, sort=v.sort, descending=v.descending)
    return [r.id for r in rows if not (v.hide_finished and r.terminal)]


async def test_ten_thousand_tasks_and_200_events_a_second_are_all_applied_and_shown() -> None:
    backend = LoadBackend(TASKS, rate=RATE, seconds=None, keep=True)
    check_snapshot(backend.snapshot)
    app = ConsoleApp(backend, bell=False)
    async with app.run_test(size=SIZE) as pilot:
        table = app.table
        await until(pilot, lambda: table.row_count >= TASKS, "the snapshot's 10,000 rows in the table", timeout=60)
        assert table.stats.rebuilds == 1  # the snapshot's; the hosts pane picking "all" again redid nothing
        # A row for every snapshot task (no paging) but those the stream, already running, has
        # since expired: on a slow machine some go before the table is filled.
        snapshot_ids = {t["id"] for t in backend.snapshot["tasks"]}
        still_there = snapshot_ids & backend.truth.keys()
        assert len(still_there) >= TASKS - backend.sent["task.expired"]
        assert still_there <= set(table.shown())

        # Keys while the stream runs: the cursor moves, the filter applies.
        await until(pilot, lambda: backend.events_sent >= 100, "the stream under way", timeout=60)
        before = table.selected()
        assert before is not None
        await pilot.press("down")
        shown = table.shown()
        assert table.selected() is not None and shown.index(table.selected()) == shown.index(before) + 1
        await pilot.press("slash", *"deploy", "enter")
        # The filter applies while it is typed, after a short pause (console/app.py): one rebuild
        # per pause, so at most one per key under a slow pilot, at least one for the whole word.
        filtered = table.stats.rebuilds
        assert table.view.text == "deploy" and 2 <= filtered <= 1 + len("deploy")

        # The stream goes on a while after the filter (as long as the pilot took to type it: it
        # waits for the app to go idle after each key, which under this load it seldom does).
        typed_at = backend.events_sent
        await until(pilot, lambda: backend.events_sent >= max(EVENTS, typed_at + 2 * RATE), "more events", timeout=60)
        backend.stop()
        await until(pilot, lambda: backend.finished, "the stream's end", timeout=60)
        await until(pilot, lambda: app.state.seq == backend.last_seq, "the last event applied", timeout=60)
        await until(pilot, lambda: table.shown() == wanted(app), "the table caught up with the state", timeout=60)

        # Every event sent is one the daemon could send, and every one was applied, once.
        for message in backend.log:
            check_event(message)
        events = backend.events_sent
        assert events >= EVENTS and len(backend.log) == events
        assert app.state.applied == events and app.state.ignored == 0
        assert app.state.seq == backend.last_seq

        # The state is the daemon's: every task, with its status and message; the open questions.
        created, expired = backend.sent["task.created"], backend.sent["task.expired"]
        assert created > 0 and expired > 0 and backend.sent["question.answered"] > 0
        assert len(app.state.tasks) == TASKS + created - expired == len(backend.truth)
        assert {tid: (t.status, t.status_message) for tid, t in app.state.tasks.items()} == {
            tid: (t.status, t.message) for tid, t in backend.truth.items()
        }
        assert set(app.state.questions) == set(backend.questions)
        assert sum(app.state.host_counts(None).values()) == len(app.state.tasks)

        # The table shows exactly the filtered tasks, in the view's order, one row each.
        shown = table.shown()
        assert shown == wanted(app) and table.row_count == len(shown)
        assert 0 < len(shown) < len(app.state.tasks)
        deploys = {tid for tid, row in app.state.tasks.items() if row.tool == "deploy"}
        assert set(shown) >= deploys and len(shown) - len(deploys) <= 2  # (an id may hold "deploy")

        # Row by row, in batches: never rebuilt by the feed; far fewer flushes than events.
        flushes = app.flushes - 1  # but the snapshot's
        assert table.stats.rebuilds == filtered  # the stream itself rebuilt nothing
        assert 0 < table.stats.row_updates <= events
        assert flushes <= backend.batches  # a flush takes at least one batch of events...
        assert events / flushes >= 5  # ...and on average several
        print(
            f"\n{events} events applied in {flushes} flushes ({events / flushes:.1f} per flush, "
            f"{backend.batches} batches sent); {len(app.state.tasks)} tasks ({created} created, "
            f"{expired} expired); {len(shown)} rows shown for 'deploy'; table: {table.stats}"
        )


async def test_sorted_by_status_with_finished_hidden_the_rows_move_and_go_as_the_stream_says() -> None:
    """The other paths of a flush: rows leaving the view (a task finishes while finished ones are
    hidden) and rows moving (sorted by status, a status changes), under the same stream."""
    backend = LoadBackend(2_000, rate=RATE, seconds=None)
    app = ConsoleApp(backend, bell=False)
    async with app.run_test(size=SIZE) as pilot:
        table = app.table
        await until(pilot, lambda: table.row_count >= 2_000, "the snapshot in the table", timeout=60)
        await pilot.press("s", "h")  # sort: age -> status; hide finished
        assert table.view.sort == "status" and table.view.hide_finished
        removed, updated = table.stats.rows_removed, table.stats.row_updates
        typed_at = backend.events_sent
        await until(pilot, lambda: backend.events_sent >= typed_at + 3 * RATE, "3 s more of the stream", timeout=60)
        backend.stop()
        await until(
            pilot, lambda: backend.finished and app.state.seq == backend.last_seq, "the stream applied", timeout=60
        )
        await until(pilot, lambda: table.shown() == wanted(app), "the table caught up with the state", timeout=60)
        assert table.stats.rows_removed > removed and table.stats.row_updates > updated
        assert not any(app.state.tasks[t].terminal for t in table.shown())
        statuses = [app.state.tasks[t].status for t in table.shown()]
        assert statuses == sorted(statuses, key=["working", "input_required"].index, reverse=True)
