"""Notification sinks against real receivers and real programs, in-process: a webhook is signed
and retried on 5xx/429 and connection errors, then given up (counted); a hanging receiver costs one
attempt's timeout; a command hook gets the event on stdin, and one that hangs is killed. The
notifier never holds up the bus: publishing returns at once whatever its sinks do."""

from __future__ import annotations

import functools
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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


# ---- one deadline and a size cap per attempt (#37 item 7) ----------------------------------------


async def test_a_receiver_that_trickles_its_answer_is_cut_at_the_attempts_deadline() -> None:
    # 200 at once, then a 20-byte body one byte every 0.5 s: 10 s in all. A per-read timeout never fires.
    with Receiver(trickle=20, trickle_every=0.5) as rx:
        async with httpx.AsyncClient() as client:
            hook = Webhook(rx.url, SECRET, client, delays=[], timeout_s=1.0)
            await hook.deliver(BODY, SinkStats())  # the 200 came: delivered, whatever the body does
            assert not rx.finished.is_set(), "the attempt waited for the whole trickled body"
            assert rx.cut.wait(5), "the connection was not closed at the deadline"
    assert rx.sent < 20


async def test_a_receiver_that_trickles_a_failure_is_one_failed_attempt_within_the_deadline() -> None:
    with Receiver([503] * 5, trickle=20, trickle_every=0.5) as rx:
        async with httpx.AsyncClient() as client:
            hook = Webhook(rx.url, SECRET, client, delays=[0.0], timeout_s=1.0)
            with pytest.raises(Undelivered, match="HTTP 503"):
                await hook.deliver(BODY, SinkStats())
            assert len(rx.got) == 2 and not rx.finished.is_set()


async def test_an_answers_body_is_read_up_to_the_cap_never_whole() -> None:
    with Receiver(body_bytes=64 * 1024 * 1024) as rx:  # 64 MiB of answer to a notification
        async with httpx.AsyncClient() as client:
            await webhook(rx.url, client).deliver(BODY, SinkStats())
            assert rx.cut.wait(10), "the whole body was read"
    assert not rx.finished.is_set() and rx.sent < 64 * 1024 * 1024


async def test_a_sinks_unexpected_error_drops_its_event_and_the_notifier_goes_on(tmp_path: Path) -> None:
    """A real fault: a program with a NUL in an argument makes the OS call raise ValueError, not the
    OSError a command hook expects (the config refuses it now; a sink's own bug looks the same)."""
    out = tmp_path / "lines"
    writer = [sys.executable, "-c", f"import sys; open({str(out)!r}, 'a').write(sys.stdin.read() + chr(10))"]
    reported: list[tuple[str, BaseException]] = []
    bus = EventBus()
    broken = Route("notify.commands[0]", CommandHook(["true", "a\x00b"]), frozenset({"question.opened"}))
    fine = Route("notify.commands[1]", CommandHook(writer), frozenset({"question.opened"}))
    notifier = Notifier(bus, [broken, fine], report=lambda name, exc: reported.append((name, exc)))
    async with anyio.create_task_group() as tg:
        await tg.start(notifier.run)
        for seq in (1, 2):
            bus.publish([stored(seq)])
        with anyio.fail_after(20):
            while notifier.status()[1]["delivered"] < 2 or notifier.status()[0]["failed"] < 2:
                await anyio.sleep(0.05)
        tg.cancel_scope.cancel()
    status = notifier.status()[0]
    assert (status["delivered"], status["failed"]) == (0, 2) and status["lastError"].startswith("ValueError")
    assert [(name, type(exc)) for name, exc in reported] == [("notify.commands[0]", ValueError)] * 2
    assert [json.loads(line)["seq"] for line in out.read_text().splitlines()] == [1, 2]


# ---- verifying a signature never raises (#37 item 8) ---------------------------------------------

_HEADER = st.one_of(st.none(), st.text(max_size=80), st.integers().map(str), st.binary(max_size=20), st.integers())


@settings(max_examples=500, deadline=None)
@given(timestamp=_HEADER, signature=_HEADER, body=st.binary(max_size=64))
def test_verify_returns_false_on_any_malformed_header_and_never_raises(
    timestamp: object, signature: object, body: bytes
) -> None:
    assert signing.verify(SECRET, timestamp, signature, body) is False


@settings(max_examples=200, deadline=None)
@given(ts=st.integers(0, 2**40), body=st.binary(max_size=64), flip=st.integers(0, 70))
def test_verify_takes_a_true_signature_and_refuses_any_other(ts: int, body: bytes, flip: int) -> None:
    h = signing.headers(SECRET, ts, body)
    stamp, sig = h[signing.TIMESTAMP_HEADER], h[signing.SIGNATURE_HEADER]
    assert signing.verify(SECRET, stamp, sig, body) is True
    forged = (
        sig[:flip] + ("0" if sig[flip : flip + 1] != "0" else "1") + sig[flip + 1 :] if flip < len(sig) else sig + "0"
    )
    assert signing.verify(SECRET, stamp, forged, body) is False
    assert signing.verify(SECRET, stamp, sig, body + b"!") is False


@functools.cache
def _docs_verify() -> Any:
    """The receiver's example in docs/notify.md, run as written."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "notify.md").read_text()
    code = text.split("## Verifying a webhook's signature", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    space: dict[str, Any] = {}
    exec(compile(code, "docs/notify.md", "exec"), space)  # the docs' own example, under test
    return space["verify"]


_HEADERS = st.dictionaries(
    st.sampled_from(["X-Mcpx-Timestamp", "X-Mcpx-Signature", "Content-Type"]), st.text(max_size=80), max_size=3
)


@settings(max_examples=500, deadline=None)
@given(headers=_HEADERS, body=st.binary(max_size=64))
def test_the_docs_example_refuses_missing_and_malformed_headers_without_raising(
    headers: dict[str, str], body: bytes
) -> None:
    assert _docs_verify()(SECRET, headers, body) is False


def test_the_docs_example_takes_a_request_mcpx_signed() -> None:
    now = int(time.time())
    h = signing.headers(SECRET, now, BODY)
    verify = _docs_verify()
    assert verify(SECRET, h, BODY) is True and verify(SECRET, {}, BODY) is False
    assert verify(SECRET, signing.headers(SECRET, now - 3600, BODY), BODY) is False  # too old: a replay
