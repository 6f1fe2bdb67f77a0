"""How a part asks for long-lived background work to run under the daemon's one rule for it.

The rule (mcpx/daemon/background.py runs it; docs/daemon-behavior.md, "Background work"): an exception
in such work is logged at ERROR with its cause, becomes a `daemon.background_failed` event, and the work
is started again after a pause, or dropped when it is one-shot; it never ends serving. A part that is
given no `Keep` (a unit test's) runs its work on its task group as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from anyio.abc import TaskGroup


class Keep(Protocol):
    def __call__(
        self, name: str, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any, restart: bool = True
    ) -> None: ...  # fmt: skip


def start_kept(
    tg: TaskGroup,
    keep: Keep | None,
    name: str,
    fn: Callable[..., Coroutine[Any, Any, Any]],
    *args: Any,
    restart: bool = True,
) -> None:
    """`fn(*args)` as background work named `name`: under `keep` when there is one, else on `tg`."""
    if keep is None:
        tg.start_soon(fn, *args, name=name)
    else:
        keep(name, fn, *args, restart=restart)
