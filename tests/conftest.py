"""Shared fixtures: real daemons and upstreams, stopped after each test; wire frames schema-checked."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import pgcluster
from harness import OPEN_CLIENTS, Daemon, FixtureHttp, RawHost, SuiteStore


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[pgcluster.Cluster]:
    """One throwaway PostgreSQL cluster for the whole run (about a second to start), on a free
    127.0.0.1 port; each test takes a fresh database of it. Stopped and removed at the end."""
    if not pgcluster.available():
        pytest.skip("PostgreSQL (initdb, pg_ctl and a postgres user) is not installed")
    with pgcluster.running() as cluster:
        yield cluster


# Which stores the live suite runs on: both unless MCPX_TEST_STORES names one. Which of them a run
# takes is the tier's choice (below): the default tier runs the SQLite half. Without PostgreSQL on
# the machine the postgres half is skipped, saying why.
SUITE_STORES = os.environ.get("MCPX_TEST_STORES", "sqlite,postgres").split(",")

# ---- tiers --------------------------------------------------------------------------------------
# `pytest` runs the default tier: unit tests, in-process tests, and the end-to-end tests on SQLite
# with our own fixture upstreams. `pytest --tier slow` runs the rest, which .ci/run runs as a further
# step: the PostgreSQL half of the live suite, and every test marked with one of SLOW_MARKERS (the
# official SDKs and FastMCP as peers, the conformance suite, the stress tests, the browser tests).
# `--tier all` is both. A test marked `sqlite_only` (its subject is not the store: wire formats,
# peers, fuzzers, the CLI's words) has no PostgreSQL half: CI's 15 minutes go to the tests whose
# subject is durable state, which run on both.
TIERS = ("default", "slow", "all")
SLOW_MARKERS = ("peers", "conformance", "stress", "browser", "heavy")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tier",
        choices=TIERS,
        default=os.environ.get("MCPX_TEST_TIER", "default"),
        help="default: unit, in-process and SQLite end-to-end tests; slow: PostgreSQL, SDK peers,"
        " conformance and stress; all: both (env MCPX_TEST_TIER)",
    )


def tier_of(item: pytest.Item) -> str:
    """`slow` for a test that runs on PostgreSQL or carries a slow marker; else `default`."""
    if any(item.get_closest_marker(name) for name in SLOW_MARKERS):
        return "slow"
    return "slow" if _on_postgres(item) else "default"


def _on_postgres(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    return callspec is not None and callspec.params.get("suite_store") == "postgres"


def _select_tier(config: pytest.Config, items: list[pytest.Item]) -> None:
    tier = config.getoption("tier")
    wanted = [item for item in items if not (item.get_closest_marker("sqlite_only") and _on_postgres(item))]
    kept = [item for item in wanted if tier in ("all", tier_of(item))]
    keep = set(map(id, kept))
    dropped = [item for item in items if id(item) not in keep]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session", params=SUITE_STORES)
def suite_store(request: pytest.FixtureRequest) -> SuiteStore:
    """The one store parameter of the live suite: every test that starts a daemon (through
    `start_daemon` or a module fixture that asks for this) runs once on each store named in
    MCPX_TEST_STORES. Session scope: pytest runs each store's tests together, on one cluster."""
    if request.param == "sqlite":
        return SuiteStore("sqlite")
    return SuiteStore("postgres", request.getfixturevalue("pg_cluster"))


def _work_unit(nodeid: str) -> str:
    """What one worker runs together: a file's tests on one store. (`--dist loadfile` alone would put
    both stores' halves of a file on one worker, and a file of long tests would end the run alone.)"""
    store = _STORE_IN_ID.search(nodeid)
    return nodeid.split("::", 1)[0] + (f"@{store.group(1)}" if store else "")


_STORE_IN_ID = re.compile(r"::[^\[]*\[(?:.*-)?(sqlite|postgres)(?:-.*)?\]$")


@pytest.hookimpl(trylast=True)  # after pytest's own reordering by fixture scope, which this keeps within a unit
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tier's tests only (above). Units holding a test marked `long` go first, then the larger
    ones: a 40-second test started last is the run's tail. Every worker sorts the same collection the
    same way, as xdist requires."""
    _select_tier(config, items)
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(_work_unit(item.nodeid), []).append(item)
    ordered = sorted(units.values(), key=lambda unit: (not any(i.get_closest_marker("long") for i in unit), -len(unit)))
    items[:] = [item for unit in ordered for item in unit]


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, one file per store: the units above, handed out in the order above."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FilePerStore(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _work_unit(nodeid)

    config.option.loadscopereorder = False  # its reorder counts tests; ours also knows which are long
    return FilePerStore(config, log)


@pytest.fixture(autouse=True)
def close_test_clients() -> Iterator[None]:
    """Every test client (RawHost, Api, FeedClient) a test made is closed when it ends: a socket left to the garbage collector
    warns (ResourceWarning) inside whichever later test the collection happens to run in."""
    yield
    while OPEN_CLIENTS:
        OPEN_CLIENTS.pop().close()


@pytest.fixture
def raw_host() -> Iterator[Callable[[str], RawHost]]:
    """Frame-level HTTP hosts, closed after the test."""
    hosts: list[RawHost] = []

    def make(url: str) -> RawHost:
        hosts.append(RawHost(url))
        return hosts[-1]

    yield make
    for h in hosts:
        h.close()


@pytest.fixture
def start_daemon(tmp_path: Path, suite_store: SuiteStore) -> Iterator[Callable[..., Daemon]]:
    """Start `mcpx daemon` processes; each is stopped and its wire log schema-checked at teardown."""
    started: list[Daemon] = []

    def start(config: dict[str, Any] | None = None, **kw: Any) -> Daemon:
        d = Daemon(
            tmp_path,
            config,
            store=suite_store,
            name=kw.pop("name", f"daemon{len(started)}"),
            extra_args=kw.pop("extra_args", None),
            wire_log=kw.pop("wire_log", True),
        )
        started.append(d)
        return d.start(**kw)

    yield start
    for d in started:
        d.stop()
        d.kill_keepers()
    for d in started:
        d.check_wire()


@pytest.fixture
def fixture_http(tmp_path: Path) -> Iterator[Callable[..., FixtureHttp]]:
    servers: list[FixtureHttp] = []

    def start(*args: str, name: str = "fixture") -> FixtureHttp:
        s = FixtureHttp(tmp_path, *args, name=name)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (anyio's pytest plugin) run on asyncio, as the daemon and the console do."""
    return "asyncio"
