"""Switching views: the app's part (ConsoleApp is one of these). Each view is made once and
installed, so its filter and cursor are there again when the operator comes back to it."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import App
from textual.binding import Binding, BindingType

from ..backend import Backend
from ..event_log import EventLog
from ..state import ConsoleState
from .command import CommandLine
from .events import EventsScreen
from .host_views import HostsScreen
from .questions import QuestionsScreen
from .upstreams import UpstreamsScreen
from .view_screen import ViewScreen

VIEW_SCREENS: dict[str, type[ViewScreen]] = {
    "questions": QuestionsScreen,
    "hosts": HostsScreen,
    "upstreams": UpstreamsScreen,
}


class ViewsApp(App[None]):
    """`:` and the views; `event_log` (the events view's rows) is fed by the app's receive()."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("colon", "command_line", ":view", show=False)]
    backend: Backend
    state: ConsoleState

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.event_log = EventLog()

    def action_command_line(self) -> None:
        self.push_screen(CommandLine(), self.switch_view)

    def switch_view(self, name: str | None) -> None:
        if name is None:
            return
        while isinstance(self.screen, ViewScreen):
            self.pop_screen()
        if name == "tasks":
            return
        if not self.is_screen_installed(name):
            if name == "events":
                screen: ViewScreen = EventsScreen(self.backend, self.state, event_log=self.event_log)
            else:
                screen = VIEW_SCREENS[name](self.backend, self.state)
            self.install_screen(screen, name)
        self.push_screen(name)

    @property
    def view(self) -> str:
        """The view on show (`tasks` for the main list)."""
        screen = self.screen
        return screen.view if isinstance(screen, ViewScreen) else "tasks"
