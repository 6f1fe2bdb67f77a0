"""`mcpx install-host`: the host's servers move into mcpx's config, the host keeps one `mcpx` entry in
the shape that host documents (docs/hosts.md), backups first, nothing changed on a second run, what
stayed said with its reason, and `--undo`. Each host's file, spawned and called through:
tests/test_install_host_hosts.py."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from mcpx.cli.install_host import entry_for, invoked_mcpx
from mcpx.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def private_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never the real home, config or daemon: HOME, XDG and the state folder under tmp_path, run there."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MCPX_STATE_DIR", str(tmp_path / "state"))
    for name in ("XDG_CONFIG_HOME", "MCPX_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["install-host", *args]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


FS = {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]}


@pytest.mark.parametrize(
    ("host", "servers_key", "typed"),
    [("claude-code", "mcpServers", True), ("cursor", "mcpServers", False), ("vscode", "servers", True),
     ("claude-desktop", "mcpServers", False)],
)  # fmt: skip
def test_json_hosts_servers_move_and_the_host_keeps_one_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], host: str, servers_key: str, typed: bool
) -> None:
    path = tmp_path / "mcp.json"
    other = {servers_key: {"fs": FS}, "inputs": [], "globalShortcut": "x"}
    path.write_text(json.dumps(other))
    said = run(capsys, host, "--file", str(path))
    assert "now reaches mcpx" in said and f"moved to {tmp_path / '.mcpx.json'} (mcpx serves them now): fs" in said
    data = json.loads(path.read_text())
    assert list(data[servers_key]) == ["mcpx"] and data["inputs"] == [] and data["globalShortcut"] == "x"
    entry = data[servers_key]["mcpx"]
    assert entry["args"][-3:] == ["serve", "--config", str(tmp_path / ".mcpx.json")], entry
    assert ("type" in entry) == typed and entry.get("type", "stdio") == "stdio"
    assert json.loads((tmp_path / ".mcpx.json").read_text()) == {"mcpServers": {"fs": FS}}
    assert json.loads((tmp_path / "mcp.json.bak").read_text()) == other
    before = path.read_text()
    assert "unchanged" in run(capsys, host, "--file", str(path))
    assert path.read_text() == before and json.loads((tmp_path / "mcp.json.bak").read_text()) == other


def test_the_entry_runs_the_mcpx_that_ran_never_the_one_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv_script = tmp_path / "venv" / "bin" / "mcpx"
    decoy = tmp_path / "elsewhere" / "bin" / "mcpx"
    for script in (venv_script, decoy):
        script.parent.mkdir(parents=True)
        script.write_text("#!/bin/sh\n")
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{decoy.parent}:/usr/bin:/bin")
    monkeypatch.setattr(sys, "argv", [str(venv_script), "install-host", "cursor"])
    assert invoked_mcpx() == ([str(venv_script)], {})
    entry = entry_for("cursor", config=tmp_path / "c.json")
    assert entry == {"command": str(venv_script), "args": ["serve", "--config", str(tmp_path / "c.json")]}
    # Run as `python -m mcpx` (no `mcpx` script): this interpreter, and this checkout if it would not find it.
    monkeypatch.setattr(sys, "argv", [str(ROOT / "mcpx" / "__main__.py")])
    command, env = invoked_mcpx()
    assert command == [sys.executable, "-m", "mcpx"] and env in ({}, {"PYTHONPATH": str(ROOT)}), (command, env)


def test_servers_mcpx_would_not_serve_as_the_host_does_stay_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    path = tmp_path / ".mcp.json"
    servers: dict[str, Any] = {
        "fs": FS,
        "gh": {"type": "http", "url": "https://example.com/mcp", "headers": {"A": "Bearer ${NOT_SET_ANYWHERE}"}},
        "old": {"type": "sse", "url": "https://example.com/sse"},
        "prompted": {"command": "x", "env": {"KEY": "${input:key}"}},
        "ws": {"command": "x", "args": ["${workspaceFolder}"]},
        "typo": {"command": "x", "comand": "y"},
        "clash": {"command": "mine"},
        "gateway": {"command": "/opt/bin/mcpx", "args": ["serve"]},
        "signed": {"type": "http", "url": "https://example.com/mcp", "oauth": {"clientId": "c"}},
    }
    path.write_text(json.dumps({"mcpServers": servers}))
    (tmp_path / ".mcpx.json").write_text(json.dumps({"mcpServers": {"clash": {"command": "theirs"}}}))
    said = run(capsys, "claude-code")
    assert "moved to" in said and ": fs, gh" in said, said
    assert "gh: ${NOT_SET_ANYWHERE} is not set here: taken along as-is" in said  # and said so
    for line in (
        "old: type 'sse': mcpx speaks stdio and Streamable HTTP only",
        "prompted: ${input:key} in server 'prompted' is a VS Code prompt",
        "ws: uses ${workspaceFolder}, which only the host expands",
        "typo: unknown key 'comand' in server 'typo'; did you mean 'command'?",
        "clash: mcpx's config already has a different server 'clash'",
        "removed from .mcp.json: gateway",
        "signed: 'oauth': the host signs in for it, mcpx sends only `headers`",
    ):
        assert line in said, (line, said)
    left = json.loads(path.read_text())["mcpServers"]
    assert set(left) == {"old", "prompted", "ws", "typo", "clash", "signed", "mcpx"}, left
    moved = json.loads((tmp_path / ".mcpx.json").read_text())["mcpServers"]
    assert moved == {"clash": {"command": "theirs"}, "fs": FS, "gh": servers["gh"]}  # taken as-is
    assert json.loads((tmp_path / ".mcpx.json.bak").read_text()) == {"mcpServers": {"clash": {"command": "theirs"}}}


def test_http_entry_points_at_the_port_given_or_the_one_the_daemon_will_listen_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = json.loads(run(capsys, "vscode", "--http", "--port", "7999", "--print"))
    assert printed == {"servers": {"mcpx": {"type": "http", "url": "http://127.0.0.1:7999/mcp"}}}
    path = tmp_path / "new" / ".mcp.json"
    said = run(capsys, "claude-code", "--http", "--file", str(path))
    assert json.loads(path.read_text()) == {
        "mcpServers": {"mcpx": {"type": "http", "url": "http://127.0.0.1:7435/mcp"}}
    }
    assert "no daemon is running: wrote the port it will listen on (7435)" in said
    assert not (path.parent / ".mcp.json.bak").exists()  # nothing to back up
    (tmp_path / ".mcpx.json").write_text(json.dumps({"daemon": {"port": 7611}}))
    run(capsys, "cursor", "--http", "--file", str(tmp_path / "cursor.json"))
    assert json.loads((tmp_path / "cursor.json").read_text())["mcpServers"]["mcpx"]["url"].endswith(":7611/mcp")
    (tmp_path / ".mcpx.json").write_text(json.dumps({"daemon": {"port": 0}}))
    assert main(["install-host", "cursor", "--http", "--file", str(tmp_path / "c2.json")]) == 1
    assert "start it: mcpx daemon --config" in capsys.readouterr().err and not (tmp_path / "c2.json").exists()


CODEX = """# my Codex settings
model = "o3"  # the model I use

[mcp_servers.fs]
command = "npx"  # the filesystem server
args = ["-y", "fs"]
env = { ROOT = "/tmp" }
tool_timeout_sec = 30

# kept by Codex: mcpx cannot filter tools
[mcp_servers.limited]
command = "x"
enabled_tools = ["a"]

[mcp_servers.gh]
url = "https://example.com/mcp"
bearer_token_env_var = "GH_TOKEN"
http_headers = { "X-Team" = "core" }

# profiles below
[profiles.fast]
model = "o4-mini"
"""


def test_codex_servers_move_from_its_toml_with_its_comments_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(CODEX)
    said = run(capsys, "codex", "--file", str(path))
    assert "fs, gh" in said and "limited: 'enabled_tools': mcpx has no per-server tool filter" in said, said
    text = path.read_text()
    for comment in ("# my Codex settings", "# the model I use", "# kept by Codex: mcpx cannot filter tools",
                    "# profiles below"):  # fmt: skip
        assert comment in text, (comment, text)
    data = tomllib.loads(text)
    assert data["model"] == "o3" and data["profiles"] == {"fast": {"model": "o4-mini"}}
    assert list(data["mcp_servers"]) == ["limited", "mcpx"]
    assert data["mcp_servers"]["mcpx"]["args"][-3:] == ["serve", "--config", str(tmp_path / ".mcpx.json")]
    assert text.index("# profiles below") < text.index("[profiles.fast]")  # still above what it is about
    moved = json.loads((tmp_path / ".mcpx.json").read_text())["mcpServers"]
    assert moved["fs"] == {"command": "npx", "args": ["-y", "fs"], "env": {"ROOT": "/tmp"}, "mcpx": {"callTimeout": 30}}
    assert moved["gh"] == {
        "url": "https://example.com/mcp",
        "headers": {"X-Team": "core", "Authorization": "Bearer ${GH_TOKEN}"},
    }
    assert (tmp_path / "config.toml.bak").read_text() == CODEX
    before = path.read_text()
    assert "unchanged" in run(capsys, "codex", "--file", str(path))
    assert path.read_text() == before
    http = tomllib.loads(run(capsys, "codex", "--http", "--port", "7611", "--print"))
    assert http == {"mcp_servers": {"mcpx": {"url": "http://127.0.0.1:7611/mcp"}}}


def test_undo_puts_the_servers_back_and_keeps_what_changed_since(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(CODEX)
    run(capsys, "codex", "--file", str(path))
    run(capsys, "codex", "--http", "--port", "7611", "--file", str(path))  # a second run keeps the first backup
    assert (tmp_path / "config.toml.bak").read_text() == CODEX
    # The user edits the file meanwhile and adds a server, which a third run moves too.
    path.write_text(path.read_text().replace('"o4-mini"', '"o5"') + '\n[mcp_servers.late]\ncommand = "late"\n')
    assert "late" in run(capsys, "codex", "--file", str(path))
    said = run(capsys, "codex", "--undo", "--file", str(path))
    assert "back in it: fs, gh, late" in said and f"{tmp_path / '.mcpx.json'}: removed" in said, said
    data = tomllib.loads(path.read_text())
    assert data["profiles"]["fast"]["model"] == "o5"  # the user's edit stays
    assert data["mcp_servers"] == tomllib.loads(CODEX)["mcp_servers"] | {"late": {"command": "late"}}
    assert "# the filesystem server" in path.read_text()  # the table came back whole
    assert not (tmp_path / ".mcpx.json").exists() and not (tmp_path / "config.toml.bak").exists()
    assert "nothing to undo" in run(capsys, "codex", "--undo", "--file", str(path))


def test_undo_leaves_mcpx_s_other_servers_and_what_changed_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".mcpx.json").write_text(json.dumps({"mcpServers": {"mine": {"command": "m"}}, "daemon": {"port": 0}}))
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"fs": FS, "git": {"command": "uvx"}}}))
    run(capsys, "claude-code")
    config = json.loads((tmp_path / ".mcpx.json").read_text())
    config["mcpServers"]["git"]["args"] = ["mcp-server-git"]  # changed in mcpx's config since
    (tmp_path / ".mcpx.json").write_text(json.dumps(config))
    said = run(capsys, "claude-code", "--undo")
    assert "still serves git (changed there since they moved)" in said, said
    assert json.loads((tmp_path / ".mcp.json").read_text()) == {"mcpServers": {"fs": FS, "git": {"command": "uvx"}}}
    after = json.loads((tmp_path / ".mcpx.json").read_text())
    assert after["mcpServers"] == {"mine": {"command": "m"}, "git": {"command": "uvx", "args": ["mcp-server-git"]}}
    assert after["daemon"] == {"port": 0}


def test_user_scope_uses_the_hosts_file_under_home_and_the_users_mcpx_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    run(capsys, "cursor", "--scope", "user")
    entry = json.loads((tmp_path / "home" / ".cursor" / "mcp.json").read_text())["mcpServers"]["mcpx"]
    assert entry["args"][-2:] == ["--config", str(tmp_path / "xdg" / "mcpx" / "config.json")]
    run(capsys, "codex", "--scope", "user")
    assert "mcpx" in tomllib.loads((tmp_path / "home" / ".codex" / "config.toml").read_text())["mcp_servers"]
    monkeypatch.setenv("MCPX_CONFIG", str(tmp_path / "chosen.json"))  # the config search's second place
    run(capsys, "claude-code", "--scope", "user")
    entry = json.loads((tmp_path / "home" / ".claude.json").read_text())["mcpServers"]["mcpx"]
    assert entry["args"][-1] == str(tmp_path / "chosen.json")


def test_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "claude_desktop_config.json"
    assert main(["install-host", "claude-desktop", "--http", "--file", str(path)]) == 2
    assert "stdio servers only" in capsys.readouterr().err and not path.exists()
    assert main(["install-host", "claude-code", "--config", ".mcp.json"]) == 2  # mcpx's config is not the host's
    assert "own file" in capsys.readouterr().err and not (tmp_path / ".mcp.json").exists()
    (tmp_path / ".mcpx.json").write_text(json.dumps({"mcpServers": {"a": {"comand": "x"}}}))
    assert main(["install-host", "cursor", "--file", str(tmp_path / "c.json")]) == 1
    assert "does not load as it is" in capsys.readouterr().err and not (tmp_path / "c.json").exists()


def test_a_private_host_files_servers_and_backup_stay_private(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`~/.claude.json` is 0600 and its servers may carry tokens: the backup and mcpx's config that
    takes them are no more open than it."""
    path = tmp_path / "home" / ".claude.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"mcpServers": {"gh": {"url": "https://x/mcp", "headers": {"A": "Bearer t0ken"}}}}))
    path.chmod(0o600)
    (tmp_path / "xdg").mkdir()
    config = tmp_path / "home" / ".config" / "mcpx" / "config.json"
    run(capsys, "claude-code", "--scope", "user")
    assert json.loads(config.read_text())["mcpServers"]["gh"]["headers"] == {"A": "Bearer t0ken"}
    for written in (path, path.with_name(".claude.json.bak"), config):
        assert written.stat().st_mode & 0o777 == 0o600, written
