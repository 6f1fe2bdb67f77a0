"""The tasks table: the selected host's tasks (or all), filtered and sorted, kept up to date row by
row from the state's changes (never rebuilt per event; rebuilt only when the view itself changes)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.coordinate import Coordinate
from textual.widgets import DataTable

from ..render import age, now_ms, short, status_text
from ..state import ConsoleState, SortKey, TaskRow

# Fixed widths: a column sized by its first rows would cut later, longer messages.
WIDTHS = {"id": 8, "status": 12, "tool": 14, "upstream": 10, "host": 24, "age": 7, "message": 48}
COLUMNS = (
    ("id", "task"),
    ("status", "status"),
    ("tool", "tool"),
    ("upstream", "upstream"),
    ("host", "host"),
    ("age", "age"),
    ("message", "status message"),
)
SORTS: tuple[SortKey, ...] = ("age", "status", "tool", "upstream", "host")


@dataclass
class View:
    host: str | None = None
    statuses: frozenset[str] = frozenset()
    text: str = ""
    sort: SortKey = "age"
    descending: bool = True
    hide_finished: bool = False

    def shows(self, state: ConsoleState, row: TaskRow) -> bool:
        if self.hide_finished and row.terminal:
            return False
        return state.matches(row, host=self.host, statuses=self.statuses, text=self.text)


@dataclass
class TableStats:
    rebuilds: int = 0
    row_updates: int = 0
    rows_added: int = 0
    rows_removed: int = 0


class TasksTable(DataTable[Text | str]):
    def __init__(self, state: ConsoleState, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.state = state
        self.view = View()
        self.stats = TableStats()
        self._shown: set[str] = set()

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key, width=WIDTHS.get(key))

    # ---- cells -----------------------------------------------------------------------------
    def _cells(self, row: TaskRow, now_ms: int) -> list[Text | str]:
        host = self.state.hosts.get(row.connection or "")
        host_label = Text(host.label if host else "?", style="" if host is None or host.open else "dim")
        message = row.status_message or ""
        if row.cancel_requested_by and not row.terminal:
            message = f"cancelling ({row.cancel_requested_by})"
        return [
            IdText(row.id),
            status_text(row.status, self.state.needs_input(row)),
            row.tool,
            row.upstream,
            host_label,
            age(row.created_ms, now_ms),
            message,
        ]

    # ---- updates ---------------------------------------------------------------------------
    def rebuild(self) -> None:
        """The view changed (host, filter, sort) or a snapshot arrived: show it afresh."""
        self.stats.rebuilds += 1
        keep = self._cursor_task()
        self.clear()
        now = now_ms()
        rows = [
            r
            for r in self.state.visible(
                host=self.view.host,
                statuses=self.view.statuses,
                text=self.view.text,
                sort=self.view.sort,
                descending=self.view.descending,
            )
            if not (self.view.hide_finished and r.terminal)
        ]
        for row in rows:
            self.add_row(*self._cells(row, now), key=row.id)
        self._shown = {r.id for r in rows}
        self._restore_cursor(keep)

    def apply(self, changed: set[str], removed: set[str]) -> None:
        """Only these tasks changed: update their rows, add or drop them as the view says."""
        now = now_ms()
        added = False
        for task_id in removed & self._shown:
            self.remove_row(task_id)
            self._shown.discard(task_id)
            self.stats.rows_removed += 1
        for task_id in changed:
            row = self.state.tasks.get(task_id)
            visible = row is not None and self.view.shows(self.state, row)
            if task_id in self._shown and not visible:
                self.remove_row(task_id)
                self._shown.discard(task_id)
                self.stats.rows_removed += 1
            elif row is not None and visible and task_id in self._shown:
                for (key, _label), value in zip(COLUMNS, self._cells(row, now), strict=True):
                    self.update_cell(task_id, key, value)
                self.stats.row_updates += 1
            elif row is not None and visible:
                self.add_row(*self._cells(row, now), key=task_id)
                self._shown.add(task_id)
                self.stats.rows_added += 1
                added = True
        if added:
            self._resort()

    def tick_ages(self) -> None:
        """Ages move on: repaint the age cells of the rows on screen only."""
        if not self.row_count:
            return
        now = now_ms()
        top = self.scroll_offset.y
        for index in range(top, min(self.row_count, top + self.size.height)):
            key = self.coordinate_to_cell_key(Coordinate(index, 0)).row_key.value
            row = self.state.tasks.get(key or "")
            if row is not None:
                self.update_cell(key or "", "age", age(row.created_ms, now))

    def _resort(self) -> None:
        keep = self._cursor_task()
        sort = self.view.sort
        tasks = self.state.tasks

        def order(task_id: object) -> tuple[object, ...]:
            row = tasks.get(str(task_id))
            if row is None:
                return (0,)
            value = {
                "age": row.created_ms,
                "status": row.status,
                "tool": row.tool,
                "upstream": row.upstream,
                "host": row.connection or "",
            }[sort]
            return (value, row.created_ms, row.id)

        self.sort(
            "id",
            key=lambda cell: order(cell.task_id if isinstance(cell, IdText) else cell),
            reverse=self.view.descending,
        )
        self._restore_cursor(keep)

    def _cursor_task(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:  # noqa: BLE001 - an empty or shrinking table has no cursor cell
            return None

    def _restore_cursor(self, task_id: str | None) -> None:
        if task_id is not None and task_id in self._shown:
            self.move_cursor(row=self.get_row_index(task_id), animate=False)

    def selected(self) -> str | None:
        return self._cursor_task()

    def shown(self) -> list[str]:
        return [str(r.key.value) for r in self.ordered_rows]


class IdText(Text):
    """The id column's cell: the short id shown, the full id kept (sorting looks rows up by it)."""

    def __init__(self, task_id: str) -> None:
        super().__init__(short(task_id), style="dim")
        self.task_id = task_id
