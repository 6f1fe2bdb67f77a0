"""A task handle is given out only once its row is committed, and a commit that fails (as a failed
fsync does) gives out none: the create call fails with a JSON-RPC error and no handle shows up
later, in `tasks/list` or in /v1. Both eras, on a real daemon whose store's commit is held or
failed through the test-only hook (mcpx/store/faults.py, MCPX_TEST_COMMIT_FAULT)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import Api, Daemon, RawHost, SuiteStore, reply_of, run_for_module, stdio_server, wait_until

from mcpx.store import faults

EXT = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, suite_store: SuiteStore) -> Iterator[Daemon]:
    tmp = tmp_path_factory.mktemp("commit-faults")
    (tmp / "fault").mkdir()
    config = {"mcpServers": {"fx": stdio_server(tmp, tools={"echo": {"taskSupport": "required"}})}}
    d = Daemon(tmp, config, store=suite_store)
    before = os.environ.get(faults.ENV)
    os.environ[faults.ENV] = str(tmp / "fault")  # the daemon's environment is this one's, copied at start
    try:
        yield from run_for_module(d)
    finally:
        if before is None:
            del os.environ[faults.ENV]
        else:
            os.environ[faults.ENV] = before


@pytest.fixture
def fault(daemon: Daemon) -> Iterator[Path]:
    folder = daemon.tmp / "fault"
    yield folder
    for name in ("hold", "fail"):
        (folder / name).unlink(missing_ok=True)


@dataclass
class Host:
    raw: RawHost
    legacy: bool

    def create(self, text: str) -> httpx.Response:
        params = {"name": "fx__echo", "arguments": {"text": text}}
        if self.legacy:
            return self.raw.legacy("tools/call", {**params, "task": {}})
        return self.raw.modern("tools/call", params, meta=EXT)

    def handle(self, frame: dict[str, Any]) -> str:
        result = frame["result"]
        return str(result["task"]["taskId"] if self.legacy else result["taskId"])


@pytest.fixture(params=["legacy", "modern"])
def host(request: pytest.FixtureRequest, daemon: Daemon) -> Iterator[Host]:
    with RawHost(daemon.url) as raw:
        h = Host(raw, request.param == "legacy")
        if h.legacy:
            raw.initialize()
        reply_of(h.create("warm"))  # the host's own rows (session, connection) are written now
        yield h


def _task_rows(daemon: Daemon) -> set[str]:
    return {row[0] for row in daemon.store_rows("SELECT id FROM tasks WHERE tool = 'echo'")}


def test_a_failed_commit_fails_the_create_and_no_handle_escapes(daemon: Daemon, host: Host, fault: Path) -> None:
    with Api(daemon) as api:
        listed_before = {t["id"] for t in api.get("/v1/tasks", params={"limit": 1000}).json()["tasks"]}
        rows_before = _task_rows(daemon)
        (fault / "fail").touch()
        frame = host.create("doomed").json()
        (fault / "fail").unlink()
        assert "result" not in frame, frame
        assert frame["error"]["code"] == -32603 and "could not create the task" in frame["error"]["message"], frame
        assert _task_rows(daemon) == rows_before
        listed_after = {t["id"] for t in api.get("/v1/tasks", params={"limit": 1000}).json()["tasks"]}
        assert listed_after == listed_before
        if host.legacy:
            own = {t["taskId"] for t in reply_of(host.raw.legacy("tasks/list", {}))["result"]["tasks"]}
            assert own <= rows_before
        # The daemon carries on: the next create commits and is answered with its handle.
        tid = host.handle(reply_of(host.create("after")))
        assert tid in _task_rows(daemon)


def test_a_handle_is_given_out_only_after_its_commit(daemon: Daemon, host: Host, fault: Path) -> None:
    rows_before = _task_rows(daemon)
    replies: list[httpx.Response] = []
    (fault / "hold").touch()
    asking = threading.Thread(target=lambda: replies.append(host.create("held")))
    asking.start()
    try:
        wait_until(lambda: (fault / "holding").exists(), what="the commit to be held")
        asking.join(0.5)
        assert not replies, "a handle was given out while its commit was held"
        assert _task_rows(daemon) == rows_before  # nothing committed, so nothing to hand out
    finally:
        (fault / "hold").unlink()
        asking.join(10)
    tid = host.handle(reply_of(replies[0]))
    assert tid in _task_rows(daemon) - rows_before
