"""The console against a real daemon and real upstream processes, driven by Textual's pilot:
answers given in its form reach the upstream, its cancel stops the upstream work, a host that goes
shows as closed with its tasks kept, and a daemon killed and restarted under it changes nothing."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness import Daemon, RawHost, conformance_server, read_jsonl, reply_of, stdio_server
from pilot_wait import until
from textual.widgets import Checkbox

from console.app import ConsoleApp
from console.client import DaemonClient, locate_in

pytestmark = pytest.mark.anyio
SIZE = (180, 48)


def console_for(d: Daemon) -> ConsoleApp:
    return ConsoleApp(DaemonClient(locate_in(d.state_dir), "olga"), bell=False)


def conformance_daemon(start_daemon: Any) -> Daemon:
    config = {"mcpServers": {"up": conformance_server()}, "tasks": {"taskAfterMs": 200}}
    d: Daemon = start_daemon(config)
    return d


async def test_an_answer_given_in_the_console_form_reaches_the_upstream_in_a_2025_task(start_daemon: Any) -> None:
    d = conformance_daemon(start_daemon)
    app = console_for(d)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.link == "connected", "the feed")
        host = RawHost(d.url)
        host.initialize()  # no elicitation: the attached console is who answers

        def start() -> str:
            params = {"name": "test_elicitation", "arguments": {"message": "Who?"}, "task": {}}
            return str(host.legacy("tools/call", params).json()["result"]["task"]["taskId"])

        tid = await anyio.to_thread.run_sync(start)
        await until(pilot, lambda: app.state.questions, "the question in the console")
        await pilot.press("a", "enter")
        await until(pilot, lambda: app.screen.query("#field-username"), "the answer form")
        await pilot.click("#field-username")
        await pilot.press(*"ada")
        await pilot.click("#field-email")
        await pilot.press(*"ada@example.com")
        await pilot.press("ctrl+s")
        await until(pilot, lambda: not app.state.questions, "the question answered")
        result = await anyio.to_thread.run_sync(lambda: reply_of(host.legacy("tasks/result", {"taskId": tid})))
        text = result["result"]["content"][0]["text"]
        assert text == 'User response: action=accept, content={"username": "ada", "email": "ada@example.com"}'
        await until(pilot, lambda: app.state.tasks[tid].status == "completed", "the task completed in the console")
        host.close()


async def test_an_answer_given_in_the_console_reaches_the_upstream_in_a_2026_task(start_daemon: Any) -> None:
    d = conformance_daemon(start_daemon)
    app = console_for(d)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.link == "connected", "the feed")
        host = RawHost(d.url)
        meta = {
            "io.modelcontextprotocol/clientCapabilities": {
                "elicitation": {},
                "extensions": {"io.modelcontextprotocol/tasks": {}},
            }
        }

        def start() -> str:
            call = {"name": "confirm_delete", "arguments": {"filename": "c.txt"}}
            return str(host.modern("tools/call", call, meta=meta).json()["result"]["taskId"])

        tid = await anyio.to_thread.run_sync(start)
        await until(pilot, lambda: any(q.task_id == tid for q in app.state.questions.values()), "its input request")
        await until(pilot, lambda: tid in app.table.shown(), "its row")
        app.table.move_cursor(row=app.table.get_row_index(tid))
        await pilot.press("enter")  # the selected task's question
        await pilot.pause()
        switch = app.screen.query_one("#field-confirm", Checkbox)
        switch.value = True
        await pilot.press("ctrl+s")
        await until(pilot, lambda: app.state.tasks[tid].status == "completed", "completed")

        def final() -> dict[str, Any]:
            got: dict[str, Any] = host.modern("tasks/get", {"taskId": tid}, meta=meta, headers={"Mcp-Name": tid}).json()
            return got

        done = await anyio.to_thread.run_sync(final)
        assert done["result"]["result"]["content"][0]["text"] == "Deleted c.txt"
        host.close()


async def test_cancelling_in_the_console_stops_the_upstream_work(start_daemon: Any, tmp_path: Path) -> None:
    d: Daemon = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    app = console_for(d)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.link == "connected", "the feed")
        host = RawHost(d.url)
        host.initialize()
        params = {"name": "fx__slow", "arguments": {"seconds": 60, "steps": 60}, "task": {}}
        tid = await anyio.to_thread.run_sync(
            lambda: host.legacy("tools/call", params).json()["result"]["task"]["taskId"]
        )
        await until(pilot, lambda: tid in app.table.shown(), "its row")
        app.table.move_cursor(row=app.table.get_row_index(tid))
        await pilot.press("c")
        await pilot.pause()
        await pilot.press("y")
        await until(pilot, lambda: app.state.tasks[tid].status == "cancelled", "cancelled in the console")
        status = await anyio.to_thread.run_sync(lambda: host.legacy("tasks/get", {"taskId": tid}).json()["result"])
        assert status["status"] == "cancelled" and "olga" in status["statusMessage"]

        def upstream_told() -> bool:
            return any(
                e["event"] == "recv" and e["msg"].get("method") == "notifications/cancelled"
                for e in read_jsonl(tmp_path / "fixture.log.jsonl")
            )

        await until(pilot, upstream_told, "the upstream's notifications/cancelled")
        host.close()


async def test_a_host_that_goes_is_shown_closed_with_its_tasks(start_daemon: Any, tmp_path: Path) -> None:
    d: Daemon = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    app = console_for(d)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.link == "connected", "the feed")
        host = RawHost(d.url)
        host.initialize()
        params = {"name": "fx__echo", "arguments": {"text": "x"}, "task": {}}
        tid = await anyio.to_thread.run_sync(
            lambda: host.legacy("tools/call", params).json()["result"]["task"]["taskId"]
        )
        await until(pilot, lambda: tid in app.state.tasks, "its task")
        conn = app.state.tasks[tid].connection
        await anyio.to_thread.run_sync(lambda: host.client.delete(d.url, headers=host._legacy_headers()))
        await until(pilot, lambda: not app.state.hosts[conn or ""].open, "the host closed")
        assert [h.id for h in app.state.hosts_shown()] == [conn]  # kept: it owns a task
        pane = app.hosts_pane
        await until(pilot, lambda: "closed" in str(pane.get_option(conn or "").prompt), "the pane showing it closed")
        assert tid in app.table.shown()
        host.close()


async def test_a_daemon_killed_and_restarted_under_the_console_leaves_the_same_tasks(
    start_daemon: Any, tmp_path: Path
) -> None:
    d: Daemon = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    app = console_for(d)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.link == "connected", "the feed")
        host = RawHost(d.url)
        host.initialize()

        def make() -> list[str]:
            return [
                host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": str(i)}, "task": {}}).json()[
                    "result"
                ]["task"]["taskId"]
                for i in range(20)
            ]

        ids = await anyio.to_thread.run_sync(make)
        await until(pilot, lambda: set(ids) <= set(app.state.tasks), "every task shown")
        await anyio.to_thread.run_sync(lambda: d.stop(signal.SIGKILL))
        await until(pilot, lambda: app.link != "connected", "the drop noticed")
        await anyio.to_thread.run_sync(lambda: d.start(port=d.port))
        await until(pilot, lambda: app.link == "connected", "reconnected", 30)
        after = await anyio.to_thread.run_sync(  # the session survived the restart: it works on
            lambda: host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "after"}, "task": {}}).json()
        )
        new = after["result"]["task"]["taskId"]
        await until(pilot, lambda: new in app.table.shown(), "a task made after the restart")
        shown = app.table.shown()
        assert set(ids) | {new} == set(shown), "lost or extra rows"
        assert len(shown) == len(set(shown)), "doubled rows"
        host.close()
