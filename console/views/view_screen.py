"""What every view shares: a title line, its own filter (`/`), a table of rows, the footer.

A view is a screen over the tasks list, installed once so its filter and cursor stay when the
operator switches away and back. Its table's messages stop here: the app's handlers are the tasks
list's. The tasks list's own keys (cancel, sort, ...) do nothing in a view.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from ..backend import Backend
from ..state import ConsoleState

Cell = str | Text
Row = tuple[str, Sequence[Cell]]  # (its key, its cells)
TASK_KEYS = "c,C,s,S,h,f,o,r,y,H,0,1,2,3,4,5"  # the tasks list's keys, which mean nothing here


class ViewScreen(Screen[None]):
    DEFAULT_CSS = """
    ViewScreen #view-title { height: 1; padding: 0 1; background: $boost; }
    ViewScreen #view-filter { height: 3; }
    ViewScreen #view-table { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "filter"),
        Binding("escape", "back", "tasks"),
        Binding(TASK_KEYS, "nothing", show=False),
    ]
    view = ""  # its name after `:`
    columns: tuple[str, ...] = ()
    refresh_s = 0.5

    def __init__(self, backend: Backend, state: ConsoleState) -> None:
        super().__init__(name=self.view)
        self.backend = backend
        self.state = state
        self.filter_text = ""
        self._painted: tuple[object, ...] | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="view-title")
        yield Input(placeholder="filter (enter)", id="view-filter")
        yield DataTable(id="view-table", cursor_type="row", zebra_stripes=True)
        yield from self.compose_below()
        yield Footer()

    def compose_below(self) -> ComposeResult:
        """A view's own panes under its table."""
        yield from ()

    @property
    def table(self) -> DataTable[Cell]:
        return self.query_one("#view-table", DataTable)

    def on_mount(self) -> None:
        self.query_one("#view-filter", Input).display = False
        self.table.add_columns(*self.columns)
        self.table.focus()
        self.set_interval(self.refresh_s, self.reload)
        self.call_later(self.reload)

    def on_screen_resume(self) -> None:
        self.call_later(self.reload)

    # ---- rows --------------------------------------------------------------------------------
    def rows(self) -> list[Row]:
        raise NotImplementedError

    def heading(self, shown: int) -> str:
        where = f"  filter: {self.filter_text}" if self.filter_text else ""
        return f":{self.view}  {shown} shown{where}   (: switch view · / filter · esc tasks)"

    async def reload(self) -> None:
        """Repaint the table when what it shows changed (views that ask the daemon fetch first)."""
        if not self.is_current:
            return
        await self.fetch()
        self.paint()

    async def fetch(self) -> None:
        """Views that show what the feed does not carry ask the daemon here."""

    def paint(self) -> None:
        rows = self.rows()
        signature = (self.filter_text, *((key, *map(str, cells)) for key, cells in rows))
        if signature == self._painted:
            return
        self._painted = signature
        table = self.table
        keep = self.selected()
        table.clear()
        for key, cells in rows:
            table.add_row(*cells, key=key)
        if keep is not None and keep in table.rows:
            table.move_cursor(row=table.get_row_index(keep))
        self.query_one("#view-title", Static).update(Text(self.heading(len(rows)), style="bold"))
        self.painted()

    def painted(self) -> None:
        """After a repaint (a view's detail pane follows its cursor)."""

    def selected(self) -> str | None:
        table = self.table
        if table.row_count == 0:
            return None
        key: Hashable = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return str(key) if key is not None else None

    # ---- keys and messages -------------------------------------------------------------------
    def action_filter(self) -> None:
        box = self.query_one("#view-filter", Input)
        box.display = True
        box.value = self.filter_text
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.filter_text = event.value.strip()
        event.input.display = False
        self.table.focus()
        self.paint()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()  # the app's handler is the tasks list's filter

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self.painted()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        key = event.row_key.value
        if key is not None:
            self.open(str(key))

    def open(self, key: str) -> None:
        """Enter on a row."""

    def action_back(self) -> None:
        box = self.query_one("#view-filter", Input)
        if box.display:
            box.display = False
            self.table.focus()
            return
        self.app.pop_screen()

    def action_nothing(self) -> None:
        return None
