"""`:` opens a one-line command prompt, k9s-style: a view's name (or a unique prefix, or an alias
such as `up`), completed as it is typed (tab or → takes the suggestion); enter switches to it."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.suggester import Suggester
from textual.widgets import Input, Label, Static

from . import names


class ViewSuggester(Suggester):
    """Suggests the first view whose name starts with what was typed."""

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=False)

    async def get_suggestion(self, value: str) -> str | None:
        return names.complete(value)


class CommandLine(ModalScreen[str | None]):
    DEFAULT_CSS = """
    CommandLine { align: center top; }
    CommandLine #command { width: 70; height: auto; margin-top: 3; border: thick $accent; background: $surface; }
    CommandLine #command-row { height: 3; }
    CommandLine #command-colon { width: 2; padding: 1 0 0 1; text-style: bold; }
    CommandLine #command-input { width: 1fr; }
    CommandLine #command-choices { color: $text-muted; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "close"),
        Binding("tab", "take_suggestion", "complete", priority=True),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(id="command"):
            with Horizontal(id="command-row"):
                yield Label(":", id="command-colon")
                yield Input(
                    placeholder="tasks, questions, hosts, upstreams, events",
                    suggester=ViewSuggester(),
                    id="command-input",
                )
            yield Static(" ".join(names.VIEWS), id="command-choices")

    def on_mount(self) -> None:
        self.query_one("#command-input", Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        found = names.completions(event.value)
        self.query_one("#command-choices", Static).update(" ".join(found) if found else "no such view")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        view = names.resolve(event.value)
        if view is None:
            self.query_one("#command-choices", Static).update(
                f"no view {event.value.strip()!r}: " + " ".join(names.VIEWS)
            )
            return
        self.dismiss(view)

    def action_take_suggestion(self) -> None:
        box = self.query_one("#command-input", Input)
        suggestion = names.complete(box.value)
        if suggestion is not None:
            box.value = suggestion
            box.cursor_position = len(suggestion)

    def action_close(self) -> None:
        self.dismiss(None)
