"""Questions upstreams ask mid-call, end to end with real third-party peers on both sides of mcpx.

`tests/test_questions.py` proves the relay with raw frames against the conformance fixture; this
module puts real SDK processes on both sides and checks, for every (upstream, host) pair that can
answer, that the upstream received EXACTLY the answer the host gave: each upstream tool echoes the
ElicitResult it got (`{"action", "content"}` as sorted JSON; its Person model is strict and forbids
extra keys) and logs it to an events file, and every cell answers with its own content.

Upstreams (one daemon for the module; each tool is `ask(message, delay=0)`):

- `q2`  SDK 2.3 `MCPServer` (`tests/peers/q_sdk2_upstream.py`, stdio), the tool's parameter filled by
        `Resolve(...)` returning `Elicit(...)`: mcpx speaks 2026-07-28 to it, so it asks by
        `InputRequiredResult` (MRTR) and the body runs on the retry.
- `q2l` the same server with `--legacy-only` (handshake-only loop, no `server/discover`): a 2025-11-25
        session, on which the SDK pushes `elicitation/create` mid-call.
- `q1`  SDK 1.30 `FastMCP` (`q_sdk1_upstream.py`, stdio): `await ctx.elicit(...)`, a 2025-11-25
        server request mid-call; it logs one `start` per upstream call (resumed calls never restart).
- `fx`  FastMCP 4.1.4 + fastmcp-tasks (`q_fastmcp_upstream.py`, HTTP: FastMCP imports slower than
        mcpx's 5 s stdio probe), a `task=True` guard tool: 2026 `InputRequiredResult` inline, or an
        extension task in `input_required` (answered by `tasks/update`) when mcpx asks for a task.

Hosts: `sdk1` (SDK 1.30 `ClientSession`, 2025-11-25, elicitation callback), `sdk2-legacy` and
`sdk2-2026` (SDK 2.3 `mcp.Client` in `legacy` / pinned `2026-07-28` mode, elicitation callback: the
SDK uses it for server requests and for MRTR input requests), `fastmcp` (FastMCP 4.1.4 client with
`fastmcp-tasks`: declares the tasks extension on every request, `elicitation_handler`; answers MRTR
rounds and, inside a task, `input_required` by `tasks/update`).

Routes (ROUTE below names each cell's): 2026 upstream + 2026 host MRTR passthrough (requestState
wrapped by mcpx); 2026 upstream + 2025 host (mcpx asks on the call's stream, retries upstream);
2025 upstream + 2025 host (server request relayed on the call's stream); 2025 upstream + 2026 host
(parked: the upstream call is held open, the host's MRTR retry answers it); questions inside a 2026
mcpx task (`inputRequests` + `tasks/update`), inside a 2025 task (on the `tasks/result` stream,
tagged with the related task), inside an upstream extension task; and an operator answering through
`/v1/questions` for a host that declared no elicitation. Cells that expose mcpx bugs are strict
xfails whose reason names the bug. Each host run is one process serving several cells (its start-up
dominates); the module takes about a minute.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from harness import MODERN, UNIT, Api, Daemon, SuiteStore, read_jsonl, wait_until
from peers.run_host import HostProcess
from peers.venvs import peer_python

PEERS = Path(__file__).resolve().parent / "peers"

# First runs build up to three peer venvs (about 40 s each); FastMCP imports take seconds.
pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.peers,
    pytest.mark.sqlite_only("who is asked which question, across peers: routing, not storage"),
]  # slow tier (tests/conftest.py)

UPSTREAMS = ("q2", "q2l", "q1", "fx")
HOSTS = ("sdk1", "sdk2-legacy", "sdk2-2026", "fastmcp")
UPSTREAM_ERA = {"q2": "modern", "q2l": "legacy", "q1": "legacy", "fx": "modern"}


def _route(up: str, host: str) -> str:
    legacy_host = host in ("sdk1", "sdk2-legacy")
    if up == "fx" and host == "fastmcp":
        return "upstream extension task input_required -> mcpx task inputRequests -> tasks/update, twice"
    if UPSTREAM_ERA[up] == "modern":
        return (
            "mcpx asks the 2025 host on the call's stream, retries upstream"
            if legacy_host
            else "2026 MRTR passthrough, mcpx-signed requestState"
        )
    return (
        "server request relayed on the call's stream"
        if legacy_host
        else "parked upstream call, host answers by MRTR retry"
    )


ROUTE = {(up, host): _route(up, host) for up in UPSTREAMS for host in HOSTS}

BUGGY: dict[tuple[str, str], Any] = {}


def _answer(host: str, up: str, n: int, action: str = "accept") -> dict[str, Any]:
    if action != "accept":
        return {"action": action}
    return {"action": "accept", "content": {"name": f"{host}/{up}", "age": 20 + n, "subscribed": n % 2 == 0}}


def _echoed(answer: dict[str, Any]) -> dict[str, Any]:
    """What the upstream tool returns when it received exactly `answer`."""
    return {"action": answer["action"], "content": answer.get("content")}


# ---- processes -------------------------------------------------------------------------------
@dataclass
class Gateway:
    daemon: Daemon
    tmp: Path
    py: dict[str, Path]
    timings: dict[str, float] = field(default_factory=dict)
    batches: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def events(self, up: str, event: str, message: str) -> list[dict[str, Any]]:
        return [
            e
            for e in read_jsonl(self.tmp / f"{up}.events.jsonl")
            if e["event"] == event and e.get("message") == message
        ]

    def api(self) -> Api:
        return Api(self.daemon)

    def host(self, kind: str, steps: list[dict[str, Any]], *extra: str, timeout: float = 90) -> HostProcess:
        """A host of that kind, started now on `steps`; `.step_lines()` waits for its lines."""
        args = ["--url", self.daemon.url, *extra]
        if kind == "sdk1":
            return HostProcess(self.py["mcp-1.30"], "q_sdk1_host.py", args, steps, timeout=timeout)
        if kind in ("sdk2-legacy", "sdk2-2026"):
            mode = "legacy" if kind == "sdk2-legacy" else MODERN
            return HostProcess(self.py["mcp-2.3"], "q_sdk2_host.py", [*args, "--mode", mode], steps, timeout=timeout)
        return HostProcess(self.py["fastmcp-tasks"], "q_fastmcp_host.py", args, steps, timeout=timeout)

    def history(self) -> list[dict[str, Any]]:
        with self.api() as api:
            return api.history()


def _start_fx(py: Path, tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    ready = tmp / "fx.port"
    with open(tmp / "fx.stderr", "wb") as err:
        proc = subprocess.Popen(
            [
                str(py),
                str(PEERS / "q_fastmcp_upstream.py"),
                "http",
                "--port",
                "0",
                "--ready-file",
                str(ready),
                "--events",
                str(tmp / "fx.events.jsonl"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        port = wait_until(
            lambda: proc.poll() is None and ready.exists() and ready.read_text().strip(),
            60,
            "FastMCP upstream on its port",
        )
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, f"http://127.0.0.1:{int(port)}/mcp"


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, suite_store: SuiteStore) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("questions-matrix")
    py = {name: peer_python(name) for name in ("mcp-2.3", "mcp-1.30", "fastmcp-tasks")}
    started = time.monotonic()
    fx, fx_url = _start_fx(py["fastmcp-tasks"], tmp)
    daemon: Daemon | None = None
    try:
        sdk2 = [str(py["mcp-2.3"]), str(PEERS / "q_sdk2_upstream.py"), "stdio"]
        config = {
            "mcpServers": {
                "q2": {"command": sdk2[0], "args": [*sdk2[1:], "--events", str(tmp / "q2.events.jsonl")]},
                "q2l": {
                    "command": sdk2[0],
                    "args": [*sdk2[1:], "--legacy-only", "--events", str(tmp / "q2l.events.jsonl")],
                },
                "q1": {
                    "command": str(py["mcp-1.30"]),
                    "args": [str(PEERS / "q_sdk1_upstream.py"), "stdio", "--events", str(tmp / "q1.events.jsonl")],
                },
                "fx": {"url": fx_url},
            },
            # A declaring 2026 host's call becomes a task after 300 ms; hosts poll tasks every 100 ms.
            "tasks": {"taskAfterMs": 300, "pollIntervalMs": 100},
            # The operator here is a script on /v1, not an attached console: questions wait for it.
            "questions": {"waitForOperator": "always"},
        }
        daemon = Daemon(tmp, config, name="qm", store=suite_store)
        daemon.start()
        eras = {u["name"]: u["era"] for u in daemon.status()["upstreams"]}
        assert eras == UPSTREAM_ERA, eras  # the ids promise these upstream eras: make sure
        g = Gateway(daemon, tmp, py)
        g.timings["setup"] = time.monotonic() - started
        yield g
        print("\nquestions matrix timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in g.timings.items()))
    finally:
        if daemon is not None:
            daemon.stop()
        if fx.poll() is None:
            fx.kill()
            fx.wait()
    daemon.check_wire()


@pytest.fixture(autouse=True)
def no_leftover_questions(gw: Gateway) -> Iterator[None]:
    """A question left open pins its upstream call (and, on a stdio upstream, makes the next
    question there unattributable): after each test, cancel whatever is still open."""
    yield
    with gw.api() as api:
        left = api.open_questions()
        for q in left:
            api.answer(q["id"], "cancel", by="cleanup")
        wait_until(lambda: not api.open_questions(), 10, "no open questions")
    # Each upstream tool logs `answered` as it takes its answer and returns: its call is over.
    wait_until(
        lambda: all(gw.events(q["upstream"], "answered", q["params"].get("message")) for q in left),
        10,
        "the cancelled questions' upstream calls to finish",
    )


class Operator:
    """Answers, through /v1/questions, every open question whose message is in `answers`."""

    def __init__(self, gw: Gateway, answers: dict[str, dict[str, Any]], by: str = "olga") -> None:
        self.gw, self.answers, self.by = gw, answers, by
        self.questions: dict[str, dict[str, Any]] = {}  # message -> the question as listed
        self.taken: dict[str, Any] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        deadline = time.monotonic() + 60 * UNIT
        with self.gw.api() as api:
            while not self._stop.is_set() and time.monotonic() < deadline and len(self.questions) < len(self.answers):
                for q in api.open_questions():
                    message = q["params"].get("message")
                    if message in self.answers and message not in self.questions:
                        self.questions[message] = q
                        answer = self.answers[message]
                        reply = api.answer(q["id"], answer["action"], by=self.by, content=answer.get("content"))
                        self.taken[message] = reply.json()
                time.sleep(0.05)

    def join(self) -> None:
        self._stop.set()
        self._thread.join(10)


# ---- checks ----------------------------------------------------------------------------------
def asked_messages(line: dict[str, Any]) -> list[str]:
    return [a["params"]["message"] if "params" in a else a["message"] for a in line.get("asked", [])]


def assert_upstream_got_exactly(
    gw: Gateway, up: str, line: dict[str, Any], message: str, answer: dict[str, Any]
) -> None:
    """The tool's result and the upstream's own log both show exactly `answer`; a 2025 upstream's
    call started once (a parked or relayed call is resumed, never started again)."""
    assert line["ok"], line
    result = line["result"]
    assert not result.get("isError"), result
    text = "".join(c.get("text", "") for c in result["content"] if c.get("type") == "text")
    assert json.loads(text) == _echoed(answer), (text, answer)
    answered = gw.events(up, "answered", message)
    assert [(e["action"], e["content"]) for e in answered] == [(answer["action"], answer.get("content"))], answered
    if up == "q1":
        assert len(gw.events("q1", "start", message)) == 1, gw.events("q1", "start", message)


# ---- the host x upstream matrix --------------------------------------------------------------
CELLS = [(up, host) for host in HOSTS for up in UPSTREAMS]
DECLINES = {("q1", "sdk2-2026"), ("q2", "sdk1")}  # a decline (no content) on top, on two routes


def _message(up: str, host: str, action: str = "accept") -> str:
    return f"[{host} -> {up}] {action}: who are you?"


def _cell_steps(host: str) -> list[tuple[tuple[str, str, str], dict[str, Any]]]:
    steps = []
    for n, up in enumerate(UPSTREAMS):
        if (up, host) in BUGGY:
            continue
        actions = ["accept"] + (["decline"] if (up, host) in DECLINES else [])
        for action in actions:
            step = {
                "op": "call",
                "name": f"{up}__ask",
                "args": {"message": _message(up, host, action)},
                "answer": _answer(host, up, n, action),
                "timeout": 30,
            }
            steps.append(((up, host, action), step))
    return steps


def _batch(gw: Gateway, host: str) -> dict[str, dict[str, Any]]:
    """Every cell of one host in one host process (its start-up dominates a cell); cached."""
    if host not in gw.batches:
        cells = _cell_steps(host)
        run = gw.host(host, [s for _, s in cells])
        lines = run.step_lines()
        gw.timings[f"host {host} ({len(cells)} calls)"] = run.elapsed
        gw.batches[host] = {"|".join(key): line for (key, _), line in zip(cells, lines, strict=True)}
    return gw.batches[host]


def _params(cells: list[tuple[str, str]]) -> list[Any]:
    return [
        pytest.param(up, host, id=f"{up}-{host}", marks=[BUGGY[(up, host)]] if (up, host) in BUGGY else [])
        for up, host in cells
    ]


@pytest.mark.parametrize("up,host", _params(CELLS))
def test_upstream_gets_exactly_the_hosts_answer(gw: Gateway, up: str, host: str) -> None:
    n = UPSTREAMS.index(up)
    if (up, host) in BUGGY:
        message = _message(up, host)
        run = gw.host(
            host,
            [
                {
                    "op": "call",
                    "name": f"{up}__ask",
                    "args": {"message": message},
                    "answer": _answer(host, up, n),
                    "timeout": 6,
                }
            ],
            timeout=60,
        )
        [line] = run.step_lines()
        assert asked_messages(line) == [message], line
        assert_upstream_got_exactly(gw, up, line, message, _answer(host, up, n))
        return
    batch = _batch(gw, host)
    for action in ["accept"] + (["decline"] if (up, host) in DECLINES else []):
        message, answer = _message(up, host, action), _answer(host, up, n, action)
        line = batch[f"{up}|{host}|{action}"]
        assert asked_messages(line) == [message], (ROUTE[(up, host)], line)  # the host saw the upstream's own question
        assert_upstream_got_exactly(gw, up, line, message, answer)
        if host == "fastmcp":
            in_task = line["asked"][0]["requestId"].startswith("task-")
            assert in_task == (up == "fx"), line  # only fx (an upstream task) makes a task here
            assert line["kind"] == ("task" if up == "fx" else "inline") and line["mrtrRounds"] == (
                0 if up == "fx" else 1
            ), line
        elif host == "sdk2-2026":
            assert line["result"].get("resultType") == "complete", line
        else:
            assert "resultType" not in line["result"], line


# ---- questions inside tasks ------------------------------------------------------------------
def test_question_inside_a_2026_task_is_answered_by_tasks_update(gw: Gateway) -> None:
    """FastMCP host, tools that work 1 s before asking: the call becomes an mcpx task (taskAfterMs
    300 ms), the question one of its inputRequests, answered by the host's tasks/update; for fx the
    upstream's own extension task asks, and mcpx answers it with tasks/update upstream."""
    cells = [(up, _message(up, "fastmcp-task"), _answer("fastmcp-task", up, n)) for n, up in enumerate(UPSTREAMS)]
    run = gw.host(
        "fastmcp",
        [
            {"op": "call", "name": f"{up}__ask", "args": {"message": m, "delay": 1.0}, "answer": a, "timeout": 30}
            for up, m, a in cells
        ],
    )
    lines = run.step_lines()
    gw.timings["2026 tasks (fastmcp host, 4 calls)"] = run.elapsed
    for (up, message, answer), line in zip(cells, lines, strict=True):
        assert line.get("kind") == "task" and line["mrtrRounds"] == 0, (up, line)
        [asked] = line["asked"]
        assert asked["params"]["message"] == message and asked["requestId"].startswith(f"task-{line['taskId']}-"), (
            up,
            line,
        )
        assert_upstream_got_exactly(gw, up, line, message, answer)


def test_question_inside_a_2025_task_arrives_on_the_tasks_result_stream(gw: Gateway) -> None:
    """SDK 1.30 host, call_tool_as_task then tasks/result: the question reaches its elicitation
    callback on that stream, tagged with the related task; fx runs as an upstream extension task."""
    cells = [(up, _message(up, "sdk1-task"), _answer("sdk1-task", up, n)) for n, up in enumerate(UPSTREAMS)]
    run = gw.host(
        "sdk1",
        [
            {"op": "call_task", "name": f"{up}__ask", "args": {"message": m}, "answer": a, "timeout": 30}
            for up, m, a in cells
        ],
    )
    lines = run.step_lines()
    gw.timings["2025 tasks (sdk1 host, 4 calls)"] = run.elapsed
    for (up, message, answer), line in zip(cells, lines, strict=True):
        [asked] = line["asked"]
        assert asked["message"] == message, (up, line)
        assert asked["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": line["task"]["taskId"]}, (up, line)
        assert_upstream_got_exactly(gw, up, line, message, answer)


# ---- operators -------------------------------------------------------------------------------
def test_operator_answers_for_a_2025_host_without_elicitation(gw: Gateway) -> None:
    """A 2025 host that declared no elicitation is never asked: the question waits in
    /v1/questions, the operator's answer is the one the upstream gets, and it is the only one."""
    cells = [(up, _message(up, "operator"), _answer("operator", up, n)) for n, up in enumerate(UPSTREAMS)]
    operator = Operator(gw, {m: a for _, m, a in cells})
    try:
        run = gw.host(
            "sdk1",
            [{"op": "call", "name": f"{up}__ask", "args": {"message": m}, "timeout": 30} for up, m, _ in cells],
            "--no-elicitation",
        )
        lines = run.step_lines()
    finally:
        operator.join()
    gw.timings["operator (sdk1 host, 4 calls)"] = run.elapsed
    history = {h["id"]: h for h in gw.history()}
    with gw.api() as api:
        for (up, message, answer), line in zip(cells, lines, strict=True):
            assert line["asked"] == [], line  # the host was never asked
            assert_upstream_got_exactly(gw, up, line, message, answer)
            q = operator.questions[message]
            taken = operator.taken[message]
            assert q["upstream"] == up and q["kind"] == "elicitation" and taken["answeredBy"] == "operator:olga", q
            row = history[q["id"]]
            assert row["status"] == "answered" and row["answeredBy"] == "operator:olga" and row["answer"] == answer, row
            late = api.answer(q["id"], "decline", by="late")
            assert late.status_code == 409, late.text  # first answer wins; the question is closed


@pytest.mark.parametrize(
    "ups",
    [
        pytest.param(("q1", "q2l"), id="q1+q2l"),
        pytest.param(
            ("fx",),
            id="fx-upstream-task",
        ),
    ],
)
def test_operator_answers_a_question_inside_a_2026_task(gw: Gateway, ups: tuple[str, ...]) -> None:
    """A FastMCP host with no elicitation handler only watches its tasks (tasks/get, never
    tasks/update); the operator answers the question each task is waiting on. (q2 is not here: it
    honestly refuses a host without elicitation, -32021, see the capability test below.)"""
    cells = [(up, _message(up, "fastmcp-task-operator"), _answer("operator-task", up, n)) for n, up in enumerate(ups)]
    operator = Operator(gw, {m: a for _, m, a in cells})
    try:
        wait = 5 if ups == ("fx",) else 10  # fx's task would be answered within 2 s if it could be
        steps = [
            {
                "op": "call_wait",
                "name": f"{up}__ask",
                "args": {"message": m, "delay": 1.0},
                "timeout": wait,
                "cancel": True,
            }
            for up, m, _ in cells
        ]
        run = gw.host("fastmcp", steps, "--no-elicitation")
        lines = run.step_lines()
    finally:
        operator.join()
    gw.timings[f"operator in 2026 tasks ({'+'.join(ups)})"] = run.elapsed
    for (up, message, answer), line in zip(cells, lines, strict=True):
        assert line.get("kind") == "task" and line["asked"] == [], line
        assert (operator.taken.get(message) or {}).get("answeredBy") == "operator:olga", (up, operator.questions)
        assert line["finalStatus"] == "completed", line
        assert_upstream_got_exactly(gw, up, line, message, answer)


@pytest.mark.parametrize("up", ["q1", "q2l"])
def test_2026_host_without_elicitation_gets_missing_capability_from_a_2025_upstream(gw: Gateway, up: str) -> None:
    """The 2025 upstream asks mid-call; the 2026 host did not declare elicitation, so mcpx may not
    ask it (DIGEST 3.5): the host's call fails with -32021 naming the capability (FIXTURES
    test_missing_capability), and the held upstream call is dropped."""
    message = _message(up, "sdk2-2026-undeclared")
    run = gw.host(
        "sdk2-2026",
        [{"op": "call", "name": f"{up}__ask", "args": {"message": message}, "timeout": 20}],
        "--no-elicitation",
        timeout=60,
    )
    [line] = run.step_lines()
    assert not line["ok"] and line["error"]["code"] == -32021, line
    assert "elicitation" in line["error"]["data"]["requiredCapabilities"], line
    assert line["asked"] == [] and gw.events(up, "answered", message) == []


def test_2026_host_without_elicitation_gets_missing_capability_from_a_2026_upstream(gw: Gateway) -> None:
    """Capability honesty: mcpx forwards the host's own (empty) capabilities, so the SDK 2.3
    upstream refuses with -32021 naming what is missing, and nobody is asked."""
    message = _message("q2", "sdk2-2026-undeclared")
    run = gw.host(
        "sdk2-2026",
        [{"op": "call", "name": "q2__ask", "args": {"message": message}, "timeout": 20}],
        "--no-elicitation",
    )
    [line] = run.step_lines()
    assert not line["ok"] and line["error"]["code"] == -32021, line
    assert "elicitation" in line["error"]["data"]["requiredCapabilities"], line
    assert line["asked"] == [] and gw.events("q2", "answered", message) == []
    assert not [h for h in gw.history() if h["params"].get("message") == message]


# ---- the question history --------------------------------------------------------------------
def test_host_answers_are_recorded_in_the_question_history(gw: Gateway) -> None:
    """Every question a host answered shows, in /v1/questions?all=1, as answered by that host."""
    steps = [
        {
            "op": "call",
            "name": "q1__ask",
            "args": {"message": _message("q1", "audit-stream")},
            "answer": _answer("audit", "q1", 1),
        },
        {
            "op": "call",
            "name": "q2__ask",
            "args": {"message": _message("q2", "audit-mrtr")},
            "answer": _answer("audit", "q2", 2),
        },
        {
            "op": "call_task",
            "name": "q1__ask",
            "args": {"message": _message("q1", "audit-task")},
            "answer": _answer("audit", "q1", 3),
        },
    ]
    lines = gw.host("sdk1", steps).step_lines()
    assert all(line["ok"] for line in lines), lines
    messages = [s["args"]["message"] for s in steps]

    def answered_rows() -> dict[str, dict[str, Any]]:
        rows = {h["params"]["message"]: h for h in gw.history() if h["params"].get("message") in messages}
        return rows if len(rows) == len(messages) and all(r["status"] == "answered" for r in rows.values()) else {}

    rows = wait_until(answered_rows, 10, "every question stored as answered") or {}
    assert sorted(rows) == sorted(messages), rows
    stored = {m: (r["status"], r["answeredBy"]) for m, r in rows.items()}
    assert all(status == "answered" and (by or "").startswith("host:") for status, by in stored.values()), stored
