"""A failing or stalled commit, for tests of what a handle promises (MCPX_TEST_COMMIT_FAULT=<folder>).

The daemon's entry point (cli/main.py) reads the variable and hands the store a `CommitFault` as its
`before_commit`; nothing else reads it, and without it the store has no hook at all. Before each
batch's COMMIT the writer looks in the folder: while a file `hold` exists the commit waits (and a
file `holding` says so); when `fail` exists it raises EIO, the error a failed fsync gives, and the
batch is rolled back, so none of its writes is acknowledged.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import anyio

from .base import BeforeCommit

ENV = "MCPX_TEST_COMMIT_FAULT"
_POLL_S = 0.02


class CommitFault:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    async def __call__(self) -> None:
        hold, holding = self.folder / "hold", self.folder / "holding"
        while hold.exists():
            holding.touch()
            await anyio.sleep(_POLL_S)
        holding.unlink(missing_ok=True)
        if (self.folder / "fail").exists():
            raise OSError(errno.EIO, f"fsync failed (injected through {ENV})")


def from_env() -> BeforeCommit | None:
    folder = os.environ.get(ENV)
    return CommitFault(Path(folder)) if folder else None
