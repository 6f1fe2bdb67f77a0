"""A host calls tools through a real mcpx daemon on a scripted 2025-11-25 HTTP upstream
(tests/scripted_http.py) whose reply streams end early and whose connections drop (#26 items 1,
5 and 8): a primed-and-closed reply is resumed, one that cannot be is an error within 2 s naming
the upstream, a POST read and dropped is never run twice, and a dropped GET stream is reopened."""

from __future__ import annotations

import time
from typing import Any

import anyio
from anyio.abc import ByteStream
from harness import reply_of, wait_until
from scripted_http import SSE_HEAD, LegacyMcp, Request, event, in_thread, json_reply, reply, result


def upstream(port: int) -> dict[str, Any]:
    return {"mcpServers": {"up": {"url": f"http://127.0.0.1:{port}/mcp"}}}


def timed_call(host: Any, arguments: dict[str, Any] | None = None) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    frame = reply_of(host.legacy("tools/call", {"name": "up__work", "arguments": arguments or {}}))
    return frame, time.monotonic() - started


def test_reply_primed_and_closed_completes_after_resuming_with_last_event_id(start_daemon: Any, raw_host: Any) -> None:
    waiting: dict[str, Any] = {}  # event id -> the JSON-RPC id of the call whose stream it primed

    async def on_call(req: Request, msg: dict[str, Any], stream: ByteStream) -> bool:
        waiting[f"call-{msg['id']}"] = msg["id"]
        await stream.send(SSE_HEAD + event(id=f"call-{msg['id']}", retry=100))
        return False  # the connection closes; the stream is to be resumed by GET

    async def on_get(req: Request, stream: ByteStream) -> bool:
        rid = waiting.get(req.headers.get("last-event-id", ""))
        if rid is None:
            await stream.send(reply(405))
            return True
        await stream.send(SSE_HEAD + event(result(rid, "done after resuming"), id="end"))
        return False

    server = LegacyMcp(on_call, on_get)
    with in_thread(server) as port:
        d = start_daemon(upstream(port))
        host = raw_host(d.url)
        host.initialize()
        frame, _ = timed_call(host)
    assert frame["result"]["content"][0]["text"] == "done after resuming", frame
    resumes = [g.headers["last-event-id"] for g in server.gets() if "last-event-id" in g.headers]
    assert resumes == [f"call-{server.calls[0]['id']}"]  # (the other GET: the standalone stream, 405)
    assert "not JSON" not in d.stderr(), "a priming event is not a warning"


def test_reply_that_ends_and_cannot_be_resumed_fails_within_2_s_naming_the_upstream(
    start_daemon: Any, raw_host: Any
) -> None:
    async def on_call(req: Request, msg: dict[str, Any], stream: ByteStream) -> bool:
        primed = msg["params"]["arguments"].get("primed")
        await stream.send(SSE_HEAD + (event(id="p-1", retry=100) if primed else b""))
        return False

    server = LegacyMcp(on_call)  # GET: 405, no resuming
    with in_thread(server) as port:
        d = start_daemon(upstream(port))
        host = raw_host(d.url)
        host.initialize()
        for primed in (True, False):
            frame, took = timed_call(host, {"primed": primed})
            assert frame["error"]["code"] == -32603 and "'up'" in frame["error"]["message"], frame
            assert "without the response" in frame["error"]["message"], frame
            assert took < 2, f"primed={primed}: {took:.2f} s"
    resumes = [g for g in server.gets() if "last-event-id" in g.headers]
    assert len(resumes) == 1, "only the primed stream has an id to resume from"


def test_post_read_then_dropped_on_a_kept_connection_runs_the_tool_once_and_the_host_gets_an_error(
    start_daemon: Any, raw_host: Any
) -> None:
    async def on_call(req: Request, msg: dict[str, Any], stream: ByteStream) -> bool:
        if msg["params"]["arguments"]["n"] == 2 and req.served_before > 0:
            return False  # read it (the tool ran), then the connection is gone before the reply
        await stream.send(json_reply(result(msg["id"], f"ran {msg['params']['arguments']['n']}")))
        return True

    server = LegacyMcp(on_call)
    with in_thread(server) as port:
        d = start_daemon(upstream(port))
        host = raw_host(d.url)
        host.initialize()
        first, _ = timed_call(host, {"n": 1})
        assert first["result"]["content"][0]["text"] == "ran 1"
        second, _ = timed_call(host, {"n": 2})
        time.sleep(0.3)  # a second POST, if one were sent, has arrived
    runs = [c for c in server.calls if c["params"]["arguments"]["n"] == 2]
    posts = [r for r in server.seen if r.method == "POST" and r.json() in runs]
    assert posts[0].served_before > 0, "the call must have gone out on a kept-alive connection"
    assert len(runs) == 1, f"the tool ran {len(runs)} times"
    assert second["error"]["code"] == -32603 and "'up'" in second["error"]["message"], second


def test_dropped_get_stream_is_reopened_and_its_list_changed_reaches_hosts(start_daemon: Any, raw_host: Any) -> None:
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    server: LegacyMcp

    async def on_get(req: Request, stream: ByteStream) -> bool:
        if "last-event-id" not in req.headers:
            await stream.send(SSE_HEAD + event(id="g-1", retry=50))
            return False  # dropped after priming: a list_changed sent now would be lost
        server.tools.append("added")
        await stream.send(SSE_HEAD + event(changed, id="g-2"))
        await anyio.sleep(60)  # held open, as a live GET stream is
        return False

    server = LegacyMcp(on_get=on_get, list_changed=True)
    with in_thread(server) as port:
        d = start_daemon(upstream(port))
        host = raw_host(d.url)
        host.initialize()

        def listed() -> list[str]:
            return [t["name"] for t in reply_of(host.legacy("tools/list"))["result"]["tools"]]

        wait_until(lambda: "up__added" in listed(), timeout=10, what="the tool the list_changed announced")
        assert [g.headers.get("last-event-id") for g in server.gets()][:2] == [None, "g-1"]
