"""The hosts pane: every connection with its task counts, and an "all hosts" entry on top."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from ..render import STATUS_STYLE
from ..state import ConsoleState, Host

ALL = "all"


def counts_lines(counts: dict[str, int], width: int) -> Text:
    """ " 3 working 1 input 2 completed", broken between counts (never inside "2 failed") to fit `width`."""
    text, used = Text(" "), 1
    for status, n in counts.items():
        if not n:
            continue
        part = f"{n} {status.replace('input_required', 'input')}"
        if used > 1 and used + 1 + len(part) > width:
            text.append("\n ")
            used = 1
        elif used > 1:
            text.append(" ")
            used += 1
        text.append(part, style=STATUS_STYLE.get(status, ""))
        used += len(part)
    return text


def host_prompt(state: ConsoleState, host: Host | None, width: int = 36) -> Text:
    counts = state.host_counts(None if host is None else host.id)
    if host is None:
        text = Text("All hosts", style="bold")
        asking = bool(state.questions)
    else:
        asking = state.host_needs_input(host.id)
        text = Text(host.label, style="bold" if host.open else "dim")
    if asking:  # on the name's line: the counts' line can fill the pane's width
        text.append(
            "  ? asks", style="bold yellow"
        )  # "?" as the status column marks it (a flag glyph is wide in some fonts)
    if host is not None:
        details = [host.revision or "2026-07-28", host.transport, host.kind]
        if host.principal:
            details.append(f"@{host.principal}")
        text.append("\n " + " · ".join(details), style="dim")
        if not host.open:
            text.append(" · closed", style="dim italic")
    text.append("\n")
    text.append_text(counts_lines(counts, width))
    return text


class HostsPane(OptionList):
    """Selecting a host filters the tasks table to it."""

    class Picked(Message):
        def __init__(self, host_id: str | None) -> None:
            super().__init__()
            self.host_id = host_id

    def __init__(self, state: ConsoleState, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.state = state
        self._order: list[str] = []
        self._width = 0  # the width the prompts were laid out for

    def _prompt_width(self) -> int:
        return max(12, self.scrollable_content_region.width - 2)  # (an option's padding)

    def on_resize(self) -> None:
        if self._order and self._prompt_width() != self._width:
            self._order = []  # laid out again at the new width
            self.refresh_hosts()

    def lists(self, host_ids: set[str]) -> bool:
        """Are these hosts in the pane already (a new one is worth painting at once)?"""
        return host_ids <= set(self._order)

    def refresh_hosts(self, changed: set[str] | None = None) -> None:
        """Rebuild when the set of hosts changed; otherwise repaint only the changed prompts."""
        hosts = self.state.hosts_shown()
        order = [ALL, *(h.id for h in hosts)]
        width = self._width = self._prompt_width()
        if order != self._order:
            highlighted = self.highlighted_option.id if self.highlighted_option is not None else ALL
            self.set_options(
                [Option(host_prompt(self.state, None, width), id=ALL)]
                + [Option(host_prompt(self.state, h, width), id=h.id) for h in hosts]
            )
            self._order = order
            self.highlighted = order.index(highlighted) if highlighted in order else 0
            return
        self.replace_option_prompt(ALL, host_prompt(self.state, None, width))
        by_id = {h.id: h for h in hosts}
        for host_id in changed or set(by_id):
            if host_id in by_id:
                self.replace_option_prompt(host_id, host_prompt(self.state, by_id[host_id], width))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        host_id = event.option.id
        self.post_message(self.Picked(None if host_id in (None, ALL) else host_id))
