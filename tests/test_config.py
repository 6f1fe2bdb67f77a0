"""Config loading: the mcpServers shape other hosts use, mcpx's own blocks, and clear refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mcpx.config import ConfigError, find_config, load_config, parse_config
from mcpx.config_reference import render

ROOT = Path(__file__).resolve().parents[1]


def test_claude_style_mcp_json_loads_with_foreign_keys_tolerated(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {"fs": {"type": "stdio", "command": "npx", "args": ["x"], "env": {"A": "1"}}},
                "otherHostKey": 1,
            }
        )
    )
    cfg = load_config(path)
    assert cfg.mcpServers["fs"].transport == "stdio" and cfg.namespace_of("fs") == "fs"


def test_unknown_key_in_mcpx_block_is_refused_naming_file_and_key() -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config({"mcpServers": {"a": {"command": "x", "mcpx": {"namespase": "q"}}}}, "cfg.json")
    assert "cfg.json: mcpServers.a.mcpx.namespase: unknown key" in str(exc.value)


def test_server_needs_exactly_one_transport() -> None:
    with pytest.raises(ConfigError, match="exactly one of `command`"):
        parse_config({"mcpServers": {"a": {"command": "x", "url": "http://127.0.0.1:1/mcp"}}}, "c")


def test_wrong_type_says_what_was_expected() -> None:
    with pytest.raises(ConfigError, match=r"c: daemon.port: Input should be a valid integer"):
        parse_config({"daemon": {"port": "eighty"}}, "c")


def test_only_loopback_address_is_accepted() -> None:
    with pytest.raises(ConfigError, match=r"daemon\.address"):
        parse_config({"daemon": {"address": "0.0.0.0"}}, "c")


def test_duplicate_namespaces_are_refused() -> None:
    with pytest.raises(ConfigError, match="share the namespace"):
        parse_config(
            {
                "mcpServers": {
                    "a": {"command": "x", "mcpx": {"namespace": "n"}},
                    "b": {"command": "y", "mcpx": {"namespace": "n"}},
                }
            },
            "c",
        )


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"mcpServers": {,}}')
    with pytest.raises(ConfigError, match=r"bad.json: not valid JSON at line 1 column 17"):
        load_config(path)


def test_search_order_prefers_explicit_then_env_then_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".mcp.json").write_text("{}")
    monkeypatch.delenv("MCPX_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert find_config(None, tmp_path) == tmp_path / ".mcp.json"
    (tmp_path / ".mcpx.json").write_text("{}")
    assert find_config(None, tmp_path) == tmp_path / ".mcpx.json"
    monkeypatch.setenv("MCPX_CONFIG", "/env.json")
    assert find_config(None, tmp_path) == Path("/env.json")
    assert find_config("/explicit.json", tmp_path) == Path("/explicit.json")


def test_daemon_refuses_a_bad_config_with_one_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "x", "mcpx": {"passthru": True}}}}))
    proc = subprocess.run(
        [sys.executable, "-m", "mcpx", "daemon", "--config", str(path), "--state-dir", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert f"{path}: mcpServers.a.mcpx.passthru: unknown key" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_readme_config_reference_is_current() -> None:
    assert render() in (ROOT / "README.md").read_text()


def test_api_doc_lists_the_event_schemas_the_code_has() -> None:
    from mcpx.api.event_schemas import render as render_events

    assert render_events() in (ROOT / "docs" / "api.md").read_text()
