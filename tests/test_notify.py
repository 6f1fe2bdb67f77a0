"""Notifications end to end (docs/notify.md): a real daemon whose upstream asks a question sends
`question.opened` to a webhook the test runs, signed, retried after two 500s, and to a command hook
on its stdin; a receiver that hangs slows neither the call that asked nor any other call, and
what went wrong is counted in /v1/status."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from harness import ROOT, UNIT, Api, RawHost, conformance_server, wait_until
from notify_receiver import Receiver

SECRET = "a-webhook-secret-0123"
CONTENT = {"username": "ada", "email": "ada@example.com"}


def _config(receiver: Receiver, out: Path) -> dict[str, Any]:
    writer = [sys.executable, "-c", f"import sys; open({str(out)!r}, 'ab').write(sys.stdin.buffer.read())"]
    return {
        "mcpServers": {"up": conformance_server()},
        # Questions wait for someone to answer them through /v1 (no operator needs to be attached).
        "questions": {"waitForOperator": "always"},
        "notify": {
            "webhooks": [{"url": receiver.url, "secret": SECRET}],
            "commands": [{"run": writer}, {"run": [sys.executable, "-c", "import sys; sys.exit('no route to ntfy')"]}],
        },
    }


def _ask_aside(daemon: Any, message: str) -> tuple[threading.Thread, dict[str, Any]]:
    """A 2025 host's plain call to the upstream's elicitation tool, from a thread (it waits for an
    answer); its response and how long it took land in the box."""
    box: dict[str, Any] = {}

    def call() -> None:
        with RawHost(daemon.url) as host:
            host.initialize()  # no elicitation capability: the question is the operators'
            params = {"name": "test_elicitation", "arguments": {"message": message}}
            box["resp"] = host.legacy("tools/call", params)
            box["done"] = time.monotonic()

    t = threading.Thread(target=call)
    t.start()
    return t, box


def _open_question(api: Api, message: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = wait_until(
        lambda: [q for q in api.open_questions() if q["params"].get("message") == message], 15, message
    )
    return found[0]


def _signed(headers: dict[str, str], body: bytes) -> bool:
    """The receiver's check, as docs/notify.md shows it (written out here, not mcpx's own code)."""
    timestamp = headers["x-mcpx-timestamp"]
    if abs(time.time() - int(timestamp)) > 300:
        return False
    mac = hmac.new(SECRET.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest("v1=" + mac, headers["x-mcpx-signature"])


def _sink(daemon: Any, name: str) -> dict[str, Any]:
    return next(s for s in daemon.status()["notify"] if s["sink"] == name)


def test_question_opened_reaches_a_webhook_signed_after_two_500s_and_a_command_on_stdin(
    start_daemon: Any, tmp_path: Path
) -> None:
    out = tmp_path / "hook-stdin.json"
    with Receiver([500, 500]) as rx:
        daemon = start_daemon(_config(rx, out))
        t, box = _ask_aside(daemon, "Deploy?")
        try:
            with Api(daemon) as api:
                q = _open_question(api, "Deploy?")
                wait_until(lambda: len(rx.got) >= 3, 20, "the webhook's third attempt")
                assert [r.status for r in rx.got] == [500, 500, 200]
                for r in rx.got:  # every attempt is signed over its own timestamp
                    assert _signed(r.headers, r.body) and not _signed(r.headers, r.body + b" ")
                event = rx.got[-1].json()
                # Each notification of a question carries its own one-time answer link (docs/answer-links.md).
                link = event.pop("answerUrl")
                assert link.startswith(f"http://127.0.0.1:{daemon.port}/answer/")
                page = httpx.get(link, timeout=10)
                assert page.status_code == 200 and "Deploy?" in page.text
                assert event["kind"] == "question.opened" and event["questionId"] == q["id"]
                assert event["data"] == q  # the question as /v1/questions shows it
                assert {"seq", "ts", "kind", "data"} <= event.keys()
                from_events = api.get("/v1/events", params={"kind": "question.opened"}).json()["events"]
                # The /v1/events entry, null keys left out (as the feed sends it).
                assert event in [{k: v for k, v in e.items() if v is not None} for e in from_events]
                on_stdin = json.loads(
                    wait_until(lambda: out.exists() and out.read_bytes(), 10, "the command hook's stdin")
                )
                assert on_stdin.pop("answerUrl") not in (None, link) and on_stdin == event
                hook = wait_until(lambda: (s := _sink(daemon, "notify.webhooks[0]"))["delivered"] == 1 and s, 10)
                assert (hook["retries"], hook["failed"], hook["dropped"]) == (2, 0, 0)
                assert hook["lastError"] == "HTTP 500 from the receiver" and hook["target"].startswith("http://")
                assert _sink(daemon, "notify.commands[0]")["delivered"] == 1
                broken = wait_until(lambda: (s := _sink(daemon, "notify.commands[1]"))["failed"] == 1 and s, 10)
                assert broken["delivered"] == 0 and broken["lastError"].endswith("exited with 1: no route to ntfy")
                shown = subprocess.run(
                    [sys.executable, "-m", "mcpx", "status", "--state-dir", str(daemon.state_dir)],
                    capture_output=True, text=True, timeout=30, env={**os.environ, "PYTHONPATH": str(ROOT)},
                ).stdout  # fmt: skip
                assert "notify notify.commands[1] (command" in shown and "0 delivered, 1 failed" in shown, shown
                assert "no route to ntfy" in shown
                assert api.answer(q["id"], "accept", content=CONTENT).status_code == 200
            t.join(15)
            assert box["resp"].status_code == 200
        finally:
            t.join(15)


def test_a_receiver_that_hangs_slows_no_call(start_daemon: Any, tmp_path: Path) -> None:
    with Receiver(hang=True) as rx:
        daemon = start_daemon(_config(rx, tmp_path / "hook-stdin.json"))
        t, box = _ask_aside(daemon, "While the webhook hangs?")
        try:
            with Api(daemon) as api:
                q = _open_question(api, "While the webhook hangs?")
                wait_until(lambda: rx.got, 10, "the webhook to be held")  # the delivery is in flight, hanging
                answered = time.monotonic()
                assert api.answer(q["id"], "accept", content=CONTENT).status_code == 200
                t.join(15)
                assert box["resp"].status_code == 200 and box["done"] - answered < 2 * UNIT
                # Another call, and a second question, while the first delivery still hangs.
                with RawHost(daemon.url) as host:
                    host.initialize()
                    started = time.monotonic()
                    reply = host.legacy("tools/call", {"name": "test_simple_text", "arguments": {}})
                    assert reply.status_code == 200 and time.monotonic() - started < 2 * UNIT
                t2, box2 = _ask_aside(daemon, "And again?")
                q2 = _open_question(api, "And again?")
                answered = time.monotonic()
                assert api.answer(q2["id"], "accept", content=CONTENT).status_code == 200
                t2.join(15)
                assert box2["done"] - answered < 2 * UNIT
                hook = _sink(daemon, "notify.webhooks[0]")
                assert hook["delivered"] == 0 and hook["queued"] == 1  # the second waits behind the first
                assert len(rx.got) == 1
        finally:
            t.join(15)
