"""Unit tests of the stateful core run on anyio's pytest plugin, on asyncio (what the daemon runs)."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
