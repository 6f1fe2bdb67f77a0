"""`l` on an upstream: its stderr log's last lines, followed live by asking the daemon each second
(`GET /v1/upstreams/{name}/stderr`): cheap, and it never floods the feed."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..backend import Backend, BackendError

TAIL = 200
START_MARK = "--- mcpx: started"  # the line each start writes (mcpx/upstream/stdio/process.py)


def stderr_text(name: str, body: dict[str, object]) -> Text:
    lines = body.get("lines")
    shown = [str(line) for line in lines] if isinstance(lines, list) else []
    code = body.get("exitCode")
    head = f"{name}: {body.get('state')}" + ("" if code is None else f", last exit code {code}")
    text = Text(head + "\n", style="bold")
    if not shown:
        text.append("(nothing written to stderr yet)" if body.get("logPath") else "(an HTTP upstream: no stderr)")
    for line in shown:
        text.append(line + "\n", style="dim" if line.startswith(START_MARK) else "")
    return text


class StderrScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    StderrScreen { align: center middle; }
    StderrScreen #stderr { width: 95%; height: 85%; border: thick $accent; background: $surface; padding: 0 1; }
    StderrScreen #stderr-keys { width: 95%; color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,l,q", "close", "close")]

    def __init__(self, backend: Backend, name: str) -> None:
        super().__init__()
        self.backend = backend
        self.upstream = name
        self.lines: list[str] = []
        self._shown: tuple[object, ...] | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="stderr"):
            yield Static(f"{self.upstream}: reading its stderr…", id="stderr-body")
        yield Static("following live · esc close", id="stderr-keys")

    def on_mount(self) -> None:
        self.set_interval(1.0, self.reload)
        self.call_later(self.reload)

    async def reload(self) -> None:
        try:
            body = await self.backend.upstream_stderr(self.upstream, TAIL)
        except BackendError as exc:
            self.query_one("#stderr-body", Static).update(Text(f"{self.upstream}: {exc}", style="red"))
            return
        lines = body.get("lines")
        self.lines = [str(line) for line in lines] if isinstance(lines, list) else []
        seen = (tuple(self.lines), body.get("state"), body.get("exitCode"))
        if seen == self._shown:
            return
        self._shown = seen
        self.query_one("#stderr-body", Static).update(stderr_text(self.upstream, body))
        self.query_one("#stderr", VerticalScroll).scroll_end(animate=False)

    def action_close(self) -> None:
        self.dismiss(None)
