"""`mcpx audit` names every host cancel and every operator action with who did it: a 2025 host's
`tasks/cancel`, a 2026 host's `tasks/cancel`, an operator's cancel through `/v1` and through
`mcpx tasks cancel`, an operator's answer through `mcpx questions answer`, through `/v1`'s answer
route and through a task's `/v1` input, and a host's own answer (its `tasks/update`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness import Api, Daemon, RawHost, conformance_server, operator_attached, stdio_server, wait_until
from test_cli import ok

EXT = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
ASKER = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, **EXT}}
PLAIN = {"io.modelcontextprotocol/clientCapabilities": EXT}


def _config(tmp_path: Path) -> dict[str, Any]:
    return {
        "mcpServers": {
            "fx": stdio_server(tmp_path),
            "up": conformance_server(),
        },
        "tasks": {"taskAfterMs": 100},
    }


def _legacy_slow(host: RawHost) -> str:
    frame = host.legacy("tools/call", {"name": "fx__slow", "arguments": {"seconds": 60}, "task": {}}).json()
    return str(frame["result"]["task"]["taskId"])


def _modern_task(host: RawHost, call: dict[str, Any], meta: dict[str, Any]) -> str:
    handle = host.modern("tools/call", call, meta=meta).json()["result"]
    assert handle["resultType"] == "task", handle
    return str(handle["taskId"])


def _asking(api: Api, tid: str) -> dict[str, Any]:
    def waiting() -> dict[str, Any] | None:
        t: dict[str, Any] = api.get(f"/v1/tasks/{tid}").json()
        return t if t["inputRequests"] else None

    return wait_until(waiting, 15, f"task {tid} to ask")


def test_every_host_cancel_and_operator_action_is_in_the_audit_log_with_who_did_it(
    start_daemon: Any, tmp_path: Path
) -> None:
    d: Daemon = start_daemon(_config(tmp_path))
    expect: dict[tuple[str, str], str] = {}  # (kind, task id) -> by
    with RawHost(d.url) as legacy, RawHost(d.url) as modern, Api(d) as api:
        legacy.initialize()
        conn = lambda tid: api.get(f"/v1/tasks/{tid}").json()["connectionId"]  # noqa: E731 - a local shorthand

        # Hosts cancel their own tasks, in each era.
        tid = _legacy_slow(legacy)
        assert "result" in legacy.legacy("tasks/cancel", {"taskId": tid}).json()
        expect["task.cancel_requested", tid] = f"host:{conn(tid)}"
        tid = _modern_task(modern, {"name": "fx__slow", "arguments": {"seconds": 60}}, PLAIN)
        assert "result" in modern.modern("tasks/cancel", {"taskId": tid}, meta=PLAIN, headers={"Mcp-Name": tid}).json()
        expect["task.cancel_requested", tid] = f"host:{conn(tid)}"

        # An operator cancels through /v1 and through the CLI.
        tid = _legacy_slow(legacy)
        assert api.post(f"/v1/tasks/{tid}/cancel", json={"by": "bea"}).status_code == 200
        expect["task.cancel_requested", tid] = "operator:bea"
        tid = _legacy_slow(legacy)
        ok(d, "tasks", "cancel", tid, "--by", "cli")
        expect["task.cancel_requested", tid] = "operator:cli"

        # An operator answers: with the CLI, with /v1's answer route, and with a task's /v1 input.
        feed = operator_attached(d, "olga")  # the hosts declare no elicitation: the operator is asked
        try:
            for by, route in (("carl", "cli"), ("ann", "answer")):
                args = {"name": "test_elicitation", "arguments": {"message": f"from {by}?"}, "task": {}}
                tid = legacy.legacy("tools/call", args).json()["result"]["task"]["taskId"]
                [request] = _asking(api, tid)["inputRequests"]
                content = {"username": by, "email": f"{by}@example.com"}
                if route == "cli":
                    ok(d, "questions", "answer", request["questionId"], "--accept",
                       f"username={by}", f"email={by}@example.com", "--by", by)  # fmt: skip
                else:
                    answered = api.answer(request["questionId"], "accept", by=by, content=content)
                    assert answered.status_code == 200, answered.text
                expect["question.answered", tid] = f"operator:{by}"
        finally:
            feed.close()
        tid = _modern_task(modern, {"name": "confirm_delete", "arguments": {"filename": "a.txt"}}, ASKER)
        [request] = _asking(api, tid)["inputRequests"]
        body = {"inputResponses": {request["key"]: {"action": "accept", "content": {"confirm": True}}}, "by": "ivy"}
        assert api.post(f"/v1/tasks/{tid}/input", json=body).json()["answered"] == [request["key"]]
        expect["question.answered", tid] = "operator:ivy"

        # A host answers its own task's question (tasks/update): the audit says which host.
        tid = _modern_task(modern, {"name": "confirm_delete", "arguments": {"filename": "b.txt"}}, ASKER)
        [request] = _asking(api, tid)["inputRequests"]
        # /v1 shows the broker's question as soon as it opens; a host learns the key from its own
        # tasks/get, once the task row has it (an answer to a key the row has not got is ignored).
        wait_until(
            lambda: (
                request["key"]
                in modern.modern("tasks/get", {"taskId": tid}, meta=ASKER, headers={"Mcp-Name": tid})
                .json()["result"]
                .get("inputRequests", {})
            ),
            10,
            "the host's tasks/get to show the question",
        )
        update = {"taskId": tid, "inputResponses": {request["key"]: {"action": "decline"}}}
        assert "result" in modern.modern("tasks/update", update, meta=ASKER, headers={"Mcp-Name": tid}).json()
        expect["question.answered", tid] = f"host:{conn(tid)}"
        # The asker records a host's answer once it wakes, a moment after tasks/update is acknowledged.
        qid = request["questionId"]
        wait_until(lambda: api.get(f"/v1/questions/{qid}").json()["status"] == "answered", 10, "the answer recorded")

    out = json.loads(ok(d, "audit", "--json", "--kind", "task.cancel_requested", "question.answered"))
    got = {(e["kind"], e["taskId"]): e["by"] for e in out["events"]}
    assert got == expect
    # And the readable table names each one too.
    text = ok(d, "audit", "--kind", "task.cancel_requested", "question.answered")
    for by in expect.values():
        assert by in text, (by, text)
