"""The demo upstream's tools: what each one declares and does (the wire is in upstream.py).

Each tool is a plain function of a `Call`, run in its own thread: it sleeps (cancellably), reports
progress and log messages, may ask the host a question (`elicitation/create`), and returns a
CallToolResult, raises `ToolError` for a JSON-RPC error, or `Cancelled` when its call was cancelled
(then nothing is sent: a cancelled request gets no reply).
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

Id = str | int
Result = dict[str, Any]


class ToolError(Exception):
    """The call's answer is this JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Cancelled(Exception):
    """The call was cancelled (notifications/cancelled): it ends without a reply."""


class PeerError(Exception):
    """The peer (mcpx) answered one of our server requests with a JSON-RPC error."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.error = error


class Wire(Protocol):
    """What a call needs of the connection: upstream.Peer."""

    def send(self, msg: dict[str, Any]) -> None: ...

    def request(self, method: str, params: dict[str, Any], cancelled: threading.Event) -> dict[str, Any]: ...


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


class Call:
    """One tools/call as a tool sees it."""

    def __init__(
        self, wire: Wire, rid: Id, args: dict[str, Any], progress_token: object, cancelled: threading.Event
    ) -> None:
        self.wire = wire
        self.rid = rid
        self.args = args
        self.progress_token = progress_token
        self.cancelled = cancelled

    def sleep(self, seconds: float) -> None:
        if self.cancelled.wait(seconds):
            raise Cancelled

    def progress(self, done: float, total: float | None, message: str) -> None:
        # Only a caller that sent a progressToken asked for progress (2025-11-25 progress).
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": done, "message": message}
        if total is not None:
            params["total"] = total
        self.wire.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})

    def log(self, level: str, message: str) -> None:
        data = {"call": self.rid, "message": message}
        params = {"level": level, "logger": "mcpx-demo", "data": data}
        self.wire.send({"jsonrpc": "2.0", "method": "notifications/message", "params": params})

    def ask(self, message: str, schema: dict[str, Any]) -> dict[str, Any]:
        """Ask the host a form question mid-call and return its ElicitResult.

        mcpx puts a stdio upstream's question to a host only while every call in flight is that
        host's; otherwise it is an operator's, and with no operator attached mcpx answers -32601.
        The other host's call may end soon, so -32601 is retried for a few seconds before it
        counts as the answer.
        """
        params = {"mode": "form", "message": message, "requestedSchema": schema}
        for attempt in range(10):
            try:
                return self.wire.request("elicitation/create", params, self.cancelled)
            except PeerError as exc:
                if exc.error.get("code") != -32601 or attempt == 9:
                    raise
                self.sleep(0.3)
        raise AssertionError("unreachable")


@dataclass(frozen=True)
class Tool:
    declaration: dict[str, Any]
    run: Callable[[Call], Result]


def _schema(**props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props}


OPTIONAL_TASK = {"taskSupport": "optional"}  # mcpx may run it as a task for its hosts

# ---- the original three: `mcpx demo` and its test call them ----------------------------------


def echo(call: Call) -> Result:
    return {"content": text(str(call.args.get("text", "")))}


def add(call: Call) -> Result:
    try:
        total = float(call.args["a"]) + float(call.args["b"])
    except (KeyError, TypeError, ValueError):
        raise ToolError(-32602, "add needs numbers a and b") from None
    return {"content": text(f"{total:g}"), "structuredContent": {"sum": total}}


def countdown(call: Call) -> Result:
    n = max(1, min(50, int(call.args.get("n", 5))))
    for i in range(n):
        call.sleep(0.2)
        call.progress(i + 1, n, f"{n - i - 1} left")
    return {"content": text("liftoff")}


# ---- slow work ---------------------------------------------------------------------------------

BUILD_STEPS = ("resolve dependencies", "compile", "link", "run unit tests", "package")


def build(call: Call) -> Result:
    target = str(call.args.get("target") or "app")
    started = time.monotonic()
    call.log("info", f"build of {target} started")
    for i, step in enumerate(BUILD_STEPS):
        call.progress(i, len(BUILD_STEPS), f"{target}: {step}")
        call.sleep(random.uniform(0.5, 1.0))
        if step == "run unit tests":
            call.log("warning", f"{target}: 2 tests skipped")
        call.log("info", f"{target}: {step} done")
    call.progress(len(BUILD_STEPS), len(BUILD_STEPS), f"{target}: done")
    return {"content": text(f"built {target} in {time.monotonic() - started:.1f} s ({len(BUILD_STEPS)} steps)")}


REPORT_OUTPUT = {
    "type": "object",
    "properties": {
        "period": {"type": "string"},
        "rows": {
            "type": "array",
            "items": _schema(service={"type": "string"}, calls={"type": "integer"}, errors={"type": "integer"}),
        },
        "totalCalls": {"type": "integer"},
    },
    "required": ["period", "rows", "totalCalls"],
}


def report(call: Call) -> Result:
    period = str(call.args.get("period") or "week")
    for i, stage in enumerate(("collect", "aggregate", "render")):
        call.progress(i, 3, f"{stage} {period} figures")
        call.sleep(random.uniform(0.8, 1.4))
    rows: list[dict[str, Any]] = [
        {"service": s, "calls": random.randint(200, 5000), "errors": random.randint(0, 40)}
        for s in ("web", "api", "worker")
    ]
    total = sum(int(r["calls"]) for r in rows)
    lines = [f"{r['service']}: {r['calls']} calls, {r['errors']} errors" for r in rows]
    return {
        "content": text(f"{period} report: {total} calls\n" + "\n".join(lines)),
        "structuredContent": {"period": period, "rows": rows, "totalCalls": total},
    }


WATCH_LIMIT_S = 600.0  # a watch nobody cancels still ends (a host that died never will)


def watch(call: Call) -> Result:
    target = str(call.args.get("target") or "queue")
    limit = min(float(call.args.get("maxSeconds") or WATCH_LIMIT_S), WATCH_LIMIT_S)
    started = time.monotonic()
    ticks = 0
    while time.monotonic() - started < limit:
        call.sleep(1.0)
        ticks += 1
        call.progress(ticks, None, f"{target}: {random.randint(0, 30)} waiting")
        if ticks % 10 == 0:
            call.log("info", f"still watching {target} ({ticks} s)")
    return {"content": text(f"watched {target} for {ticks} s (the limit)")}


_flaky_turns = itertools.count()
_flaky_lock = threading.Lock()


def flaky(call: Call) -> Result:
    """Fails in turn with an isError result, then a JSON-RPC error, then works."""
    with _flaky_lock:
        turn = next(_flaky_turns)
    call.sleep(random.uniform(0.8, 1.8))
    if turn % 3 == 0:
        return {"content": text(f"flaky: the backend timed out (attempt {turn + 1})"), "isError": True}
    if turn % 3 == 1:
        raise ToolError(-32603, f"flaky: lost the connection to the backend (attempt {turn + 1})")
    return {"content": text(f"flaky: worked this time (attempt {turn + 1})")}


# ---- questions ---------------------------------------------------------------------------------

_asking = threading.Lock()


def _one_question_at_a_time(what: str, ask: Callable[[], Result]) -> Result:
    """Runs `ask`, unless another call of this process waits for an answer: then refuses at once.

    A second asking call would be in flight when the first one's question goes out, and mcpx
    could then not tell which call asked; refusing at once keeps that window short.
    """
    if not _asking.acquire(blocking=False):
        return {"content": text(f"{what}: another approval is already waiting for an answer"), "isError": True}
    try:
        return ask()
    finally:
        _asking.release()


DEPLOY_FORM = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean", "title": "Approve the deploy?"},
        "environment": {"type": "string", "enum": ["staging", "production"], "default": "staging"},
        "notify": {"type": "string", "format": "email", "title": "Who to tell (optional)"},
    },
    "required": ["approve"],
}
DEPLOY_OUTPUT = {
    "type": "object",
    "properties": {
        "deployed": {"type": "boolean"},
        "action": {"type": "string"},
        "service": {"type": "string"},
        "version": {"type": "string"},
        "environment": {"type": ["string", "null"]},
    },
    "required": ["deployed", "action", "service", "version"],
}


def deploy(call: Call) -> Result:
    service = str(call.args.get("service") or "web")
    version = str(call.args.get("version") or "1.0.0")
    return _one_question_at_a_time(f"deploy {service}", lambda: _deploy(call, service, version))


def _content(answer: dict[str, Any]) -> dict[str, Any]:
    """An ElicitResult's form values (none unless it was accepted with an object)."""
    content = answer.get("content")
    return content if isinstance(content, dict) else {}


def _deploy(call: Call, service: str, version: str) -> Result:
    # Plan first: a 2026 host's call becomes a task only after a moment, and a question asked
    # inside a task can wait for an operator (before that it would go to the host inline).
    call.progress(0, 3, f"planning the deploy of {service} {version}")
    call.sleep(1.5)
    call.log("info", f"deploy of {service} {version} waits for approval")
    try:
        answer = call.ask(f"Deploy {service} {version}?", DEPLOY_FORM)
    except PeerError as exc:
        return {"content": text(f"deploy of {service} {version}: nobody could approve it ({exc})"), "isError": True}
    action = str(answer.get("action"))
    content = _content(answer)
    env = content.get("environment", "staging")
    told = {"action": action, "service": service, "version": version, "environment": env}
    if action != "accept" or content.get("approve") is not True:
        why = "not approved" if action == "accept" else f"answered {action}"
        return {
            "content": text(f"deploy of {service} {version} {why}; nothing changed"),
            "structuredContent": {**told, "deployed": False, "environment": None},
        }
    for i, stage in enumerate((f"rolling out to {env}", "health checks")):
        call.progress(i + 1, 3, stage)
        call.sleep(0.8)
    call.log("info", f"{service} {version} is live on {env}")
    return {
        "content": text(f"deployed {service} {version} to {env} (approved)"),
        "structuredContent": {**told, "deployed": True},
    }


def confirm(call: Call) -> Result:
    question = str(call.args.get("question") or "Proceed?")
    return _one_question_at_a_time("confirm", lambda: _confirm(call, question))


def _confirm(call: Call, question: str) -> Result:
    call.sleep(1.0)  # as deploy: be a task (for a 2026 host) before asking
    try:
        answer = call.ask(question, {**_schema(ok={"type": "boolean", "title": question}), "required": ["ok"]})
    except PeerError as exc:
        return {"content": text(f"nobody could answer {question!r} ({exc})"), "isError": True}
    content = _content(answer)
    if answer.get("action") != "accept":
        return {"content": text(f"{question} — no answer ({answer.get('action')})")}
    return {"content": text(f"{question} — {'yes' if content.get('ok') is True else 'no'}")}


TOOLS: dict[str, Tool] = {
    "echo": Tool(
        {
            "name": "echo",
            "description": "Echo the given text.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        },
        echo,
    ),
    "countdown": Tool(
        {
            "name": "countdown",
            "description": "Count down from n, one step per 0.2 s, reporting progress.",
            "inputSchema": _schema(n={"type": "integer", "minimum": 1, "maximum": 50}),
        },
        countdown,
    ),
    "add": Tool(
        {
            "name": "add",
            "description": "Add two numbers.",
            "inputSchema": {**_schema(a={"type": "number"}, b={"type": "number"}), "required": ["a", "b"]},
        },
        add,
    ),
    "build": Tool(
        {
            "name": "build",
            "description": "Build a target: a few seconds, with progress and log messages.",
            "inputSchema": _schema(target={"type": "string"}),
            "execution": OPTIONAL_TASK,
        },
        build,
    ),
    "deploy": Tool(
        {
            "name": "deploy",
            "description": "Deploy a service; asks for approval (a form) before it does.",
            "inputSchema": _schema(service={"type": "string"}, version={"type": "string"}),
            "outputSchema": DEPLOY_OUTPUT,
            "execution": OPTIONAL_TASK,
        },
        deploy,
    ),
    "confirm": Tool(
        {
            "name": "confirm",
            "description": "Ask a yes/no question and return the answer.",
            "inputSchema": _schema(question={"type": "string"}),
            "execution": OPTIONAL_TASK,
        },
        confirm,
    ),
    "flaky": Tool(
        {
            "name": "flaky",
            "description": "Fails in turn with an isError result and a JSON-RPC error; every third call works.",
            "inputSchema": _schema(),
            "execution": OPTIONAL_TASK,
        },
        flaky,
    ),
    "watch": Tool(
        {
            "name": "watch",
            "description": f"Watch a target until cancelled (at most {WATCH_LIMIT_S:g} s), with progress every second.",
            "inputSchema": _schema(target={"type": "string"}, maxSeconds={"type": "number", "minimum": 1}),
            "execution": OPTIONAL_TASK,
        },
        watch,
    ),
    "report": Tool(
        {
            "name": "report",
            "description": "Compile a usage report (a few seconds); the figures come as structuredContent.",
            "inputSchema": _schema(period={"type": "string", "enum": ["day", "week", "month"]}),
            "outputSchema": REPORT_OUTPUT,
            "execution": OPTIONAL_TASK,
        },
        report,
    ),
}
