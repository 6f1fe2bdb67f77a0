"""Waiting in a pilot test for the console to get somewhere (shared by the console's tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
from textual.pilot import Pilot


async def until(pilot: Pilot[None], cond: Callable[[], Any], what: str, timeout: float = 20) -> Any:
    """Pause the pilot until `cond()` is truthy (returned), or fail naming `what`."""
    try:
        with anyio.fail_after(timeout):
            while not (got := cond()):
                await pilot.pause(0.05)
    except TimeoutError:
        raise AssertionError(f"never: {what}") from None
    return got
