"""`mcpx install-host`: each host's entry in the shape that host documents (docs/hosts.md), merged
into its file with the rest kept, a backup first, and nothing changed on a second run."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from mcpx.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["install-host", *args]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    ("host", "servers_key", "typed"),
    [("claude-code", "mcpServers", True), ("cursor", "mcpServers", False), ("vscode", "servers", True),
     ("claude-desktop", "mcpServers", False)],
)  # fmt: skip
def test_json_hosts_get_their_documented_shape_merged_with_a_backup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], host: str, servers_key: str, typed: bool
) -> None:
    path = tmp_path / "mcp.json"
    other = {servers_key: {"fs": {"command": "npx", "args": ["fs"]}}, "inputs": [], "globalShortcut": "x"}
    path.write_text(json.dumps(other))
    assert "now reaches mcpx" in run(capsys, host, "--file", str(path))
    data = json.loads(path.read_text())
    entry = data[servers_key]["mcpx"]
    assert entry["args"] == ["serve"] and entry["command"].endswith("mcpx")
    assert ("type" in entry) == typed and entry.get("type", "stdio") == "stdio"
    assert (
        data[servers_key]["fs"] == other[servers_key]["fs"] and data["inputs"] == [] and data["globalShortcut"] == "x"
    )
    assert json.loads((tmp_path / "mcp.json.bak").read_text()) == other
    before = path.read_text()
    assert "unchanged" in run(capsys, host, "--file", str(path))
    assert path.read_text() == before and json.loads((tmp_path / "mcp.json.bak").read_text()) == other


def test_http_entry_points_at_the_daemons_mcp_url(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    printed = json.loads(run(capsys, "vscode", "--http", "--port", "7999", "--print"))
    assert printed == {"servers": {"mcpx": {"type": "http", "url": "http://127.0.0.1:7999/mcp"}}}
    path = tmp_path / "new" / ".mcp.json"
    run(capsys, "claude-code", "--http", "--file", str(path))
    assert json.loads(path.read_text()) == {
        "mcpServers": {"mcpx": {"type": "http", "url": "http://127.0.0.1:7435/mcp"}}
    }
    assert not (path.parent / ".mcp.json.bak").exists()  # nothing to back up


def test_codex_gets_a_mcp_servers_table_in_its_toml_with_the_rest_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.toml"
    path.write_text('model = "o3"\n\n[mcp_servers.mcpx]\ncommand = "old"\n\n[mcp_servers.fs]\ncommand = "npx"\n')
    run(capsys, "codex", "--file", str(path))
    data = tomllib.loads(path.read_text())
    assert data["model"] == "o3" and data["mcp_servers"]["fs"] == {"command": "npx"}
    assert data["mcp_servers"]["mcpx"]["args"] == ["serve"] and data["mcp_servers"]["mcpx"]["command"].endswith("mcpx")
    assert (tmp_path / "config.toml.bak").read_text().startswith('model = "o3"')
    before = path.read_text()
    assert "unchanged" in run(capsys, "codex", "--file", str(path))
    assert path.read_text() == before
    http = tomllib.loads(run(capsys, "codex", "--http", "--print"))
    assert http == {"mcp_servers": {"mcpx": {"url": "http://127.0.0.1:7435/mcp"}}}


def test_user_scope_uses_the_hosts_file_under_home(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # never the real home
    run(capsys, "cursor", "--scope", "user")
    assert "mcpx" in json.loads((tmp_path / ".cursor" / "mcp.json").read_text())["mcpServers"]
    run(capsys, "codex", "--scope", "user")
    assert "mcpx" in tomllib.loads((tmp_path / ".codex" / "config.toml").read_text())["mcp_servers"]


def test_claude_desktop_is_not_given_a_url_it_cannot_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "claude_desktop_config.json"
    assert main(["install-host", "claude-desktop", "--http", "--file", str(path)]) == 2
    assert "stdio servers only" in capsys.readouterr().err and not path.exists()
