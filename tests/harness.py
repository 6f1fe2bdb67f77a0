"""Real processes for end-to-end tests: the mcpx daemon, fixture upstreams, and a raw host client.

Every daemon started here records the frames it sends to hosts (MCPX_WIRE_LOG); when it stops,
each frame is checked against its revision's JSON schema, and a bad frame fails the test.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import daemon_launcher
import httpx
import pytest
from wire_schema import check_wire_log

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "upstream_server.py"
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
# One scaled time unit for waits in tests (slow CI machines: raise MCPX_TEST_TIME_SCALE).
UNIT = float(os.environ.get("MCPX_TEST_TIME_SCALE", "1"))


def modern_meta(**extra: Any) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "pytest", "version": "0"},
    }
    meta.update(extra)
    return meta


def wait_until(pred: Any, timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout * UNIT
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class FixtureHttp:
    """The fixture upstream as an HTTP server process."""

    def __init__(self, tmp: Path, *args: str, name: str = "fixture") -> None:
        self.log = tmp / f"{name}-http.log.jsonl"
        ready = tmp / f"{name}-http.port"
        with open(tmp / f"{name}-http.stderr", "wb") as err:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    str(FIXTURE),
                    "http",
                    "--port",
                    "0",
                    "--ready-file",
                    str(ready),
                    "--log",
                    str(self.log),
                    "--name",
                    name,
                    *args,
                ],
                stdin=subprocess.DEVNULL,
                stderr=err,
            )
        port = wait_until(lambda: ready.exists() and ready.read_text().strip(), what="fixture HTTP server")
        self.url = f"http://127.0.0.1:{int(port)}/mcp"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def stdio_server(tmp: Path, *args: str, name: str = "fixture", **mcpx: Any) -> dict[str, Any]:
    """A config entry running the fixture upstream over stdio, logging to tmp/<name>.log.jsonl."""
    entry: dict[str, Any] = {
        "command": sys.executable,
        "args": [str(FIXTURE), "stdio", "--log", str(tmp / f"{name}.log.jsonl"), "--name", name, *args],
    }
    if mcpx:
        entry["mcpx"] = mcpx
    return entry


CONFORMANCE_SERVER = ROOT / "tests" / "conformance" / "server.py"


def conformance_server(*args: str, also_tasks: tuple[str, ...] = ()) -> dict[str, Any]:
    """A config entry running the conformance fixture over stdio with its tools under their own
    names, its two question-asking tools (and `also_tasks`) allowed to run as tasks, so both eras
    can ask mid-task."""
    names = ("test_elicitation", "confirm_delete", *also_tasks)
    tools = {name: {"taskSupport": "optional"} for name in names}
    return {
        "command": sys.executable,
        "args": [str(CONFORMANCE_SERVER), "stdio", *args],
        "mcpx": {"passthrough": True, "tools": tools},
    }


@dataclass(frozen=True)
class SuiteStore:
    """Where the daemons of a test keep their state: the embedded SQLite file in each state folder,
    or PostgreSQL, a fresh database on the run's cluster for each daemon. The `suite_store` fixture
    (conftest) runs every daemon test on each store MCPX_TEST_STORES names."""

    kind: str  # "sqlite" | "postgres"
    cluster: Any = None  # pgcluster.Cluster when kind == "postgres"

    def entry(self) -> dict[str, str] | None:
        """The `store` config entry a new daemon gets (None: the SQLite default)."""
        return {"url": str(self.cluster.database())} if self.kind == "postgres" else None


SQLITE = SuiteStore("sqlite")
# A test of the SQLite file itself (its mode, a full disk) runs on that store only.
sqlite_only = pytest.mark.parametrize("suite_store", ["sqlite"], indirect=True)
# A test whose daemons name their PostgreSQL store in their own config runs once.
postgres_only = pytest.mark.parametrize("suite_store", ["postgres"], indirect=True)


class Daemon:
    """`mcpx daemon` as a real process on 127.0.0.1 with its own state folder. A config without a
    `store` of its own gets `store`'s (a fresh PostgreSQL database, or the SQLite default)."""

    def __init__(
        self,
        tmp: Path,
        config: dict[str, Any] | None,
        *,
        store: SuiteStore,
        extra_args: list[str] | None = None,
        name: str = "daemon",
        wire_log: bool = True,
    ) -> None:
        """`wire_log=False`: no test-only frame log (a flood or a benchmark: a line a frame)."""
        self.tmp = tmp
        self.state_dir = tmp / f"{name}-state"
        self.config_path = tmp / f"{name}-config.json"
        config = dict(config or {"mcpServers": {}})
        if "store" not in config and (entry := store.entry()) is not None:
            config["store"] = entry
        self.store_url: str | None = config.get("store", {}).get("url")
        self.config_path.write_text(json.dumps(config))
        self.wire_log: Path | None = tmp / f"{name}-wire.jsonl" if wire_log else None
        self.stderr_path = tmp / f"{name}.stderr"
        self.extra_args = extra_args or []
        self.proc: subprocess.Popen[bytes] | daemon_launcher.ForkedDaemon | None = None
        self.port = 0

    def start(self, wait_upstreams: bool = True, port: int | None = None) -> Daemon:
        """Start (or restart); `port` pins the listen port, e.g. to restart where hosts point."""
        # PYTHONPATH: the daemon runs the checkout under test, whatever else pip has installed.
        env = dict(
            os.environ,
            MCPX_WIRE_LOG=str(self.wire_log or ""),  # empty: off, as in a real deployment
            PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
        )
        (self.state_dir / "daemon.json").unlink(missing_ok=True)
        argv = [
            "daemon",
            "--config",
            str(self.config_path),
            "--state-dir",
            str(self.state_dir),
            "--port",
            str(port or 0),
            *self.extra_args,
        ]
        if daemon_launcher.ENABLED:
            self.proc = daemon_launcher.ForkedDaemon(argv, env, self.tmp, self.stderr_path)
        else:
            with open(self.stderr_path, "ab") as err:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "mcpx", *argv],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                    env=env,
                    cwd=self.tmp,
                )

        def ready() -> Any:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode}: {self.stderr()}")
            info = self.state_dir / "daemon.json"
            return info.exists() and json.loads(info.read_text())

        info = wait_until(ready, 20, "daemon info file")
        self.port = info["port"]
        if wait_upstreams:
            self.wait_upstreams()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def token(self) -> str:
        return (self.state_dir / "token").read_text().strip()

    def status(self) -> dict[str, Any]:
        return httpx.get(
            f"http://127.0.0.1:{self.port}/v1/status", headers={"Authorization": f"Bearer {self.token}"}, timeout=5
        ).json()

    def wait_upstreams(self, state: str = "ready") -> None:
        wait_until(lambda: all(u["state"] == state for u in self.status()["upstreams"]), 20, f"upstreams {state}")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def store_rows(self, sql: str, *args: object) -> list[tuple[Any, ...]]:
        """Run `sql` (`?` placeholders) on this daemon's store, whichever it is, as another process
        would: tests read rows behind the daemon's back, or break its tables."""
        if self.store_url is None:
            with contextlib.closing(sqlite3.connect(self.state_dir / "mcpx.db")) as db, db:
                return list(db.execute(sql, args).fetchall())
        import asyncio

        import asyncpg

        numbers = itertools.count(1)
        pg_sql = re.sub(r"\?", lambda _: f"${next(numbers)}", sql)

        async def run(url: str) -> list[tuple[Any, ...]]:
            conn = await asyncpg.connect(url)
            try:
                return [tuple(r) for r in await conn.fetch(pg_sql, *args)]
            finally:
                await conn.close()

        return asyncio.run(run(self.store_url))

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("daemon did not stop within 20 s of SIGTERM") from None

    def left_keepers(self) -> list[int]:
        """Pids of keepers and kept servers still alive for this state folder."""
        from mcpx.upstream.stdio import keeper_wire

        pids = []
        for record in keeper_wire.all_records(self.state_dir / keeper_wire.FOLDER):
            pids += [pid for pid in (record.keeper_pid, record.server_pid) if keeper_wire.alive(pid)]
        return pids

    def kill_keepers(self) -> None:
        """Teardown: a daemon a test SIGKILLed leaves its keepers for their grace period; end them now."""
        from mcpx.upstream.stdio import keeper_wire

        for record in keeper_wire.all_records(self.state_dir / keeper_wire.FOLDER):
            for pid, kill in ((record.keeper_pid, os.kill), (record.server_pid, os.killpg)):
                if keeper_wire.alive(pid):
                    try:
                        kill(pid, signal.SIGKILL)
                    except OSError:
                        pass

    def check_wire(self) -> int:
        return check_wire_log(self.wire_log) if self.wire_log is not None and self.wire_log.exists() else 0


def run_for_module(daemon: Daemon) -> Iterator[Daemon]:
    """A module-scoped fixture's body: start `daemon`, hand it out, and when the module is done
    check that it survived, stop it and schema-check its wire log."""
    try:
        daemon.start()
        yield daemon
        # Whatever the tests threw at it, the daemon must still be up when the module ends.
        assert daemon.proc is not None and daemon.proc.poll() is None, f"daemon died: {daemon.stderr()}"
    finally:
        daemon.stop()
        daemon.kill_keepers()
    daemon.check_wire()


def end_by_eof(proc: subprocess.Popen[Any], timeout: float = 10) -> None:
    """End a child that exits when its stdin closes (a shim, a peer driver); kill it if it does not."""
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Closeable(Protocol):
    def close(self) -> None: ...


# Every test client (RawHost, Api, FeedClient) made during a test, closed when it ends (conftest).
OPEN_CLIENTS: list[Closeable] = []


class RawHost:
    """Frame-level Streamable HTTP host: sends exactly what a test says, returns the raw reply."""

    def __init__(self, url: str) -> None:
        self.url = url
        # TCP_NODELAY: without it headers and body leave in two writes and Nagle + delayed ACK add 40 ms.
        nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
        self.client = httpx.Client(timeout=30, transport=httpx.HTTPTransport(socket_options=nodelay))
        self.session_id: str | None = None
        self.revision = LEGACY
        self._id = 0
        OPEN_CLIENTS.append(self)

    def next_id(self) -> int:
        self._id += 1
        return self._id

    def post(self, body: Any, headers: dict[str, str] | None = None, raw: bytes | None = None) -> httpx.Response:
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        h.update(headers or {})
        return self.client.post(self.url, content=raw if raw is not None else json.dumps(body), headers=h)

    # ---- modern ----
    def modern(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        headers: dict[str, str] | None = None,
        meta: dict[str, Any] | None = None,
    ) -> httpx.Response:
        params = dict(params or {})
        params["_meta"] = {**modern_meta(), **(meta or {}), **(params.get("_meta") or {})}
        h = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
        name = (
            params.get("name")
            if method in ("tools/call", "prompts/get")
            else params.get("uri")
            if method == "resources/read"
            else None
        )
        if isinstance(name, str):
            h["Mcp-Name"] = name
        if headers is not None:
            h.update(headers)
            h = {k: v for k, v in h.items() if v is not None}
        return self.post({"jsonrpc": "2.0", "id": self.next_id(), "method": method, "params": params}, h)

    # ---- legacy ----
    def initialize(self, version: str = LEGACY, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        resp = self.post(
            {
                "jsonrpc": "2.0",
                "id": self.next_id(),
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": capabilities or {},
                    "clientInfo": {"name": "pytest-raw", "version": "0"},
                },
            }
        )
        assert resp.status_code == 200, resp.text
        self.session_id = resp.headers["mcp-session-id"]
        result = resp.json()["result"]
        self.revision = result["protocolVersion"]
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, self._legacy_headers())
        return result

    def _legacy_headers(self) -> dict[str, str]:
        h = {"MCP-Protocol-Version": self.revision}
        if self.session_id:
            h["Mcp-Session-Id"] = self.session_id
        return h

    def legacy(
        self, method: str, params: dict[str, Any] | None = None, *, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        h = self._legacy_headers()
        h.update(headers or {})
        return self.post({"jsonrpc": "2.0", "id": self.next_id(), "method": method, "params": params or {}}, h)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> RawHost:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class ShimHost:
    """`mcpx serve` attached to a running daemon (one host connection), replies matched by id."""

    def __init__(self, daemon: Daemon, client_name: str = "pytest-shim") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpx", "serve", "--state-dir", str(daemon.state_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.frames: list[dict[str, Any]] = []
        self._ids = 0
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        init = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": client_name, "version": "0"}}
        assert "result" in self.request("initialize", init, timeout=20), "the shim did not initialize"
        self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self.frames.append(json.loads(line))

    def write(self, frame: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        with self._lock:
            self.proc.stdin.write(json.dumps(frame).encode() + b"\n")
            self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any], timeout: float = 10) -> dict[str, Any]:
        with self._lock:
            self._ids += 1
            rid = f"shim-{self._ids}"
        self.write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return wait_until(
            lambda: next((f for f in self.frames if f.get("id") == rid and "method" not in f), None),
            timeout,
            f"the shim's reply to {method}",
        )

    def close(self) -> None:
        end_by_eof(self.proc)
        self._reader.join(5)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def sse_frames(resp: httpx.Response) -> list[dict[str, Any]]:
    """Every JSON frame of an SSE body (or the one JSON body)."""
    if "text/event-stream" not in resp.headers.get("content-type", ""):
        return [resp.json()]
    out = []
    for block in resp.text.split("\n\n"):
        data = [line[5:].lstrip() for line in block.splitlines() if line.startswith("data:")]
        if data:
            out.append(json.loads("\n".join(data)))
    return out


class SseStream:
    """A long-lived SSE stream (a 2025 session's GET stream, a 2026 listen stream), read in a thread:
    every JSON frame it carried, in order."""

    def __init__(self, method: str, url: str, headers: dict[str, str], body: dict[str, Any] | None = None) -> None:
        self.frames: list[dict[str, Any]] = []
        self.status: int | None = None
        self._sock: socket.socket | None = None
        self._client = httpx.Client(timeout=httpx.Timeout(10 * UNIT, read=None))
        self._opened = threading.Event()
        content = json.dumps(body) if body is not None else None
        self._thread = threading.Thread(target=self._read, args=(method, url, headers, content), daemon=True)
        self._thread.start()
        OPEN_CLIENTS.append(self)
        assert self._opened.wait(10 * UNIT) and self.status == 200, f"the stream did not open: {self.status}"

    def _read(self, method: str, url: str, headers: dict[str, str], content: str | None) -> None:
        try:
            with self._client.stream(method, url, content=content, headers=headers) as resp:
                self.status = resp.status_code
                self._sock = resp.extensions["network_stream"].get_extra_info("socket")
                self._opened.set()
                for line in resp.iter_lines():
                    if line.startswith("data:"):
                        self.frames.append(json.loads(line[5:]))
        except httpx.HTTPError:  # ended by close(), or the daemon went away
            pass
        self._opened.set()

    def close(self) -> None:
        """End the stream (a shutdown wakes the reader at once; closing the client would not)."""
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(5 * UNIT)
        self._client.close()


def reply_of(resp: httpx.Response) -> dict[str, Any]:
    frames = [f for f in sse_frames(resp) if "id" in f and "method" not in f]
    assert frames, f"no reply in {resp.text!r}"
    return frames[-1]


def iter_kill(procs: Iterator[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


class Api:
    """The operator API (`/v1`) of a test daemon, with its token."""

    def __init__(self, daemon: Daemon, timeout: float = 10) -> None:
        self.client = httpx.Client(
            base_url=f"http://127.0.0.1:{daemon.port}",
            headers={"Authorization": f"Bearer {daemon.token}"},
            timeout=timeout,
        )
        OPEN_CLIENTS.append(self)

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.client.get(path, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return self.client.post(path, **kw)

    def open_questions(self) -> list[dict[str, Any]]:
        return self.get("/v1/questions").json()["questions"]

    def history(self, limit: int = 500) -> list[dict[str, Any]]:
        """Every stored question, newest first."""
        params = {"status": ["open", "answered", "expired", "abandoned"], "limit": limit}
        return self.get("/v1/questions", params=params).json()["questions"]

    def answer(self, qid: str, action: str = "accept", by: str = "tester", **body: Any) -> httpx.Response:
        return self.post(f"/v1/questions/{qid}/answer", json={"action": action, "by": by, **body})

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FeedClient:
    """A `/v1/events` subscriber reading in a thread: every message it got, in order."""

    def __init__(self, daemon: Daemon, **subscribe: Any) -> None:
        from websockets.sync.client import connect

        self.messages: list[dict[str, Any]] = []
        self.ws = connect(
            f"ws://127.0.0.1:{daemon.port}/v1/events",
            additional_headers={"Authorization": f"Bearer {daemon.token}"},
            max_size=None,
        ).__enter__()  # held open until close(): a test's subscriber outlives any one block
        self.ws.send(json.dumps({"type": "subscribe", **subscribe}))
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        OPEN_CLIENTS.append(self)

    def _read(self) -> None:
        try:
            for text in self.ws:
                self.messages.append(json.loads(text))
        except Exception:  # closed by close(), or by the daemon stopping
            pass

    def snapshot(self, timeout: float = 10) -> dict[str, Any]:
        """The snapshot a subscription without `since` starts with (once it has arrived)."""
        wait_until(lambda: self.messages, timeout, "the feed's snapshot")
        assert self.messages[0]["type"] == "snapshot", self.messages[0]
        return self.messages[0]

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("type") == "event" and (kind is None or m["kind"] == kind)]

    def close(self) -> None:
        self.ws.close()
        self._thread.join(5)


def operator_attached(daemon: Daemon, name: str = "olga") -> FeedClient:
    """An attached operator, as a console is: questions the host cannot answer wait for it."""
    feed = FeedClient(daemon, operator=name)
    wait_until(lambda: name in daemon.status()["operators"], 10, "operator attached")
    return feed


class ListenStream:
    """A 2026 `subscriptions/listen` stream for task ids, read in a thread until closed."""

    def __init__(
        self, url: str, meta: dict[str, Any], task_ids: list[str], *, token: str | None = None, rid: int = 70
    ) -> None:
        self.frames: list[dict[str, Any]] = []
        self.answer: Any = None
        self.sock: socket.socket | None = None
        self.client = httpx.Client(timeout=httpx.Timeout(10 * UNIT, read=None))
        self.body = {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "subscriptions/listen",
            "params": {"_meta": {**modern_meta(), **meta}, "notifications": {"taskIds": task_ids}},
        }
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "subscriptions/listen",
        }
        if token is not None:
            self.headers["Authorization"] = f"Bearer {token}"
        self.acked = threading.Event()
        self.thread = threading.Thread(target=self._read, args=(url,), daemon=True)
        self.thread.start()
        assert self.acked.wait(10 * UNIT), "no acknowledgement on the listen stream"

    def _read(self, url: str) -> None:
        try:
            with self.client.stream("POST", url, content=json.dumps(self.body), headers=self.headers) as resp:
                self.answer = (resp.status_code, resp.headers.get("content-type", "").split(";")[0])
                self.sock = resp.extensions["network_stream"].get_extra_info("socket")
                for line in resp.iter_lines():
                    if line.startswith("data:"):
                        self.frames.append(json.loads(line[5:]))
                        self.acked.set()
        except Exception:  # ended by close(), or the daemon went away
            pass
        self.acked.set()

    def tasks_seen(self) -> list[dict[str, Any]]:
        return [f["params"] for f in self.frames if f.get("method") == "notifications/tasks"]

    def close(self) -> list[dict[str, Any]]:
        """End the stream (a shutdown wakes the reader at once; closing the client would not)."""
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)
        self.thread.join(5 * UNIT)
        self.client.close()
        assert not self.thread.is_alive(), "the listen stream did not end"
        return self.frames
