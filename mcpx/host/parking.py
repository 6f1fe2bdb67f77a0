"""Upstream calls held open across a 2026 host's MRTR rounds.

A 2025 upstream asks its questions as server requests in the middle of a call; a 2026 host can only
be asked by an `input_required` result followed by a retry. So mcpx holds the upstream call open
(parked), returns the questions as `inputRequests` keyed by their broker question ids with a signed
`requestState` naming the park, and the retry's `inputResponses` answer those questions: the
**same** upstream work resumes, it is never started again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import anyio

from ..protocol.ids import opaque_id

if TYPE_CHECKING:
    from ..records.question import Question
    from ..tasks.engine import Run

WaitOutcome = Literal["done", "question", "deadline"]
PARK_LINGER_S = 60.0  # a finished parked call waits this long for its host's retry


class Park:
    def __init__(self) -> None:
        self.id = opaque_id(16)
        self.outstanding: dict[str, dict[str, Any]] = {}  # broker question id -> input request
        self.changed = anyio.Event()
        self.refused: Exception | None = None

    def refuse(self, error: Exception) -> None:
        """The host cannot be asked at all (a capability it lacks): its call fails with `error`."""
        self.refused = error
        self.changed.set()

    async def hold(self, question: Question) -> dict[str, Any]:
        """The broker's host_ask for a parked call: wait until someone answers the question
        through the broker (the host's retry, or an operator); the broker then cancels this."""
        self.outstanding[question.id] = {"method": question.method, "params": question.params}
        self.changed.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.outstanding.pop(question.id, None)
        raise AssertionError("unreachable")  # pragma: no cover

    def rearm(self) -> None:
        self.changed = anyio.Event()


def park_of(params: dict[str, Any]) -> str | None:
    """The park a retry resumes: mcpx's own state inside the signed requestState envelope."""
    state = params.get("requestState")
    park = state.get("mcpxPark") if isinstance(state, dict) else None
    return park if isinstance(park, str) else None


async def wait_for(run: Run, park: Park, deadline_s: float | None) -> WaitOutcome:
    """'done', 'question' or 'deadline', whichever comes first (done wins a tie).

    One event, no helper tasks: the run sets `park.changed` too when it ends (on the hot path of
    every 2026 call, a task group with two watchers cost three task spawns per call)."""
    if not run.done.is_set():
        run.also_wake = park.changed
        try:
            with anyio.move_on_after(float("inf") if deadline_s is None else deadline_s):
                await park.changed.wait()
        finally:
            run.also_wake = None
    if run.done.is_set():
        return "done"
    return "question" if park.changed.is_set() else "deadline"
