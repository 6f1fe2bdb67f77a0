"""`:upstreams`: each configured server's state, era, tools, restarts, last exit and error (or the
tools mcpx leaves out of its listing, and why), as `/v1/status` knows them (asked each second). `l`
tails its stderr, `r` restarts it after asking, `i` starts the OAuth sign-in of an HTTP server
(`needs login`) and shows the URL to copy."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType

from ..backend import BackendError
from ..screens import ConfirmScreen
from .sign_in import SignInScreen
from .stderr import StderrScreen
from .view_screen import Row, ViewScreen

STATE_STYLE = {
    "ready": "green",
    "starting": "yellow",
    "restarting": "bold yellow",
    "down": "bold red",
    "needs login": "bold magenta",
}


def upstream_row(u: dict[str, Any]) -> Row:
    code = u.get("exitCode")
    left_out = [t for t in u.get("leftOutTools") or [] if isinstance(t, dict)]
    # Its last error, else the tools mcpx leaves out of its listing and why (SEP-2243).
    problem = (
        Text(str(u["lastError"]), style="red")
        if u.get("lastError")
        else Text("; ".join(f"left out {t.get('name')}: {t.get('reason')}" for t in left_out), style="yellow")
    )
    return (
        str(u["name"]),
        (
            str(u["name"]),
            str(u.get("transport") or ""),
            Text(str(u.get("state") or ""), style=STATE_STYLE.get(str(u.get("state")), "")),
            f"{u.get('era') or '-'} {u.get('revision') or ''}".strip(),
            str(u.get("tools", 0)),
            str(u.get("restarts", 0)),
            "-" if code is None else str(code),
            problem,
        ),
    )


class UpstreamsScreen(ViewScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("l", "tail", "stderr"),
        Binding("r", "restart", "restart"),
        Binding("i", "sign_in", "sign in"),
    ]
    view = "upstreams"
    columns = ("name", "transport", "state", "era", "tools", "restarts", "exit", "last error")
    refresh_s = 1.0

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.upstreams: list[dict[str, Any]] = []
        self.problem: str | None = None

    async def fetch(self) -> None:
        try:
            self.upstreams, self.problem = await self.backend.upstreams(), None
        except BackendError as exc:
            self.problem = str(exc)

    def rows(self) -> list[Row]:
        text = self.filter_text.lower()
        rows = [upstream_row(u) for u in self.upstreams]
        return [r for r in rows if not text or text in " ".join(map(str, r[1])).lower()]

    def heading(self, shown: int) -> str:
        base = super().heading(shown)
        return f"{base}   ! {self.problem}" if self.problem else base

    def action_tail(self) -> None:
        name = self.selected()
        if name is not None:
            self.app.push_screen(StderrScreen(self.backend, name))

    def open(self, key: str) -> None:
        self.app.push_screen(StderrScreen(self.backend, key))

    def action_restart(self) -> None:
        name = self.selected()
        if name is None:
            return
        if getattr(self.app, "read_only", False):
            self.notify("read-only: restarting is off in this console", timeout=3)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._restart(name), group="restart")

        self.app.push_screen(
            ConfirmScreen(f"Restart {name}? Its calls in flight fail; it starts again at once."), confirmed
        )

    async def _restart(self, name: str) -> None:
        try:
            await self.backend.restart_upstream(name)
        except BackendError as exc:
            self.notify(f"restart refused: {exc}", severity="error", timeout=6)
            return
        self.notify(f"{name}: restart asked", timeout=3)
        await self.reload()

    def action_sign_in(self) -> None:
        name = self.selected()
        if name is None:
            return
        if getattr(self.app, "read_only", False):
            self.notify("read-only: signing in is off in this console", timeout=3)
            return
        self.run_worker(self._sign_in(name), group="sign-in")

    async def _sign_in(self, name: str) -> None:
        try:
            started = await self.backend.login_upstream(name)
        except BackendError as exc:
            self.notify(f"sign-in refused: {exc}", severity="error", timeout=8)
            return
        url = started.get("authorizationUrl")
        if not isinstance(url, str):
            self.notify(
                f"{name}: signed in" if started.get("signedIn") else f"{name}: {started.get('error')}", timeout=5
            )
            return
        self.app.push_screen(SignInScreen(name, url))
