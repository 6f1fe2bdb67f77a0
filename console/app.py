"""`mcpx console`: every host's tasks live, what waits for a person, answered and cancelled here.

The app is thin: the feed's messages go into `ConsoleState` (state.py) as they come, and ten
times a second the screen repaints only what they changed (hosts pane prompts, table rows).
"""

from __future__ import annotations

import time
from collections import deque
from typing import ClassVar

import anyio
from rich.text import Text
from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Input, Static

from . import forms
from .answer_screen import AnswerScreen, TaskAnswersScreen
from .backend import Backend, BackendError
from .commands import ConsoleCommands
from .heap import HeapKeeper
from .screens import AllowancesScreen, ConfirmScreen, HelpScreen, QueueScreen
from .state import STATUSES, Changes, ConsoleState, Question
from .views.switching import ViewsApp
from .widgets.detail import DetailPane
from .widgets.hosts import HostsPane
from .widgets.tasks import SORTS, TasksTable
from .wire import FeedMessage

REFRESH_S = 0.1
HOSTS_S = 1.0  # the hosts pane's counts are repainted at most this often (new or gone hosts at once)
RECONNECT_MAX_S = 5.0


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
        Binding("question_mark", "help", "keys"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(
        self, backend: Backend, *, bell: bool = True, toasts: bool = True, refresh_s: float = REFRESH_S
    ) -> None:
        super().__init__()
        self.backend = backend
        self.state = ConsoleState()
        self.bell_on_question = bell  # the terminal bell when something new needs input (b toggles)
        self.toasts = toasts  # a toast when something new needs input (errors and confirmations show anyway)
        self.refresh_s = refresh_s
        self.link = "connecting"  # connecting | connected | reconnecting | no daemon
        self.link_detail = ""
        self._pending = Changes()
        self._hosts_pending: set[str] = set()  # hosts whose counts changed since the pane was painted
        self._hosts_painted = 0.0
        self._topbar: Text | None = None
        self.heap = HeapKeeper()
        self._arrivals: deque[float] = deque()  # event receipt times, for the rate shown
        self._detail_for: str | None = None
        self.flushes = 0

    # ---- layout ----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="topbar")
        with Horizontal(id="main"):
            yield HostsPane(self.state, id="hosts")
            with Vertical(id="right"):
                yield Input(placeholder="filter: text in id, tool, upstream, host, message (enter)", id="filter")
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
        self._pending.merge(self.state.apply(message))
        self.event_log.apply(message)

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
                self.notify(f"{q.upstream} asks: {q.message}", title="needs input", timeout=6)
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

    def _paint_topbar(self) -> None:
        now = time.monotonic()
        while self._arrivals and self._arrivals[0] < now - 5:
            self._arrivals.popleft()
        rate = len(self._arrivals) / 5
        style = {"connected": "bold green", "connecting": "yellow", "reconnecting": "bold yellow"}.get(
            self.link, "bold red"
        )
        text = Text.assemble(("mcpx console ", "bold"), (self.backend.label(), "cyan"), "  ")
        text.append(f"● {self.link} ", style=style)
        if self.link_detail and self.link != "connected":
            text.append(f" ({self.link_detail})", style="dim")
        waiting = len(self.state.questions)
        text.append(f"    {rate:.1f} ev/s   {len(self.state.tasks)} tasks   ")
        text.append(
            f"{waiting} waiting for you" if waiting else "nothing waiting", style="bold yellow" if waiting else "dim"
        )
        text.append(f"   bell {'on' if self.bell_on_question else 'off'}", style="dim")
        others = [o for o in self.state.operators if o != self.backend.operator]
        if others:
            text.append(f"   also answering: {', '.join(others)}", style="cyan")
        if text != self._topbar:  # (one line, always: no layout)
            self._topbar = text
            self.query_one("#topbar", Static).update(text, layout=False)

    # ---- selection and detail --------------------------------------------------------------
    def on_hosts_pane_picked(self, event: HostsPane.Picked) -> None:
        table = next(iter(self.query("#tasks").results(TasksTable)), None)
        if table is None:
            return  # a pick still queued while the screen is torn down (seen under load): no table left
        if event.host_id == table.view.host:
            return  # the pane re-highlighting the same host (every snapshot does): nothing to redo
        table.view.host = event.host_id
        table.rebuild()

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

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self.table.view.text = event.value.strip()
            event.input.display = bool(event.value.strip())
            self.table.rebuild()
            self.table.focus()

    def action_sort(self) -> None:
        view = self.table.view
        view.sort = SORTS[(SORTS.index(view.sort) + 1) % len(SORTS)]
        self.table.rebuild()
        self.notify(f"sorted by {view.sort}", timeout=2)

    def action_reverse(self) -> None:
        self.table.view.descending = not self.table.view.descending
        self.table.rebuild()

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
