"""The console's top line, a dashboard: where the daemon is and whether the feed is live, what is
working, waiting for you and failed, the daemon's version and uptime, and the events per second of
the last `SPARK_S` seconds as a sparkline (at the right end, with the rate)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Sparkline, Static

from ..render import age

SPARK_S = 20  # seconds the sparkline shows, one bar each
LINK_STYLE = {"connected": "bold green", "connecting": "yellow", "reconnecting": "bold yellow"}


@dataclass
class HeaderFacts:
    """Everything the top line says, gathered by the app (so the text is a pure function of it)."""

    where: str
    link: str
    link_detail: str = ""
    working: int = 0
    waiting: int = 0
    failed: int = 0
    tasks: int = 0
    version: str | None = None
    started_ms: int | None = None  # the daemon's start, by the console's clock (from /v1/status's uptimeS)
    now_ms: int = 0
    bell: bool = True
    read_only: bool = False
    others: list[str] = field(default_factory=list)
    narrow: bool = False


def header_text(f: HeaderFacts) -> Text:
    text = Text()
    if f.read_only:
        text.append(" READ-ONLY ", style="bold reverse")
        text.append(" ")
    link_style = LINK_STYLE.get(f.link, "bold red")
    if f.narrow and f.link == "connected":  # (80 columns: what waits for you first, the address dropped)
        text.append("●", style=link_style)
    else:
        text.append("mcpx console ", style="bold")
        text.append(f.where, style="cyan")
        text.append(f"  ● {f.link}", style=link_style)
    if f.link_detail and f.link != "connected":
        text.append(f" ({f.link_detail})", style="dim")
    text.append("  ")
    text.append(
        f"{f.waiting} waiting for you" if f.waiting else "nothing waiting", style="bold yellow" if f.waiting else "dim"
    )
    text.append(f"   {f.working} working", style="bold cyan" if f.working else "dim")
    text.append(f"   {f.failed} failed", style="bold red" if f.failed else "dim")
    if not f.narrow:
        text.append(f"   {f.tasks} tasks", style="dim")
    if f.version is not None:
        text.append(f"   v{f.version}", style="dim")
    if f.started_ms is not None:
        text.append(f" up {age(f.started_ms, f.now_ms)}", style="dim")
    text.append(f"   bell {'on' if f.bell else 'off'}", style="dim")
    if f.others:
        text.append(f"   also answering: {', '.join(f.others)}", style="cyan")
    return text


class EventRate:
    """Events counted per second: the last `SPARK_S` seconds' counts for the sparkline."""

    def __init__(self) -> None:
        self.seconds: deque[int] = deque([0] * SPARK_S, maxlen=SPARK_S)
        self.current = 0

    def count(self) -> None:
        self.current += 1

    def next_second(self) -> list[int]:
        self.seconds.append(self.current)
        self.current = 0
        return list(self.seconds)


class DashboardHeader(Horizontal):
    DEFAULT_CSS = """
    DashboardHeader { height: 1; background: $boost; padding: 0 1; }
    DashboardHeader #topbar { width: 1fr; height: 1; }
    DashboardHeader #rate { width: 12; height: 1; margin-left: 1; }
    DashboardHeader #spark { width: 20; height: 1; }
    """

    def compose(self) -> ComposeResult:
        yield Static(id="topbar")
        yield Static("0.0 ev/s", id="rate")
        yield Sparkline([0] * SPARK_S, id="spark")

    def paint(self, text: Text, rate: float) -> None:
        """One line each, always: no layout."""
        self.query_one("#topbar", Static).update(text, layout=False)
        self.query_one("#rate", Static).update(f"{rate:6.1f} ev/s", layout=False)

    def spark(self, counts: list[int]) -> None:
        self.query_one("#spark", Sparkline).data = counts
