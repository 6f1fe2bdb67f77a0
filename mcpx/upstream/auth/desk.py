"""Every HTTP upstream's OAuth state, and where sign-ins come back to.

The desk makes one `UpstreamAuth` per HTTP upstream (kept across its restarts and across reloads that
leave its URL and `oauth` unchanged), remembers each started sign-in by its `state`, and completes
it when the browser returns: to the daemon's own `/oauth/callback` (api/oauth_callback.py), or to a
listener on `oauth.callbackPort` that it opens for the sign-in and closes after (loopback.py).
"""

from __future__ import annotations

import html
import logging
from contextlib import suppress
from typing import Any

import anyio
import httpx
from anyio.abc import TaskGroup, TaskStatus

from ...config.servers import ServerConfig
from . import fetch, loopback
from .auth_errors import AuthError
from .upstream_auth import OnEvent, Redirects, UpstreamAuth
from .vault import Vault

log = logging.getLogger("mcpx.upstream.auth")

CALLBACK_PATH = "/oauth/callback"
CLOSE_AFTER_S = 2.0  # a callback-port listener stays this long after its last sign-in ended


class Desk(Redirects):
    def __init__(self, vault: Vault, on_event: OnEvent, http: httpx.AsyncClient | None = None) -> None:
        self.vault = vault
        self.on_event = on_event
        self.http = http or fetch.new_client()
        self.auths: dict[str, UpstreamAuth] = {}
        self._keys: dict[str, tuple[str, Any]] = {}  # name -> (url, oauth) the auth was made for
        self._pending: dict[str, UpstreamAuth] = {}  # a login's state -> its upstream
        self._port: int | None = None
        self._listeners: dict[int, anyio.CancelScope] = {}
        self._tg: TaskGroup | None = None

    def for_server(self, name: str, cfg: ServerConfig) -> UpstreamAuth | None:
        """The auth of an HTTP upstream (None: stdio, or `headers` carries its own Authorization)."""
        if cfg.transport != "http" or cfg.url is None or cfg.static_authorization:
            return None
        key = (cfg.url, cfg.oauth.model_dump() if cfg.oauth is not None else None)
        held = self.auths.get(name)
        if held is not None and self._keys.get(name) == key:
            return held
        auth = UpstreamAuth(name, cfg.url, cfg.oauth, self.vault, self.http, self, self.on_event)
        self.auths[name] = auth
        self._keys[name] = key
        return auth

    async def run(self, *, task_status: TaskStatus[None]) -> None:
        """Holds the callback-port listeners' task group for the daemon's life."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                task_status.started()
                await anyio.sleep_forever()
        finally:
            self._tg = None
            with anyio.CancelScope(shield=True):
                await self.http.aclose()

    def listening(self, port: int) -> None:
        """The daemon serves on 127.0.0.1:`port` (its `/oauth/callback` is there)."""
        self._port = port

    # ---- Redirects -----------------------------------------------------------------------------
    async def redirect_uri(self, auth: UpstreamAuth) -> str:
        port = auth.oauth.callbackPort
        if port is None:
            if self._port is None:
                raise AuthError("the daemon is not serving yet")
            return f"http://127.0.0.1:{self._port}{CALLBACK_PATH}"
        if port not in self._listeners:
            if self._tg is None:
                raise AuthError("the daemon is not serving yet")
            scope = anyio.CancelScope()
            try:
                await self._tg.start(self._listen, port, scope)
            except OSError as exc:
                raise AuthError(
                    f"cannot listen on 127.0.0.1:{port} (oauth.callbackPort): {exc.strerror or exc}"
                ) from None
            self._listeners[port] = scope
        return f"http://localhost:{port}/callback"

    async def _listen(self, port: int, scope: anyio.CancelScope, *, task_status: TaskStatus[None]) -> None:
        with scope:
            await loopback.serve(port, self.complete, task_status=task_status)

    def pending(self, state: str, auth: UpstreamAuth) -> None:
        self._pending[state] = auth

    def done(self, state: str) -> None:
        auth = self._pending.pop(state, None)
        port = auth.oauth.callbackPort if auth is not None else None
        if port is not None and self._tg is not None:
            # Later, not now: the browser's own request may be what completes the sign-in, and its
            # answer still has to go out on this listener.
            self._tg.start_soon(self._close_later, port)

    async def _close_later(self, port: int) -> None:
        await anyio.sleep(CLOSE_AFTER_S)
        if not any(a.oauth.callbackPort == port for a in self._pending.values()):
            scope = self._listeners.pop(port, None)
            if scope is not None:
                scope.cancel()

    # ---- the browser comes back -----------------------------------------------------------------
    async def complete(self, query: dict[str, str]) -> tuple[int, str]:
        """A redirect back: (HTTP status, the page the person sees)."""
        auth = self._pending.get(query.get("state", ""))
        if auth is None:
            return 400, page(
                "Sign-in not recognised", "This sign-in is unknown or already used. Run `mcpx login NAME` again."
            )
        try:
            login = await auth.complete(query)
        except AuthError as exc:
            return 400, page(f"Sign-in to {auth.name} failed", str(exc))
        if login.error is not None:
            return 400, page(f"Sign-in to {auth.name} failed", login.error)
        return 200, page(f"Signed in to {auth.name}", "mcpx has its token. You can close this tab.")

    async def aclose(self) -> None:
        for scope in self._listeners.values():
            scope.cancel()
        self._listeners.clear()
        with suppress(Exception):
            await self.http.aclose()


def page(title: str, text: str) -> str:
    return (
        "<!doctype html><meta charset=utf-8><title>mcpx: "
        + html.escape(title)
        + "</title><body style='font-family:sans-serif;margin:3em'><h1>"
        + html.escape(title)
        + "</h1><p>"
        + html.escape(text)
        + "</p></body>"
    )
