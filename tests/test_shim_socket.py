"""`mcpx serve` over the shim socket (mcpx/host/shim_unix.py, mcpx/cli/serve.py): the socket is
private, and a shim whose daemon restarts reconnects and carries its host's session on."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path
from queue import Empty, Queue
from typing import IO, Any

from harness import ROOT, UNIT, stdio_server

LEGACY = "2025-11-25"


def test_the_shim_socket_is_0600_in_a_0700_folder(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    sock = d.state_dir / "shim.sock"
    mode = os.stat(sock).st_mode
    assert stat.S_ISSOCK(mode), oct(mode)
    assert stat.S_IMODE(mode) == 0o600, oct(mode)
    assert stat.S_IMODE(os.stat(d.state_dir).st_mode) == 0o700
    d.stop()
    assert not sock.exists(), "a stopped daemon removes its socket"


class _Shim:
    """`mcpx serve` with its stdout read in a thread, replies matched by id."""

    def __init__(self, state_dir: Path, transport: str = "unix") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpx", "serve", "--state-dir", str(state_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT), "MCPX_SHIM_TRANSPORT": transport},
        )
        self.lines: Queue[dict[str, Any]] = Queue()
        assert self.proc.stdout is not None
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, out: IO[bytes]) -> None:
        for line in out:
            self.lines.put(json.loads(line))

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            try:
                msg = self.lines.get(timeout=20 * UNIT)
            except Empty:
                raise AssertionError(f"no reply to {method} (id {rid})") from None
            if msg.get("id") == rid and "method" not in msg:
                return msg

    def close(self) -> str:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10 * UNIT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        err = self.proc.stderr.read().decode()
        self.proc.stderr.close()
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return err


def _echo(shim: _Shim, rid: int, text: str) -> dict[str, Any]:
    return shim.request(rid, "tools/call", {"name": "fx__echo", "arguments": {"text": text}})


def test_a_shim_reconnects_after_a_daemon_restart_and_its_2025_session_goes_on(
    start_daemon: Any, tmp_path: Path
) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    shim = _Shim(d.state_dir)
    try:
        init = shim.request(
            1,
            "initialize",
            {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
        )
        assert init["result"]["protocolVersion"] == LEGACY, init
        shim.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert _echo(shim, 2, "before")["result"]["content"][0]["text"] == "before"
        d.stop()
        d.start(port=d.port)
        # No initialize from the host: the shim replayed its own to the new daemon.
        after = _echo(shim, 3, "after")
        assert after["result"]["content"][0]["text"] == "after", after
        assert shim.proc.poll() is None
    finally:
        err = shim.close()
    assert "the daemon closed the connection" in err and "reconnected to the daemon" in err, err
    assert shim.lines.empty(), "the replayed initialize's reply reached the host"


def test_a_shim_told_to_use_the_websocket_still_relays(start_daemon: Any, tmp_path: Path) -> None:
    """The fallback carrier (a daemon without a socket, e.g. an older one after an upgrade)."""
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    shim = _Shim(d.state_dir, transport="ws")
    try:
        init = shim.request(
            1,
            "initialize",
            {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
        )
        assert init["result"]["protocolVersion"] == LEGACY, init
        assert _echo(shim, 2, "over ws")["result"]["content"][0]["text"] == "over ws"
    finally:
        err = shim.close()
    assert "cannot reach" not in err, err
