"""The console's views (`:`) as SVG snapshots, grouped by feature: the command line completing a
name, :upstreams after a crash and its stderr tail, :questions with why each went where it went,
:hosts and a host's detail, :events. The snapshot app's recorded feed, with the /v1 answers the
views ask for recorded here. Update after a deliberate change: `--snapshot-update`."""

from __future__ import annotations

from typing import Any

from pilot_wait import until
from snapshot_app import CONNECTIONS, NOW, QUESTIONS, TASKS, ReplayBackend, snapshot
from textual.pilot import Pilot
from textual.widgets import Input

from console import render
from console.app import ConsoleApp
from console.widgets.header import DashboardHeader, EventRate

SIZE = (180, 48)
UPSTREAMS = [
    {"name": "demo", "transport": "stdio", "state": "ready", "era": "legacy", "revision": "2025-11-25", "tools": 7,
     "restarts": 0, "lastError": None, "exitCode": None},
    {"name": "flaky", "transport": "stdio", "state": "restarting", "era": None, "revision": None, "tools": 0,
     "restarts": 3, "lastError": "upstream 'flaky' exited with code 3", "exitCode": 3},
    {"name": "search-http", "transport": "http", "state": "ready", "era": "modern", "revision": "2026-07-28",
     "tools": 12, "restarts": 0, "lastError": None, "exitCode": None},
    {"name": "linear", "transport": "http", "state": "needs login", "era": None, "revision": None, "tools": 0,
     "restarts": 0, "lastError": "upstream 'linear' needs a sign-in (the server asks for a sign-in): run `mcpx login linear`",
     "exitCode": None},
]  # fmt: skip
SIGN_IN_URL = (
    "https://auth.example.com/authorize?response_type=code&client_id=mcpx-7f3a&redirect_uri=http%3A%2F%2F127.0.0.1"
    "%3A7435%2Foauth%2Fcallback&state=n0t-a-real-state&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    "&code_challenge_method=S256&resource=https%3A%2F%2Fmcp.linear.app%2Fmcp"
)
STDERR = ["--- mcpx: started 2026-12-06T10:00:01 python flaky.py", "loading model", "Traceback (most recent call last):",
          '  File "flaky.py", line 9, in <module>', "RuntimeError: out of tokens"]  # fmt: skip
WHY = {
    "q-deploy": "asked of the host as one of its task's input requests (it declared elicitation)",
    "q-confirm": "waiting for an operator: the host did not declare elicitation",
    "q-pick": "waiting for an operator: 2 calls were in flight on this stdio server (hosts demo-cli 0.9.1, demo-ide)",
}
EVENTS = [
    {"type": "event", "seq": 121 + i, "ts": NOW - (30 - i) * 1000, "kind": "task.status",
     "taskId": TASKS[n]["id"], "connectionId": TASKS[n]["connectionId"],
     "data": {"status": "working", "previous": "working", "statusMessage": message}}
    for i, (n, message) in enumerate([(0, "compiling 2/8"), (5, "tick 11"), (0, "compiling 3/8"), (5, "tick 12")])
]  # fmt: skip


class ViewsBackend(ReplayBackend):
    async def upstreams(self) -> list[dict[str, Any]]:
        return UPSTREAMS

    async def upstream_stderr(self, name: str, tail: int) -> dict[str, Any]:
        return {"name": name, "lines": STDERR, "logPath": "/state/logs/flaky.stderr.log", "state": "restarting",
                "exitCode": 3}  # fmt: skip

    async def restart_upstream(self, name: str) -> None:
        return None

    async def login_upstream(self, name: str) -> dict[str, Any]:
        return {"name": name, "authorizationUrl": SIGN_IN_URL, "signedIn": False, "by": "operator:olga"}

    async def connection(self, connection_id: str) -> dict[str, Any]:
        conn = next(c for c in CONNECTIONS if c["id"] == connection_id)
        caps = {"elicitation": {}, "roots": {"listChanged": True}, "extensions": {"io.modelcontextprotocol/tasks": {}}}
        return {**conn, "capabilities": caps}

    async def events(self, since: int, limit: int) -> list[dict[str, Any]]:
        return []


def views_app() -> ConsoleApp:
    render.clock = lambda: NOW
    questions = [{**q, "why": WHY[q["id"]]} for q in QUESTIONS]
    return ConsoleApp(ViewsBackend([snapshot(TASKS, questions, CONNECTIONS), *EVENTS]), bell=False)


def _suggested(pilot: Pilot[None]) -> str:
    """What the command line suggests now (textual keeps it in the Input's `_suggestion`)."""
    box = pilot.app.screen.query("#command-input").first(Input)
    return str(getattr(box, "_suggestion", ""))


async def to_view(pilot: Pilot[None], typed: str) -> None:
    app = pilot.app
    assert isinstance(app, ConsoleApp)
    await until(pilot, lambda: app.state.seq == EVENTS[-1]["seq"] and app.flushes > 0, "the feed folded in")
    await pilot.press("colon", *typed, "enter")
    await until(pilot, lambda: app.view != "tasks", "the view")
    await until(pilot, lambda: app.screen.query_one("#view-table").row_count > 0, "its rows")  # type: ignore[attr-defined]  # a DataTable
    await pilot.pause()


def test_the_command_line_completes_a_view_name(snap_compare: Any) -> None:
    async def typing(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, ConsoleApp)
        await until(pilot, lambda: app.state.seq == EVENTS[-1]["seq"] and app.flushes > 0, "the feed folded in")
        # The header's sparkline shows the replayed events from the next one-second tick on, which
        # comes before the snapshot or after it by how fast the machine is: start it from zero.
        app.rate = EventRate()
        app.query_one(DashboardHeader).spark(app.rate.next_second())
        await pilot.press("colon", "u")
        # The suggestion comes from a worker: under load one pause was not always enough.
        await until(pilot, lambda: _suggested(pilot) == "upstreams", "the suggestion shown")
        await pilot.pause()

    assert snap_compare(views_app(), terminal_size=SIZE, run_before=typing)


def test_upstreams_view_shows_a_crashed_servers_exit_code_and_error(snap_compare: Any) -> None:
    async def upstreams(pilot: Pilot[None]) -> None:
        await to_view(pilot, "up")

    assert snap_compare(views_app(), terminal_size=SIZE, run_before=upstreams)


def test_i_on_an_upstream_that_needs_a_login_shows_the_url_to_copy(snap_compare: Any) -> None:
    async def sign_in(pilot: Pilot[None]) -> None:
        await to_view(pilot, "up")
        await pilot.press("down", "down", "down", "i")
        await until(pilot, lambda: type(pilot.app.screen).__name__ == "SignInScreen", "the sign-in URL")
        await pilot.pause()

    assert snap_compare(views_app(), terminal_size=SIZE, run_before=sign_in)


def test_l_on_an_upstream_tails_its_stderr(snap_compare: Any) -> None:
    async def tail(pilot: Pilot[None]) -> None:
        await to_view(pilot, "up")
        await pilot.press("down", "l")
        await until(pilot, lambda: "RuntimeError" in str(getattr(pilot.app.screen, "lines", "")), "the tail")
        await pilot.pause()

    assert snap_compare(views_app(), terminal_size=SIZE, run_before=tail)


def test_questions_view_says_why_each_question_went_where_it_went(snap_compare: Any) -> None:
    async def questions(pilot: Pilot[None]) -> None:
        await to_view(pilot, "q")

    assert snap_compare(views_app(), terminal_size=SIZE, run_before=questions)


def test_a_hosts_detail_shows_what_it_negotiated_with_its_open_work(snap_compare: Any) -> None:
    async def host(pilot: Pilot[None]) -> None:
        await to_view(pilot, "ho")
        await pilot.press("enter")
        await until(pilot, lambda: getattr(pilot.app.screen, "shown", None) is not None, "the host's detail")
        await pilot.pause()

    assert snap_compare(views_app(), terminal_size=SIZE, run_before=host)


def test_events_view_lists_the_audit_log_newest_first(snap_compare: Any) -> None:
    async def events(pilot: Pilot[None]) -> None:
        await to_view(pilot, "ev")

    assert snap_compare(views_app(), terminal_size=SIZE, run_before=events)


def labelled_app() -> ConsoleApp:
    """Two agents from one folder: the daemon's labels lead the process and folder with each one's
    clientInfo name (connections/naming.py)."""
    folder = "python in ~/src/api"
    names = {"c-ide": f"research-agent · {folder}", "c-cli": f"review-agent · {folder}"}
    conns = [{**c, "label": names.get(c["id"])} for c in CONNECTIONS]
    render.clock = lambda: NOW
    return ConsoleApp(ViewsBackend([snapshot(TASKS, [], conns), *EVENTS]), bell=False)


def test_two_agents_from_one_folder_are_told_apart_in_events(snap_compare: Any) -> None:
    """:events names a host as the hosts pane does, where it showed a connection id before."""

    async def events(pilot: Pilot[None]) -> None:
        await to_view(pilot, "ev")

    assert snap_compare(labelled_app(), terminal_size=(140, 20), run_before=events)


def test_two_agents_from_one_folder_are_told_apart_in_the_hosts_pane(snap_compare: Any) -> None:
    async def folded(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, ConsoleApp)
        await until(pilot, lambda: app.state.seq == EVENTS[-1]["seq"] and app.flushes > 0, "the feed folded in")
        app.rate = EventRate()  # the sparkline from zero (test_the_command_line_completes_a_view_name says why)
        app.query_one(DashboardHeader).spark(app.rate.next_second())
        await pilot.pause()

    assert snap_compare(labelled_app(), terminal_size=(140, 30), run_before=folded)
