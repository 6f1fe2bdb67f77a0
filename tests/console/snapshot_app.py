"""The console in fixed states, for snapshot tests and screenshots: the real ConsoleApp, fed a
recorded feed by `ReplayBackend` instead of a daemon, with a frozen clock so ages render the same.

Scenarios: empty, hosts (three hosts, tasks in every status, one closed host), queue, cancelled,
reconnecting, approval (one approval with long arguments). `python tests/console/snapshot_app.py hosts` runs one for a look.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from console import render
from console.app import ConsoleApp
from console.backend import BackendError

NOW = 1_796_300_000_000  # a fixed "now" (ms)
DEPLOY_SCHEMA = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean", "title": "Approve the deploy?"},
        "environment": {"type": "string", "enum": ["staging", "production"], "default": "staging"},
        "contact": {"type": "string", "format": "email", "title": "Who to tell"},
    },
    "required": ["approve", "contact"],
}


def _conn(
    cid: str,
    kind: str,
    name: str,
    version: str,
    revision: str | None,
    transport: str,
    opened_s: int,
    closed_s: int | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    return {
        "id": cid, "kind": kind, "transport": transport, "revision": revision,
        "clientInfo": {"name": name, "version": version}, "principal": None, "peer": "127.0.0.1",
        "shimPid": 4242 if kind == "shim" else None, "openedMs": NOW - opened_s * 1000,
        "lastSeenMs": NOW - 1000, "closedMs": None if closed_s is None else NOW - closed_s * 1000,
        "closeReason": reason, "label": None,
    }  # fmt: skip


def _task(
    tid: str,
    cid: str,
    tool: str,
    status: str,
    age_s: int,
    message: str | None = None,
    era: str = "legacy",
    kind: str = "task",
) -> dict[str, Any]:
    owner = "call" if kind == "call" else "conn" if era == "legacy" else "modern"
    return {
        "id": tid, "kind": kind, "status": status, "statusMessage": message, "tool": tool, "upstream": "demo", "era": era,
        "connectionId": cid, "owner": owner, "createdMs": NOW - age_s * 1000,
        "updatedMs": NOW - 1000, "ttlMs": 600_000, "expiresMs": NOW + 600_000, "pollIntervalMs": 1000,
        "upstreamTaskId": None, "needsInput": status == "input_required",
    }  # fmt: skip


def _question(qid: str, cid: str, task: str | None, message: str, age_s: int, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": qid, "kind": "elicitation", "method": "elicitation/create", "upstream": "demo",
        "params": {"message": message, "requestedSchema": schema}, "status": "open",
        "createdMs": NOW - age_s * 1000, "expiresMs": NOW + 600_000, "taskId": task, "connectionId": cid,
        "inputKey": qid if task else None, "hostCanAnswer": False, "answeredBy": None, "answer": None,
        "error": None, "closedMs": None, "reason": None, "candidates": [],
    }  # fmt: skip


CONNECTIONS = [
    _conn("c-ide", "session", "demo-legacy-ide", "1.4.0", "2025-11-25", "http", 600),
    _conn("c-agent", "stateless", "demo-agent", "2.3.0", None, "http", 420),
    _conn("c-cli", "shim", "demo-cli", "0.9.1", "2025-11-25", "stdio", 300),
    _conn("c-old", "session", "old-notebook", "0.1", "2025-06-18", "http", 900, 240, "session deleted by the host"),
]
TASKS = [
    _task("Tk1buildAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "c-ide", "build", "working", 42, "compiling 3/8"),
    _task("Tk2deployAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "c-agent", "deploy", "input_required", 35,
          "waiting for input", "modern"),
    _task("Tk3reportAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "c-agent", "report", "completed", 180, None, "modern"),
    _task("Tk4flakyAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "c-cli", "flaky", "failed", 95, "the tool reported an error"),
    _task("Tk5watchAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "c-ide", "watch", "cancelled", 150, "cancelled by the host"),
    _task("Tk6watchAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "c-cli", "watch", "working", 12, "tick 12"),
    _task("Tk7echoAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "c-old", "report", "completed", 700),
    _task("Tk8fetchAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "c-cli", "fetch", "working", 25, "progress 3/10", kind="call"),
]  # fmt: skip
QUESTIONS = [
    _question("q-deploy", "c-agent", TASKS[1]["id"], "Deploy build 1.4 to an environment?", 30, DEPLOY_SCHEMA),
    _question("q-confirm", "c-ide", None, "Delete the cache folder?",
              20, {"type": "object", "properties": {"yes": {"type": "boolean", "title": "Delete?"}}}),
    _question("q-pick", "c-cli", None, "Which region?", 8,
              {"type": "object", "properties": {"region": {"type": "string", "enum": ["eu", "us", "ap"]}}}),
]  # fmt: skip


# An approval whose arguments run long, padded before the value that matters (#37 item 5).
LONG_ARGUMENTS = {
    "a_padding": "pad " * 400,
    "command": "rm -rf / --no-preserve-root",
    "env": {"HOME": "/root", "PATH": "/usr/bin"},
}


def _approval(qid: str, cid: str, task: str, age_s: int) -> dict[str, Any]:
    from mcpx.host.approvals import Requester, question_params

    params = question_params(Requester("agent in ~/src/api", "this 2025 session"), "fx__run", "fx", LONG_ARGUMENTS)
    q = _question(qid, cid, task, params["message"], age_s, params["requestedSchema"])
    return {**q, "upstream": "fx", "params": params, "why": "waiting for an operator: approval gate `*__run`"}


def snapshot(
    tasks: list[dict[str, Any]], questions: list[dict[str, Any]], conns: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "type": "snapshot",
        "seq": 120,
        "connections": conns,
        "tasks": tasks,
        "questions": questions,
        "operators": ["olga"],
    }


class ReplayBackend:
    """Plays recorded feed messages, then holds the feed open (or drops it, to show reconnecting)."""

    operator = "olga"

    def __init__(self, messages: list[dict[str, Any]], *, drop: bool = False) -> None:
        self.messages = messages
        self.drop = drop
        self.answers: list[tuple[str, str, Any, Any]] = []
        self.cancelled: list[str] = []

    def label(self) -> str:
        return "127.0.0.1:7435"

    async def feed(self, since: int | None) -> AsyncIterator[dict[str, Any]]:
        if self.drop:
            raise BackendError("the feed ended: connection refused")
        for message in self.messages:
            yield message
        await anyio.sleep_forever()

    async def task(self, task_id: str) -> dict[str, Any]:
        summary = next(t for t in TASKS + LONG_NAMES if t["id"] == task_id)
        detail = {**summary, "arguments": {"target": "web"}, "result": None, "error": None, "inputRequests": [],
                  "events": [{"seq": 100, "ts": summary["createdMs"], "kind": "task.created", "data": {"status": "working"},
                              "by": f"host:{summary['connectionId']}"}]}  # fmt: skip
        if summary["status"] == "completed":
            detail["result"] = {"content": [{"type": "text", "text": "report ready"}],
                                "structuredContent": {"pages": 3, "sections": ["intro", "numbers"]}}  # fmt: skip
        return detail

    async def frames(self, task_id: str) -> list[dict[str, Any]]:
        return []

    async def aclose(self) -> None:
        return None

    async def cancel(self, task_id: str) -> dict[str, Any]:
        self.cancelled.append(task_id)
        return {}

    async def status(self) -> dict[str, Any]:
        return {"version": "0.9.0", "uptimeS": 7384.5}

    async def allowances(self) -> list[dict[str, Any]]:
        return []

    async def revoke_allowance(self, allowance_id: str) -> None:
        return None

    async def answer(self, question_id: str, action: str, content: Any, result: Any) -> dict[str, Any]:
        self.answers.append((question_id, action, content, result))
        return {}


LONG_NAMES = [
    {**_task("Tl1longAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "c-ide", "trigger-long-running-operation", "working", 106,
             "step 4 of 10"), "upstream": "everything-http"},
    {**_task("Tl2longAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "c-agent", "trigger-long-running-operation", "working", 50,
             "step 9 of 10"), "upstream": "everything"},
    {**_task("Tl3longAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "c-cli", "simulate-research-query", "completed", 300),
     "upstream": "everything-http"},
]  # fmt: skip


def make_app(scenario: str, *, read_only: bool = False) -> ConsoleApp:
    render.clock = lambda: NOW
    settings_file = Path(tempfile.mkdtemp(prefix="mcpx-snapshot-")) / "console.json"  # never the user's theme
    if scenario == "empty":
        backend = ReplayBackend([snapshot([], [], [])])
    elif scenario == "reconnecting":
        backend = ReplayBackend([], drop=True)
    elif scenario == "cancelled":
        tasks = [dict(t) for t in TASKS]
        tasks[0].update(status="cancelled", statusMessage="cancelled by operator olga")
        backend = ReplayBackend([snapshot(tasks, QUESTIONS, CONNECTIONS)])
    elif scenario == "long":  # tool and upstream names longer than their columns
        backend = ReplayBackend([snapshot(LONG_NAMES, [], CONNECTIONS)])
    elif scenario == "approval":
        backend = ReplayBackend([snapshot(TASKS, [_approval("q-run", "c-ide", TASKS[0]["id"], 12)], CONNECTIONS)])
    elif scenario == "one-question":
        backend = ReplayBackend([snapshot(TASKS, QUESTIONS[2:], CONNECTIONS)])
    else:  # hosts, queue, form
        backend = ReplayBackend([snapshot(TASKS, QUESTIONS, CONNECTIONS)])
    return ConsoleApp(backend, bell=False, read_only=read_only, settings_file=settings_file)


if __name__ == "__main__":
    make_app(sys.argv[1] if len(sys.argv) > 1 else "hosts").run()
