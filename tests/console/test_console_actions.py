"""The console's own actions, driven by Textual's pilot over the snapshot app's recorded feed
(tests/console/snapshot_app.py; nothing of the daemon is imitated beyond its feed's messages):
j/k/g/G move the task cursor, `b` toggles the terminal bell (shown in the top bar), toasts can be
turned off, several open questions of one task are answered together or one by one, and the
command palette has an entry for every action a key runs."""

from __future__ import annotations

import pytest
from pilot_wait import until
from snapshot_app import CONNECTIONS, NOW, QUESTIONS, TASKS, ReplayBackend, _question, make_app, snapshot
from textual.pilot import Pilot
from textual.widgets import Button, Static

from console.answer_screen import QuestionForm, TaskAnswersScreen
from console.app import ConsoleApp
from console.commands import ACTIONS, ConsoleCommands
from console.screens import QueueScreen

pytestmark = pytest.mark.anyio
SIZE = (180, 48)
APPROVE = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Approve?"}},
    "required": ["approve"],
}
NOTE = {"type": "object", "properties": {"note": {"type": "string", "title": "A note"}}, "required": ["note"]}
DEPLOY_TASK = TASKS[1]["id"]  # input_required, on c-agent


async def loaded(pilot: Pilot[None]) -> ConsoleApp:
    app = pilot.app
    assert isinstance(app, ConsoleApp)
    await until(pilot, lambda: app.table.row_count == len(TASKS), "the snapshot's rows")
    return app


def topbar(app: ConsoleApp) -> str:
    return str(app.query_one("#topbar", Static).content)


async def test_j_k_g_and_capital_g_move_the_task_cursor() -> None:
    app = make_app("hosts")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        table = app.table
        assert table.cursor_row == 0
        await pilot.press("j", "j")
        assert table.cursor_row == 2
        await pilot.press("k")
        assert table.cursor_row == 1
        await pilot.press("G")
        assert table.cursor_row == len(TASKS) - 1
        await pilot.press("g")
        assert table.cursor_row == 0


async def test_b_toggles_the_terminal_bell_and_the_top_bar_says_which() -> None:
    app = make_app("hosts")  # started with bell=False
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        assert not app.bell_on_question and "bell off" in topbar(app)
        await pilot.press("b")
        assert app.bell_on_question and "bell on" in topbar(app)
        assert any("terminal bell on" in n.message for n in app._notifications)
        await pilot.press("b")
        assert not app.bell_on_question and "bell off" in topbar(app)


def _asked_later(toasts: bool) -> ConsoleApp:
    """The snapshot, then a new question inside a working task."""
    q = _question("q-later", "c-ide", TASKS[0]["id"], "Keep the old build?", 0, APPROVE)
    event = {"type": "event", "seq": 121, "ts": NOW, "kind": "question.opened", "taskId": TASKS[0]["id"],
             "connectionId": "c-ide", "questionId": "q-later", "data": q}  # fmt: skip
    backend = ReplayBackend([snapshot(TASKS, QUESTIONS, CONNECTIONS), event])
    return ConsoleApp(backend, bell=False, toasts=toasts)


@pytest.mark.parametrize("toasts", [True, False])
async def test_a_new_question_toasts_unless_toasts_are_off(toasts: bool) -> None:
    app = _asked_later(toasts)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        # The top bar counts it once a flush has taken the question's changes: the flush that toasts.
        waiting = f"{len(QUESTIONS) + 1} waiting for you"
        await until(pilot, lambda: waiting in topbar(app), "the new question flushed")
        await pilot.pause()  # the toast's message handled
        asked = [n for n in app._notifications if "Keep the old build?" in n.message]
        assert len(asked) == (1 if toasts else 0)


def _two_questions_app() -> tuple[ConsoleApp, ReplayBackend]:
    questions = [
        _question("q-one", "c-agent", DEPLOY_TASK, "Approve the deploy?", 30, APPROVE),
        _question("q-two", "c-agent", DEPLOY_TASK, "Anything to tell the on-call?", 25, NOTE),
    ]
    backend = ReplayBackend([snapshot(TASKS, questions, CONNECTIONS)])
    return ConsoleApp(backend, bell=False), backend


async def open_task_questions(pilot: Pilot[None], app: ConsoleApp) -> TaskAnswersScreen:
    await loaded(pilot)
    app.table.move_cursor(row=app.table.get_row_index(DEPLOY_TASK))
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, TaskAnswersScreen), "the task's questions screen")
    screen = app.screen
    assert isinstance(screen, TaskAnswersScreen)
    assert [f.question["id"] for f in screen.query(QuestionForm)] == ["q-one", "q-two"]  # oldest first
    return screen


async def test_several_open_questions_of_one_task_are_answered_together() -> None:
    app, backend = _two_questions_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_task_questions(pilot, app)
        await pilot.press("ctrl+s")  # the note is required and empty: nothing is sent
        error = screen.query_one("#question-2 #error-note", Static)
        await until(pilot, lambda: "required" in str(error.content), "the note's error shown")
        await pilot.pause()  # a send, had one been started, done
        assert backend.answers == []
        screen.query_one("#question-1 #field-approve").focus()
        await pilot.press("space")  # approve: on
        screen.query_one("#question-2 #field-note").focus()
        await pilot.press(*"all clear")
        await pilot.press("ctrl+s")
        await until(pilot, lambda: not isinstance(app.screen, TaskAnswersScreen), "the screen closed")
        assert backend.answers == [
            ("q-one", "accept", {"approve": True}, None),
            ("q-two", "accept", {"note": "all clear"}, None),
        ]


async def test_several_open_questions_of_one_task_are_answered_one_by_one() -> None:
    app, backend = _two_questions_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_task_questions(pilot, app)
        screen.query_one("#question-2 #field-note").focus()
        await pilot.press(*"later")
        await pilot.click("#accept-2")
        await until(pilot, lambda: len(backend.answers) == 1, "the second question answered")
        assert backend.answers == [("q-two", "accept", {"note": "later"}, None)]
        assert isinstance(app.screen, TaskAnswersScreen)  # the first one still waits
        assert screen.query_one("#accept-2", Button).disabled
        assert str(screen.query_one("#question-2 #done", Static).content) == "answered: accept"
        await pilot.press("ctrl+d")  # decline what is left: the first one only
        await until(pilot, lambda: not isinstance(app.screen, TaskAnswersScreen), "the screen closed")
        assert backend.answers[1:] == [("q-one", "decline", None, None)]


async def test_the_command_palette_has_an_entry_for_every_action_a_key_runs() -> None:
    app = make_app("hosts")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        palette = {action for _name, action, _help in ACTIONS}
        keyed = {b.action for b in (*ConsoleApp.BINDINGS, *type(app.table).BINDINGS) if not isinstance(b, tuple)}
        table_moves = {"cursor_down": "cursor('down')", "cursor_up": "cursor('up')"}
        table_moves |= {"scroll_top": "cursor('top')", "scroll_bottom": "cursor('bottom')"}
        missing = {table_moves.get(a, a) for a in keyed} - palette
        assert not missing, missing
        for action in palette:  # each one the app can run
            name = action.split("(")[0]
            assert callable(getattr(app, f"action_{name}", None)), action
        provider = ConsoleCommands(app.screen)
        listed = [hit.text async for hit in provider.discover()]
        assert listed == [name for name, _action, _help in ACTIONS]
        for name in ("Terminal bell on or off", "Task details: raw JSON", "Cancel every shown unfinished task"):
            assert name in listed


async def test_a_click_picks_the_row_under_the_pointer_after_rows_moved_down() -> None:
    """Rows keep their drawn lines when they move (new tasks above them): a click still picks
    the row it lands on, not the one drawn there before."""
    app = make_app("hosts")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        table = app.table
        await pilot.pause(0.2)  # drawn once, where they are now
        for n in (1, 2):  # two newer tasks: every row moves two places down (the same stripe)
            data = {"upstream": "demo", "tool": f"new{n}", "arguments": {}, "era": "legacy", "owner": "conn",
                    "status": "working", "statusMessage": None, "createdMs": NOW + n, "ttlMs": 600_000,
                    "pollIntervalMs": 1000}  # fmt: skip
            app.receive({"type": "event", "seq": 200 + n, "ts": NOW + n, "kind": "task.created",
                         "taskId": f"TkNew{n}AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "connectionId": "c-ide",
                         "data": data})  # fmt: skip
        await until(pilot, lambda: table.row_count == len(TASKS) + 2, "the new rows")
        await pilot.pause(0.2)
        shown = table.shown()
        for row in (4, 2, 5):
            await pilot.click(type(table), offset=(3, 1 + row))  # (the header is line 0)
            assert table.cursor_row == row and table.selected() == shown[row]


async def test_a_feed_flush_between_opening_the_queue_and_its_first_paint_does_not_crash() -> None:
    # Under load the app flushed feed changes into a just-pushed queue screen whose list was not
    # composed yet (NoMatches took the console down in a CI run); it now fills the list on mount.
    app = make_app("hosts")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        screen = QueueScreen(app.state, lambda _q, _key: None)
        app.push_screen(screen)  # not awaited: compose runs later, as when the app pushes it on `a`
        screen.refresh_queue()
        await until(pilot, lambda: screen.query("#queue-list"), "the queue's list")
        await pilot.pause()
        assert app.screen is screen and app.is_running
