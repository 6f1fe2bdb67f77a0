"""The console's views (`:upstreams`, `:questions`, `:hosts`, `:events`) against a real daemon
and real upstream processes, driven by Textual's pilot: an upstream's crash shows with its exit
code and `l` shows its last stderr lines, `r` restarts it; a question's why, a host's negotiated
capabilities with its open call and question, and the live event log, each in its view."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness import Api, Daemon, RawHost, stdio_server
from pilot_wait import until
from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from console.app import ConsoleApp
from console.client import DaemonClient, locate_in
from console.views.host_views import HostScreen
from console.views.stderr import StderrScreen
from console.views.view_screen import ViewScreen

pytestmark = pytest.mark.anyio
SIZE = (180, 48)
DEMO = {"command": sys.executable, "args": ["-m", "mcpx.demo.upstream", "--tools", "confirm"]}


def console_for(d: Daemon) -> ConsoleApp:
    return ConsoleApp(DaemonClient(locate_in(d.state_dir), "olga"), bell=False)


async def switch_to(pilot: Pilot[None], view: str, typed: str) -> ViewScreen:
    """`:` then what an operator types for the view (a prefix, or an alias such as `up`)."""
    await pilot.press("colon")
    await until(pilot, lambda: pilot.app.screen.query("#command-input"), "the command line")
    await pilot.press(*typed, "enter")
    screen = await until(
        pilot, lambda: isinstance(pilot.app.screen, ViewScreen) and pilot.app.screen, f"the {view} view"
    )
    assert isinstance(screen, ViewScreen) and screen.view == view
    return screen


def cells(screen: ViewScreen, key: str) -> list[str]:
    table: DataTable[Any] = screen.table
    if key not in table.rows:
        return []
    return [str(c) for c in table.get_row(key)]


def body_text(screen: Any, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


def plain(renderable: Any) -> str:
    console = Console(width=160, color_system=None)
    with console.capture() as out:
        console.print(renderable)
    return out.get()


async def test_an_upstream_crash_shows_its_exit_code_and_l_shows_its_last_stderr_lines(
    start_daemon: Any, tmp_path: Path
) -> None:
    d: Daemon = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    app = console_for(d)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.link == "connected", "the feed")
        view = await switch_to(pilot, "upstreams", "up")
        await until(pilot, lambda: cells(view, "fx")[2:3] == ["ready"], "fx ready in the view")
        with RawHost(d.url) as host:
            host.initialize()
            await anyio.to_thread.run_sync(lambda: host.legacy("tools/call", {"name": "fx__crash", "arguments": {}}))
        row = await until(pilot, lambda: (r := cells(view, "fx")) and r[6] == "3" and r, "the crash's exit code")
        assert row[5] in ("1", "0"), row  # restarted once (or about to be)
        await pilot.press("l")
        tail = await until(pilot, lambda: isinstance(app.screen, StderrScreen) and app.screen, "the stderr tail")
        assert isinstance(tail, StderrScreen)
        await until(
            pilot, lambda: "[fixture] crash tool called: exiting with status 3" in tail.lines, "its last stderr lines"
        )
        assert "last exit code 3" in body_text(tail, "#stderr-body")
        await pilot.press("escape")
        await until(pilot, lambda: cells(view, "fx")[2:3] == ["ready"], "fx back up")
        restarts = int(cells(view, "fx")[5])
        await pilot.press("r")
        await until(pilot, lambda: app.screen.query("#confirm"), "the confirm modal")
        await pilot.press("y")
        await until(pilot, lambda: int(cells(view, "fx")[5]) == restarts + 1, "restarted by the operator")
        await until(pilot, lambda: cells(view, "fx")[2:3] == ["ready"], "fx ready again")


async def test_questions_hosts_and_events_views_show_why_what_was_negotiated_and_the_audit_log(
    start_daemon: Any,
) -> None:
    d: Daemon = start_daemon({"mcpServers": {"demo": DEMO}})
    app = console_for(d)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.link == "connected", "the feed")
        host = RawHost(d.url)
        host.initialize(capabilities={"roots": {}})  # no elicitation: the question is the operator's
        done: dict[str, Any] = {}
        call = {"name": "demo__confirm", "arguments": {"question": "Ship it?"}}
        thread = threading.Thread(target=lambda: done.update(host.legacy("tools/call", call).json()), daemon=True)
        thread.start()
        [qid] = await until(pilot, lambda: list(app.state.questions), "the question in the console")

        questions = await switch_to(pilot, "questions", "q")
        row = await until(pilot, lambda: cells(questions, qid), "its row in :questions")
        assert row[-1] == "waiting for an operator: the host did not declare elicitation", row
        await pilot.press("enter")
        await until(pilot, lambda: app.screen.query("#why"), "its form")
        assert body_text(app.screen, "#why") == "waiting for an operator: the host did not declare elicitation"
        await pilot.press("escape")

        hosts = await switch_to(pilot, "hosts", "ho")
        [cid] = [h for h in app.state.hosts if app.state.hosts[h].open]
        await until(pilot, lambda: cells(hosts, cid), "the host's row")
        await pilot.press("enter")
        detail = await until(pilot, lambda: isinstance(app.screen, HostScreen) and app.screen, "the host's detail")
        assert isinstance(detail, HostScreen)
        text = plain(await until(pilot, lambda: detail.shown, "its facts"))
        assert "2025-11-25" in text and "roots" in text, text  # what it negotiated
        assert "open questions (1)" in text and "Ship it?" in text, text
        assert "open calls and tasks (1)" in text and "confirm on demo" in text, text
        await pilot.press("escape")

        events = await switch_to(pilot, "events", "ev")
        await until(pilot, lambda: events.table.row_count >= 3, "the audit log's rows")
        kinds = {events.table.get_row_at(i)[2] for i in range(events.table.row_count)}
        assert {"connection.opened", "task.created", "question.opened"} <= kinds, kinds
        await pilot.press("slash", *"question", "enter")
        await until(pilot, lambda: events.table.row_count == 1, "only the question's event")

        with Api(d) as api:
            answer = {"action": "accept", "content": {"ok": True}, "by": "olga"}
            assert api.post(f"/v1/questions/{qid}/answer", json=answer).status_code == 200
        await anyio.to_thread.run_sync(lambda: thread.join(10))
        assert done["result"]["content"][0]["text"] == "Ship it? — yes"
        await pilot.press("escape")  # back to the tasks list
        await until(pilot, lambda: app.view == "tasks", "the tasks list")
        host.close()
