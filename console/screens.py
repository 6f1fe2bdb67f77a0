"""The console's small screens: confirm, help, and the answer queue."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, OptionList, Static
from textual.widgets.option_list import Option

from .backend import Backend, BackendError
from .render import age
from .state import ConsoleState, Question

KEYS = """\
[b]Tasks[/b]
  ↑ ↓ / j k   move              enter   answer its question(s)
  g / G       first / last task  home end pgup pgdn   the same, by page
  /           filter by text     s       sort by the next column (S: reverse)
  1-5         show only a status (0: all)     h   hide finished tasks
  c           cancel the task    C       cancel every shown unfinished task
  r           raw JSON           f       its JSON-RPC frames    o  overview
[b]Everywhere[/b]
  a           the answer queue (everything waiting for a person)
  A           approval allowances in force (x revokes one)
  b           terminal bell on new questions on/off (shown top right)
  tab         hosts / tasks      ctrl+p  command palette        ?   these keys
  y           copy the row's mcpx command (cancel, answer, show) to the clipboard
  H           next host (the hosts pane folds into a line when the terminal is narrow)
  ctrl+t      change the theme (remembered)
  q           quit
[b]In the answer queue[/b]
  enter       open the form      y / n   answer a yes/no question
  1-9         pick that option   d       decline     x   cancel the question
"""


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("y", "yes", "yes"), Binding("n,escape", "no", "no")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm"):
            # Wrapped to the dialog's width (console.tcss): a long tool, upstream or host name is read
            # whole at 80x24, not cut at the border. The buttons side by side keep the dialog short.
            yield Static(self.question, id="confirm-question")
            with Horizontal(id="confirm-buttons"):
                yield Button("Yes (y)", variant="error", id="yes")
                yield Button("No (n)", id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_yes(self) -> None:
        self.dismiss(True)

    def action_no(self) -> None:
        self.dismiss(False)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "close", "close")]

    def compose(self) -> ComposeResult:
        with Vertical(id="help"):
            yield Static(KEYS, id="help-keys")

    def action_close(self) -> None:
        self.dismiss(None)


def queue_prompt(state: ConsoleState, q: Question) -> Text:
    host = state.hosts.get(q.connection or "")
    text = Text.assemble((f"{age(q.created_ms):>6}  ", "dim"), (q.kind, "bold yellow"), " from ", (q.upstream, "bold"))
    text.append(f"  {q.message}")
    where = [host.label if host else "?"]
    if q.task_id:
        where.append(f"task {q.task_id[:8]}")
    text.append(f"\n        {' · '.join(where)}", style="dim")
    return text


class QueueScreen(ModalScreen[None]):
    """Every open question across all hosts, oldest first; answered from here."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,a", "close", "close")]

    QUICK = frozenset({"y", "n", "d", "x", *"123456789"})

    def __init__(self, state: ConsoleState, answer_with: Callable[[Question, str], None]) -> None:
        super().__init__()
        self.state = state
        self.answer_with = answer_with  # the app answers: a quick key, or "enter" for the full form

    def compose(self) -> ComposeResult:
        with Vertical(id="queue"):
            yield Label("Waiting for a person — oldest first", id="queue-title")
            yield OptionList(id="queue-list")
            yield Static(
                "enter: answer · y/n: yes/no · 1-9: that option · d: decline · x: cancel · esc: back", id="queue-keys"
            )

    def on_mount(self) -> None:
        self.refresh_queue()

    def refresh_queue(self) -> None:
        lists = self.query("#queue-list").results(OptionList)
        ol = next(lists, None)
        if ol is None:  # pushed but not composed yet (the app flushes meanwhile): on_mount fills it
            return
        current = ol.highlighted_option.id if ol.highlighted_option is not None else None
        questions = self.state.answer_queue()
        ol.set_options([Option(queue_prompt(self.state, q), id=q.id) for q in questions])
        if not questions:
            ol.add_option(Option(Text("nothing is waiting for you", style="dim"), id="none", disabled=True))
            return
        ids = [q.id for q in questions]
        ol.highlighted = ids.index(current) if current in ids else 0

    def _current(self) -> Question | None:
        ol = self.query_one("#queue-list", OptionList)
        option = ol.highlighted_option
        return self.state.questions.get(option.id) if option is not None and option.id else None

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        q = self._current()
        if q is not None:
            self.answer_with(q, "enter")

    def on_key(self, event: events.Key) -> None:
        q = self._current()
        if q is not None and event.key in self.QUICK:
            event.stop()
            self.answer_with(q, event.key)

    def action_close(self) -> None:
        self.dismiss(None)


class AllowancesScreen(ModalScreen[None]):
    """The approval allowances in force (docs/approvals.md): which host may call which gated tool
    unasked, until when, granted by whom; x revokes the highlighted one."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("x", "revoke", "revoke"),
        Binding("escape,A", "close", "close"),
    ]

    def __init__(self, backend: Backend, state: ConsoleState) -> None:
        super().__init__()
        self.backend = backend
        self.state = state

    def compose(self) -> ComposeResult:
        with Vertical(id="allowances"):
            yield Label("Approval allowances in force", id="allowances-title")
            yield OptionList(id="allowances-list")
            yield Static("x: revoke (the host is asked again) · esc: back", id="allowances-keys")

    def on_mount(self) -> None:
        self.run_worker(self.reload(), exclusive=True)

    async def reload(self) -> None:
        ol = self.query_one("#allowances-list", OptionList)
        try:
            found = await self.backend.allowances()
        except BackendError as exc:
            ol.set_options([Option(Text(f"could not list them: {exc}", style="red"), disabled=True)])
            return
        options = []
        for a in found:
            host = self.state.hosts.get(str(a.get("connectionId")))
            text = Text.assemble((f"{a.get('upstream')}/{a.get('tool')}", "bold"), "  for ")
            text.append(host.label if host else str(a.get("connectionId")))
            text.append(f"  until {clock(int(a.get('untilMs') or 0))}  by {a.get('by')}", style="dim")
            options.append(Option(text, id=str(a.get("id"))))
        ol.set_options(options or [Option(Text("no allowances in force", style="dim"), id="none", disabled=True)])
        if options:
            ol.highlighted = 0
            ol.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action == "revoke" and getattr(self.app, "read_only", False))

    def action_revoke(self) -> None:
        option = self.query_one("#allowances-list", OptionList).highlighted_option
        if option is not None and option.id and option.id != "none":
            self.run_worker(self._revoke(option.id), exclusive=True)

    async def _revoke(self, allowance_id: str) -> None:
        try:
            await self.backend.revoke_allowance(allowance_id)
        except BackendError as exc:
            self.app.notify(f"not revoked: {exc}", severity="error")
        await self.reload()

    def action_close(self) -> None:
        self.dismiss(None)


def clock(ms: int) -> str:
    return time.strftime("%H:%M", time.localtime(ms / 1000))
