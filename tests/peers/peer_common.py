"""Stdlib-only helpers shared by the peer drivers in this folder (hosts and upstreams alike).

Every driver runs as a script from its own peer venv (``<venv python> tests/peers/<driver>.py``),
so Python puts this folder first on ``sys.path`` and ``import peer_common`` works in each venv.
Nothing here may import a third-party package: the venvs have different ones (and mcpx's own
environment has none of them). What needs an SDK stays in the SDK family's base driver
(``sdk1_host.py``, ``sdk2_host.py``, ``fastmcp_host.py``, ``fastmcp_upstream.py``), which the
``q_*`` driver of the same family imports.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any

# ---- hosts: output lines ------------------------------------------------------------------------


def emit(line: dict[str, Any]) -> None:
    """Print one JSON output line and flush it (the tests read stdout line by line)."""
    sys.stdout.write(json.dumps(line, default=str) + "\n")
    sys.stdout.flush()


def leaf(exc: BaseException) -> BaseException:
    """The first non-group exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def error_of(
    exc: BaseException, rpc_error: type[BaseException], detail: Callable[[Any], Any] | None = None
) -> dict[str, Any]:
    """A failure as ``{"code", "message"[, "data"]}`` for a JSON-RPC error (an ``rpc_error``
    instance; ``detail`` picks the object holding ``code``/``message``/``data``, default the
    exception itself), else ``{"code": null, "message", "type"}``."""
    exc = leaf(exc)
    if isinstance(exc, rpc_error):
        rpc = exc if detail is None else detail(exc)
        err: dict[str, Any] = {"code": rpc.code, "message": rpc.message}
        if rpc.data is not None:
            err["data"] = rpc.data
        return err
    return {"code": None, "message": str(exc) or repr(exc), "type": type(exc).__name__}


@contextmanager
def step_errors(out: dict[str, Any], error: Callable[[BaseException], dict[str, Any]]) -> Iterator[None]:
    """Around a step: any failure becomes data in its line (``ok: false``, ``error``), never a crash."""
    try:
        yield
    except Exception as exc:
        out["ok"] = False
        out["error"] = error(exc)


def step_line(step: dict[str, Any]) -> dict[str, Any]:
    """The start of a step's output line: ``op``, ``ok: true`` (always the second key), ``id``."""
    out: dict[str, Any] = {"op": step.get("op"), "ok": True}
    if "id" in step:
        out["id"] = step["id"]
    return out


async def run_host(
    connect: Callable[[], AbstractAsyncContextManager[Any]],
    connect_line: Callable[[Any], dict[str, Any]],
    run_step: Callable[[Any, dict[str, Any], int], Awaitable[dict[str, Any]]],
    steps: list[dict[str, Any]],
    error: Callable[[BaseException], dict[str, Any]],
) -> int:
    """A host's run: ``async with connect() as peer``, print ``connect_line(peer)``, then the line
    ``run_step(peer, step, N)`` of each step N (from 1). Returns the exit code: 0, also when steps
    failed, or when the connection broke afterwards (a final ``disconnect`` line; the lines already
    printed stand); 2 after a ``connect`` line with ``ok: false``. An interrupt or ``SystemExit``
    goes on."""
    connected = False
    try:
        async with connect() as peer:
            connected = True
            emit(connect_line(peer))
            for n, step in enumerate(steps, start=1):
                emit(await run_step(peer, step, n))
    except BaseException as exc:
        if isinstance(leaf(exc), KeyboardInterrupt) or isinstance(exc, SystemExit):
            raise
        if not connected:
            emit({"op": "connect", "ok": False, "error": error(exc)})
            return 2
        emit({"op": "disconnect", "ok": False, "error": error(exc)})
    return 0


# ---- hosts: progress, questions and parallel steps ----------------------------------------------


def progress_item(progress: float, total: float | None, message: str | None) -> dict[str, Any]:
    item: dict[str, Any] = {"progress": progress}
    if total is not None:
        item["total"] = total
    if message is not None:
        item["message"] = message
    return item


class Progress:
    """A progress callback ``(progress, total, message)`` that keeps every report in ``seen``."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append(progress_item(progress, total, message))


class Answerer:
    """Base of the ``q_*`` hosts' elicitation callbacks: a question is answered with the ``answer``
    of the step in progress (none: decline), and ``asked`` records the questions of that step."""

    def __init__(self) -> None:
        self.answer: dict[str, Any] | None = None
        self.asked: list[dict[str, Any]] = []

    def start(self, step: dict[str, Any]) -> None:
        """A new step: its ``answer``, nothing asked yet."""
        self.answer, self.asked = step.get("answer"), []


async def run_parallel(
    steps: list[dict[str, Any]],
    run: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]],
    task_group: Callable[[], Any],
) -> list[dict[str, Any] | None]:
    """Run ``run(step)`` for every step concurrently in ``task_group()`` (the SDK's async library,
    e.g. ``anyio.create_task_group``); the output lines in step order."""
    results: list[dict[str, Any] | None] = [None] * len(steps)

    async def run_one(i: int, sub: dict[str, Any]) -> None:
        results[i] = await run(sub)

    async with task_group() as tg:
        for i, sub in enumerate(steps):
            tg.start_soon(run_one, i, sub)
    return results


# ---- hosts: command line --------------------------------------------------------------------


def host_parser(
    description: str | None, *, stdio: bool = False, answerer: str | None = None
) -> argparse.ArgumentParser:
    """The options every host driver has: ``--url`` (with ``stdio``, or ``--stdio`` and a command
    after ``--``), ``--script`` and ``--timeout``; with ``answerer`` (what the driver's elicitation
    answerer is to the SDK: "callback", "handler") also ``--no-elicitation``."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    url_help = "Streamable HTTP endpoint, e.g. http://127.0.0.1:8000/mcp"
    if stdio:
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--url", help=url_help)
        target.add_argument("--stdio", action="store_true", help="spawn the server given after --")
    else:
        parser.add_argument("--url", required=True, help=url_help)
    parser.add_argument("--script", default="[]", help="JSON list of steps, or @FILE")
    parser.add_argument("--timeout", type=float, default=30.0, help="default per-request read timeout (s)")
    if answerer is not None:
        parser.add_argument(
            "--no-elicitation", action="store_true", help=f"no elicitation {answerer} (capability not declared)"
        )
    return parser


def parse_cli(
    parser: argparse.ArgumentParser, argv: list[str] | None = None, *, command: bool = False
) -> tuple[argparse.Namespace, list[dict[str, Any]]]:
    """Parse the arguments and load ``--script`` (a JSON list of steps, or ``@FILE``). With
    ``command``, everything after ``--`` is the command to spawn (``args.command``)."""
    if command:
        argv = list(sys.argv[1:] if argv is None else argv)
        spawn: list[str] = []
        if "--" in argv:
            i = argv.index("--")
            argv, spawn = argv[:i], argv[i + 1 :]
    args = parser.parse_args(argv)
    if command:
        args.command = spawn
    script = args.script
    if script.startswith("@"):
        with open(script[1:], encoding="utf-8") as f:
            script = f.read()
    steps = json.loads(script)
    if not isinstance(steps, list):
        parser.error("--script must be a JSON list of steps")
    return args, steps


def stdio_command(args: argparse.Namespace) -> tuple[str, list[str], dict[str, str] | None]:
    """``--stdio``: the command after ``--`` and the ``--env NAME=VALUE`` variables for it."""
    if not args.command:
        raise SystemExit("--stdio needs a command after --")
    env = dict(item.partition("=")[::2] for item in args.env) or None
    return args.command[0], args.command[1:], env


def parse_headers(raw: Iterable[str]) -> dict[str, str]:
    """``--header 'Name: value'`` options as a dict."""
    headers = {}
    for item in raw:
        name, _, value = item.partition(":")
        headers[name.strip()] = value.strip()
    return headers


def http_request_logger(path: str) -> Callable[[Any], Awaitable[None]]:
    """An httpx ``request`` event hook appending ``{"method","url","headers","body"}`` to ``path``."""

    async def log_request(request: Any) -> None:
        line: dict[str, Any] = {"method": request.method, "url": str(request.url), "headers": dict(request.headers)}
        try:
            body = request.content
        except Exception:  # a streaming body is not readable here
            body = b""
        if body:
            try:
                line["body"] = json.loads(body)
            except ValueError:
                line["body"] = body.decode("utf-8", "replace")
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")

    return log_request


# ---- upstreams ------------------------------------------------------------------------------


class Events:
    """``--events FILE``: ``events(name, **fields)`` appends ``{"event", "t", "pid", ...}`` as one
    JSON line; nothing is written while ``path`` is None."""

    def __init__(self) -> None:
        self.path: str | None = None

    def __call__(self, event: str, **fields: Any) -> None:
        if self.path is None:
            return
        line = json.dumps({"event": event, "t": time.time(), "pid": os.getpid(), **fields})
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


async def serve_uvicorn(server: Any, port: int, ready_file: str | None) -> None:
    """Serve ``server`` (a ``uvicorn.Server``) on 127.0.0.1:``port`` (0: any free port); once it
    has started, write the bound port to ``ready_file`` (atomically). Returns when it stops."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    bound = sock.getsockname()[1]
    serving = asyncio.ensure_future(server.serve([sock]))
    while not server.started:
        if serving.done():  # it failed (or stopped) before it started
            await serving
            return
        await asyncio.sleep(0.02)
    if ready_file:
        tmp = ready_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(bound))
        os.replace(tmp, ready_file)
    await serving
