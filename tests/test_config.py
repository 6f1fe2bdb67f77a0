"""Config loading: the mcpServers shape other hosts use, mcpx's own blocks, and clear refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mcpx.config.model import Config, ConfigError, find_config, load_config, parse_config
from mcpx.config.reference import render

ROOT = Path(__file__).resolve().parents[1]


def test_claude_style_mcp_json_loads_with_foreign_keys_tolerated(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {"fs": {"type": "stdio", "command": "npx", "args": ["x"], "env": {"A": "1"}}},
                "globalShortcut": "Ctrl+Space",
            }
        )
    )
    cfg = load_config(path)
    assert cfg.mcpServers["fs"].transport == "stdio" and cfg.namespace_of("fs") == "fs"


def test_unknown_key_in_mcpx_block_is_refused_naming_file_and_key() -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config({"mcpServers": {"a": {"command": "x", "mcpx": {"namespase": "q"}}}}, "cfg.json")
    assert "cfg.json: mcpServers.a.mcpx.namespase: unknown key 'namespase'" in str(exc.value)


def test_server_needs_exactly_one_transport() -> None:
    with pytest.raises(ConfigError, match="exactly one of `command`"):
        parse_config({"mcpServers": {"a": {"command": "x", "url": "http://127.0.0.1:1/mcp"}}}, "c")


def test_scope_host_is_for_stdio_servers_only() -> None:
    with pytest.raises(ConfigError, match="only for stdio servers"):
        parse_config({"mcpServers": {"a": {"url": "http://127.0.0.1:9/mcp", "mcpx": {"scope": "host"}}}}, "c")
    parsed = parse_config({"mcpServers": {"a": {"command": "x", "mcpx": {"scope": "host", "maxInstances": 2}}}}, "c")
    assert parsed.mcpServers["a"].mcpx.scope == "host" and parsed.mcpServers["a"].mcpx.maxInstances == 2


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
    path.write_text(json.dumps({"mcpServers": {"a": {"comand": "x", "mcpx": {"passthru": True}}}}))
    proc = subprocess.run(
        [sys.executable, "-m", "mcpx", "daemon", "--config", str(path), "--state-dir", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert f"{path}: mcpServers.a.comand: unknown key 'comand' in server 'a'; did you mean 'command'?" in proc.stderr
    assert f"{path}: mcpServers.a.mcpx.passthru: unknown key 'passthru'" in proc.stderr
    assert "did you mean 'passthrough'?" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "s" / "daemon.json").exists()


def test_readme_config_reference_is_current() -> None:
    assert render() in (ROOT / "README.md").read_text()


def test_the_doc_generators_write_the_checkouts_own_docs() -> None:
    """`python -m mcpx.config.reference` and `python -m mcpx.api.event_schemas` rewrite the
    README and docs/api.md beside mcpx/ (a package move once pointed the first at mcpx/README.md)."""
    from mcpx.api.event_schemas import API_DOC
    from mcpx.config.reference import README

    assert README == ROOT / "README.md" and API_DOC == ROOT / "docs" / "api.md"


def test_the_config_reference_has_a_section_for_every_config_model() -> None:
    """A new section of the config (a model field of a model) is described, not only named."""
    from pydantic import BaseModel

    from mcpx.config.reference import SECTIONS

    listed = {model for _, model in SECTIONS}
    todo, seen = [Config], set()
    while todo:
        model = todo.pop()
        seen.add(model)
        for field in model.model_fields.values():
            for kind in (field.annotation, *getattr(field.annotation, "__args__", ())):
                for inner in (kind, *getattr(kind, "__args__", ())):
                    if isinstance(inner, type) and issubclass(inner, BaseModel) and inner not in seen:
                        todo.append(inner)
    assert seen <= listed, sorted(m.__name__ for m in seen - listed)


def test_api_doc_lists_the_event_schemas_the_code_has() -> None:
    from mcpx.api.event_schemas import render as render_events

    assert render_events() in (ROOT / "docs" / "api.md").read_text()


# ---- bad config is never silent ------------------------------------------------------------


def test_a_misspelt_top_level_key_is_an_error_with_a_suggestion() -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config({"mcpServer": {"a": {"command": "x"}}}, "cfg.json")
    assert str(exc.value) == (
        "cfg.json: mcpServer: unknown top-level key 'mcpServer'; did you mean 'mcpServers'?"
        " (without it mcpx serves nothing)"
    )


def test_other_hosts_known_top_level_keys_pass_without_a_word() -> None:
    cfg = parse_config({"mcpServers": {}, "globalShortcut": "x", "inputs": [], "$schema": "s", "theme": "dark"}, "c")
    assert cfg.warnings == []


def test_disabled_servers_are_kept_but_not_started() -> None:
    cfg = parse_config({"mcpServers": {"a": {"command": "x", "disabled": True}, "b": {"command": "y"}}}, "c")
    assert set(cfg.mcpServers) == {"a", "b"} and set(cfg.active_servers) == {"b"}


@pytest.mark.parametrize(
    "server",
    [
        {"command": "mcpx", "args": ["serve"]},
        {"type": "stdio", "command": "/home/u/venv/bin/mcpx", "args": ["serve", "--config", "/p/.mcpx.json"]},
        {"command": "python3", "args": ["-m", "mcpx", "serve"]},
    ],
)
def test_a_hosts_own_mcpx_serve_entry_is_skipped_with_a_note(server: dict[str, object]) -> None:
    """The file a host and mcpx both read (`.mcp.json`) holds the entry the host reaches mcpx by:
    proxying it would be mcpx proxying itself, so it is left out, the rest served."""
    cfg = parse_config({"mcpServers": {"mcpx": server, "fs": {"command": "npx"}}}, "cfg.json")
    assert list(cfg.mcpServers) == ["fs"]
    assert cfg.notes == ["cfg.json: server 'mcpx' is `mcpx serve` itself (a host's way to reach mcpx): skipped"]


def test_mcpx_subcommands_other_than_serve_are_fine_upstreams() -> None:
    cfg = parse_config({"mcpServers": {"d": {"command": "mcpx", "args": ["demo-upstream"]}}}, "c")
    assert "d" in cfg.active_servers


def test_the_daemon_says_when_it_found_no_config(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    env.pop("MCPX_CONFIG", None)
    expected = "no config file found (searched: --config, MCPX_CONFIG"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpx", "daemon", "--port", "0", "--state-dir", str(tmp_path / "state")],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    stop = threading.Timer(20, proc.terminate)  # ends the read below if the line never comes
    stop.start()
    try:
        assert proc.stderr is not None
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if expected in line:
                break
        assert any(expected in line for line in lines), lines
    finally:
        stop.cancel()
        proc.terminate()
        proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()


def test_mcpx_serve_with_no_daemon_and_no_config_refuses_instead_of_starting_an_empty_one(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    env.pop("MCPX_CONFIG", None)
    state = tmp_path / "state"
    proc = subprocess.run(
        [sys.executable, "-m", "mcpx", "serve", "--state-dir", str(state)],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "no config file was found" in proc.stderr and "mcpx serve --config FILE" in proc.stderr, proc.stderr
    assert not (state / "daemon.json").exists()  # no daemon was left behind
