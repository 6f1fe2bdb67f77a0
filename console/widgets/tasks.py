"""The tasks table: the selected host's tasks (or all), filtered and sorted, kept up to date row by
row from the state's changes (never rebuilt per event; rebuilt only when the view itself changes)."""

from __future__ import annotations

import gc
from bisect import insort
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from rich.markup import escape
from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual._two_way_dict import TwoWayDict
from textual._types import SegmentLines
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.coordinate import Coordinate
from textual.widgets import DataTable
from textual.widgets._data_table import default_cell_formatter
from textual.widgets.data_table import ColumnKey, Row, RowKey

from ..heap import HeapKeeper
from ..render import age, now_ms, short, status_text
from ..state import ConsoleState, SortKey, TaskRow, sort_key
from .columns import COLUMNS, header, widths

# A plain call (no task handle: the host just waits) stands out from the tasks around it.
KIND_TEXT = {"task": Text("task", style="dim"), "call": Text("call", style="bold")}
SORTS: tuple[SortKey, ...] = ("age", "status", "tool", "upstream", "host")
SETTLE_ROWS = 2000  # a rebuild of this many rows settles the heap (console/heap.py)
CELL_CACHE_ROWS = 2000  # rows whose rendered cells are kept (those on screen, and some scrolled past)


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
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "down", show=False),
        Binding("k", "cursor_up", "up", show=False),
        Binding("g", "scroll_top", "first", show=False),
        Binding("G", "scroll_bottom", "last", show=False),
    ]

    """DataTable draws the rows; the order of the rows is kept here.

    DataTable re-sorts by sorting every row with a Python key, renumbers every row after the one
    it removes, and re-derives its row order and line offsets after every cell update: each of
    those is O(rows), 10-45 ms at 10,000 rows, and a busy feed asks for them many times a second.
    So this table keeps the shown tasks in order itself (`_asc`: their row keys, ascending by the
    view's sort key): a new row goes in by bisection, gone rows come out in one pass, and from `_asc` it sets
    DataTable's row numbering (`_row_locations`) and answers its `ordered_rows` and `_y_offsets`,
    only recomputed when the order changed. These are DataTable's own internals (as in Textual 8);
    tests/console/test_console_load.py checks that the rows shown stay the state's, in order.
    """

    def __init__(self, state: ConsoleState, *, heap: HeapKeeper | None = None, id: str | None = None) -> None:
        self.view = View()
        self._asc: list[RowKey] = []  # the shown tasks' rows, ascending by the view's sort key
        self._ordered: list[Row] | None = None  # top to bottom, derived from _asc
        self._offsets: list[tuple[RowKey, int]] | None = None  # each line's row, derived from _asc
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)  # (which reads the three above)
        self.state = state
        self.stats = TableStats()
        self._shown: set[str] = set()
        self.heap = heap or HeapKeeper()  # settled after a big rebuild
        # Per row, until it changes: its cells rendered by Rich, unstyled (see _render_cell), and
        # its lines as drawn at a place (see _render_line_in_row).
        self._cell_lines: dict[RowKey, dict[Hashable, Any]] = {}

    def on_mount(self) -> None:
        sized = widths(self.size.width or 180)
        for key, label in COLUMNS:
            self.add_column(header(key, label, self.view.sort, self.view.descending), key=key, width=sized[key])

    def on_resize(self) -> None:
        """Columns shrink and grow with the table, by priority (columns.py)."""
        sized = widths(self.size.width)
        if all(self.columns[ColumnKey(key)].width == width for key, width in sized.items()):
            return
        for key, width in sized.items():
            self.columns[ColumnKey(key)].width = width
        self._cell_lines.clear()
        self._drop_stale_renders()
        self._require_update_dimensions = True
        self.refresh(layout=True)

    def _label_sort(self) -> None:
        """The sorted column's header says so (▲/▼)."""
        if not self.columns:
            return
        for key, label in COLUMNS:
            self.columns[ColumnKey(key)].label = header(key, label, self.view.sort, self.view.descending)
        self._drop_stale_renders()
        self.refresh()

    # ---- cells -----------------------------------------------------------------------------
    def _cells(self, row: TaskRow, now_ms: int) -> list[Text | str]:
        host = self.state.hosts.get(row.connection or "")
        host_label = Text(host.label if host else "?", style="" if host is None or host.open else "dim")
        message = row.status_message or ""
        if row.cancel_requested_by and not row.terminal:
            message = f"cancelling ({row.cancel_requested_by})"
        # DataTable reads a str cell as Rich markup, so what an upstream or host says is escaped:
        # its "[/x]" would raise, its "[red]" restyle the row. (A str, not a Text: 10,000 rows of
        # Texts are 60,000 more objects for the garbage collector to walk, every time it does.)
        return [
            IdText(row.id),
            KIND_TEXT.get(row.kind, row.kind),
            status_text(row.status, self.state.needs_input(row)),
            escape(row.tool),
            escape(row.upstream),
            host_label,
            age(row.created_ms, now_ms),
            escape(message),
        ]

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> SegmentLines:
        """One cell, as DataTable draws it, but with Rich's rendering of its content kept per row.

        DataTable caches a cell's rendering under its count of changes, so any change anywhere (a
        flush changes a few rows ten times a second) has it render every cell on screen through
        Rich again (~25 ms for a screenful): a keypress just after a flush waited for all of that.
        Here a cell's content is rendered once (Rich: padding, cropping, its own styles) until its
        row changes; the styles of its place (zebra stripe, cursor, hover, the row and column the
        mouse finds there) are put on top every time, as DataTable's `Styled` does."""
        if row_index < 0 or column_index < 0 or self.fixed_rows or self.fixed_columns:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        if row_key is None or column_key is None or self.rows[row_key].height != 1:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        cells = self._row_cache(row_key)
        lines = cells.get((column_key, width))
        if lines is None:
            value = self._data[row_key].get(column_key)
            content = Text() if value is None else default_cell_formatter(value, wrap=False, height=1) or Text()
            if isinstance(content, Text):
                content.overflow = "ellipsis"  # a cut name ends in "…", not mid-word as if whole
            options = self.app.console_options.update_dimensions(width, 1).update(no_wrap=True)
            lines = self.app.console.render_lines(Padding(content, (0, self.cell_padding)), options)
            cells[(column_key, width)] = lines
        component_style, post_style = self._get_styles_to_render_cell(
            False,
            False,
            False,
            hover,
            cursor,
            self.show_cursor,
            self._show_hover_cursor,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css",
        )
        pre_style = base_style + Style.from_meta({"row": row_index, "column": column_index}) + component_style
        return [list(Segment.apply_style(line, pre_style, post_style)) for line in lines]

    def _row_cache(self, row_key: RowKey) -> dict[Hashable, Any]:
        cache = self._cell_lines.get(row_key)
        if cache is None:
            if len(self._cell_lines) >= CELL_CACHE_ROWS:
                self._cell_lines.clear()
            cache = self._cell_lines[row_key] = {}
        return cache

    def _render_line_in_row(
        self,
        row_key: RowKey,
        line_no: int,
        base_style: Style,
        cursor_location: Coordinate,
        hover_location: Coordinate,
    ) -> tuple[SegmentLines, SegmentLines]:
        """A row's line, kept until the row changes. DataTable keys its lines by where the cursor
        is (and its count of changes), so a keypress that moves the cursor draws every row on
        screen again, and so does every flush that adds a row above them (each moves down);
        here only the rows the cursor left and came to, or the rows that changed, are drawn
        again. A line is kept for the stripe it was drawn with (odd or even place), so a row that
        moves keeps its lines; the row number DataTable puts in them for the mouse may then be
        stale, and `_pointed` puts the right one in each mouse event."""
        index = self._row_locations.get(row_key)
        if index is None or self.cursor_type != "row":
            return super()._render_line_in_row(row_key, line_no, base_style, cursor_location, hover_location)
        key = (
            line_no,
            index % 2,  # the zebra stripe
            base_style,
            index == cursor_location.row,
            index == hover_location.row,
            self.show_cursor,
            self._show_hover_cursor,
            self._pseudo_class_state,
            self.size.width,
        )
        lines: dict[Hashable, tuple[SegmentLines, SegmentLines]] = self._row_cache(row_key).setdefault("lines", {})
        line = lines.get(key)
        if line is None:
            if len(lines) >= 4:  # the row moved on (its place, the cursor): what it was drawn as before goes
                lines.clear()
            line = lines[key] = super()._render_line_in_row(
                row_key, line_no, base_style, cursor_location, hover_location
            )
        return line

    def _pointed(self, event: events.MouseEvent) -> None:
        """The row under the pointer into the event's meta, where DataTable's own handlers (which
        run after this) read it: a kept line may carry the row it was drawn at before it moved."""
        meta = event.style.meta
        offset = event.get_content_offset(self)
        header = self.header_height if self.show_header else 0
        if "row" not in meta or offset is None or offset.y < header:
            return
        row = offset.y - header + self.scroll_offset.y
        if meta["row"] != row:
            event.style = event.style + Style.from_meta({**meta, "row": row})

    def _on_mouse_move(self, event: events.MouseMove) -> None:
        self._pointed(event)

    async def _on_click(self, event: events.Click) -> None:
        self._pointed(event)

    def update_cell(
        self, row_key: RowKey | str, column_key: ColumnKey | str, value: Text | str, *, update_width: bool = False
    ) -> None:
        """Only this cell is rendered again (each second every age on screen changes, and only it)."""
        cache = self._cell_lines.get(row_key if isinstance(row_key, RowKey) else RowKey(row_key))
        if cache is not None:
            column = column_key if isinstance(column_key, ColumnKey) else ColumnKey(column_key)
            for key in [k for k in cache if k == "lines" or (isinstance(k, tuple) and k[0] == column)]:
                del cache[key]
        super().update_cell(row_key, column_key, value, update_width=update_width)

    def clear(self, columns: bool = False) -> Self:
        self._cell_lines.clear()
        super().clear(columns)
        return self

    # ---- updates ---------------------------------------------------------------------------
    def rebuild(self) -> None:
        """The view changed (host, filter, sort) or a snapshot arrived: show it afresh."""
        self.stats.rebuilds += 1
        keep = self._cursor_task()
        self._asc, self._ordered, self._offsets = [], None, None
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
        collecting = gc.isenabled()
        gc.disable()  # every object made here lives on: a collection meanwhile would only walk them
        try:
            keys = [self.add_row(*self._cells(row, now), key=row.id) for row in rows]
        finally:
            if collecting:
                gc.enable()
        self._shown = {r.id for r in rows}
        self._asc = keys[::-1] if self.view.descending else keys
        self._label_sort()
        self._ordered = self._offsets = None  # added in the shown order: DataTable's numbering is right
        self._restore_cursor(keep)
        if len(rows) >= SETTLE_ROWS:
            self.heap.settle_now()

    def resort(self) -> None:
        """The sort (column or direction) changed, nothing else: the same rows, put in the new
        order (one sort of their keys, ~10 ms at 10,000 rows), none of them made again (a rebuild
        took ~500 ms)."""
        keep = self._cursor_task()
        # A row whose task the state has let go (expired) but whose removal is not yet applied has
        # nothing to sort by: it goes now, as the next apply would take it anyway.
        gone = {k.value or "" for k in self._asc if (k.value or "") not in self.state.tasks}
        if gone:
            self._drop(gone)
        self._asc.sort(key=self._order_key())
        self._renumber()
        self._label_sort()
        self._restore_cursor(keep)

    def apply(self, changed: set[str], removed: set[str]) -> None:
        """Only these tasks changed: update their rows, add or drop them as the view says, then
        number the rows once for all of them."""
        now = now_ms()
        keep = self._cursor_task()
        gone = removed & self._shown
        added: list[RowKey] = []
        updated = False
        for task_id in changed - gone:
            row = self.state.tasks.get(task_id)
            visible = row is not None and self.view.shows(self.state, row)
            if task_id in self._shown and not visible:
                gone.add(task_id)
            elif row is not None and visible and task_id in self._shown:
                for (key, _label), value in zip(COLUMNS, self._cells(row, now), strict=True):
                    self.update_cell(task_id, key, value)
                self.stats.row_updates += 1
                updated = True
            elif row is not None and visible:
                added.append(self.add_row(*self._cells(row, now), key=task_id))
                self._shown.add(task_id)
                self.stats.rows_added += 1
        # A status change moves a row when sorted by status; nothing else a row shows is a sort key.
        moved = bool(changed) and self.view.sort == "status"
        if not (added or gone or moved):
            if updated:
                self._drop_stale_renders()
            return
        if gone:
            self._drop(gone)
        order = self._order_key()
        if moved:
            self._asc.extend(added)
            self._asc.sort(key=order)
        else:
            for row_key in added:
                insort(self._asc, row_key, key=order)
        self._renumber()
        self.cursor_coordinate = self.cursor_coordinate  # kept within the rows left
        self._restore_cursor(keep)
        self._drop_stale_renders()

    def _drop_stale_renders(self) -> None:
        """DataTable keys its render caches (up to 10,000 cells, 1,000 lines) by a count of changes;
        after a change none of what they hold can be used again, but it stays until pushed out:
        ~100,000 objects at 10,000 rows under a busy feed, each walked by every full garbage
        collection (~50 ms each). Let them go now.

        Textual's LRUCache links its entries in a ring, which its `clear` leaves as one big cycle
        of garbage (lines, strips, segments: ~25 MB in 10 s under this feed) that only a full
        collection frees, and the console holds those back (console/heap.py). So the rings are
        cut first: then each entry goes as soon as nothing uses it."""
        for cache in (self._row_render_cache, self._cell_render_cache, self._row_renderable_cache, self._line_cache):
            _cut_ring(cache)
        self._clear_caches()

    def _order_key(self) -> Callable[[RowKey], tuple[Any, ...]]:
        """A shown task's place: the key `ConsoleState.visible` sorts by."""
        by, tasks = sort_key(self.view.sort), self.state.tasks
        return lambda key: by(tasks[key.value or ""])

    def _drop(self, task_ids: set[str]) -> None:
        """Take these rows out, all at once (the numbering of the rest follows, once)."""
        for task_id in task_ids:
            key = RowKey(task_id)
            del self.rows[key]
            del self._data[key]
            self._new_rows.discard(key)
            self._cell_lines.pop(key, None)
        self._shown -= task_ids
        self._asc = [k for k in self._asc if k.value not in task_ids]
        self.stats.rows_removed += len(task_ids)
        self._require_update_dimensions = True  # fewer rows: a shorter scroll
        self.refresh(layout=True)

    def _renumber(self) -> None:
        """DataTable's row numbers, from `_asc`."""
        top_down = reversed(self._asc) if self.view.descending else self._asc
        self._row_locations = TwoWayDict({key: i for i, key in enumerate(top_down)})
        self._ordered = self._offsets = None
        self._update_count += 1
        self.refresh()

    @property
    def ordered_rows(self) -> list[Row]:
        if self._ordered is None:
            rows = self.rows
            self._ordered = [rows[k] for k in (reversed(self._asc) if self.view.descending else self._asc)]
        return self._ordered

    @property
    def _y_offsets(self) -> list[tuple[RowKey, int]]:
        if self._offsets is None:
            self._offsets = [(row.key, y) for row in self.ordered_rows for y in range(row.height)]
        return self._offsets

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        """DataTable measures every cell of every new row (with Rich: seconds for a 10,000-task
        snapshot) to size the columns that fit their content. Every column here has a fixed width
        and every row one line, so there is nothing to measure: only the scroll size is updated."""
        if any(column.auto_width for column in self.columns.values()):
            super()._update_dimensions(new_rows)
        else:
            super()._update_dimensions(())

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
        self._drop_stale_renders()

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


def _cut_ring(cache: LRUCache[Any, Any]) -> None:
    """Empty each entry of an LRUCache ([prev, next, key, value]): no cycle is left to collect."""
    for link in cache._cache.values():
        link.clear()
    cache.clear()


class IdText(Text):
    """The id column's cell: the short id shown, the full id kept."""

    def __init__(self, task_id: str) -> None:
        super().__init__(short(task_id), style="dim")
        self.task_id = task_id
