"""`mcpx console --demo`'s world without the console: start_demo() runs a daemon with the demo
upstreams and three demo hosts of different eras, seen here only through `/v1`, as the console sees it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from harness import ROOT, UNIT, wait_until

from mcpx.config import state_files
from mcpx.demo.console_world import MARK, DemoRun, start_demo

APPROVE = {"action": "accept", "content": {"approve": True, "environment": "staging"}, "by": "test"}


class DemoApi:
    """The demo daemon's `/v1`, with the token from its state folder (as tests/harness.Api)."""

    def __init__(self, run: DemoRun) -> None:
        token = (run.state_dir / "token").read_text().strip()
        self.client = httpx.Client(
            base_url=f"http://127.0.0.1:{run.port}", headers={"Authorization": f"Bearer {token}"}, timeout=10
        )

    def get(self, path: str, **params: Any) -> Any:
        resp = self.client.get(path, params=params)
        assert resp.status_code == 200, resp.text
        return resp.json()

    def tasks(self) -> list[dict[str, Any]]:
        return self.get("/v1/tasks", limit=1000)["tasks"]

    def open_questions(self) -> list[dict[str, Any]]:
        return self.get("/v1/questions")["questions"]


@pytest.fixture(scope="module")
def demo() -> Iterator[DemoRun]:
    run = start_demo()
    try:
        yield run
    finally:
        run.stop()


@pytest.fixture(scope="module")
def api(demo: DemoRun) -> Iterator[DemoApi]:
    client = DemoApi(demo)
    yield client
    client.client.close()


def _demo_processes(folder: Path) -> list[str]:
    """Live processes of a run, found without its own help: the folder in the command line (daemon,
    hosts, shims), or the run's marker in the environment (the upstreams); zombies excepted."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (entry / "environ").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[-1].split()[0] == "Z" or int(entry.name) == os.getpid():
            continue
        if str(folder) in cmdline or f"{MARK}={folder}".encode() in environ:
            found.append(f"{entry.name}: {cmdline}")
    return found


def _all_up(folder: Path) -> bool:
    found = _demo_processes(folder)
    return any("mcpx serve" in p for p in found) and len(found) >= 5


def test_three_hosts_of_three_kinds_have_tasks_within_15_s(demo: DemoRun, api: DemoApi) -> None:
    def owners() -> set[str] | None:
        kinds = {c["id"]: c["kind"] for c in api.get("/v1/connections")["connections"]}
        seen = {kinds.get(t["connectionId"], "?") for t in api.tasks()}
        return seen if {"session", "stateless", "shim"} <= seen else None

    wait_until(owners, 15, "tasks from a session, a stateless host and a shim")
    names = {c["clientInfo"].get("name") for c in api.get("/v1/connections")["connections"]}
    assert {"demo-legacy-ide", "demo-agent", "demo-cli"} <= names


def test_tasks_pass_through_every_status_and_questions_wait_for_an_operator(demo: DemoRun, api: DemoApi) -> None:
    seen: set[str] = set()

    def every_status() -> bool:
        seen.update(t["status"] for t in api.tasks())
        if api.open_questions():
            seen.add("question open")
        return {"working", "completed", "failed"} <= seen and bool({"input_required", "question open"} & seen)

    wait_until(every_status, 45, f"working, completed, failed and a question (seen: {seen})")


@pytest.mark.long  # the demo asks its deploy question at a human pace
def test_an_operators_answer_to_a_deploy_question_completes_its_call(demo: DemoRun, api: DemoApi) -> None:
    def deploy_question() -> dict[str, Any] | None:
        for q in api.open_questions():
            fields = q["params"].get("requestedSchema", {}).get("properties", {})
            if "approve" in fields and q["taskId"]:
                return q
            # One question is open at a time: answer any other, so a deploy task gets its turn.
            other = APPROVE if "approve" in fields else {"action": "accept", "content": {"ok": True}, "by": "test"}
            api.client.post(f"/v1/questions/{q['id']}/answer", json=other)
        return None

    q = wait_until(deploy_question, 60, "a deploy question inside a task")
    assert q["upstream"] == "release" and not q["hostCanAnswer"]  # no demo host declares elicitation
    resp = api.client.post(f"/v1/questions/{q['id']}/answer", json=APPROVE)
    assert resp.status_code == 200, resp.text
    task = wait_until(
        lambda: (t := api.get(f"/v1/tasks/{q['taskId']}"))["status"] in ("completed", "failed") and t,
        15,
        "the deploy task to end",
    )
    assert task["status"] == "completed", task
    assert task["result"]["structuredContent"] == {
        "action": "accept",
        "service": task["arguments"]["service"],
        "version": task["arguments"]["version"],
        "environment": "staging",
        "deployed": True,
    }
    answered = api.get(f"/v1/questions/{q['id']}")
    assert answered["status"] == "answered" and answered["answeredBy"] == "operator:test"


def test_stop_leaves_no_process_and_no_folder() -> None:
    started = time.monotonic()
    run = start_demo()
    startup = time.monotonic() - started
    try:
        # Everything is up: daemon, two upstreams (and their keepers), the hosts, and the shim of
        # the stdio host (started once the hosts listen for SIGTERM).
        wait_until(lambda: _all_up(run.state_dir), 15, "the demo's processes")
        assert startup < 10 * UNIT, f"start_demo() took {startup:.1f} s"
    finally:
        run.stop()
    assert _demo_processes(run.state_dir) == []
    assert not run.state_dir.exists()
    # Both ended on SIGTERM, within the bound, and cleanly (a SIGKILL would read -9).
    assert run.hosts is not None and run.hosts.returncode == 0 and run.daemon.returncode == 0
    run.stop()  # a second stop is harmless


def test_a_demo_whose_console_dies_ends_with_it() -> None:
    """SIGKILL leaves no stop() to call: the hosts see their parent gone and take the run down."""
    code = "import sys, time; from mcpx.demo.console_world import start_demo; print(start_demo().state_dir, flush=True); time.sleep(120)"
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as console:
        try:
            assert console.stdout is not None
            folder = Path(console.stdout.readline().strip())
            wait_until(lambda: _all_up(folder), 15, "the demo's processes")
        finally:
            console.kill()
    wait_until(lambda: not _demo_processes(folder) and not folder.exists(), 15, "the orphaned demo to end")


@pytest.mark.anyio
async def test_the_console_on_the_demo_shows_working_and_completed_tasks_of_hosts_of_both_eras(demo: DemoRun) -> None:
    """What a newcomer sees first (`mcpx console --demo`): within 10 s of the console attaching,
    the hosts pane lists the three demo hosts (2025 and 2026 revisions) and the table shows
    working and completed tasks of more than one of them."""
    from console.app import ConsoleApp
    from console.client import DaemonClient, locate_in

    app = ConsoleApp(DaemonClient(locate_in(demo.state_dir), "newcomer"), bell=False)

    def seen() -> bool:
        rows = [app.state.tasks[t] for t in app.table.shown()]
        owners = {r.connection for r in rows}
        return {"working", "completed"} <= {r.status for r in rows} and len(owners) >= 2

    async with app.run_test(size=(180, 48)) as pilot:
        with anyio.fail_after(10 * UNIT):
            while not seen():
                await pilot.pause(0.1)
        assert app.link == "connected"
        hosts = {h.client_name: h.revision for h in app.state.hosts_shown()}
        assert {"demo-legacy-ide", "demo-agent", "demo-cli"} <= hosts.keys()
        assert hosts["demo-legacy-ide"] == "2025-11-25" and hosts["demo-agent"] is None  # a 2026 host


def _stopped(pid: int) -> bool:
    """The process is there, stopped by SIGSTOP (state T): not ended, not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] in ("T", "t")
    except OSError:
        return False


def test_quitting_the_demo_console_gives_the_terminal_back_before_the_demo_has_stopped(tmp_path: Path) -> None:
    """`mcpx console --demo`, then q: the first q once took 7-12 s on a blank screen, the console
    stopping the demo (hosts up to 3 s, daemon up to 5 s, a sweep) before it returned. The real CLI,
    in a terminal (a pty), with the demo's daemon SIGSTOPped so it cannot stop: a console that waited
    on the demo's shutdown would return only after killing it (after its 5 s grace). This one is gone
    with the daemon still there, and the demo still ends completely after (leave()'s reaper)."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "TERM": "xterm-256color", "PYTHONPATH": str(ROOT)}
    env.pop(MARK, None)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    argv = [sys.executable, "-m", "mcpx", "console", "--demo", "--operator", "pty-test", "--no-bell"]
    console = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=tmp_path)
    os.close(slave)
    drained = threading.Thread(target=_drain, args=(master,), daemon=True)  # a full pty would block the app
    drained.start()
    folder: Path | None = None
    try:
        folder = wait_until(lambda: next(tmp_path.glob("mcpx-console-demo-*"), None), 30, "the demo's folder")
        wait_until(lambda: _all_up(folder), 30, "the demo's processes")
        info = state_files.read_info(folder)
        assert info is not None
        with httpx.Client(timeout=10) as client:
            token = (folder / "token").read_text().strip()
            status = f"http://127.0.0.1:{info['port']}/v1/status"

            def attached() -> bool:
                return (
                    "pty-test" in client.get(status, headers={"Authorization": f"Bearer {token}"}).json()["operators"]
                )

            wait_until(attached, 30, "the console attached")
        daemon = int(info["pid"])
        os.kill(daemon, signal.SIGSTOP)
        os.write(master, b"q")
        assert console.wait(60 * UNIT) == 0
        assert _stopped(daemon), "the console waited for the demo's daemon to end"
        os.kill(daemon, signal.SIGCONT)  # now it may stop (on the SIGTERM it was sent), sooner than its grace
        wait_until(lambda: not _demo_processes(folder) and not folder.exists(), 30, "the demo to end")
    finally:
        if console.poll() is None:
            console.kill()
            console.wait()
        os.close(master)
        if folder is not None and folder.exists():
            for pid in _demo_processes(folder):
                with contextlib.suppress(OSError):
                    os.kill(int(pid.split(":")[0]), signal.SIGKILL)


def _drain(fd: int) -> None:
    with contextlib.suppress(OSError):
        while os.read(fd, 65536):
            pass
