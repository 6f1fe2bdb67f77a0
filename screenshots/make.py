"""Makes the README's screenshots from the real console attached to a real demo run
(`mcpx console --demo`'s daemon, upstreams and hosts), driven the way a person would drive it.

    python3 screenshots/make.py            # writes screenshots/*.svg

The demo is live, so each run's pictures differ in ids, ages and counts; what they show does not:
hosts with live tasks, a question form refusing a bad answer, the answer queue, a cancelled task,
and the console in an 80x24 terminal.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from textual.pilot import Pilot

from console.app import ConsoleApp
from console.client import DaemonClient, locate_in
from mcpx.demo.console_world import start_demo

OUT = Path(__file__).resolve().parent
SIZE = (180, 48)


async def until(pilot: Pilot[None], cond: Callable[[], Any], what: str, timeout: float = 60, must: bool = True) -> Any:
    got = None
    with anyio.move_on_after(timeout):
        while not (got := cond()):
            await pilot.pause(0.1)
    if not got and must:
        raise SystemExit(f"screenshots: gave up waiting for {what}")
    return got


def shoot(app: ConsoleApp, name: str) -> None:
    app.save_screenshot(f"{name}.svg", str(OUT))
    print(f"screenshots/{name}.svg")


async def make(app: ConsoleApp) -> None:
    async with app.run_test(size=SIZE) as pilot:
        state = app.state

        def busy_hosts() -> bool:
            owners = {t.connection for t in state.tasks.values()}
            statuses = {t.status for t in state.tasks.values()}
            return len(owners) >= 3 and {"working", "completed"} <= statuses and bool(state.questions)

        await until(pilot, busy_hosts, "three hosts with working and completed tasks")
        await pilot.pause(2)  # a few more finish, so the table shows a mix
        shoot(app, "hosts-with-live-tasks")

        await until(pilot, lambda: len(state.questions) >= 2, "a second question", 10, must=False)
        await pilot.press("a")
        await pilot.pause(0.5)
        shoot(app, "answer-queue")
        await pilot.press("escape")

        def deploy_question() -> Any:
            asks = [q for q in state.answer_queue() if "notify" in str(q.wire.get("params"))]
            return asks[0] if asks else None

        q = await until(pilot, deploy_question, "a deploy question")
        app.answer(q, "enter")
        await pilot.pause(0.5)
        await pilot.click("#field-notify")
        await pilot.press(*"ops-at-example")
        await pilot.press("ctrl+s")
        await pilot.pause(0.3)
        shoot(app, "question-form-validation-error")
        await pilot.press("escape")
        await pilot.pause(0.3)

        def watching() -> str | None:
            rows = [t for t in app.table.shown() if state.tasks[t].tool == "watch" and not state.tasks[t].terminal]
            return rows[0] if rows else None

        task_id = await until(pilot, watching, "a running watch task")
        app.table.move_cursor(row=app.table.shown().index(task_id))
        await pilot.pause(0.3)
        await pilot.press("c")
        await pilot.pause(0.3)
        await pilot.press("y")
        await until(pilot, lambda: state.tasks[task_id].status == "cancelled", "the cancel to land")
        await pilot.pause(1)  # its detail and timeline refetched
        app.table.move_cursor(row=app.table.shown().index(task_id))
        await pilot.pause(0.5)
        shoot(app, "cancelled-task")

        await pilot.resize_terminal(80, 24)  # a small terminal: the hosts pane folds into a line
        await pilot.pause(1.5)
        shoot(app, "console-80x24")


def main() -> None:
    run = start_demo()
    try:
        # A settings file of its own: the README shows the default theme, whatever the user chose.
        settings_file = Path(tempfile.mkdtemp(prefix="mcpx-screenshots-")) / "console.json"
        app = ConsoleApp(DaemonClient(locate_in(run.state_dir), "you"), bell=False, settings_file=settings_file)
        anyio.run(make, app)
    finally:
        run.stop()


if __name__ == "__main__":
    main()
