"""The CLI's way to the running daemon: its info file, its token, `/v1` over HTTP and the feed.

Only the public API is used here (REST with httpx, the `/v1/events` websocket with
`websockets.sync`); nothing of the daemon's internals is imported.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import httpx

from ..config import state_files

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_RUNNING = 3  # `mcpx status` only (the LSB convention for a status query)
EXIT_WAITING = 75  # EX_TEMPFAIL: `tasks show` of a task that waits for input


class CliError(Exception):
    """Ends the command: the message goes to stderr, `code` is the exit code."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


class ApiError(CliError):
    """The daemon answered with an error status; `error` and `fields` are its body."""

    def __init__(self, status: int, error: str, fields: dict[str, str] | None) -> None:
        super().__init__(f"{error} (HTTP {status})")
        self.status = status
        self.error = error
        self.fields = fields or {}


def running_daemon(folder: Path) -> dict[str, Any] | None:
    """The info file of the daemon serving `folder`, if its process is alive."""
    info = state_files.read_info(folder)
    if info is None or not state_files.pid_alive(info.get("pid")):
        return None
    return info


def daemon_endpoint(folder: Path) -> tuple[str, str] | None:
    """The running daemon's base URL and the state folder's token, or None: how any client (the
    CLI, the console) finds /v1 (what else it learns of the daemon, it learns there)."""
    info = running_daemon(folder)
    if info is None:
        return None
    try:
        token = (folder / state_files.TOKEN).read_text().strip()
    except OSError:
        return None
    return f"http://127.0.0.1:{int(info['port'])}", token


class Api:
    """`/v1` of the daemon whose state folder is `folder`, with the folder's token."""

    def __init__(self, folder: Path, info: dict[str, Any], timeout: float = 10.0) -> None:
        self.folder = folder
        self.info = info
        self.port = int(info["port"])
        self.token = (folder / state_files.TOKEN).read_text().strip()
        self.client = httpx.Client(
            base_url=f"http://127.0.0.1:{self.port}",
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=timeout,
        )

    @classmethod
    def open(cls, folder: Path) -> Api:
        info = running_daemon(folder)
        if info is None:
            raise CliError(f"no daemon running for {folder} (start one with `mcpx daemon`)")
        try:
            return cls(folder, info)
        except (OSError, KeyError, ValueError) as exc:
            raise CliError(f"cannot use the daemon's info or token in {folder}: {exc}") from None

    def _call(
        self, method: str, path: str, params: dict[str, Any] | None = None, body: dict[str, Any] | None = None
    ) -> Any:
        try:
            resp = self.client.request(method, path, params=params, json=body)
        except httpx.HTTPError as exc:
            pid = self.info.get("pid")
            raise CliError(f"daemon pid {pid} does not answer on port {self.port}: {exc}") from None
        try:
            answer = resp.json()
        except ValueError:
            answer = None
        if resp.is_success:
            return answer
        if isinstance(answer, dict) and isinstance(answer.get("error"), str):
            fields = answer.get("fields")
            raise ApiError(resp.status_code, answer["error"], fields if isinstance(fields, dict) else None)
        raise ApiError(resp.status_code, resp.text.strip() or resp.reason_phrase, None)

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        return self._call("GET", path, params={k: v for k, v in (params or {}).items() if v is not None})

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self._call("POST", path, body=body)

    def delete(self, path: str) -> Any:
        return self._call("DELETE", path)

    def feed(self, subscribe: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Every message of the `/v1/events` websocket after sending `subscribe`; ends when it closes."""
        from websockets.exceptions import ConnectionClosed, InvalidHandshake
        from websockets.sync.client import connect

        url = f"ws://127.0.0.1:{self.port}/v1/events"
        try:
            ws = connect(url, additional_headers={"Authorization": f"Bearer {self.token}"}, max_size=None)
        except (OSError, InvalidHandshake) as exc:
            raise CliError(f"cannot open the event feed at {url}: {exc}") from None
        with ws:
            ws.send(json.dumps({"type": "subscribe", **subscribe}))
            try:
                for text in ws:
                    message = json.loads(text)
                    if isinstance(message, dict):
                        yield message
            except ConnectionClosed:
                pass
            close = ws.protocol.close_rcvd
            if close is not None and close.code in (1001, 1012):  # going away, service restart
                raise CliError(f"the daemon is stopping (feed closed with code {close.code})")
            if close is not None and close.code != 1000:
                raise CliError(f"the daemon closed the feed: {close.reason or 'no reason'} (code {close.code})")

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Api:
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


AMBIGUOUS_SHOWN = 10  # matches an ambiguous short id lists


def resolve_id(api: Api, kind: Literal["task", "question"], given: str, *, known: bool = True) -> str:
    """The whole id `given` names: itself, or the one id it starts (the console and `mcpx tasks
    watch` show 8 characters), like git's short hashes. None: "no such ..." (exit 1), or with
    `known=False` (the event log still names tasks that expired) `given` as it is; several: they
    are listed, exit 2."""
    path = f"/v1/{kind}s"
    try:
        api.get(f"{path}/{given}")
        return given
    except ApiError as exc:
        if exc.status != 404:
            raise
    params: dict[str, Any] = {"idPrefix": given, "limit": AMBIGUOUS_SHOWN + 1}
    if kind == "question":
        params["status"] = ["open", "answered", "expired", "abandoned"]
    ids = [row["id"] for row in api.get(path, params)[f"{kind}s"]] if given else []
    if len(ids) == 1:
        return str(ids[0])
    if not ids:
        if not known:
            return given
        raise CliError(f"no such {kind}: {given}")
    more = " (and more)" if len(ids) > AMBIGUOUS_SHOWN else ""
    listed = "\n  ".join(ids[:AMBIGUOUS_SHOWN])
    raise CliError(f"{given!r} is ambiguous: it starts these {kind} ids{more}:\n  {listed}", EXIT_USAGE)
