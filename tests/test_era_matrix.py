"""The era matrix, end to end: the official SDK 2.3 client as the host, through mcpx, to real upstreams.

Every cell runs `tests/peers/sdk2_host.py` against a running daemon and, through it, lists the
tools (namespaced `up__<tool>`), calls `echo` (text comes back), `slow` with a progress token
(progress 1..3 of 3 reaches the host before the result) and `fail` (an `isError` result, not a
JSON-RPC error). The dimensions:

- host era: `legacy` (2025-11-25 `initialize`), `modern` (2026-07-28, no discover), `auto`
  (probes `server/discover`, so it must end up modern);
- host transport: `host-http` (`--url`) and `host-stdio` (`mcpx serve --state-dir <the daemon's>`,
  i.e. the shim attaching to the daemon that already runs);
- upstream: our fixture over stdio and over HTTP, the SDK 2.3 server (`sdk2_upstream.py`) over
  stdio and over HTTP. All four speak both eras, so mcpx talks 2026-07-28 to each of them.

Those four upstreams get the full cross product (3 x 2 x 4 = 24 cells). On top, the fixture
forced to `--era legacy` over stdio and over HTTP puts the 2025-11-25 *upstream* side of the
translation in the matrix; to keep the file at about two minutes on 2 cores these two run on a
diagonal (DIAGONAL below: each era x host transport pair once across the two, 6 cells).

One daemon per upstream serves all of that upstream's cells (module-scoped `gateway`); it is
stopped and its wire log schema-checked when the module is done with it. A cell takes about
2-4 s on 2 cores, mostly the SDK host's start-up (plus the shim's for `host-stdio`).

Beside the matrix, the shim's life with the daemon's: the shim starts a daemon when none runs,
reports a daemon that cannot start at once, exits (so its host sees the server go) when the
daemon stops, and a legacy stdio host whose shim is killed mid-call takes neither the daemon nor
the call down.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from harness import (
    LEGACY,
    MODERN,
    UNIT,
    Api,
    Daemon,
    FixtureHttp,
    RawHost,
    SuiteStore,
    read_jsonl,
    reply_of,
    stdio_server,
    wait_until,
)
from peers.run_host import HostProcess, json_lines, run_host
from peers.venvs import peer_python
from wire_schema import check_wire_log

PEERS = Path(__file__).resolve().parent / "peers"
SDK_UPSTREAM = PEERS / "sdk2_upstream.py"

# The first run builds the SDK 2.3 peer venv (about a minute); each host run has its own timeout.
pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.peers,
    pytest.mark.sqlite_only("the SDK hosts' and upstreams' view of both eras: the wire"),
]  # slow tier (tests/conftest.py)

ERAS = {"legacy": "legacy", "modern": MODERN, "auto": "auto"}  # id -> sdk2_host --mode
HOST_TRANSPORTS = ["host-http", "host-stdio"]
FULL = ["fixture-stdio", "fixture-http", "sdk2-stdio", "sdk2-http"]
DIAGONAL = {
    "fixture-legacy-stdio": [("legacy", "host-http"), ("modern", "host-stdio"), ("auto", "host-http")],
    "fixture-legacy-http": [("legacy", "host-stdio"), ("modern", "host-http"), ("auto", "host-stdio")],
}
CELLS = [(up, era, tr) for up in FULL for era in ERAS for tr in HOST_TRANSPORTS] + [
    (up, era, tr) for up, pairs in DIAGONAL.items() for era, tr in pairs
]


@dataclass
class Gateway:
    """A daemon with one upstream under the key "up", and what that upstream answers."""

    daemon: Daemon
    tools: list[str]
    structured_key: str  # echo's structuredContent key
    slow_text: str  # slow(seconds=0.3, steps=3)
    fail_text: str


FIXTURE_ANSWERS = {
    "tools": ["echo", "slow", "fail", "protocol_error", "crash", "whoami"],
    "structured_key": "text",
    "slow_text": "slept 0.3",
    "fail_text": "it failed",
}
SDK2_ANSWERS = {
    "tools": ["echo", "slow", "fail", "rpc_error"],
    "structured_key": "result",
    "slow_text": "done after 3 steps",
    "fail_text": "Error executing tool fail: fail tool failed on purpose",
}


# ---- processes -------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM, then SIGKILL."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def _start_sdk2_http(python: Path, tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    log = tmp / "sdk2-upstream.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(python), str(SDK_UPSTREAM), "http", "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )

    def accepting() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"SDK upstream exited with {proc.returncode}:\n{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            return False

    try:
        wait_until(accepting, 20, "SDK 2.3 upstream accepting on its port")
    except BaseException:
        _stop(proc)
        raise
    return proc, f"http://127.0.0.1:{port}/mcp"


def _pid_gone(pid: int) -> bool:
    """Exited: no such process, or a zombie its (new) parent has not reaped yet."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _children(pid: int) -> list[int]:
    """Pids whose parent is `pid` (Linux /proc)."""
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            kids.append(int(entry))
    return kids


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


# ---- the SDK host ----------------------------------------------------------------------------
def shim_target(state_dir: Path, *extra: str, env: dict[str, str] | None = None) -> list[str]:
    """sdk2_host arguments that spawn `mcpx serve` (with the daemon's python) as the stdio server."""
    env_args = [arg for k, v in (env or {}).items() for arg in ("--env", f"{k}={v}")]
    return ["--stdio", *env_args, "--", sys.executable, "-m", "mcpx", "serve", "--state-dir", str(state_dir), *extra]


def text_of(result: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")


def assert_connected(connect: dict[str, Any], era: str) -> None:
    assert connect["op"] == "connect" and connect["ok"], connect
    if era == "legacy":
        assert connect["protocolVersion"] == LEGACY and connect["era"] == "legacy", connect
        assert connect["serverInfo"]["name"] == "mcpx", connect
    else:
        assert connect["protocolVersion"] == MODERN and connect["era"] == "modern", connect
    if era == "auto":  # the probe reached mcpx's real server/discover
        assert connect["serverInfo"]["name"] == "mcpx" and "tools" in connect["capabilities"], connect


def assert_shaped_for(result: dict[str, Any], era: str) -> None:
    """resultType is the 2026 discriminator: present for a modern host, absent for a handshake host."""
    if era == "legacy":
        assert "resultType" not in result, result
    else:
        assert result.get("resultType") == "complete", result


# ---- one daemon per upstream -----------------------------------------------------------------
@pytest.fixture(scope="module")
def sdk2_python() -> Path:
    return peer_python("mcp-2.3")


@pytest.fixture(scope="module")
def gateway(
    request: pytest.FixtureRequest, sdk2_python: Path, tmp_path_factory: pytest.TempPathFactory, suite_store: SuiteStore
) -> Iterator[Gateway]:
    kind: str = request.param
    tmp = tmp_path_factory.mktemp(kind)
    stops: list[Callable[[], Any]] = []
    try:
        answers = SDK2_ANSWERS if kind.startswith("sdk2") else FIXTURE_ANSWERS
        legacy_only = ["--era", "legacy"] if "legacy" in kind else []
        if kind in ("fixture-stdio", "fixture-legacy-stdio"):
            entry: dict[str, Any] = stdio_server(tmp, *legacy_only)
        elif kind in ("fixture-http", "fixture-legacy-http"):
            fx = FixtureHttp(tmp, *legacy_only)
            stops.append(fx.stop)
            entry = {"url": fx.url}
        elif kind == "sdk2-stdio":
            entry = {"command": str(sdk2_python), "args": [str(SDK_UPSTREAM), "stdio"]}
        else:
            proc, url = _start_sdk2_http(sdk2_python, tmp)
            stops.append(lambda: _stop(proc))
            entry = {"url": url}
        daemon = Daemon(tmp, {"mcpServers": {"up": entry}}, store=suite_store)
        stops.insert(0, daemon.stop)  # the daemon goes first, its upstream after it
        daemon.start()
        # The cell ids promise an upstream era: make sure mcpx really speaks that one to it.
        (up,) = daemon.status()["upstreams"]
        assert up["era"] == ("legacy" if legacy_only else "modern"), up
        yield Gateway(daemon, **answers)
        daemon.stop()
        assert daemon.check_wire() > 0
    finally:
        for stop in stops:
            stop()


# ---- the matrix ------------------------------------------------------------------------------
# scope="module": without it pytest keys the indirect `gateway` by each cell's own index in CELLS
# and tears the daemon down and starts it again for every cell.
@pytest.mark.parametrize(
    ("gateway", "era", "host_transport"),
    [pytest.param(*cell, id="-".join(cell)) for cell in CELLS],
    indirect=["gateway"],
    scope="module",
)
def test_tools_through_mcpx(gateway: Gateway, sdk2_python: Path, era: str, host_transport: str) -> None:
    d = gateway.daemon
    target = ["--url", d.url] if host_transport == "host-http" else shim_target(d.state_dir)
    text = f"héllo {era} over {host_transport}"
    script = [
        {"op": "list_tools"},
        {"op": "call", "name": "up__echo", "args": {"text": text}},
        {"op": "call", "name": "up__slow", "args": {"seconds": 0.3, "steps": 3}, "progress": True, "timeout": 20},
        {"op": "call", "name": "up__fail", "args": {}},
    ]
    connect, tools, echo, slow, fail = run_host(sdk2_python, "sdk2_host.py", ["--mode", ERAS[era], *target], script)

    assert_connected(connect, era)

    assert tools["ok"], tools
    assert [t["name"] for t in tools["result"]["tools"]] == [f"up__{name}" for name in gateway.tools], tools
    assert_shaped_for(tools["result"], era)

    assert echo["ok"], echo
    assert echo["result"]["content"] == [{"type": "text", "text": text}], echo
    assert echo["result"]["structuredContent"] == {gateway.structured_key: text}, echo
    assert not echo["result"].get("isError"), echo
    assert_shaped_for(echo["result"], era)

    assert slow["ok"], slow
    assert text_of(slow["result"]) == gateway.slow_text and not slow["result"].get("isError"), slow
    # The SDK drops progress that arrives after the result, so these came before it.
    assert slow["progress"] == [{"progress": float(i), "total": 3.0, "message": f"step {i}/3"} for i in (1, 2, 3)], slow
    assert_shaped_for(slow["result"], era)

    assert fail["ok"], fail  # a tool error is a result, not a JSON-RPC error
    assert fail["result"]["isError"] is True and text_of(fail["result"]) == gateway.fail_text, fail
    assert_shaped_for(fail["result"], era)


# ---- the shim and the daemon's life ---------------------------------------------------------
def test_shim_starts_the_daemon_when_none_runs(sdk2_python: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    config = tmp_path / "config.json"
    wire = tmp_path / "wire.jsonl"
    # port 0: the default 7435 may be taken on a test machine.
    config.write_text(json.dumps({"mcpServers": {"up": stdio_server(tmp_path)}, "daemon": {"port": 0}}))

    def status() -> tuple[int, dict[str, Any]]:
        proc = subprocess.run(
            [sys.executable, "-m", "mcpx", "status", "--state-dir", str(state), "--json"],
            capture_output=True,
            text=True,
            timeout=30 * UNIT,
            stdin=subprocess.DEVNULL,
        )
        return proc.returncode, json.loads(proc.stdout)

    code, before = status()
    assert code == 3 and before["running"] is False, before

    pids: list[int] = []
    try:
        # MCPX_WIRE_LOG reaches the shim, which passes its environment on to the daemon it starts.
        target = shim_target(state, "--config", str(config), env={"MCPX_WIRE_LOG": str(wire)})
        connect, tools, echo = run_host(
            sdk2_python,
            "sdk2_host.py",
            ["--mode", "legacy", *target],
            [{"op": "list_tools"}, {"op": "call", "name": "up__echo", "args": {"text": "started"}}],
        )
        info = json.loads((state / "daemon.json").read_text())
        pids = [info["pid"], *_children(info["pid"])]  # the daemon and its upstream
        assert_connected(connect, "legacy")
        assert "up__echo" in [t["name"] for t in tools["result"]["tools"]], tools
        assert echo["ok"] and text_of(echo["result"]) == "started", echo

        # The host and its shim are gone; the daemon they started serves on.
        code, after = status()
        assert code == 0 and after["running"] is True, after
        assert after["pid"] == info["pid"] and after["url"] == info["url"], (after, info)
        assert after["config"] == str(config), after
        assert [(u["name"], u["state"]) for u in after["upstreams"]] == [("up", "ready")], after

        os.kill(info["pid"], signal.SIGTERM)
        wait_until(lambda: all(_pid_gone(p) for p in pids), 20, "the daemon (and its upstream) to exit after SIGTERM")
        assert not (state / "daemon.json").exists(), "a cleanly stopped daemon removes its info file"
    finally:
        if not pids and (state / "daemon.json").exists():  # failed before we looked: still stop it
            pid = json.loads((state / "daemon.json").read_text())["pid"]
            pids = [pid, *_children(pid)]
        for pid in pids:  # not our children: all we can do is signal them
            if not _pid_gone(pid):
                os.kill(pid, signal.SIGKILL)
    assert check_wire_log(wire) > 0


def test_shim_reports_a_daemon_that_cannot_start_at_once(tmp_path: Path) -> None:
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"mcpServers": {"up": {}}, "daemon": {"port": 0}}))  # neither command nor url
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "mcpx", "serve", "--config", str(config), "--state-dir", str(tmp_path / "state")],
        input="",
        capture_output=True,
        text=True,
        timeout=30 * UNIT,
    )
    elapsed = time.monotonic() - started
    assert proc.returncode != 0 and proc.stdout == "", proc
    # The daemon's own reason reaches the host's log (the shim's stderr), not just "see daemon.log".
    assert "bad config" in proc.stderr and str(config) in proc.stderr, proc.stderr
    assert elapsed < 10 * UNIT, f"mcpx serve took {elapsed:.1f} s to report a daemon that had already exited"


def test_killing_the_shim_mid_call_leaves_the_daemon_and_the_call_running(
    sdk2_python: Path, start_daemon: Any, tmp_path: Path
) -> None:
    d = start_daemon({"mcpServers": {"up": stdio_server(tmp_path)}})
    upstream_log = tmp_path / "fixture.log.jsonl"
    seconds = 2.0 * UNIT
    script = [
        {"op": "call", "name": "up__slow", "args": {"seconds": seconds, "steps": 4}, "progress": True, "timeout": 30}
    ]
    with HostProcess(sdk2_python, "sdk2_host.py", ["--mode", "legacy", *shim_target(d.state_dir)], script) as host:

        def slow_call() -> Any:
            return next(
                (
                    e["msg"]["id"]
                    for e in read_jsonl(upstream_log)
                    if e["event"] == "recv" and (e["msg"].get("params") or {}).get("name") == "slow"
                ),
                None,
            )

        upstream_id = wait_until(slow_call, 20, "the slow call to reach the upstream")
        (shim,) = [pid for pid in _children(host.proc.pid) if "serve" in _cmdline(pid)]
        with Api(d) as api:
            live = api.get("/v1/connections", params={"closed": False}).json()["connections"]
        assert [(c["transport"], c["kind"]) for c in live] == [("stdio", "shim")]
        os.kill(shim, signal.SIGKILL)
        out, err = host.output(30)
    lines = json_lines(out)
    assert lines[0]["op"] == "connect" and lines[0]["ok"], (out, err)
    assert lines[1]["op"] == "call" and not lines[1]["ok"], (out, err)  # the host lost its server

    # The daemon noticed the shim going, is still up, and the call ran to its end upstream
    # (a legacy host's disconnect is not a cancellation).
    wait_until(lambda: not d.status()["connections"], 10, "the shim's connection to close")
    with Api(d) as api:
        [closed] = api.get("/v1/connections").json()["connections"]
    assert closed["closeReason"] == "the mcpx serve process disconnected" and closed["closedMs"], closed
    assert d.proc is not None and d.proc.poll() is None, d.stderr()
    finished = wait_until(
        lambda: [
            e
            for e in read_jsonl(upstream_log)
            if e["event"] in ("finished", "cancelled") and e.get("requestId") == upstream_id
        ],
        seconds + 10,
        "the slow call to end upstream",
    )
    assert [e["event"] for e in finished] == ["finished"], finished

    # And it still answers.
    host2 = RawHost(d.url)
    try:
        host2.initialize()
        echo = reply_of(host2.legacy("tools/call", {"name": "up__echo", "arguments": {"text": "still here"}}))
    finally:
        host2.close()
    assert text_of(echo["result"]) == "still here", echo


def test_shim_exits_when_the_daemon_stops_under_a_waiting_host(
    sdk2_python: Path, start_daemon: Any, tmp_path: Path
) -> None:
    d = start_daemon({"mcpServers": {"up": stdio_server(tmp_path)}})
    upstream_log = tmp_path / "fixture.log.jsonl"
    # The host waits up to 60 s for the reply and keeps its stdin open all that time.
    script = [{"op": "call", "name": "up__slow", "args": {"seconds": 30, "steps": 30}, "timeout": 60}]
    with HostProcess(sdk2_python, "sdk2_host.py", ["--mode", "legacy", *shim_target(d.state_dir)], script) as host:
        wait_until(
            lambda: any(
                e["event"] == "recv" and (e["msg"].get("params") or {}).get("name") == "slow"
                for e in read_jsonl(upstream_log)
            ),
            20,
            "the slow call to reach the upstream",
        )
        assert d.stop() == 0, d.stderr()
        stopped = time.monotonic()
        # The shim must notice and exit, so that its host sees the server go, well before its timeout.
        out, err = host.output(
            30, overdue="the host was still waiting after the daemon had stopped: the shim did not exit"
        )
        waited = time.monotonic() - stopped
    lines = json_lines(out)
    assert lines[0]["op"] == "connect" and lines[0]["ok"], (out, err)
    assert lines[1]["op"] == "call" and not lines[1]["ok"], (out, err)
    # The daemon answers the call it cuts before it ends the shim's socket (the websocket shim
    # lost that reply and said so on stderr): the host is told why its call ended.
    assert lines[1]["error"]["message"] == "the mcpx daemon is stopping; the call was cut", (out, err)
    assert "Fatal Python error" not in err, err
    assert waited < 10 * UNIT, f"the host waited {waited:.1f} s after the daemon had stopped"
