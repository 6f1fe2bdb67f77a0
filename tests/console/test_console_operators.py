"""Several operators at once (#27): two consoles (real Textual apps, real daemon) have the same
question open; an answer given through its one-time link wins, and both open forms say who answered
within a second, never a silent 409 later. Each console names the other operator attached."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from harness import Api, RawHost, conformance_server, stdio_server, wait_until
from pilot_wait import until
from textual.widgets import OptionList, Static

from console.app import ConsoleApp
from console.client import DaemonClient, locate_in

pytestmark = pytest.mark.anyio
SIZE = (180, 48)


def _answer_by_link(d: Any, qid: str) -> float:
    with Api(d) as api, httpx.Client(timeout=10) as web:
        url = api.post(f"/v1/questions/{qid}/link").json()["url"]
        page = web.get(url).text
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
        assert csrf is not None
        form = {"csrf": csrf.group(1), "by": "bob", "action": "accept", "username": "ada", "email": "a@b.c"}
        assert web.post(url, data=form).status_code == 200
    return time.monotonic()


async def test_an_answer_given_elsewhere_closes_the_form_in_every_console(start_daemon: Any) -> None:
    d = start_daemon({"mcpServers": {"up": conformance_server()}})
    olga = ConsoleApp(DaemonClient(locate_in(d.state_dir), "olga"), bell=False)
    sam = ConsoleApp(DaemonClient(locate_in(d.state_dir), "sam"), bell=False)
    async with olga.run_test(size=SIZE) as p1, sam.run_test(size=SIZE) as p2:
        for app, pilot in ((olga, p1), (sam, p2)):
            await until(pilot, lambda app=app: app.link == "connected", "the feed")
        await until(p1, lambda: "sam" in olga.state.operators, "olga's console sees sam")
        await until(p2, lambda: "olga" in sam.state.operators, "sam's console sees olga")
        host = RawHost(d.url)
        host.initialize()
        done = anyio.Event()

        def call() -> None:
            host.legacy("tools/call", {"name": "test_elicitation", "arguments": {"message": "Who?"}})

        async def run_call() -> None:
            await anyio.to_thread.run_sync(call)
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_call)
            for app, pilot in ((olga, p1), (sam, p2)):
                await until(pilot, lambda app=app: app.state.questions, "the question in the console")
                await pilot.press("a", "enter")
                await until(pilot, lambda app=app: app.screen.query("#field-username"), "the answer form")
            qid = next(iter(olga.state.questions))
            answered_at = await anyio.to_thread.run_sync(_answer_by_link, d, qid)
            for app, pilot in ((olga, p1), (sam, p2)):
                await until(
                    pilot,
                    lambda app=app: "answered by bob via link" in str(app.screen.query_one("#done", Static).content),
                    "the form saying who answered",
                )
                assert time.monotonic() - answered_at < 1.0
            await p1.press("ctrl+s")  # too late: nothing is sent, nothing fails
            assert "answered by bob via link" in str(olga.screen.query_one("#done", Static).content)
            await done.wait()
        host.close()


def _allow_one_call(d: Any) -> None:
    """A host calls the gated tool; an operator allows this host for half an hour."""
    host = RawHost(d.url)
    host.initialize()
    call = threading.Thread(
        target=lambda: host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "hi"}}), daemon=True
    )
    call.start()
    with Api(d) as api:
        [q] = wait_until(api.open_questions, 20, "the approval")
        content = {"decision": "allow-for-host", "minutes": 30}
        assert api.answer(q["id"], "accept", by="olga", content=content).status_code == 200
    call.join(15)
    host.close()


def _listed(app: ConsoleApp) -> list[str]:
    return [str(o.prompt) for o in app.screen.query_one("#allowances-list", OptionList).options if o.id != "none"]


async def test_the_console_lists_approval_allowances_and_revokes_one(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path, approve=["echo"])}})
    app = ConsoleApp(DaemonClient(locate_in(d.state_dir), "olga"), bell=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.link == "connected", "the feed")
        await anyio.to_thread.run_sync(_allow_one_call, d)
        await pilot.press("A")
        await until(
            pilot, lambda: any("fx/echo" in p and "by operator:olga" in p for p in _listed(app)), "the allowance"
        )
        await pilot.press("x")
        await until(pilot, lambda: not _listed(app), "the allowance revoked")
        with Api(d) as api:
            assert api.get("/v1/allowances").json()["allowances"] == []
