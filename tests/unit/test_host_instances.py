"""mcpx.upstream.host_scoped: one process per host connection for `scope: host` servers, started on
first use, stopped when the connection closes or idles, bounded by maxInstances (a host beyond it
waits for room, then is refused). The processes are stand-ins that record their start and stop."""

from __future__ import annotations

from typing import Any, cast

import anyio
import pytest

from mcpx.config.model import ServerConfig
from mcpx.protocol.errors import LimitReached
from mcpx.upstream import host_scoped
from mcpx.upstream.host_scoped import HostInstances
from mcpx.upstream.pool import UpstreamServer

pytestmark = pytest.mark.anyio


class Process:
    def __init__(self, cfg: ServerConfig, connection: str) -> None:
        self.key, self.cfg, self.connection = "up", cfg, connection
        self.in_flight = 0
        self.last_used = 0.0
        self.running = False
        self.stopped = False

    async def run(self) -> None:
        self.running = True

    async def stop(self) -> None:
        self.stopped = True


def shared(**mcpx: Any) -> UpstreamServer:
    cfg = ServerConfig.model_validate({"command": "x", "mcpx": {"scope": "host", **mcpx}})
    return cast(UpstreamServer, Process(cfg, ""))


def make(server: UpstreamServer, connection: str) -> UpstreamServer:
    return cast(UpstreamServer, Process(server.cfg, connection))


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
        assert proc(a1).stopped and not proc(b).stopped and instances.count("up") == 1
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
