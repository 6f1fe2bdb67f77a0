"""The tasks table's columns: how wide each is at a given table width, and their header labels. Pure.

Every column has a width it needs at least and one it would like; a narrow table gives each its
least, then hands out what is left by priority (a cut cell ends in `…`, never mid-word silently);
the status message takes whatever remains. So at 80 columns id, status, tool, upstream, host and age
all still show, shortened, and at 180 the tool and upstream names show whole.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from ..state import SortKey


@dataclass(frozen=True)
class ColumnSpec:
    key: str
    label: str
    least: int
    wanted: int


COLUMN_SPECS = (
    ColumnSpec("id", "id", 8, 8),
    ColumnSpec("kind", "kind", 4, 4),
    ColumnSpec("status", "status", 11, 13),  # "needs input ?"
    ColumnSpec("tool", "tool", 8, 22),
    ColumnSpec("upstream", "upstream", 7, 16),
    ColumnSpec("host", "host", 8, 24),
    ColumnSpec("age", "age", 6, 7),
    ColumnSpec("message", "status message", 8, 24),
)
COLUMNS = tuple((c.key, c.label) for c in COLUMN_SPECS)
# Who gets room first once every column has its least, and up to how wide (None: its wanted width);
# the message then takes the rest.
PRIORITY: tuple[tuple[str, int | None], ...] = (
    ("tool", None),
    ("upstream", None),
    ("age", None),
    ("status", None),
    ("message", 24),
    ("host", None),
)
PADDING = 2  # DataTable's cell padding, both sides of every column
SCROLLBAR = 2


def widths(table_width: int) -> dict[str, int]:
    """Each column's content width for a table this wide (its scrollbar included)."""
    room = table_width - SCROLLBAR - PADDING * len(COLUMN_SPECS)
    out = {c.key: c.least for c in COLUMN_SPECS}
    room -= sum(out.values())
    wanted = {c.key: c.wanted for c in COLUMN_SPECS}
    for key, cap in PRIORITY:
        if room <= 0:
            break
        more = max(0, min(room, (cap or wanted[key]) - out[key]))
        out[key] += more
        room -= more
    if room > 0:
        out["message"] += room
    return out


def header(key: str, label: str, sort: SortKey, descending: bool) -> Text:
    """A column's header: the sorted one says so, and which way (▼ newest/highest first)."""
    if key != sort:
        return Text(label, overflow="ellipsis")
    marked = Text.assemble(label, (" ▼" if descending else " ▲", "bold"))
    marked.overflow = "ellipsis"
    return marked
