"""mcpx.upstream.host_scoped: one process per host connection for `scope: host` servers, started on
first use, stopped when the connection closes or idles, bounded by maxInstances (a host beyond it
waits for room, then is refused); a process tasks run on outlives its host until the last of them
ends. The processes are stand-ins that record their start and stop."""

from __future__ import annotations

from typing import Any, cast

import anyio
import pytest

from mcpx.config.model import ServerConfig
from mcpx.protocol.errors import LimitReached
from mcpx.upstream import host_scoped
from mcpx.upstream.host_scoped import HostInstances
from mcpx.upstream.pool import UpstreamServer
from mcpx.upstream.session import AskOwner

pytestmark = pytest.mark.anyio


class Process:
    def __init__(self, cfg: ServerConfig, connection: str, ask_owner: AskOwner | None = None) -> None:
        self.key, self.cfg, self.connection, self.ask_owner = "up", cfg, connection, ask_owner
        self.in_flight = 0
        self.holds = 0  # tasks running on it (UpstreamServer.hold)
        self._unheld = anyio.Event()
        self.last_used = 0.0
        self.running = False
        self.stopped: str | None = None  # why it was stopped

    async def run(self) -> None:
        self.running = True

    async def stop(self, why: str | None = None) -> None:
        self.stopped = why or "?"

    def tasks_end(self) -> None:
        self.holds = 0
        self._unheld.set()

    async def unheld(self) -> None:
        while self.holds:
            await self._unheld.wait()


def shared(**mcpx: Any) -> UpstreamServer:
    cfg = ServerConfig.model_validate({"command": "x", "mcpx": {"scope": "host", **mcpx}})
    return cast(UpstreamServer, Process(cfg, ""))


def make(server: UpstreamServer, connection: str, ask_owner: AskOwner | None) -> UpstreamServer:
    return cast(UpstreamServer, Process(server.cfg, connection, ask_owner))


def proc(server: UpstreamServer) -> Process:
    return cast(Process, server)


async def test_each_connection_gets_its_own_process_once_and_a_shared_server_is_itself() -> None:
    instances = HostInstances(make)
    async with anyio.create_task_group() as tg:
        await instances.run(tg)
        up = shared()
        a1, a2, b = [await instances.for_host(up, c) for c in ("a", "a", "b")]
        assert a1 is a2 and a1 is not b and instances.count("up") == 2
        assert proc(a1).connection == "a" and proc(b).connection == "b"
        plain = cast(UpstreamServer, Process(ServerConfig.model_validate({"command": "x"}), ""))
        assert await instances.for_host(plain, "a") is plain
        await instances.release("a")
        assert proc(a1).stopped == "its host connection closed" and not proc(b).stopped and instances.count("up") == 1
        tg.cancel_scope.cancel()


async def test_an_idle_process_is_stopped_a_busy_one_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_scoped, "SWEEP_EVERY_S", 0.01)
    now = [100.0]
    instances = HostInstances(make, clock=lambda: now[0])
    async with anyio.create_task_group() as tg:
        await instances.run(tg)
        up = shared(idleStopS=60)
        idle, busy = await instances.for_host(up, "a"), await instances.for_host(up, "b")
        proc(idle).last_used = proc(busy).last_used = 50.0
        proc(busy).in_flight = 1
        await anyio.sleep(0.05)
        assert not proc(idle).stopped  # quiet for 50 s of 60
        now[0] = 111.0
        await anyio.sleep(0.05)
        assert proc(idle).stopped and not proc(busy).stopped  # a call in flight keeps it
        assert instances.count("up") == 1
        assert await instances.for_host(up, "a") is not idle  # the next call starts a new one
        tg.cancel_scope.cancel()


async def test_beyond_max_instances_a_host_waits_for_room_then_is_refused() -> None:
    instances = HostInstances(make)
    async with anyio.create_task_group() as tg:
        await instances.run(tg)
        up = shared(maxInstances=1, roomWaitS=0.2)
        first = await instances.for_host(up, "a")
        with pytest.raises(LimitReached) as refused:
            await instances.for_host(up, "b")
        assert "mcpServers.up.mcpx.maxInstances" in refused.value.message

        async def free_soon() -> None:
            await anyio.sleep(0.05)
            await instances.release("a")

        tg.start_soon(free_soon)
        second = await instances.for_host(up, "b")  # waited for a's process to stop
        assert proc(first).stopped and proc(second).connection == "b"
        tg.cancel_scope.cancel()


async def test_a_process_its_tasks_run_on_outlives_its_host_and_stops_when_the_last_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """#39 item 3: a host that disconnects leaves its tasks running; their process stays (also past
    idleStopS: the task is not idle, it is running) and stops as the last of them ends."""
    monkeypatch.setattr(host_scoped, "SWEEP_EVERY_S", 0.01)
    now = [100.0]
    instances = HostInstances(make, clock=lambda: now[0])
    async with anyio.create_task_group() as tg:
        await instances.run(tg)
        up = shared(idleStopS=60)
        tasked, plain = await instances.for_host(up, "a"), await instances.for_host(up, "b")
        proc(tasked).holds = 1
        await instances.release("a")
        await instances.release("b")
        assert proc(plain).stopped == "its host connection closed"  # nothing of b's runs there
        assert not proc(tasked).stopped and instances.left("a") and instances.count("up") == 1
        now[0] = 1000.0  # long past idleStopS: still running its task
        await anyio.sleep(0.05)
        assert not proc(tasked).stopped
        proc(tasked).tasks_end()
        await anyio.sleep(0.01)
        assert proc(tasked).stopped == "its host connection closed and its last task ended"
        assert not instances.left("a") and instances.count("up") == 0
        tg.cancel_scope.cancel()


async def test_a_connected_hosts_process_is_not_idle_while_a_task_runs_on_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A task between two requests (waiting for an approval, between MRTR rounds) has none in
    flight; it still holds its process against idleStopS."""
    monkeypatch.setattr(host_scoped, "SWEEP_EVERY_S", 0.01)
    now = [100.0]
    instances = HostInstances(make, clock=lambda: now[0])
    async with anyio.create_task_group() as tg:
        await instances.run(tg)
        own = await instances.for_host(shared(idleStopS=60), "a")
        proc(own).holds = 1
        now[0] = 1000.0
        await anyio.sleep(0.05)
        assert not proc(own).stopped
        proc(own).tasks_end()
        await anyio.sleep(0.05)
        assert proc(own).stopped == "idle for 60 s"
        tg.cancel_scope.cancel()


async def test_a_hosts_process_is_made_with_that_hosts_own_question_taker() -> None:
    instances = HostInstances(make)
    async with anyio.create_task_group() as tg:
        await instances.run(tg)

        async def ask_a(method: str, params: dict[str, Any]) -> dict[str, Any]:
            return {"roots": []}

        own = await instances.for_host(shared(), "a", ask_a)
        assert proc(own).ask_owner is ask_a
        tg.cancel_scope.cancel()


async def test_a_host_that_comes_back_under_its_id_keeps_its_process_past_its_tasks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 2025 session the registry closed as idle is restored under its id by its next request: its
    process, kept for its task meanwhile, is its own again and idles out as usual."""
    monkeypatch.setattr(host_scoped, "SWEEP_EVERY_S", 0.01)
    now = [100.0]
    instances = HostInstances(make, clock=lambda: now[0])
    async with anyio.create_task_group() as tg:
        await instances.run(tg)
        up = shared(idleStopS=60)
        own = await instances.for_host(up, "a")
        proc(own).holds = 1
        await instances.release("a")
        assert await instances.for_host(up, "a") is own and not instances.left("a")
        proc(own).last_used = now[0]  # (the real one notes when its last task ended)
        proc(own).tasks_end()
        await anyio.sleep(0.05)
        assert not proc(own).stopped  # back, and used just now
        now[0] = 1000.0
        await anyio.sleep(0.05)
        assert proc(own).stopped == "idle for 60 s"
        tg.cancel_scope.cancel()
