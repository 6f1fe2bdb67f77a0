"""An operator answers through /v1 what the upstream asked, and the upstream gets exactly that:
inside a 2025-11-25 task, inside a 2026-07-28 task (its inputRequests), and outside any task. The
answer is checked first (422 naming the field), a second one is refused (409), a question whose
call is gone closes with it, and every step is in the audit log with who did it."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from harness import (
    Api,
    FeedClient,
    RawHost,
    conformance_server,
    operator_attached,
    reply_of,
    sse_frames,
    wait_until,
)

CONTENT = {"username": "ada", "email": "ada@example.com"}
TASKS_EXT = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
WAITING = "waiting for an operator to answer up's elicitation question"


@pytest.fixture(params=[True, False], ids=["upstream-2025", "upstream-2026"])
def daemon(request: Any, start_daemon: Any) -> Any:
    args = ["--legacy-only"] if request.param else []
    up = conformance_server(*args, also_tasks=("test_tool_with_task",))
    config = {"mcpServers": {"up": up}, "tasks": {"taskAfterMs": 200}}
    d = start_daemon(config)
    d.legacy_upstream = request.param
    return d


def _summary(content: dict[str, Any]) -> str:
    """What the conformance fixture's test_elicitation returns for an accepted answer."""
    return f"User response: action=accept, content={json.dumps(content)}"


def _answer_the_open_question(api: Api, message: str) -> dict[str, Any]:
    [q] = wait_until(lambda: [q for q in api.open_questions() if q["params"].get("message") == message], 15, message)
    bad = api.answer(q["id"], "accept", by="olga", content={"username": "ada"})
    assert bad.status_code == 422 and "content.email" in bad.json()["fields"], bad.text  # checked first
    taken = api.answer(q["id"], "accept", by="olga", content=CONTENT)
    assert taken.status_code == 200, taken.text
    again = api.answer(q["id"], "decline", by="late")
    assert again.status_code == 409, again.text
    return q


@contextlib.contextmanager
def _a_2025_task_asking(daemon: Any, raw_host: Any, message: str) -> Iterator[tuple[RawHost, str]]:
    """A 2025 host's task whose upstream asks `message`, with an operator attached to answer it
    (the host declares no elicitation); the host and the task id."""
    host = raw_host(daemon.url)
    host.initialize()
    feed = operator_attached(daemon, "olga")
    try:
        args = {"name": "test_elicitation", "arguments": {"message": message}, "task": {}}
        yield host, host.legacy("tools/call", args).json()["result"]["task"]["taskId"]
    finally:
        feed.close()


def test_an_operators_answer_reaches_the_upstream_inside_a_2025_task(daemon: Any, raw_host: Any) -> None:
    with _a_2025_task_asking(daemon, raw_host, "In a 2025 task?") as (host, tid), Api(daemon) as api:
        q = _answer_the_open_question(api, "In a 2025 task?")
        assert q["taskId"] == tid
        result = reply_of(host.legacy("tasks/result", {"taskId": tid}))["result"]
        assert result["content"][0]["text"] == _summary(CONTENT)
        kinds = [(e["kind"], e.get("by")) for e in api.get("/v1/events", params={"task": tid}).json()["events"]]
        assert ("question.answered", "operator:olga") in kinds, kinds


def test_an_operators_input_responses_reach_the_upstream_inside_a_2026_task(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    meta = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, **TASKS_EXT}}
    call = {"name": "confirm_delete", "arguments": {"filename": "b.txt"}}
    handle = host.modern("tools/call", call, meta=meta).json()["result"]
    assert handle["resultType"] == "task", handle
    tid = handle["taskId"]
    with Api(daemon) as api:

        def asking() -> dict[str, Any] | None:
            t: dict[str, Any] = api.get(f"/v1/tasks/{tid}").json()
            return t if t["inputRequests"] and t["status"] == "input_required" else None

        detail = wait_until(asking, 15, "the task to wait for input")
        [request] = detail["inputRequests"]
        assert request["method"] == "elicitation/create" and detail["needsInput"]
        # The same key a host's tasks/update would use, for the same answer shape.
        bad = api.post(f"/v1/tasks/{tid}/input", json={"inputResponses": {request["key"]: {"action": "maybe"}}})
        assert bad.status_code == 422 and f"inputResponses.{request['key']}.action" in bad.json()["fields"]
        answer = {"action": "accept", "content": {"confirm": True}}
        body = {"inputResponses": {request["key"]: answer, "nope": {}}, "by": "ann"}
        outcome = api.post(f"/v1/tasks/{tid}/input", json=body).json()
        assert outcome == {"answered": [request["key"]], "ignored": ["nope"]}

        def done() -> dict[str, Any] | None:
            r = host.modern("tasks/get", {"taskId": tid}, meta=meta, headers={"Mcp-Name": tid}).json()["result"]
            return r if r["status"] == "completed" else None

        assert wait_until(done, 15, "completion")["result"]["content"][0]["text"] == "Deleted b.txt"
        q = api.get(f"/v1/questions/{request['questionId']}").json()
        assert q["status"] == "answered" and q["answeredBy"] == "operator:ann" and q["answer"] == answer
        # The first answer won: a second one, either way it is given, changes nothing.
        again = api.answer(request["questionId"], "decline", by="late")
        assert again.status_code == 409 and "answered" in again.json()["error"], again.text
        late = api.post(f"/v1/tasks/{tid}/input", json={"inputResponses": {request["key"]: {"action": "decline"}}})
        assert late.json() == {"answered": [], "ignored": [request["key"]]}, late.text
        q = api.get(f"/v1/questions/{request['questionId']}").json()
        assert q["answeredBy"] == "operator:ann" and q["answer"] == answer


def test_input_responses_answer_a_question_inside_a_2025_task(daemon: Any, raw_host: Any) -> None:
    """POST /v1/tasks/{id}/input is era-blind: the 2025 task's question is keyed as a 2026 task's
    inputRequests are, and the upstream gets exactly the ElicitResult given for that key."""
    with _a_2025_task_asking(daemon, raw_host, "Legacy input?") as (host, tid), Api(daemon) as api:
        detail = wait_until(lambda: (t := api.get(f"/v1/tasks/{tid}").json())["inputRequests"] and t, 15, "ask")
        [request] = detail["inputRequests"]
        assert request["method"] == "elicitation/create" and request["params"]["message"] == "Legacy input?"
        answer = {"action": "accept", "content": CONTENT}
        body = {"inputResponses": {request["key"]: answer}, "by": "ann"}
        outcome = api.post(f"/v1/tasks/{tid}/input", json=body)
        assert outcome.json() == {"answered": [request["key"]], "ignored": []}, outcome.text
        result = reply_of(host.legacy("tasks/result", {"taskId": tid}))["result"]
        assert result["content"][0]["text"] == _summary(CONTENT)
        assert host.legacy("tasks/get", {"taskId": tid}).json()["result"]["status"] == "completed"
        q = api.get(f"/v1/questions/{request['questionId']}").json()
        assert q["status"] == "answered" and q["answeredBy"] == "operator:ann" and q["answer"] == answer


def _plain_call_aside(daemon: Any, host: RawHost, params: dict[str, Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """A tools/call in `host`'s 2025 session from a thread of its own (it waits for its answer);
    its response lands in the box as "resp"."""
    box: dict[str, Any] = {}

    def call() -> None:
        with RawHost(daemon.url) as h:
            h.session_id, h.revision = host.session_id, host.revision
            box["resp"] = h.legacy("tools/call", params)

    t = threading.Thread(target=call)
    t.start()
    return t, box


def test_an_operators_answer_reaches_the_upstream_outside_any_task(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    host.initialize()
    feed = operator_attached(daemon, "olga")
    t, box = _plain_call_aside(daemon, host, {"name": "test_elicitation", "arguments": {"message": "Plain call?"}})
    try:
        with Api(daemon) as api:
            q = _answer_the_open_question(api, "Plain call?")
            # Shown with the plain call that asked (listed at once), which holds no task.
            row = api.get(f"/v1/tasks/{q['taskId']}").json()
            assert (row["kind"], row["tool"], row["owner"]) == ("call", "test_elicitation", "call")
        t.join(15)
        assert box["resp"].json()["result"]["content"][0]["text"] == _summary(CONTENT)
    finally:
        t.join(15)
        feed.close()


def test_a_question_closes_when_its_call_is_cancelled(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    host.initialize()  # no elicitation: the question waits for the attached operator
    feed = operator_attached(daemon, "olga")
    events = FeedClient(daemon, kinds=["question.opened", "question.expired"])
    events.snapshot()  # subscribed: what follows arrives as events
    body = {"jsonrpc": "2.0", "id": 777, "method": "tools/call"}
    body["params"] = {"name": "test_elicitation", "arguments": {"message": "Then cancelled?"}}
    try:
        t = threading.Thread(target=lambda: host.post(body, host._legacy_headers()))
        t.start()
        [opened] = wait_until(lambda: events.events("question.opened"), 15, "the question")
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 777}}
        assert host.post(cancel, host._legacy_headers()).status_code == 202
        [gone] = wait_until(lambda: events.events("question.expired"), 10, "the question to close")
        assert gone["questionId"] == opened["questionId"] and gone["data"]["reason"] == "the call ended"
        with Api(daemon) as api:
            assert not api.open_questions()
            late = api.answer(opened["questionId"], "accept", content=CONTENT)
            assert late.status_code == 409, late.text
        t.join(10)
    finally:
        events.close()
        feed.close()


# ---- the host sees that its question waits for an operator ----------------------------------------
def test_a_2025_task_whose_question_waits_for_an_operator_says_so_until_it_is_answered(
    daemon: Any, raw_host: Any
) -> None:
    host = raw_host(daemon.url)
    host.initialize()  # no elicitation: the question can only wait for the attached operator
    feed = operator_attached(daemon, "olga")
    try:
        call = {"name": "test_tool_with_task", "arguments": {}, "task": {}}  # asks, then works 1.5 s
        tid = host.legacy("tools/call", call).json()["result"]["task"]["taskId"]

        def get() -> dict[str, Any]:
            return host.legacy("tasks/get", {"taskId": tid}).json()["result"]

        waiting = wait_until(lambda: (t := get()).get("statusMessage") == WAITING and t, 15, "the waiting message")
        assert waiting["status"] == "working"  # nothing for this host to do: it is not asked
        with Api(daemon) as api:
            assert api.get(f"/v1/tasks/{tid}").json()["statusMessage"] == WAITING
            [q] = api.open_questions()
            assert api.answer(q["id"], "accept", by="olga", content={"name": "Ada"}).status_code == 200
        # Answered: while the upstream works on, the task no longer says it waits for anyone.
        after = wait_until(lambda: (t := get()).get("statusMessage") != WAITING and t, 5, "the message withdrawn")
        assert after["status"] == "working" and after.get("statusMessage") is None, after
        assert reply_of(host.legacy("tasks/result", {"taskId": tid}))["result"]["content"][0]["text"] == "Hello, Ada!"
        messages = [e["data"]["statusMessage"] for e in feed.events("task.status") if e["taskId"] == tid]
        assert messages[:2] == [WAITING, None], messages  # the feed saw it said, then withdrawn
    finally:
        feed.close()


def test_a_2026_task_whose_question_waits_for_an_operator_says_so(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    meta = {"io.modelcontextprotocol/clientCapabilities": TASKS_EXT}  # tasks, but no elicitation
    feed = operator_attached(daemon, "olga")
    try:
        handle = host.modern("tools/call", {"name": "confirm_delete", "arguments": {"filename": "c.txt"}}, meta=meta)
        tid = handle.json()["result"]["taskId"]

        def get() -> dict[str, Any]:
            r: dict[str, Any] = host.modern("tasks/get", {"taskId": tid}, meta=meta, headers={"Mcp-Name": tid}).json()
            return r["result"]

        if not daemon.legacy_upstream:
            # A 2026 upstream is given this host's own capabilities (MRTR passes through, docs/tasks.md):
            # it refuses by itself to ask a host without elicitation, and no question is ever opened.
            failed = wait_until(lambda: (t := get())["status"] == "failed" and t, 15, "the upstream's refusal")
            assert failed["error"]["code"] == -32021 and "elicitation" in failed["error"]["message"], failed
            with Api(daemon) as api:
                assert not [q for q in api.history() if q["taskId"] == tid]
            return
        waiting = wait_until(lambda: (t := get()).get("statusMessage") == WAITING and t, 15, "the waiting message")
        assert waiting["status"] == "working" and "inputRequests" not in waiting  # not asked of this host
        with Api(daemon) as api:
            [q] = api.open_questions()
            assert q["taskId"] == tid and not q["hostCanAnswer"]
            assert api.answer(q["id"], "accept", by="olga", content={"confirm": True}).status_code == 200
        done = wait_until(lambda: (t := get())["status"] == "completed" and t, 15, "completion")
        assert done["result"]["content"][0]["text"] == "Deleted c.txt"
    finally:
        feed.close()


def test_a_plain_call_whose_question_waits_for_an_operator_gets_a_progress_message(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    host.initialize()
    feed = operator_attached(daemon, "olga")
    params = {"name": "test_elicitation", "arguments": {"message": "Progress?"}, "_meta": {"progressToken": "p"}}
    t, box = _plain_call_aside(daemon, host, params)
    try:
        with Api(daemon) as api:
            [q] = wait_until(api.open_questions, 15, "the question")
            assert api.answer(q["id"], "accept", by="olga", content=CONTENT).status_code == 200
        t.join(15)
        *notes, reply = sse_frames(box["resp"])
        assert reply["result"]["content"][0]["text"] == _summary(CONTENT)
        progress = [n["params"] for n in notes if n.get("method") == "notifications/progress"]
        assert progress and progress[0]["progressToken"] == "p" and progress[0]["message"] == WAITING, notes
    finally:
        t.join(15)
        feed.close()
