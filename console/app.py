"""`mcpx console`: every host's tasks live, what waits for a person, answered and cancelled here.

The app is thin: the feed's messages go into `ConsoleState` (state.py) as they come, and ten
times a second the screen repaints only what they changed (hosts pane prompts, table rows).
"""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path
from typing import ClassVar

import anyio
from rich.text import Text
from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.theme import Theme
from textual.timer import Timer
from textual.widgets import Footer, Input, Static

from . import forms, settings
from .answer_screen import AnswerScreen, TaskAnswersScreen
from .backend import Backend, BackendError
from .cli_equivalent import host_command, task_command
from .commands import ConsoleCommands
from .heap import HeapKeeper
from .notices import config_notice
from .render import now_ms
from .screens import AllowancesScreen, ConfirmScreen, HelpScreen, QueueScreen
from .state import STATUSES, Changes, ConsoleState, Question
from .views.switching import ViewsApp
from .widgets.detail import DetailPane
from .widgets.header import DashboardHeader, EventRate, HeaderFacts, header_text
from .widgets.hosts import HostsPane
from .widgets.scrollbars import use_whole_cell_scrollbars
from .widgets.tasks import SORTS, TasksTable
from .wire import FeedMessage

REFRESH_S = 0.1
HOSTS_S = 1.0  # the hosts pane's counts are repainted at most this often (new or gone hosts at once)
RECONNECT_MAX_S = 5.0
NARROW = 120  # columns: below this the hosts pane folds away into a line above the table (H picks a host)
FILTER_DEBOUNCE_S = 0.15  # the list follows the filter as it is typed, after a pause this long
# Actions that change something on the daemon: off in --read-only (hidden from the footer and palette).
WRITES = frozenset({"cancel", "cancel_shown", "answer_selected"})


class ConsoleApp(ViewsApp):
    CSS_PATH = "console.tcss"
    TITLE = "mcpx console"
    COMMANDS = App.COMMANDS | {ConsoleCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "queue", "answer queue"),
        Binding("A", "allowances", "allowances", show=False),
        Binding("slash", "filter", "filter"),
        Binding("s", "sort", "sort"),
        Binding("S", "reverse", "reverse", show=False),
        Binding("h", "hide_finished", "hide done"),
        Binding("b", "toggle_bell", "bell"),
        Binding("c", "cancel", "cancel"),
        Binding("C", "cancel_shown", "cancel shown", show=False),
        Binding("r", "detail('raw')", "raw", show=False),
        Binding("f", "detail('frames')", "frames", show=False),
        Binding("o", "detail('overview')", "overview", show=False),
        *(Binding(str(i + 1), f"only('{s}')", show=False) for i, s in enumerate(STATUSES)),
        Binding("0", "only('')", show=False),
        Binding("y", "copy_command", "copy cmd"),
        Binding("H", "next_host", "next host", show=False),
        Binding("ctrl+t", "change_theme", "theme", show=False),
        Binding("question_mark", "help", "keys"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(
        self,
        backend: Backend,
        *,
        bell: bool = True,
        toasts: bool = True,
        refresh_s: float = REFRESH_S,
        read_only: bool = False,
        settings_file: Path | None = None,
    ) -> None:
        super().__init__()
        use_whole_cell_scrollbars()
        self.backend = backend
        self.read_only = read_only  # watching a shared daemon: no cancel, no answer
        self.settings_file = settings_file or settings.settings_path()
        self.rate = EventRate()
        self.daemon_version: str | None = None
        self.daemon_started_ms: int | None = None  # by the console's clock, from /v1/status's uptimeS
        self.state = ConsoleState()
        self.bell_on_question = bell  # the terminal bell when something new needs input (b toggles)
        self.toasts = toasts  # a toast when something new needs input (errors and confirmations show anyway)
        self.refresh_s = refresh_s
        self.link = "connecting"  # connecting | connected | reconnecting | no daemon
        self.link_detail = ""
        self._pending = Changes()
        self._hosts_pending: set[str] = set()  # hosts whose counts changed since the pane was painted
        self._hosts_painted = 0.0
        self._topbar: tuple[Text, float] | None = None
        self.heap = HeapKeeper()
        self._arrivals: deque[float] = deque()  # event receipt times, for the rate shown
        self._detail_for: str | None = None
        self._filter_timer: Timer | None = None
        self._table_height = 0
        self.flushes = 0

    # ---- layout ----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield DashboardHeader(id="header")
        with Horizontal(id="main"):
            yield HostsPane(self.state, id="hosts")
            with Vertical(id="right"):
                yield Static(id="hostbar")
                yield Input(placeholder="filter: text in id, tool, upstream, host, message", id="filter")
                yield TasksTable(self.state, heap=self.heap, id="tasks")
                yield DetailPane(id="detail")
        yield Footer()

    @property
    def table(self) -> TasksTable:
        return self.query_one("#tasks", TasksTable)

    @property
    def hosts_pane(self) -> HostsPane:
        return self.query_one("#hosts", HostsPane)

    @property
    def detail(self) -> DetailPane:
        return self.query_one("#detail", DetailPane)

    def on_mount(self) -> None:
        self._load_theme()
        self.heap.hold()
        self.query_one("#filter", Input).display = False
        self.table.focus()
        self.set_interval(self.refresh_s, self.flush)
        self.set_interval(1.0, self._tick)
        self._paint_topbar()
        self.follow_feed()

    async def on_unmount(self) -> None:
        self.heap.release()
        await self.backend.aclose()

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key):
            self.heap.key()  # the operator is at the keys: no settling of the heap just now
        await super().on_event(event)

    # ---- the feed --------------------------------------------------------------------------
    @work(exclusive=True, group="feed")
    async def follow_feed(self) -> None:
        """Forever: follow the feed; after a drop or a restart, resume from the last sequence."""
        delay = 0.2
        while True:
            try:
                async for message in self.backend.feed(self.state.seq):
                    if self.link != "connected":
                        self.link, self.link_detail, delay = "connected", "", 0.2
                        self.load_status()
                    self.receive(message)
            except BackendError as exc:
                self.link = "no daemon" if "no daemon" in str(exc) else "reconnecting"
                self.link_detail = str(exc)
            self._paint_topbar()
            await anyio.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX_S)

    def receive(self, message: FeedMessage) -> None:
        """One feed message into the state; the screen catches up at the next flush."""
        if message.get("type") == "event":
            self._arrivals.append(time.monotonic())
            self.rate.count()
        self._pending.merge(self.state.apply(message))
        self.event_log.apply(message)
        notice = config_notice(message)  # a config reload: a toast, whatever the toasts setting (it is rare)
        if notice is not None:
            self.notify(notice.text, title=notice.title, severity=notice.severity, timeout=8)

    def _open(self) -> bool:
        """Not closing: while the app closes, its timers and workers can run after its widgets went."""
        return self.is_running

    def flush(self) -> None:
        """Repaint what changed since the last flush, and nothing else."""
        if not self._open():
            return
        pending, self._pending = self._pending, Changes()
        self._paint_topbar()
        self.heap.tick()
        self._hosts_pending |= pending.hosts
        if pending.reset:
            self._paint_hosts(everything=True)
        elif self._hosts_pending and (
            time.monotonic() - self._hosts_painted >= HOSTS_S or not self.hosts_pane.lists(self._hosts_pending)
        ):
            self._paint_hosts()
        if pending.empty:
            return
        self.flushes += 1
        if pending.reset:
            self.table.rebuild()
        elif pending.tasks or pending.removed_tasks:
            self.table.apply(pending.tasks, pending.removed_tasks)
        self._fit_table()
        for screen in self.screen_stack:
            if isinstance(screen, QueueScreen) and (pending.questions or pending.reset):
                screen.refresh_queue()
            if isinstance(screen, AnswerScreen):  # a question answered elsewhere closes in its form at once
                for qid in pending.questions:
                    why = self.state.closed_why.get(qid)
                    if why is not None and qid not in self.state.questions:
                        screen.closed_elsewhere(qid, why)
        if pending.new_questions:
            q = self.state.questions.get(pending.new_questions[-1])
            if q is not None and self.toasts:
                approval = forms.approval_of(q.wire.get("params") or {})  # mcpx asks, not the server
                said = forms.form_spec(q.wire).title if approval is not None else f"{q.upstream} asks: {q.message}"
                self.notify(said, title="needs input", timeout=6)
            if q is not None and self.bell_on_question:
                self.bell()
        if self._detail_for is not None and (pending.reset or self._detail_for in pending.tasks):
            self.load_detail(self._detail_for)

    def _paint_hosts(self, *, everything: bool = False) -> None:
        """The hosts pane: its counts change with most events, but a count that is a second late
        misleads no one, and repainting the pane ten times a second costs every keypress."""
        self.hosts_pane.refresh_hosts(None if everything else self._hosts_pending)
        self._hosts_pending = set()
        self._hosts_painted = time.monotonic()

    def _tick(self) -> None:
        if self._open():
            self.table.tick_ages()
            self.detail.tick()
            self.query_one(DashboardHeader).spark(self.rate.next_second())

    def _paint_topbar(self) -> None:
        now = time.monotonic()
        while self._arrivals and self._arrivals[0] < now - 5:
            self._arrivals.popleft()
        counts = self.state.host_counts(None)
        facts = HeaderFacts(
            where=self.backend.label(),
            link=self.link,
            link_detail=self.link_detail,
            working=counts["working"],
            waiting=len(self.state.questions),
            failed=counts["failed"],
            tasks=len(self.state.tasks),
            version=self.daemon_version,
            started_ms=self.daemon_started_ms,
            now_ms=now_ms(),
            bell=self.bell_on_question,
            read_only=self.read_only,
            others=[o for o in self.state.operators if o != self.backend.operator],
            narrow=self.size.width < NARROW,
        )
        shown = (header_text(facts), round(len(self._arrivals) / 5, 1))
        if shown != self._topbar:  # (one line, always: no layout)
            self._topbar = shown
            self.query_one(DashboardHeader).paint(*shown)

    @work(exclusive=True, group="status")
    async def load_status(self) -> None:
        """The daemon's version and uptime (`/v1/status`), once per connection: the uptime then
        counts on here."""
        try:
            status = await self.backend.status()
        except BackendError:
            return
        self.daemon_version = str(status.get("version") or "") or None
        uptime = status.get("uptimeS")
        self.daemon_started_ms = now_ms() - int(float(uptime) * 1000) if isinstance(uptime, int | float) else None
        if self._open():
            self._paint_topbar()

    # ---- selection and detail --------------------------------------------------------------
    def on_hosts_pane_picked(self, event: HostsPane.Picked) -> None:
        table = next(iter(self.query("#tasks").results(TasksTable)), None)
        if table is None:
            return  # a pick still queued while the screen is torn down (seen under load): no table left
        if event.host_id == table.view.host:
            return  # the pane re-highlighting the same host (every snapshot does): nothing to redo
        table.view.host = event.host_id
        table.rebuild()
        self._fit_table()
        self._paint_hostbar()

    def on_data_table_row_highlighted(self, event: TasksTable.RowHighlighted) -> None:
        task_id = event.row_key.value if event.row_key is not None else None
        if task_id and task_id != self._detail_for:
            self._detail_for = task_id
            self.load_detail(task_id)

    def on_data_table_row_selected(self, event: TasksTable.RowSelected) -> None:
        """Enter on a task: answer its open question, if it has one."""
        self.action_answer_selected()

    @work(exclusive=True, group="detail")
    async def load_detail(self, task_id: str) -> None:
        await anyio.sleep(0.05)  # a burst of highlights (scrolling) fetches only the last one
        try:
            task = await self.backend.task(task_id)
            frames = await self.backend.frames(task_id) if self._open() and self.detail.mode == "frames" else None
        except BackendError as exc:
            if self._open():
                self.detail.show_error(task_id, str(exc))
            return
        if not self._open():
            return  # closed meanwhile: the pane is gone
        host = self.state.hosts.get(task.get("connectionId") or "")
        self.detail.show(task, host.label if host else "?", frames)

    def action_detail(self, mode: str) -> None:
        self.detail.mode = mode  # type: ignore[assignment]  # one of the three bound modes
        if self._detail_for is not None:
            self.load_detail(self._detail_for)

    # ---- the view --------------------------------------------------------------------------
    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        """The list follows the filter as it is typed (once typing pauses: a rebuild of 10,000
        rows per key would lag the keys)."""
        if event.input.id == "filter":
            if self._filter_timer is not None:
                self._filter_timer.stop()
            self._filter_timer = self.set_timer(FILTER_DEBOUNCE_S, self._apply_filter)

    def _apply_filter(self) -> None:
        self._filter_timer = None
        text = self.query_one("#filter", Input).value.strip()
        if text != self.table.view.text:
            self.table.view.text = text
            self.table.rebuild()
            self._fit_table()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            if self._filter_timer is not None:
                self._filter_timer.stop()
            self._apply_filter()
            event.input.display = bool(event.value.strip())
            self.table.focus()

    def action_sort(self) -> None:
        view = self.table.view
        view.sort = SORTS[(SORTS.index(view.sort) + 1) % len(SORTS)]
        self.flush()  # the table catches up with the state first: re-sorting reads every row's task
        self.table.resort()
        self.notify(f"sorted by {view.sort}", timeout=2)

    def action_reverse(self) -> None:
        self.table.view.descending = not self.table.view.descending
        self.flush()
        self.table.resort()

    def action_hide_finished(self) -> None:
        self.table.view.hide_finished = not self.table.view.hide_finished
        self.table.rebuild()

    def action_only(self, status: str) -> None:
        self.table.view.statuses = frozenset({status}) if status else frozenset()
        self.table.rebuild()

    def action_toggle_bell(self) -> None:
        self.bell_on_question = not self.bell_on_question
        self._paint_topbar()
        self.notify(f"terminal bell {'on' if self.bell_on_question else 'off'} for new questions", timeout=2)

    def action_toggle_toasts(self) -> None:
        self.toasts = not self.toasts
        self.notify(f"toasts {'on' if self.toasts else 'off'} for new questions", timeout=2)

    def action_cursor(self, where: str) -> None:
        """The tasks table's cursor, from the palette: top, bottom, down, up."""
        table = self.table
        moves = {
            "top": table.action_scroll_top,
            "bottom": table.action_scroll_bottom,
            "down": table.action_cursor_down,
            "up": table.action_cursor_up,
        }
        table.focus()
        moves[where]()

    def on_resize(self, event: events.Resize) -> None:
        """Narrow: the hosts pane folds into one line above the table (H moves to the next host)."""
        narrow = event.size.width < NARROW
        self.set_class(narrow, "-narrow")
        self._paint_hostbar()
        self._fit_table()
        self._topbar = None  # the top line drops a word or two when narrow

    def _fit_table(self) -> None:
        """As tall as its rows, up to 60%: a short list leaves the rest to the detail pane, not to
        blank lines. Set only when it changes (CSS height: auto would lay the screen out again at
        every flush that adds a row, even at 10,000 rows)."""
        table = next(iter(self.query("#tasks").results(TasksTable)), None)
        if table is None:
            return
        height = min(table.row_count + 1, max(3, int(self.size.height * 0.6)))
        if height != self._table_height:
            self._table_height = height
            table.styles.height = height

    def _paint_hostbar(self) -> None:
        table = next(iter(self.query("#tasks").results(TasksTable)), None)
        host = self.state.hosts.get(table.view.host or "") if table is not None else None
        label = "all hosts" if host is None else host.label
        bar = Text.assemble(("host: ", "dim"), (label, "bold"), ("  (H: next host)", "dim"))
        self.query_one("#hostbar", Static).update(bar)

    def action_next_host(self) -> None:
        pane = self.hosts_pane
        if pane.option_count:
            pane.highlighted = ((pane.highlighted or 0) + 1) % pane.option_count

    def action_copy_command(self) -> None:
        """The `mcpx` command that does what this row offers, to the clipboard (OSC 52)."""
        if self.focused is self.hosts_pane:
            command = host_command(self.state.hosts.get(self.table.view.host or ""))
        else:
            row = self.state.tasks.get(self.table.selected() or "")
            if row is None:
                self.notify("no task selected", timeout=2)
                return
            asked = [q for q in self.state.answer_queue() if q.task_id == row.id]
            command = task_command(row, asked)
        self.copy_to_clipboard(command)
        self.notify(command, title="copied", timeout=4)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (self.read_only and action in WRITES)

    def _load_theme(self) -> None:
        name = settings.load(self.settings_file).get("theme")
        if isinstance(name, str) and name in self.available_themes:
            self.theme = name
        self.theme_changed_signal.subscribe(self, self._save_theme)

    def _save_theme(self, theme: Theme) -> None:
        """Remembered for the next run, per user (console/settings.py)."""
        try:
            settings.save(self.settings_file, theme=theme.name)
        except OSError as exc:
            self.notify(f"theme not remembered: {exc}", severity="warning", timeout=4)

    def action_focus_hosts(self) -> None:
        self.hosts_pane.focus()

    def action_focus_tasks(self) -> None:
        self.table.focus()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    # ---- answering -------------------------------------------------------------------------
    def action_queue(self) -> None:
        self.push_screen(QueueScreen(self.state, self.answer))

    def action_allowances(self) -> None:
        self.push_screen(AllowancesScreen(self.backend, self.state))

    def action_answer_selected(self) -> None:
        task_id = self.table.selected()
        asked = [q for q in self.state.answer_queue() if q.task_id == task_id]
        if len(asked) > 1:  # several: together in one screen, or one by one there
            self.push_screen(TaskAnswersScreen([q.wire for q in asked], self._submit))
        elif asked:
            self.answer(asked[0], "enter")

    def answer(self, q: Question, key: str) -> None:
        """A key pressed on a question: the full form (enter) or a quick answer."""
        if self.read_only:
            self.notify("read-only: answering is off in this console", timeout=3)
            return
        if key == "enter":
            self.push_screen(AnswerScreen(q.wire, lambda answer: self._submit(q.id, answer)))
            return
        quick = forms.quick_answer(q.wire, key)
        if quick is None:
            self.notify("this question needs its form: press enter", timeout=3)
            return
        self.send_answer(q.id, quick)

    async def _submit(self, qid: str, answer: forms.Answer) -> dict[str, str] | None:
        try:
            await self.backend.answer(qid, answer.action, answer.content, answer.result)
        except BackendError as exc:
            return exc.fields or {"": str(exc)}
        return None

    @work(group="answers")
    async def send_answer(self, qid: str, answer: forms.Answer) -> None:
        refused = await self._submit(qid, answer)
        if refused:
            self.notify("; ".join(f"{k or 'answer'}: {v}" for k, v in refused.items()), severity="error", timeout=6)
        else:
            self.notify(f"answered: {answer.action}", timeout=2)

    # ---- cancelling ------------------------------------------------------------------------
    def action_cancel(self) -> None:
        task_id = self.table.selected()
        row = self.state.tasks.get(task_id or "")
        if row is None or row.terminal:
            self.notify("pick a task that has not ended", timeout=3)
            return
        host = self.state.hosts.get(row.connection or "")
        question = f"Cancel task {row.id[:8]} ({row.tool} on {row.upstream}) of {host.label if host else '?'}?"

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.cancel_tasks([row.id])

        self.push_screen(ConfirmScreen(question), confirmed)

    def action_cancel_shown(self) -> None:
        ids = [t for t in self.table.shown() if not self.state.tasks[t].terminal]
        if not ids:
            self.notify("no unfinished task is shown", timeout=3)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.cancel_tasks(ids)

        self.push_screen(ConfirmScreen(f"Cancel the {len(ids)} unfinished tasks shown?"), confirmed)

    @work(group="cancels")
    async def cancel_tasks(self, ids: list[str]) -> None:
        failed = 0
        for task_id in ids:
            try:
                await self.backend.cancel(task_id)
            except BackendError as exc:
                failed += 1
                last = str(exc)
        if failed:
            self.notify(f"{failed} of {len(ids)} not cancelled: {last}", severity="warning", timeout=6)
        else:
            self.notify(f"cancel sent for {len(ids)} task{'s' if len(ids) > 1 else ''}", timeout=3)
