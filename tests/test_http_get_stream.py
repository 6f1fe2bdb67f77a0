"""A 2025-11-25 HTTP upstream's standalone GET stream, through a real mcpx daemon (#36).

The upstream is a server of ours (tests/scripted_http.py) that behaves as TypeScript SDK servers do:
what it says outside any request (a question with no related call, list_changed) goes on its GET
stream, which mcpx opens after initialize whatever the server declared. Its question is asked of
the host whose call is in flight and the host's answer (with the form's defaults, SEP-1034) is
POSTed back; its list_changed reaches a host's own GET stream; and a GET stream that floods mcpx
with notifications, pings and junk never stalls it."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import anyio
import httpx
from anyio.abc import ByteStream
from harness import UNIT, Api, RawHost, SseStream, operator_attached, reply_of, wait_until
from scripted_http import SSE_HEAD, LegacyMcp, Request, event, in_thread, result

ASK = {
    "jsonrpc": "2.0",
    "id": "ask-1",
    "method": "elicitation/create",
    "params": {
        "message": "Which team?",
        "requestedSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "team": {"type": "string", "default": "core"}},
            "required": ["name"],
        },
    },
}


class GetStream:
    """The server side of the GET stream: what a handler puts in `outbox` goes out as an event."""

    def __init__(self) -> None:
        self.outbox: list[bytes] = []
        self.opened = 0

    async def on_get(self, req: Request, stream: ByteStream) -> bool:
        self.opened += 1
        await stream.send(SSE_HEAD + event(id="g-0"))
        while True:
            while self.outbox:
                await stream.send(self.outbox.pop(0))
            await anyio.sleep(0.01)

    def push(self, msg: dict[str, Any] | str, event_id: str | None = None) -> None:
        if isinstance(msg, str):  # raw SSE text, as it goes on the wire
            self.outbox.append(msg.encode())
        else:
            self.outbox.append(event(msg, id=event_id))


def _upstream(port: int) -> dict[str, Any]:
    return {"mcpServers": {"up": {"url": f"http://127.0.0.1:{port}/mcp", "mcpx": {"passthrough": True}}}}


def _call_answering(host: RawHost, answer: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A 2025 host's tools/call of `work`; every server request on the call's stream is answered."""
    body = {"jsonrpc": "2.0", "id": 900, "method": "tools/call", "params": {"name": "work", "arguments": {}}}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    headers.update(host._legacy_headers())
    asked = []
    with httpx.Client(timeout=30) as c, c.stream("POST", host.url, content=json.dumps(body), headers=headers) as resp:
        for line in resp.iter_lines():
            if not line.startswith("data:"):
                continue
            frame = json.loads(line[5:])
            if "method" in frame and "id" in frame:
                asked.append(frame)
                assert host.post({"jsonrpc": "2.0", "id": frame["id"], "result": answer}, host._legacy_headers())
            elif frame.get("id") == 900:
                return frame, asked
    raise AssertionError("no reply")


def test_a_question_on_the_get_stream_is_asked_of_the_host_whose_call_is_in_flight(
    start_daemon: Any, raw_host: Any
) -> None:
    get = GetStream()
    server: LegacyMcp

    async def on_call(req: Request, msg: dict[str, Any], stream: ByteStream) -> bool:
        await stream.send(SSE_HEAD)  # the call's own stream stays silent: the question goes on GET
        get.push(ASK, "g-1")
        with anyio.fail_after(20):
            while not any(r.get("id") == "ask-1" for r in server.replies):
                await anyio.sleep(0.02)
        [answer] = [r for r in server.replies if r.get("id") == "ask-1"]
        await stream.send(event(result(msg["id"], json.dumps(answer["result"]))))
        return False

    server = LegacyMcp(on_call, get.on_get)  # declares no listChanged: the GET stream opens anyway
    with in_thread(server) as port:
        d = start_daemon(_upstream(port))
        host = raw_host(d.url)
        host.initialize(capabilities={"elicitation": {}})
        frame, asked = _call_answering(host, {"action": "accept", "content": {"name": "Ada"}})
    assert [a["params"]["message"] for a in asked] == ["Which team?"]
    assert json.loads(frame["result"]["content"][0]["text"]) == {
        "action": "accept",
        "content": {"name": "Ada", "team": "core"},  # the default of the field the host left out
    }
    assert get.opened == 1 and server.gets()[0].headers.get("mcp-session-id") == "s-1"


def test_a_list_changed_on_the_get_stream_reaches_a_hosts_session(start_daemon: Any, raw_host: Any) -> None:
    get = GetStream()
    server = LegacyMcp(on_get=get.on_get, list_changed=True)
    with in_thread(server) as port:
        d = start_daemon(_upstream(port))
        host = raw_host(d.url)
        host.initialize()
        stream = SseStream("GET", d.url, {"Accept": "text/event-stream", **host._legacy_headers()})
        wait_until(lambda: get.opened, what="mcpx's GET stream to the upstream")
        server.tools.append("added")
        get.push({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, "g-1")
        wait_until(
            lambda: any(f.get("method") == "notifications/tools/list_changed" for f in stream.frames),
            what="the list_changed on the host's GET stream",
        )
        names = [t["name"] for t in reply_of(host.legacy("tools/list"))["result"]["tools"]]
        stream.close()
    assert names == ["work", "added"]


def test_what_the_get_stream_floods_mcpx_with_never_stalls_it(start_daemon: Any, raw_host: Any) -> None:
    get = GetStream()

    async def on_call(req: Request, msg: dict[str, Any], stream: ByteStream) -> bool:
        from scripted_http import json_reply

        await stream.send(json_reply(result(msg["id"], "done")))
        return True

    server = LegacyMcp(on_call, get.on_get, list_changed=True)
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    with in_thread(server) as port:
        d = start_daemon(_upstream(port))
        host = raw_host(d.url)
        host.initialize()
        wait_until(lambda: get.opened, what="mcpx's GET stream to the upstream")
        lists_before = sum(1 for r in server.seen if r.method == "POST" and r.json().get("method") == "tools/list")
        for i in range(300):
            get.push(changed)
            get.push({"jsonrpc": "2.0", "id": f"ping-{i}", "method": "ping"})
            get.push({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": i}})
        get.push("data: not json\n\n")
        get.push({"jsonrpc": "2.0", "id": 123456, "result": {}})  # a reply to nothing mcpx asked
        started = time.monotonic()
        frame = reply_of(host.legacy("tools/call", {"name": "work", "arguments": {}}))
        assert frame["result"]["content"][0]["text"] == "done"
        took = time.monotonic() - started
        # With no call in flight a question is nobody's: refused at once (never left hanging).
        get.push({"jsonrpc": "2.0", "id": "ask-x", "method": "elicitation/create", "params": ASK["params"]})
        wait_until(lambda: sum(1 for r in server.replies if str(r.get("id")).startswith("ping-")) == 300,
                   what="every ping answered")  # fmt: skip
        wait_until(lambda: any(r.get("id") == "ask-x" for r in server.replies), what="the orphan question refused")
        time.sleep(0.5)  # the refreshes the flood caused have ended
        lists = sum(1 for r in server.seen if r.method == "POST" and r.json().get("method") == "tools/list")
    [refused] = [r for r in server.replies if r.get("id") == "ask-x"]
    assert "no call was in flight" in refused["error"]["message"]
    # 300 list_changed: one refresh at a time, each one more run at most while it was running.
    assert lists - lists_before < 30, lists - lists_before
    assert took < 10 * UNIT, f"a call during the flood took {took:.1f} s"
    assert "not JSON" in d.stderr()


def test_a_question_on_the_get_stream_while_two_hosts_calls_are_in_flight_is_an_operators(
    start_daemon: Any, raw_host: Any
) -> None:
    get = GetStream()
    server: LegacyMcp
    in_flight: list[Any] = []

    async def on_call(req: Request, msg: dict[str, Any], stream: ByteStream) -> bool:
        in_flight.append(msg["id"])
        await stream.send(SSE_HEAD)
        with anyio.fail_after(30):
            while len(in_flight) < 2:  # both hosts' calls are here: nobody can tell whose it is
                await anyio.sleep(0.02)
            if msg["id"] == in_flight[0]:
                get.push(ASK, "g-1")
            while not any(r.get("id") == "ask-1" for r in server.replies):
                await anyio.sleep(0.02)
        await stream.send(event(result(msg["id"], "done")))
        return False

    server = LegacyMcp(on_call, get.on_get)
    with in_thread(server) as port:
        d = start_daemon(_upstream(port))
        hosts = [raw_host(d.url), raw_host(d.url)]
        for host in hosts:
            host.initialize(capabilities={"elicitation": {}})  # each could answer: neither may
        feed = operator_attached(d, "olga")
        box: dict[int, Any] = {}
        threads = [
            threading.Thread(target=lambda i=i, h=h: box.update({i: h.legacy("tools/call", {"name": "work"})}))
            for i, h in enumerate(hosts)
        ]
        for t in threads:
            t.start()
        try:
            with Api(d) as api:
                [q] = wait_until(api.open_questions, what="the question, for an operator")
                assert q["why"].startswith("waiting for an operator: 2 calls were in flight on this server"), q
                assert len(q["candidates"]) == 2 and not q["hostCanAnswer"], q
                assert api.answer(q["id"], "accept", by="olga", content={"name": "Olga"}).status_code == 200
                for t in threads:
                    t.join(20)
        finally:
            feed.close()
    [answer] = [r for r in server.replies if r.get("id") == "ask-1"]
    assert answer["result"] == {"action": "accept", "content": {"name": "Olga", "team": "core"}}
    assert all(reply_of(box[i])["result"]["content"][0]["text"] == "done" for i in range(2))
