"""The command palette (ctrl+p): every console action by name."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from .state import STATUSES

ACTIONS: list[tuple[str, str, str]] = [
    ("Answer queue", "queue", "everything waiting for a person, oldest first"),
    ("Approval allowances", "allowances", "which host may call which gated tool unasked; revoke them"),
    ("Answer the selected task's questions", "answer_selected", "the form of each open question, or all in one"),
    ("Cancel the selected task", "cancel", "with a confirmation"),
    ("Cancel every shown unfinished task", "cancel_shown", "bulk cancel of the filtered tasks, with a count"),
    ("Filter tasks by text", "filter", "id, tool, upstream, host, status message"),
    ("Sort by the next column", "sort", "age, status, tool, upstream, host"),
    ("Reverse the sort", "reverse", ""),
    ("Hide or show finished tasks", "hide_finished", ""),
    ("Show all statuses", "only('')", ""),
    *((f"Show only {s.replace('_', ' ')} tasks", f"only('{s}')", "") for s in STATUSES),
    ("Task details: overview", "detail('overview')", ""),
    ("Task details: raw JSON", "detail('raw')", ""),
    ("Task details: JSON-RPC frames", "detail('frames')", "as the daemon relayed them"),
    ("Go to the first task", "cursor('top')", "g"),
    ("Go to the last task", "cursor('bottom')", "G"),
    ("Next task", "cursor('down')", "j or down"),
    ("Previous task", "cursor('up')", "k or up"),
    ("Go to the hosts pane", "focus_hosts", ""),
    ("Go to the tasks table", "focus_tasks", ""),
    ("Terminal bell on or off", "toggle_bell", "rung when something new needs input"),
    ("Toasts on or off", "toggle_toasts", "shown when something new needs input"),
    ("Copy the row's mcpx command", "copy_command", "the CLI command that does the same (y)"),
    ("Next host", "next_host", "the tasks of the next host in the hosts pane (H)"),
    ("Change theme", "change_theme", "remembered for the next run (ctrl+t)"),
    ("Keys", "help", "every key binding"),
    ("Quit", "quit", ""),
]


class ConsoleCommands(Provider):
    def _run(self, action: str) -> Callable[[], object]:
        return partial(self.app.run_action, action)  # an App's own method: no need to know which app

    def _actions(self) -> list[tuple[str, str, str]]:
        """Those the app allows now (in --read-only, none that cancels or answers)."""
        app = self.app
        return [a for a in ACTIONS if app.check_action(a[1].split("(")[0], ()) is not False]

    async def discover(self) -> Hits:
        for name, action, help_text in self._actions():
            yield DiscoveryHit(name, self._run(action), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, action, help_text in self._actions():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), self._run(action), help=help_text)
