"""Several operators at once (#27): two consoles (real Textual apps, real daemon) have the same
question open; an answer given through its one-time link wins, and both open forms say who answered
within a second, never a silent 409 later. Each console names the other operator attached."""

from __future__ import annotations

import re
import time
from typing import Any

import anyio
import httpx
import pytest
from harness import Api, RawHost, conformance_server
from pilot_wait import until
from textual.widgets import Static

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
