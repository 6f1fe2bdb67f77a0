"""The operator CLI (`mcpx tasks|questions|audit|stop|status`), run as a real process against a real
daemon: what it prints, what it sends to `/v1`, and its exit codes (docs/cli.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from harness import ROOT, UNIT, Api, Daemon, RawHost, conformance_server, operator_attached, stdio_server, wait_until

from mcpx.cli import text_format
from mcpx.events.bus import EVENT_KINDS

pytestmark = [pytest.mark.sqlite_only("the CLI's words and exit codes over /v1"), pytest.mark.heavy]

ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
TASK_META = {
    "io.modelcontextprotocol/clientCapabilities": {
        "elicitation": {},
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }
}


def mcpx(daemon: Daemon | Path, *args: str) -> subprocess.CompletedProcess[str]:
    folder = daemon.state_dir if isinstance(daemon, Daemon) else daemon
    return subprocess.run(
        [sys.executable, "-m", "mcpx", *args, "--state-dir", str(folder)],
        capture_output=True,
        text=True,
        timeout=30 * UNIT,
        env=ENV,
        stdin=subprocess.DEVNULL,
    )


def ok(daemon: Daemon | Path, *args: str) -> str:
    out = mcpx(daemon, *args)
    assert out.returncode == 0, (out.returncode, out.stdout, out.stderr)
    return out.stdout


def _conformance_config() -> dict[str, Any]:
    """tests/test_questions.py's dual-era upstream: confirm_delete may run as a task."""
    return {"mcpServers": {"up": conformance_server()}, "tasks": {"taskAfterMs": 200}}


def _slow_tasks(daemon: Daemon, n: int) -> list[str]:
    with RawHost(daemon.url) as host:
        host.initialize()
        ids = []
        for _ in range(n):
            # Long enough to outlive a slow CI machine's dozen CLI runs before the cancel.
            frame = host.legacy("tools/call", {"name": "fx__slow", "arguments": {"seconds": 120}, "task": {}}).json()
            ids.append(frame["result"]["task"]["taskId"])
        return ids


# ---- tasks -------------------------------------------------------------------------------------
def test_every_command_takes_a_unique_prefix_of_an_id_and_an_ambiguous_one_lists_its_matches(
    start_daemon: Any, tmp_path: Path
) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    made = _slow_tasks(d, 63)  # 62 characters can start an id: two of these share their first
    first = made[0]
    assert f"task       {first}" in ok(d, "tasks", "show", first[:8])  # 8 characters, as the console shows

    by_start: dict[str, list[str]] = {}
    for tid in made:
        by_start.setdefault(tid[0], []).append(tid)
    shared = next(group for group in by_start.values() if len(group) > 1)
    ambiguous = mcpx(d, "tasks", "cancel", shared[0][0], "--by", "carol")
    listed = [line.strip() for line in ambiguous.stderr.splitlines()[1:]]
    assert ambiguous.returncode == 2 and "is ambiguous" in ambiguous.stderr, ambiguous
    assert set(listed) <= set(shared) and len(listed) == min(len(shared), 10)
    assert all(t["status"] == "working" for t in Api(d).get("/v1/tasks", params={"limit": 100}).json()["tasks"])

    cancelled = mcpx(d, "tasks", "cancel", first[:8], "--by", "carol")
    assert cancelled.returncode == 0 and f"task {first} cancelled" in cancelled.stdout, cancelled
    events = json.loads(ok(d, "audit", "--task", first[:8], "--json"))["events"]
    assert [e["kind"] for e in events] == ["task.created", "task.cancel_requested", "task.status"]
    missing = mcpx(d, "tasks", "show", "no-such-task")
    assert missing.returncode == 1 and "no such task" in missing.stderr


def test_tasks_ls_show_and_cancel_work_on_real_tasks(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    first, second = _slow_tasks(d, 2)

    listed = ok(d, "tasks", "ls").splitlines()
    assert listed[0].split() == ["ID", "KIND", "STATUS", "TOOL", "CONNECTION", "AGE", "MESSAGE"]
    assert [line.split()[:4] for line in listed[1:]] == [
        [second, "task", "working", "fx/slow"],
        [first, "task", "working", "fx/slow"],
    ]
    one = mcpx(d, "tasks", "ls", "--limit", "1")
    assert one.returncode == 0 and second in one.stdout and first not in one.stdout and "--all-pages" in one.stderr
    paged = ok(d, "tasks", "ls", "--limit", "1", "--all-pages")
    assert second in paged and first in paged
    assert first in ok(d, "tasks", "ls", "--grep", first[:12]) and second not in ok(d, "tasks", "ls", "--grep", first)
    assert ok(d, "tasks", "ls", "--tool", "nothing-like-it").strip() == "no tasks"

    shown = ok(d, "tasks", "show", first)
    assert f"task       {first}" in shown and "status     working" in shown and '{"seconds":120}' in shown
    assert "task.created" in shown  # the timeline

    cancelled = mcpx(d, "tasks", "cancel", first, "--by", "carol")
    assert cancelled.returncode == 0 and f"task {first} cancelled" in cancelled.stdout, cancelled
    again = mcpx(d, "tasks", "cancel", first, "--by", "carol")
    assert again.returncode == 1 and "too late to cancel" in again.stderr and "already ended" in again.stderr
    assert ok(d, "tasks", "ls", "--status", "cancelled").count("\n") == 2  # header and that task
    assert first not in ok(d, "tasks", "ls", "--status", "working", "input_required")
    missing = mcpx(d, "tasks", "show", "no-such-task")
    assert missing.returncode == 1 and "no such task" in missing.stderr

    # The audit log shows the cancel with who asked it, as text and as the API's JSON.
    lines = ok(d, "audit", "--kind", "task.cancel_requested").splitlines()
    assert len(lines) == 1 and "task.cancel_requested" in lines[0] and first[:8] in lines[0]
    assert lines[0].endswith("by operator:carol"), lines
    events = json.loads(ok(d, "audit", "--task", first, "--json"))["events"]
    assert [e["kind"] for e in events] == ["task.created", "task.cancel_requested", "task.status"]
    assert events[1]["by"] == "operator:carol" and events[2]["data"]["status"] == "cancelled"


def test_tasks_show_of_a_task_waiting_for_input_exits_75_until_it_is_answered(start_daemon: Any) -> None:
    d = start_daemon(_conformance_config())
    with RawHost(d.url) as host:
        handle = host.modern(
            "tools/call", {"name": "confirm_delete", "arguments": {"filename": "a.txt"}}, meta=TASK_META
        ).json()["result"]
        assert handle["resultType"] == "task"
        tid = handle["taskId"]
        wait_until(lambda: "input_required" in ok(d, "tasks", "ls"), 15, "the task waits for input")

        waiting = mcpx(d, "tasks", "show", tid)
        assert waiting.returncode == 75, waiting
        assert "input_required" in waiting.stdout and "Delete a.txt?" in waiting.stdout
        assert mcpx(d, "tasks", "show", tid, "--json").returncode == 75
        [row] = ok(d, "questions", "ls").splitlines()[1:]
        qid = row.split()[0]
        assert "elicitation" in row and tid[:8] in row and "Delete a.txt?" in row

        # A value the schema cannot take is refused here, naming the field; nothing is sent.
        bad = mcpx(d, "questions", "answer", qid, "--accept", "confirm=maybe")
        assert bad.returncode == 1 and "confirm: must be true or false" in bad.stderr, bad
        assert qid in ok(d, "questions", "ls")
        # The string "yes" becomes the boolean the form asks for.
        answered = mcpx(d, "questions", "answer", qid, "--accept", "confirm=yes", "--by", "dora")
        assert answered.returncode == 0 and "operator:dora" in answered.stdout, answered

        def get() -> dict[str, Any]:
            return host.modern("tasks/get", {"taskId": tid}, meta=TASK_META, headers={"Mcp-Name": tid}).json()["result"]

        done = wait_until(lambda: (r := get())["status"] == "completed" and r, 15, "completion")
        assert done["result"]["content"][0]["text"] == "Deleted a.txt"
    assert mcpx(d, "tasks", "show", tid).returncode == 0


# ---- questions ---------------------------------------------------------------------------------
def test_questions_answer_delivers_the_content_and_a_second_answer_is_refused(start_daemon: Any) -> None:
    d = start_daemon(_conformance_config())
    feed = operator_attached(d, "olga")  # the host cannot be asked: the question waits for an operator
    box: dict[str, Any] = {}
    with RawHost(d.url) as host:
        host.initialize()  # declares no elicitation

        def call() -> None:
            with RawHost(d.url) as h:
                h.session_id, h.revision = host.session_id, host.revision
                params = {"name": "test_elicitation", "arguments": {"message": "Deploy?"}}
                box["frame"] = h.legacy("tools/call", params).json()

        t = threading.Thread(target=call)
        t.start()
        try:
            with Api(d) as api:
                [q] = wait_until(api.open_questions, 15, "open question")
            listed = ok(d, "questions", "ls")
            assert q["id"] in listed and "Deploy?" in listed and " no " in listed  # HOST: no
            assert "username=string (required)" in ok(d, "questions", "show", q["id"])

            usage = mcpx(d, "questions", "answer", q["id"], "--accept", "username")
            assert usage.returncode == 2 and "name=value" in usage.stderr
            # Unchecked here, the daemon's own check answers 422 with the field; it is shown as such.
            refused = mcpx(d, "questions", "answer", q["id"], "--accept", "username=ada", "--no-check")
            assert refused.returncode == 1 and "HTTP 422" in refused.stderr, refused
            assert "content.email: a value is required" in refused.stderr

            answer = ["--accept", "username=ada", "email=ada@example.com", "--by", "olga"]
            taken = mcpx(d, "questions", "answer", q["id"][:8], *answer)  # the short id the console shows
            assert taken.returncode == 0 and f"question {q['id']} answered accept by operator:olga" in taken.stdout
            t.join(15 * UNIT)
            assert "ada@example.com" in box["frame"]["result"]["content"][0]["text"]

            late = mcpx(
                d, "questions", "answer", q["id"][:8], "--decline", "--by", "late"
            )  # answered: found all the same
            assert late.returncode == 1 and "too late" in late.stderr and "operator:olga" in late.stderr, late
            assert ok(d, "questions", "ls").strip() == "no open questions"
            history = ok(d, "questions", "ls", "--all")
            assert q["id"] in history and "answered" in history and "operator:olga" in history
        finally:
            t.join(15 * UNIT)
            feed.close()


def test_questions_answer_reaches_the_upstream_inside_a_2025_task(start_daemon: Any) -> None:
    d = start_daemon(_conformance_config())
    feed = operator_attached(d, "olga")  # the host cannot be asked: the question waits for an operator
    try:
        with RawHost(d.url) as host, Api(d) as api:
            host.initialize()  # declares no elicitation
            params = {"name": "test_elicitation", "arguments": {"message": "Ship it?"}, "task": {}}
            tid = host.legacy("tools/call", params).json()["result"]["task"]["taskId"]
            [q] = wait_until(api.open_questions, 15, "open question")
            assert q["taskId"] == tid and tid[:8] in ok(d, "questions", "ls")

            answer = ["--accept", "username=grace", "email=grace@example.com", "--by", "olga"]
            taken = mcpx(d, "questions", "answer", q["id"], *answer)
            assert taken.returncode == 0 and f"question {q['id']} answered accept by operator:olga" in taken.stdout
            result = host.legacy("tasks/result", {"taskId": tid}).json()["result"]
            # The conformance upstream echoes what it got: exactly the content given on the command line.
            content = json.dumps({"username": "grace", "email": "grace@example.com"})
            assert result["content"][0]["text"] == f"User response: action=accept, content={content}", result
            assert host.legacy("tasks/get", {"taskId": tid}).json()["result"]["status"] == "completed"
    finally:
        feed.close()


# ---- watch -------------------------------------------------------------------------------------
class Watch:
    """`mcpx tasks watch` as a process; `lines` fills as it prints."""

    def __init__(self, daemon: Daemon, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpx", "tasks", "watch", *args, "--state-dir", str(daemon.state_dir)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=ENV,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        self.lines.extend(self.proc.stdout)

    def interrupt(self) -> tuple[int, str]:
        """Ctrl-C: its exit code and what it wrote to stderr."""
        self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(10 * UNIT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdout.close()
        with self.proc.stderr as err:
            return code, err.read()


def test_watch_prints_one_line_per_event_and_ctrl_c_exits_0(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    watch = Watch(d)
    lines = watch.lines
    try:
        wait_until(lambda: any(line.startswith("-- snapshot at #") for line in lines), 15, "the snapshot line")
        [tid] = _slow_tasks(d, 1)
        assert mcpx(d, "tasks", "cancel", tid, "--by", "watcher").returncode == 0
        wait_until(lambda: any("task.status" in line for line in lines), 15, "the status event")
    finally:
        code, err = watch.interrupt()
    assert code == 0, err
    events = [line.split() for line in lines if " task." in line]
    assert [(e[2], e[3]) for e in events] == [
        ("task.created", tid[:8]),
        ("task.cancel_requested", tid[:8]),
        ("task.status", tid[:8]),
    ], lines
    created, _, status = (line for line in lines if " task." in line)
    assert "fx/slow" in created and "by host:" in created
    assert "working → cancelled" in status and status.rstrip().endswith("by operator:watcher")
    assert all(e[1].startswith("#") and ":" in e[0] for e in events)  # time, then #seq

    # With --since and filters, only the stored events asked for are replayed (no snapshot).
    replay = Watch(d, "--since", "0", "--task", tid, "--kind", "task.cancel_requested")
    lines = replay.lines
    try:
        wait_until(lambda: lines, 15, "the replayed event")
        time.sleep(0.3)  # nothing else may follow
    finally:
        code, err = replay.interrupt()
    assert code == 0, err
    assert len(lines) == 1 and "task.cancel_requested" in lines[0] and "operator:watcher" in lines[0], lines


# ---- stop and status ---------------------------------------------------------------------------
def test_stop_stops_the_running_daemon_and_says_so_when_none_runs(start_daemon: Any) -> None:
    d = start_daemon()
    assert d.proc is not None
    stopped = mcpx(d, "stop")
    assert stopped.returncode == 0 and f"stopped the daemon (pid {d.proc.pid})" in stopped.stdout, stopped
    assert d.proc.wait(5) == 0
    again = mcpx(d, "stop")
    assert again.returncode == 0 and "no daemon running" in again.stdout
    gone = mcpx(d, "tasks", "ls")
    assert gone.returncode == 1 and "no daemon running" in gone.stderr
    assert mcpx(d, "status").returncode == 3


CRASHING = {"command": sys.executable, "args": ["-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"]}


def _crashed_status(start_daemon: Any, tmp_path: Path) -> tuple[Daemon, str]:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path), "bad": CRASHING}}, wait_upstreams=False)

    def crashed() -> bool:
        return any(u["name"] == "bad" and u["restarts"] >= 1 for u in d.status()["upstreams"])

    wait_until(crashed, 20, "the crashing upstream restarted")
    return d, ok(d, "status")


def test_status_shows_a_crashed_upstreams_stderr_and_log(start_daemon: Any, tmp_path: Path) -> None:
    d, text = _crashed_status(start_daemon, tmp_path)
    bad = text[text.index("  bad ") :]
    assert "last stderr lines:" in bad and "| boom" in bad
    assert f"log: {d.state_dir / 'logs' / 'bad.stderr.log'}" in bad
    assert "host connections: 0" in text and "operators attached: none" in text and "last event: #" in text


def test_status_shows_a_crashed_upstreams_exit_code_and_only_its_latest_stderr(
    start_daemon: Any, tmp_path: Path
) -> None:
    _, text = _crashed_status(start_daemon, tmp_path)
    bad = text[text.index("  bad ") :]
    assert "exit code 3" in bad
    assert bad.count("| boom") == 1  # the latest start's lines, not every restart's


# ---- the CLI's own lists -------------------------------------------------------------------------
def test_the_cli_offers_the_daemons_event_kinds_and_documents_its_exit_codes(tmp_path: Path) -> None:
    assert tuple(EVENT_KINDS) == text_format.EVENT_KINDS
    usage = mcpx(tmp_path, "tasks", "watch", "--kind", "task.nope")
    assert usage.returncode == 2 and "invalid choice" in usage.stderr
    helptext = subprocess.run(
        [sys.executable, "-m", "mcpx", "--help"], capture_output=True, text=True, env=ENV, timeout=30 * UNIT
    ).stdout
    assert "exit codes:" in helptext and "75" in helptext
    none = mcpx(tmp_path / "nothing", "questions", "ls")
    assert none.returncode == 1 and "no daemon running" in none.stderr
