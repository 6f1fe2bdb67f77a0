"""Unit tests of the stateful core run on anyio's pytest plugin, on asyncio (what the daemon runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .storekit import PostgresSite, Site, SqliteSite


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", "postgres"])
def store_site(request: pytest.FixtureRequest, tmp_path: Path) -> Site:
    """Where a store under test lives: each Store-contract test runs on both backends."""
    if request.param == "sqlite":
        return SqliteSite(tmp_path / "mcpx.db")
    cluster = request.getfixturevalue("pg_cluster")
    return PostgresSite(cluster.database())
