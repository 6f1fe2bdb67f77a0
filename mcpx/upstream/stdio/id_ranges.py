"""Which request ids a keeper forwarded to its server, as a few ranges (keeper.py keeps them; the
welcome hands them to the next daemon). Pure.

A daemon numbers its requests upward but may send them slightly out of order (each waits for its
task row first), so the ids forwarded are mostly one run with short gaps. What a restarted daemon
needs from them: for the request a task row names, did the server ever get it? Inside the window
(`floor` and up) the answer is certain: in a range, the server got it (its reply, if not replayed,
was lost); outside every range, it never arrived (the daemon died before it was sent) and can be
sent again. Below `floor` (ranges let go to stay small) nobody can tell.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

MAX_RANGES = 256  # beyond this the oldest ranges go, and the floor rises past them

Seen = Literal["forwarded", "never", "unknown"]


@dataclass
class IdRanges:
    floor: int = 0  # ids below it are not known either way
    ranges: list[list[int]] = field(default_factory=list)  # sorted, disjoint, not adjacent: [lo, hi]

    def add(self, rid: int) -> None:
        if rid < self.floor:
            return
        at = 0
        while at < len(self.ranges) and self.ranges[at][1] < rid - 1:
            at += 1
        if at < len(self.ranges) and self.ranges[at][0] <= rid + 1:
            lo, hi = self.ranges[at]
            self.ranges[at] = [min(lo, rid), max(hi, rid)]
            if at + 1 < len(self.ranges) and self.ranges[at + 1][0] <= self.ranges[at][1] + 1:
                self.ranges[at] = [self.ranges[at][0], self.ranges.pop(at + 1)[1]]
        else:
            self.ranges.insert(at, [rid, rid])
        while len(self.ranges) > MAX_RANGES:
            self.floor = self.ranges.pop(0)[1] + 1

    def seen(self, rid: int) -> Seen:
        if rid < self.floor:
            return "unknown"
        return "forwarded" if any(lo <= rid <= hi for lo, hi in self.ranges) else "never"

    def wire(self) -> dict[str, object]:
        return {"floor": self.floor, "ranges": [list(r) for r in self.ranges]}

    @classmethod
    def from_wire(cls, data: object) -> IdRanges | None:
        """A welcome's `forwarded`; None when absent or malformed (an older keeper: nothing is known)."""
        if not isinstance(data, dict) or not isinstance(data.get("floor"), int):
            return None
        items = data.get("ranges")
        if not isinstance(items, list) or not all(
            isinstance(r, list) and len(r) == 2 and all(isinstance(v, int) for v in r) and r[0] <= r[1] for r in items
        ):
            return None
        out = cls(floor=data["floor"], ranges=_merged(items))  # (re-sorted: not trusted to be)
        while len(out.ranges) > MAX_RANGES:
            out.floor = out.ranges.pop(0)[1] + 1
        return out


def _merged(ranges: list[list[int]]) -> list[list[int]]:
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return out
