"""A daemon that dies between remembering a call and sending it, for tests of what a restart
carries on (MCPX_TEST_SEND_FAULT=<folder>).

The daemon's entry point (cli/main.py) reads the variable and hands the pool a `SendFault`; nothing
else reads it, and without it a kept server's transport has no hook at all. When a file `die` is in
the folder, the daemon kills itself (SIGKILL) as it is about to hand a `tools/call` to a keeper:
the task row already names the request (it is committed first), and the server never gets it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ENV = "MCPX_TEST_SEND_FAULT"
BeforeSend = Callable[[dict[str, Any]], Awaitable[None]]


class SendFault:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    async def __call__(self, msg: dict[str, Any]) -> None:
        if msg.get("method") == "tools/call" and "id" in msg and (self.folder / "die").exists():
            os.kill(os.getpid(), signal.SIGKILL)


def from_env() -> BeforeSend | None:
    folder = os.environ.get(ENV)
    return SendFault(Path(folder)) if folder else None
