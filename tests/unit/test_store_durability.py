"""`store.durability`: the default has every commit on disk before its writers wake (SQLite WAL with
synchronous=FULL: the WAL is fsync'd at each COMMIT; PostgreSQL synchronous_commit=on whatever the
server's default), `process-crash` is the opt-out; and a write returns only after its commit."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import anyio
import asyncpg
import pytest
from pgcluster import Cluster

from mcpx.config.model import Config
from mcpx.store import StoreError
from mcpx.store.base import Durability
from mcpx.store.postgres import PostgresStore
from mcpx.store.sqlite import SqliteStore

from .storekit import task_record

pytestmark = pytest.mark.anyio
SQLITE_SYNC = {"power-loss": 2, "process-crash": 1}  # PRAGMA synchronous: FULL, NORMAL


def test_power_loss_is_the_default() -> None:
    assert Config().store.durability == "power-loss"
    assert Config.model_validate({"store": {"durability": "process-crash"}}).store.durability == "process-crash"


@pytest.mark.parametrize("durability", ["power-loss", "process-crash", None])
async def test_the_sqlite_writer_syncs_each_commit_unless_opted_out(
    tmp_path: Path, durability: Durability | None
) -> None:
    store = (
        SqliteStore(tmp_path / "mcpx.db")
        if durability is None
        else SqliteStore(tmp_path / "mcpx.db", durability=durability)
    )
    await store.open()
    try:
        assert store.db is not None
        rows = list(await store.db.execute_fetchall("PRAGMA synchronous"))
        assert rows[0][0] == SQLITE_SYNC[durability or "power-loss"]
        journal = list(await store.db.execute_fetchall("PRAGMA journal_mode"))
        assert journal[0][0] == "wal"
    finally:
        await store.close()


@pytest.mark.parametrize("durability", ["power-loss", "process-crash"])
async def test_the_postgres_writer_waits_for_the_wal_flush_unless_opted_out(
    pg_cluster: Cluster, durability: Durability
) -> None:
    url = pg_cluster.database()
    # A server whose default is off (as some tuned setups are) still gets "on" from the default.
    admin = await asyncpg.connect(url)
    try:
        name = await admin.fetchval("SELECT current_database()")
        await admin.execute(f'ALTER DATABASE "{name}" SET synchronous_commit TO off')
    finally:
        await admin.close()
    store = PostgresStore(url, durability=durability)
    await store.open()
    try:
        assert store.db is not None
        setting = await store.db.fetchval("SHOW synchronous_commit")
        assert setting == ("on" if durability == "power-loss" else "off")
    finally:
        await store.close()


async def test_a_write_returns_only_after_its_commit_and_a_failed_commit_keeps_nothing(tmp_path: Path) -> None:
    path = tmp_path / "mcpx.db"
    entered, release = anyio.Event(), anyio.Event()
    fail = False

    async def before_commit() -> None:
        entered.set()
        await release.wait()
        if fail:
            raise OSError(5, "fsync failed (test)")

    def committed_ids() -> set[str]:
        with contextlib.closing(sqlite3.connect(path)) as db:  # another connection sees committed rows only
            return {r[0] for r in db.execute("SELECT id FROM tasks")}

    store = SqliteStore(path, before_commit=before_commit)
    await store.open()
    held, doomed = task_record(), task_record()
    returned: list[str] = []
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(store.run_writer)

            async def put() -> None:
                await store.put_task(held)
                returned.append(held.id)

            tg.start_soon(put)
            await entered.wait()
            await anyio.sleep(0.05)
            assert returned == [] and committed_ids() == set()  # held at its commit: not returned
            release.set()
            with anyio.fail_after(5):
                while not returned:
                    await anyio.sleep(0.01)
            assert held.id in committed_ids()  # returned, and committed by then

            fail = True
            with pytest.raises(StoreError, match="fsync failed"):
                await store.put_task(doomed)
            assert await store.get_task(doomed.id) is None and doomed.id not in committed_ids()
            tg.cancel_scope.cancel()
    finally:
        await store.close()
