"""Operator answers a real daemon's store cannot record (#26): /v1 answers 503 and changes nothing,
so the upstream gets no answer the event log does not hold, and the question stays open until an
answer is recorded, which is then the one the upstream gets.

The fault is put in the daemon's SQLite file from outside, as a test may break its tables: a
trigger that aborts every write closing a question (the daemon's other writes go on)."""

from __future__ import annotations

import threading
from typing import Any

import httpx
from harness import Api, Daemon, conformance_server, operator_attached, sqlite_only, wait_until
from test_operator_answers import _plain_call_aside, _summary

FAULT = (
    "CREATE TRIGGER test_fault BEFORE UPDATE ON questions"
    " BEGIN SELECT RAISE(ABORT, 'injected: the disk is failing'); END"
)


def _form(name: str) -> dict[str, str]:
    return {"username": name, "email": f"{name}@example.com"}


def _at_once(d: Daemon, qid: str, *names: str) -> dict[str, httpx.Response]:
    """The named operators answer `qid` at the same moment, each on a connection of its own."""
    got: dict[str, httpx.Response] = {}
    start = threading.Barrier(len(names))

    def one(name: str) -> None:
        with Api(d, timeout=30) as api:
            start.wait(10)
            got[name] = api.answer(qid, "accept", by=name, content=_form(name))

    threads = [threading.Thread(target=one, args=(name,)) for name in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return got


@sqlite_only  # the fault is a trigger in the SQLite file
def test_answers_the_store_cannot_record_get_503_and_the_upstream_only_a_recorded_one(
    start_daemon: Any, raw_host: Any
) -> None:
    d: Daemon = start_daemon({"mcpServers": {"up": conformance_server()}})
    host = raw_host(d.url)
    host.initialize()  # no elicitation: the question is the attached operators'
    feed = operator_attached(d, "olga")
    t, box = _plain_call_aside(d, host, {"name": "test_elicitation", "arguments": {"message": "Recorded?"}})
    try:
        with Api(d) as api:
            [q] = wait_until(api.open_questions, 15, "the question")
            d.store_rows(FAULT)
            got = _at_once(d, q["id"], "ann", "bob")
            for name, resp in got.items():
                assert resp.status_code == 503, (name, resp.text)
                assert "could not record" in resp.json()["error"] and "still open" in resp.json()["error"]
            # The same through the era-blind input route, which names what it answered before.
            body = {"inputResponses": {q["id"]: {"action": "accept", "content": _form("cy")}}, "by": "cy"}
            assert api.post(f"/v1/tasks/{q['taskId']}/input", json=body).status_code == 503
            # Nothing changed: the question is open, the host's call still waits.
            assert api.get(f"/v1/questions/{q['id']}").json()["status"] == "open"
            assert [o["id"] for o in api.open_questions()] == [q["id"]]
            assert "resp" not in box

            d.store_rows("DROP TRIGGER test_fault")  # the store works again
            taken = api.answer(q["id"], "accept", by="dee", content=_form("dee"))
            assert taken.status_code == 200, taken.text
            t.join(15)
            assert box["resp"].json()["result"]["content"][0]["text"] == _summary(_form("dee"))
            events = api.get("/v1/events", params={"kind": "question.answered"}).json()["events"]
            assert [e["by"] for e in events if e["questionId"] == q["id"]] == ["operator:dee"]
            assert api.answer(q["id"], "decline", by="late").status_code == 409
    finally:
        t.join(15)
        feed.close()
