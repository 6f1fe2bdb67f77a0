"""`mcpx install-host`, end to end, once per host file: a temporary HOME, mcpx installed in a venv that
is not on PATH (and a decoy `mcpx` that is), the host's server moved into mcpx's config, the written
file parsed back, the host's `mcpx` command spawned as that host spawns it (command, args and env from
the file; the host's own environment; its working folder), and a tool of the moved server called
through it: a real `mcpx serve` that starts a real daemon, which runs the fixture upstream."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import LEGACY, ROOT, UNIT, Daemon, RawHost, reply_of, stdio_server, wait_until

pytestmark = [
    pytest.mark.long,
    pytest.mark.sqlite_only("host config files and the command they spawn"),
    pytest.mark.heavy,
]  # a daemon per test, most started by the `mcpx serve` a host spawned


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with this checkout's mcpx and an `mcpx` script in its bin/, as pip makes one; never on PATH."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(root)], check=True, timeout=120
    )
    (site,) = root.glob("lib/python*/site-packages")
    (site / "mcpx-under-test.pth").write_text(f"{ROOT}\n")  # before any other install of mcpx on sys.path
    script = root / "bin" / "mcpx"
    script.write_text(f"#!{root}/bin/python\nimport sys\nfrom mcpx.cli.main import main\nsys.exit(main())\n")
    script.chmod(0o755)
    return root


class World:
    """A user's machine in a temporary folder: HOME, a project, a PATH with another `mcpx` on it."""

    def __init__(self, tmp: Path, venv: Path) -> None:
        self.tmp, self.venv = tmp, venv
        self.home, self.project, self.elsewhere = tmp / "home", tmp / "project", tmp / "elsewhere"
        decoy = tmp / "other-install" / "bin"
        for folder in (self.home, self.project, self.elsewhere, decoy):
            folder.mkdir(parents=True)
        (decoy / "mcpx").write_text("#!/bin/sh\necho 'the other install of mcpx on PATH ran' >&2\nexit 97\n")
        (decoy / "mcpx").chmod(0o755)
        # What a host started from the desktop or a shell without the venv gets: no MCPX_*, no XDG_*.
        self.env = {"HOME": str(self.home), "PATH": f"{decoy}:/usr/bin:/bin", "LANG": "C.UTF-8"}
        self.state = self.home / ".local" / "state" / "mcpx"  # the default state folder under that HOME

    def mcpx(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """`<venv>/bin/mcpx ...`, by its path, as a user runs it without activating the venv."""
        return subprocess.run(
            [str(self.venv / "bin" / "mcpx"), *args],
            cwd=cwd, env=self.env, capture_output=True, text=True, timeout=60 * UNIT,
        )  # fmt: skip

    def upstream(self) -> dict[str, Any]:
        return stdio_server(self.tmp, name="fix")

    def mcpx_config(self, path: Path) -> None:
        """mcpx's config as the user already has it: a free port, so tests never meet on 7435."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"daemon": {"port": 0}}))

    def stop_daemon(self) -> None:
        info_path = self.state / "daemon.json"
        if not info_path.exists():
            return
        pid = json.loads(info_path.read_text())["pid"]
        self.mcpx("stop", cwd=self.tmp)
        try:
            os.kill(pid, signal.SIGKILL)  # only if `mcpx stop` did not
        except ProcessLookupError:
            pass


@pytest.fixture
def world(tmp_path: Path, venv: Path) -> Iterator[World]:
    w = World(tmp_path, venv)
    yield w
    w.stop_daemon()


def host_calls_a_tool(world: World, entry: dict[str, Any], cwd: Path, tool: str = "fix__echo") -> dict[str, Any]:
    """Spawn the entry as a host does (its env over the host's own, in the host's working folder),
    speak MCP on its stdio, and call `tool`; the call's result."""
    proc = subprocess.Popen(
        [entry["command"], *entry.get("args", [])],
        cwd=cwd, env={**world.env, **entry.get("env", {})},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None

    def ask(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        assert line, f"the host's server closed the connection; its stderr: {proc.stderr.read() if proc.stderr else ''}"
        reply: dict[str, Any] = json.loads(line)
        assert reply.get("id") == rid, reply
        return reply

    timer = _kill_after(proc, 60 * UNIT)
    try:
        init = ask(1, "initialize", {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "h"}})
        assert "result" in init, init
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        proc.stdin.flush()
        tools = [t["name"] for t in ask(2, "tools/list", {})["result"]["tools"]]
        assert tool in tools, tools
        return ask(3, "tools/call", {"name": tool, "arguments": {"text": "through mcpx"}})["result"]
    finally:
        timer.cancel()
        proc.stdin.close()
        proc.wait(30 * UNIT)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _kill_after(proc: subprocess.Popen[str], seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, proc.kill)
    timer.start()
    return timer


def installed(world: World, host: str, *args: str, cwd: Path) -> str:
    done = world.mcpx("install-host", host, *args, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


def echo_through(world: World, entry: dict[str, Any], cwd: Path) -> str:
    """The fixture's echo, called through the host's `mcpx` entry (which must run the venv's mcpx)."""
    assert entry["command"] == str(world.venv / "bin" / "mcpx"), entry  # the mcpx that ran, not PATH's
    result = host_calls_a_tool(world, entry, cwd)
    assert not result.get("isError"), result
    return str(result["content"][0]["text"])


def moved(said: str, config: Path) -> dict[str, Any]:
    """`fix` in mcpx's config, and said to have moved there."""
    assert f"moved to {config} (mcpx serves them now): fix" in said, said
    server: dict[str, Any] = json.loads(config.read_text())["mcpServers"]["fix"]
    return server


def test_claude_code_project_scope(world: World) -> None:
    host_file = world.project / ".mcp.json"
    original = {"mcpServers": {"fix": {"type": "stdio", **world.upstream()}}}
    host_file.write_text(json.dumps(original))
    world.mcpx_config(world.project / ".mcpx.json")
    said = installed(world, "claude-code", cwd=world.project)
    written = json.loads(host_file.read_text())["mcpServers"]
    # Claude Code starts a project's servers in the project's folder, where `.mcp.json` lies.
    assert echo_through(world, written["mcpx"], world.project) == "through mcpx"
    assert list(written) == ["mcpx"], written  # the host no longer runs `fix` itself: mcpx does
    assert moved(said, world.project / ".mcpx.json") == original["mcpServers"]["fix"]
    assert json.loads((world.project / ".mcp.json.bak").read_text()) == original


def test_claude_code_user_scope(world: World) -> None:
    host_file = world.home / ".claude.json"
    host_file.write_text(json.dumps({"numStartups": 3, "mcpServers": {"fix": world.upstream()}, "projects": {}}))
    world.mcpx_config(world.home / ".config" / "mcpx" / "config.json")
    # Claude Code runs in some project of the user's, with a `.mcp.json` of its own that the config
    # search would find first: the user's mcpx must read its own config all the same.
    (world.elsewhere / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "false"}}}))
    said = installed(world, "claude-code", "--scope", "user", cwd=world.project)
    written = json.loads(host_file.read_text())
    assert echo_through(world, written["mcpServers"]["mcpx"], world.elsewhere) == "through mcpx"
    assert written["numStartups"] == 3 and list(written["mcpServers"]) == ["mcpx"], written
    moved(said, world.home / ".config" / "mcpx" / "config.json")


def test_cursor_user_scope(world: World) -> None:
    host_file = world.home / ".cursor" / "mcp.json"
    host_file.parent.mkdir()
    host_file.write_text(json.dumps({"mcpServers": {"fix": world.upstream()}}))
    world.mcpx_config(world.home / ".config" / "mcpx" / "config.json")
    said = installed(world, "cursor", "--scope", "user", cwd=world.project)
    written = json.loads(host_file.read_text())["mcpServers"]
    assert echo_through(world, written["mcpx"], world.home) == "through mcpx"
    assert list(written) == ["mcpx"], written
    moved(said, world.home / ".config" / "mcpx" / "config.json")


def test_vscode_project_scope(world: World) -> None:
    host_file = world.project / ".vscode" / "mcp.json"
    host_file.parent.mkdir()
    host_file.write_text(json.dumps({"inputs": [], "servers": {"fix": {"type": "stdio", **world.upstream()}}}))
    world.mcpx_config(world.project / ".mcpx.json")
    said = installed(world, "vscode", cwd=world.project)
    written = json.loads(host_file.read_text())
    # VS Code starts a workspace's servers in the workspace folder.
    assert echo_through(world, written["servers"]["mcpx"], world.project) == "through mcpx"
    assert written["inputs"] == [] and list(written["servers"]) == ["mcpx"], written
    assert written["servers"]["mcpx"]["type"] == "stdio"
    moved(said, world.project / ".mcpx.json")


def test_codex_toml_keeps_its_comments(world: World) -> None:
    host_file = world.home / ".codex" / "config.toml"
    host_file.parent.mkdir()
    fix = world.upstream()
    host_file.write_text(
        '# my Codex settings\nmodel = "o3"  # the model I use\n\n'
        f"[mcp_servers.fix]\ncommand = {json.dumps(fix['command'])}\nargs = {json.dumps(fix['args'])}\n"
        'tool_timeout_sec = 60\n\n# profiles below\n[profiles.fast]\nmodel = "o4-mini"\n'
    )
    world.mcpx_config(world.home / ".config" / "mcpx" / "config.json")
    said = installed(world, "codex", "--scope", "user", cwd=world.project)
    text = host_file.read_text()
    written = tomllib.loads(text)
    assert echo_through(world, written["mcp_servers"]["mcpx"], world.project) == "through mcpx"
    assert list(written["mcp_servers"]) == ["mcpx"] and written["profiles"]["fast"]["model"] == "o4-mini", written
    assert "# my Codex settings" in text and "# the model I use" in text and "# profiles below" in text, text
    fix_in_mcpx = moved(said, world.home / ".config" / "mcpx" / "config.json")
    assert fix_in_mcpx["mcpx"] == {"callTimeout": 60}, fix_in_mcpx  # Codex's tool timeout, in mcpx's words


def test_claude_desktop(world: World) -> None:
    host_file = world.home / ".config" / "Claude" / "claude_desktop_config.json"
    host_file.parent.mkdir(parents=True)
    host_file.write_text(json.dumps({"globalShortcut": "Ctrl+Space", "mcpServers": {"fix": world.upstream()}}))
    world.mcpx_config(world.home / ".config" / "mcpx" / "config.json")
    said = installed(world, "claude-desktop", "--scope", "user", cwd=world.project)
    written = json.loads(host_file.read_text())
    # Claude Desktop starts its servers in `/`.
    assert echo_through(world, written["mcpServers"]["mcpx"], Path("/")) == "through mcpx"
    assert written["globalShortcut"] == "Ctrl+Space" and list(written["mcpServers"]) == ["mcpx"], written
    moved(said, world.home / ".config" / "mcpx" / "config.json")


def test_mcpx_serve_beside_its_own_entry_skips_it_and_serves_the_rest(world: World) -> None:
    """The file an older install-host left: `.mcp.json` holding `mcpx serve` (found by the config
    search from the project's folder) and a server. mcpx leaves its own entry out, says so once at
    INFO, and serves the other one, instead of refusing the file."""
    (world.project / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "mcpx": {"type": "stdio", "command": "mcpx", "args": ["serve"]},
                    "fix": world.upstream(),
                },
                "daemon": {"port": 0},
            }
        )
    )
    entry = {"command": str(world.venv / "bin" / "mcpx"), "args": ["serve"]}
    assert echo_through(world, entry, world.project) == "through mcpx"
    log = (world.state / "daemon.log").read_text()
    said = [line for line in log.splitlines() if "is `mcpx serve` itself" in line]
    assert len(said) == 1 and "INFO" in said[0] and "server 'mcpx'" in said[0] and "skipped" in said[0], log


def test_http_entry_names_the_running_daemons_port_and_its_config_takes_the_servers(
    world: World, start_daemon: Any
) -> None:
    """`--http` writes the port the daemon runs on (not 7435), and with that daemon's config as
    `--config`, the moved server is served at once (the daemon reloads its file)."""
    d: Daemon = start_daemon({"mcpServers": {}})
    host_file = world.project / ".cursor" / "mcp.json"
    host_file.parent.mkdir()
    host_file.write_text(json.dumps({"mcpServers": {"fix": world.upstream()}}))
    said = installed(
        world, "cursor", "--http", "--state-dir", str(d.state_dir), "--config", str(d.config_path), cwd=world.project
    )
    moved(said, d.config_path)
    assert "the running daemon" in said and "takes the change at once" in said, said
    written = json.loads(host_file.read_text())["mcpServers"]
    assert written == {"mcpx": {"url": f"http://127.0.0.1:{d.port}/mcp"}}, written
    with RawHost(written["mcpx"]["url"]) as host:  # what Cursor does with a `url` entry
        host.initialize()

        def listed() -> bool:
            tools = reply_of(host.legacy("tools/list"))["result"]["tools"]
            return "fix__echo" in [t["name"] for t in tools]

        wait_until(listed, 20 * UNIT, "the moved server's tools")
        reply = reply_of(host.legacy("tools/call", {"name": "fix__echo", "arguments": {"text": "over http"}}))
    assert reply["result"]["content"][0]["text"] == "over http", reply


def test_mcpx_serve_says_when_the_running_daemon_reads_another_config(world: World, start_daemon: Any) -> None:
    """One daemon per state folder: a host's `mcpx serve --config B` that reaches a daemon reading A
    is served A's servers, and its log (the shim's stderr) says so."""
    d: Daemon = start_daemon({"mcpServers": {}})
    other = world.project / ".mcpx.json"
    other.write_text(json.dumps({"mcpServers": {"fix": world.upstream()}}))
    done = subprocess.run(
        [str(world.venv / "bin" / "mcpx"), "serve", "--config", str(other), "--state-dir", str(d.state_dir)],
        cwd=world.project, env=world.env, input="", capture_output=True, text=True, timeout=60 * UNIT,
    )  # fmt: skip
    assert f"reads {d.config_path}, not {other}" in done.stderr, done.stderr
    same = subprocess.run(
        [str(world.venv / "bin" / "mcpx"), "serve", "--config", str(d.config_path), "--state-dir", str(d.state_dir)],
        cwd=world.project, env=world.env, input="", capture_output=True, text=True, timeout=60 * UNIT,
    )  # fmt: skip
    assert "reads" not in same.stderr, same.stderr
