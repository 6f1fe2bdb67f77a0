"""The URL of an upstream's OAuth sign-in, to open in a browser on the daemon's machine (its redirect
comes back to the daemon on loopback). `y` copies it; the upstream turns `ready` once it is done."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, Static


class SignInScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("y", "copy", "copy URL"), Binding("escape,q", "close", "close")]
    DEFAULT_CSS = """
    SignInScreen { align: center middle; }
    #sign-in { width: 90%; height: auto; border: round $accent; padding: 1 2; background: $surface; }
    #sign-in-url { margin: 1 0; color: $text; }
    """

    def __init__(self, name: str, url: str) -> None:
        super().__init__()
        self.upstream = name
        self.url = url

    def compose(self) -> ComposeResult:
        with Vertical(id="sign-in"):
            yield Label(f"Sign in to {self.upstream}: open this URL in a browser on the daemon's machine")
            yield Static(self.url, id="sign-in-url", markup=False)
            yield Label("y copy the URL   esc close (the sign-in goes on; the upstream turns ready when it is done)")

    def action_copy(self) -> None:
        self.app.copy_to_clipboard(self.url)
        self.notify("sign-in URL copied", timeout=3)

    def action_close(self) -> None:
        self.dismiss(None)
