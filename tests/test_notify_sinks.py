"""Notification sinks against real receivers and real programs, in-process: a webhook is signed
and retried on 5xx/429 and connection errors, then given up (counted); a hanging receiver costs one
attempt's timeout; a command hook gets the event on stdin, and one that hangs is killed. The
notifier never holds up the bus: publishing returns at once whatever its sinks do."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from notify_receiver import Receiver

from mcpx.events.bus import Event, EventBus, StoredEvent
from mcpx.notify import signing
from mcpx.notify.command_hook import CommandHook
from mcpx.notify.notifier import Notifier, Route
from mcpx.notify.outbox import SinkStats
from mcpx.notify.payload import Undelivered
from mcpx.notify.webhook import Webhook

pytestmark = pytest.mark.anyio
SECRET = "a-secret-of-16-or-more"
BODY = b'{"seq":1,"kind":"question.opened"}'


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def webhook(url: str, client: httpx.AsyncClient) -> Webhook:
    """Four attempts with no wait between them: the schedule itself is a unit test's."""
    return Webhook(url, SECRET, client, delays=[0.0, 0.0, 0.0])


def stored(seq: int) -> StoredEvent:
    return StoredEvent(seq, 1000 + seq, Event("question.opened", {"id": f"q{seq}"}))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---- webhooks ----------------------------------------------------------------------------------


async def test_a_webhook_is_signed_and_retried_after_two_500s() -> None:
    stats = SinkStats()
    with Receiver([500, 500]) as rx:
        async with httpx.AsyncClient() as client:
            await webhook(rx.url, client).deliver(BODY, stats)
    assert [r.status for r in rx.got] == [500, 500, 200]
    assert stats.retries == 2 and stats.last_error == "HTTP 500 from the receiver"
    last = rx.got[-1]
    assert last.body == BODY and last.headers["content-type"] == "application/json"
    assert signing.verify(SECRET, last.headers["x-mcpx-timestamp"], last.headers["x-mcpx-signature"], last.body)


async def test_a_webhook_that_keeps_failing_is_given_up_after_its_attempts() -> None:
    with Receiver([503] * 10) as rx:
        async with httpx.AsyncClient() as client:
            with pytest.raises(Undelivered, match="HTTP 503"):
                await webhook(rx.url, client).deliver(BODY, SinkStats())
    assert len(rx.got) == 4


async def test_a_4xx_is_not_retried() -> None:
    with Receiver([400]) as rx:
        async with httpx.AsyncClient() as client:
            with pytest.raises(Undelivered, match="HTTP 400"):
                await webhook(rx.url, client).deliver(BODY, SinkStats())
    assert len(rx.got) == 1


async def test_a_refused_connection_is_retried_then_given_up() -> None:
    stats = SinkStats()
    async with httpx.AsyncClient() as client:
        with pytest.raises(Undelivered, match="ConnectError"):
            await webhook(f"http://127.0.0.1:{free_port()}/hook", client).deliver(BODY, stats)
    assert stats.retries == 3


async def test_a_hanging_receiver_costs_one_attempt_timeout_each_try() -> None:
    with Receiver(hang=True) as rx:
        async with httpx.AsyncClient() as client:
            hook = Webhook(rx.url, SECRET, client, delays=[], timeout_s=0.3)
            started = time.monotonic()
            with pytest.raises(Undelivered, match=r"no answer within 0\.3 s"):
                await hook.deliver(BODY, SinkStats())
            assert time.monotonic() - started < 3


# ---- command hooks -----------------------------------------------------------------------------


def _writer(out: Path) -> list[str]:
    return [sys.executable, "-c", f"import sys; open({str(out)!r}, 'ab').write(sys.stdin.buffer.read())"]


async def test_a_command_hook_gets_the_event_on_stdin(tmp_path: Path) -> None:
    out = tmp_path / "got.json"
    await CommandHook(_writer(out)).deliver(BODY, SinkStats())
    assert out.read_bytes() == BODY


async def test_a_failing_command_reports_its_exit_status_and_stderr() -> None:
    argv = [sys.executable, "-c", "import sys; sys.stderr.write('no topic'); sys.exit(3)"]
    with pytest.raises(Undelivered, match="exited with 3: no topic"):
        await CommandHook(argv).deliver(BODY, SinkStats())


async def test_a_command_that_hangs_is_killed_at_its_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    argv = [
        sys.executable,
        "-c",
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)",
    ]
    with pytest.raises(Undelivered, match="killed"):
        await CommandHook(argv, timeout_s=1.0).deliver(BODY, SinkStats())
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_missing_program_is_a_failed_delivery() -> None:
    with pytest.raises(Undelivered, match="cannot run"):
        await CommandHook(["/nonexistent/notify-hook"]).deliver(BODY, SinkStats())


# ---- the notifier ------------------------------------------------------------------------------


async def test_publishing_never_waits_for_a_hanging_sink_and_others_still_get_every_event(tmp_path: Path) -> None:
    out = tmp_path / "lines"
    bus = EventBus()
    writer = [sys.executable, "-c", f"import sys; open({str(out)!r}, 'a').write(sys.stdin.read() + chr(10))"]
    with Receiver(hang=True) as rx:
        async with httpx.AsyncClient() as client:
            slow = Route("notify.webhooks[0]", Webhook(rx.url, SECRET, client), frozenset({"question.opened"}))
            fast = Route("notify.commands[0]", CommandHook(writer), frozenset({"question.opened"}))
            notifier = Notifier(bus, [slow, fast])
            async with anyio.create_task_group() as tg:
                await tg.start(notifier.run)
                started = time.monotonic()
                for seq in range(1, 6):
                    bus.publish([stored(seq)])
                assert time.monotonic() - started < 0.05  # publish only appends to outboxes
                with anyio.fail_after(20):
                    while notifier.status()[1]["delivered"] < 5:
                        await anyio.sleep(0.05)
                tg.cancel_scope.cancel()
    assert [json.loads(line)["seq"] for line in out.read_text().splitlines()] == [1, 2, 3, 4, 5]
    slow_status = notifier.status()[0]
    assert slow_status["delivered"] == 0 and slow_status["queued"] == 4  # one in flight, four waiting
