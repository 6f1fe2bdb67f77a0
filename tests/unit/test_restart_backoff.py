"""mcpx.upstream.pool: RestartBackoff, and UpstreamServer.run's restart loop driven with its
injectable sleep and clock against a stdio command that cannot start."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from anyio.lowlevel import checkpoint

from mcpx.config.model import ServerConfig
from mcpx.protocol.errors import UpstreamUnavailable
from mcpx.upstream import pool
from mcpx.upstream.pool import BACKOFF_CAP_S, BACKOFF_START_S, STABLE_AFTER_S, RestartBackoff, UpstreamServer

MISSING = "/nonexistent/mcpx-test-no-such-upstream"
DOUBLING = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


# ---- RestartBackoff ------------------------------------------------------------------------


def test_the_defaults_are_the_documented_ones() -> None:
    assert (BACKOFF_START_S, BACKOFF_CAP_S, STABLE_AFTER_S) == (0.25, 30.0, 30.0)  # docs/daemon-behavior.md


def test_backoff_doubles_from_a_quarter_second_up_to_the_cap() -> None:
    backoff = RestartBackoff()
    assert [backoff.delay(0.0) for _ in DOUBLING] == DOUBLING


def test_backoff_starts_afresh_after_a_run_longer_than_the_stable_time() -> None:
    backoff = RestartBackoff()
    assert [backoff.delay(0.0) for _ in range(5)] == [0.25, 0.5, 1.0, 2.0, 4.0]
    assert backoff.delay(STABLE_AFTER_S + 0.5) == 0.25
    assert backoff.delay(1.0) == 0.5


def test_a_short_run_does_not_reset_the_backoff() -> None:
    backoff = RestartBackoff()
    for _ in range(4):
        backoff.delay(0.0)
    assert backoff.delay(STABLE_AFTER_S - 1) == 4.0


def test_backoff_parameters_can_be_chosen() -> None:
    backoff = RestartBackoff(start_s=1.0, cap_s=3.0, stable_after_s=10.0)
    assert [backoff.delay(0.0) for _ in range(4)] == [1.0, 2.0, 3.0, 3.0]
    assert backoff.delay(11.0) == 1.0


# ---- UpstreamServer.run ----------------------------------------------------------------------


class FakeTime:
    """The restart loop's sleep and clock: a sleep is recorded and moves the clock by its length,
    and the server is stopped from inside the sleep after `stop_after` of them."""

    def __init__(self, stop_after: int, runs: Iterator[float] | None = None) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.stop_after = stop_after
        self.server: UpstreamServer | None = None
        self._runs = runs  # how long each start "runs", read between the loop's two clock reads
        self._reads = 0

    def clock(self) -> float:
        self._reads += 1
        if self._runs is not None and self._reads % 2 == 0:  # the second read of an attempt
            self.now += next(self._runs)
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        assert self.server is not None
        if len(self.sleeps) == self.stop_after:
            await self.server.stop()
        await checkpoint()


def server(tmp_path: Path, fake: FakeTime) -> UpstreamServer:
    up = UpstreamServer(
        "broken", ServerConfig(command=MISSING), "broken", tmp_path / "logs", sleep=fake.sleep, clock=fake.clock
    )
    fake.server = up
    return up


@pytest.mark.anyio
async def test_an_upstream_that_cannot_start_is_retried_with_capped_doubling_backoff(tmp_path: Path) -> None:
    fake = FakeTime(stop_after=len(DOUBLING))
    up = server(tmp_path, fake)
    with anyio.fail_after(10):
        await up.run()
    assert fake.sleeps == DOUBLING
    assert up.restarts == len(DOUBLING)
    assert up.last_error is not None and MISSING in up.last_error and "cannot start" in up.last_error
    assert up.session is None


@pytest.mark.anyio
async def test_a_start_that_ran_past_the_stable_time_resets_the_backoff(tmp_path: Path) -> None:
    runs = iter([0.0, 0.0, 0.0, STABLE_AFTER_S + 7, 0.0, 0.0])
    fake = FakeTime(stop_after=6, runs=runs)
    up = server(tmp_path, fake)
    with anyio.fail_after(10):
        await up.run()
    assert fake.sleeps == [0.25, 0.5, 1.0, 0.25, 0.5, 1.0]


@pytest.mark.anyio
async def test_a_stopped_upstream_is_not_restarted(tmp_path: Path) -> None:
    fake = FakeTime(stop_after=1)
    up = server(tmp_path, fake)
    with anyio.fail_after(10):
        await up.run()
    assert fake.sleeps == [0.25] and up.restarts == 1


@pytest.mark.anyio
async def test_waiting_for_an_upstream_that_cannot_start_names_its_last_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pool, "RESTART_WAIT_S", 0.01)  # how long a call waits for a restart
    fake = FakeTime(stop_after=2)
    up = server(tmp_path, fake)
    with anyio.fail_after(10):
        await up.run()
        with pytest.raises(UpstreamUnavailable, match="cannot start"):
            await up.ready_session()
