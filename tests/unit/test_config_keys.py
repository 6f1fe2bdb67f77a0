"""A config never fails quietly: every unknown key is an error naming it, where it is and what it
probably meant; the keys other hosts write load; `${VAR}`s expand as Claude Code and VS Code do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcpx.config.doc_blocks import rewrite_block
from mcpx.config.expand import parse_env_file
from mcpx.config.host_keys import (
    OTHER_HOSTS_SERVER_OBJECTS,
    SERVER_KEYS_FROM_OTHER_HOSTS,
    TOP_LEVEL_FROM_OTHER_HOSTS,
    did_you_mean,
    render_host_keys,
)
from mcpx.config.model import ConfigError, load_config, parse_config

ROOT = Path(__file__).resolve().parents[2]


def refusal(data: dict[str, Any], environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as exc:
        parse_config(data, "cfg.json", environ=environ or {})
    return str(exc.value)


# ---- typos are errors naming the key, the server and the suggestion ------------------------------


@pytest.mark.parametrize(
    ("typo", "meant"),
    [("arg", "args"), ("enviroment", "env"), ("comand", "command"), ("Args", "args"), ("working_dir", "cwd")],
)
def test_a_misspelt_server_key_is_an_error_naming_key_server_and_suggestion(typo: str, meant: str) -> None:
    entry: dict[str, Any] = {"command": "x", typo: ["a"]} if typo != "comand" else {"comand": "x"}
    message = refusal({"mcpServers": {"fs": entry}})
    assert f"cfg.json: mcpServers.fs.{typo}: unknown key {typo!r} in server 'fs'; did you mean {meant!r}?" in message


def test_comand_is_named_instead_of_the_generic_transport_error() -> None:
    message = refusal({"mcpServers": {"fs": {"comand": "npx", "args": ["srv"]}}})
    assert "'comand'" in message and "did you mean 'command'?" in message
    assert "exactly one of" not in message


@pytest.mark.parametrize("typo", ["mcpServer", "mcpservers", "McpServers", "mcpServerss"])
def test_a_top_level_key_one_edit_from_mcpservers_is_an_error(typo: str) -> None:
    message = refusal({typo: {"fs": {"command": "x"}}})
    assert f"cfg.json: {typo}: unknown top-level key {typo!r}; did you mean 'mcpServers'?" in message


@pytest.mark.parametrize("key", sorted(OTHER_HOSTS_SERVER_OBJECTS))
def test_another_hosts_servers_object_alone_is_an_error_saying_mcpx_reads_mcpservers(key: str) -> None:
    message = refusal({key: {"fs": {"command": "x"}}})
    assert f"cfg.json: {key}: top-level {key!r} is" in message and "mcpx reads 'mcpServers'" in message


def test_another_hosts_servers_object_beside_mcpservers_is_left_alone() -> None:
    cfg = parse_config({"mcpServers": {"a": {"command": "x"}}, "servers": {"b": {}}}, "c", environ={})
    assert set(cfg.mcpServers) == {"a"}


@pytest.mark.parametrize(
    ("data", "where", "message"),
    [
        ({"mcpServers": {"a": {"command": "x", "mcpx": {"namespase": "q"}}}}, "mcpServers.a.mcpx.namespase",
         "unknown key 'namespase' in mcpx of server 'a'; did you mean 'namespace'?"),
        ({"mcpServers": {"a": {"command": "x", "mcpx": {"tools": {"t": {"taskSuport": "required"}}}}}},
         "mcpServers.a.mcpx.tools.t.taskSuport", "in mcpx.tools.t of server 'a'; did you mean 'taskSupport'?"),
        ({"taks": {}}, "taks", "unknown top-level key 'taks'; did you mean 'tasks'?"),
        ({"tasks": {"ttl": 5}}, "tasks.ttl", "unknown key 'ttl' in tasks; did you mean 'ttlMs'?"),
        ({"daemon": {"prot": 1}}, "daemon.prot", "unknown key 'prot' in daemon; did you mean 'port'?"),
        ({"auth": {"tokens": [{"principal": "p", "tokn": "x" * 16}]}}, "auth.tokens.0.tokn", "did you mean 'token'?"),
        ({"frobnicate": 1}, "frobnicate", "unknown top-level key 'frobnicate' (not an mcpx option)"),
    ],
)  # fmt: skip
def test_unknown_keys_in_every_section_are_errors_with_a_suggestion(
    data: dict[str, Any], where: str, message: str
) -> None:
    assert f"cfg.json: {where}: " in refusal(data) and message in refusal(data)


def test_every_problem_is_listed_at_once() -> None:
    message = refusal({"mcpServers": {"a": {"command": "x", "arg": []}, "b": {"url": "http://h/mcp", "header": {}}}})
    assert "'arg' in server 'a'" in message and "'header' in server 'b'; did you mean 'headers'?" in message


def test_did_you_mean_finds_case_separator_synonym_and_close_spellings() -> None:
    keys = ["command", "args", "env", "cwd", "url", "headers", "disabled"]
    assert did_you_mean("ENV", keys) == "env"
    assert did_you_mean("environment", keys) == "env"
    assert did_you_mean("enabled", keys) == "disabled"
    assert did_you_mean("xyzzy", keys) is None


# ---- the keys other hosts write load -------------------------------------------------------------


def test_a_mcp_json_with_every_allow_listed_host_key_loads(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("FROM_FILE=1\n")
    samples: dict[str, Any] = {"envFile": ".env", "disabled": False, "timeout": 60, "type": "stdio"}
    stdio = {"command": "srv", **{k: samples.get(k, {}) for k in SERVER_KEYS_FROM_OTHER_HOSTS}}
    del stdio["serverUrl"], stdio["httpUrl"]  # their names for `url`: an HTTP server's below
    data = {
        "mcpServers": {
            "local": stdio,
            "windsurf": {"serverUrl": "http://127.0.0.1:9/mcp", "disabledTools": []},
            "gemini": {"httpUrl": "http://127.0.0.1:8/mcp", "trust": True, "timeout": 30000},
        },
        **{key: {} for key in TOP_LEVEL_FROM_OTHER_HOSTS},
        "$schema": "https://example.invalid/schema.json",
    }
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps(data))
    cfg = load_config(path, environ={})
    assert set(cfg.active_servers) == {"local", "windsurf", "gemini"}
    assert cfg.mcpServers["windsurf"].url == "http://127.0.0.1:9/mcp"
    assert cfg.mcpServers["gemini"].url == "http://127.0.0.1:8/mcp"
    assert cfg.mcpServers["local"].env == {"FROM_FILE": "1"}
    # The auth schemes mcpx does not run are said, so a 401 later is not a mystery.
    assert any("'oauth'" in note and "'local'" in note for note in cfg.warnings)


def test_disabled_true_keeps_the_server_out_of_the_active_ones() -> None:
    cfg = parse_config({"mcpServers": {"a": {"command": "x", "disabled": True}, "b": {"command": "y"}}}, "c")
    assert set(cfg.active_servers) == {"b"}


def test_docs_hosts_md_lists_the_allow_listed_keys_as_the_code_has_them(tmp_path: Path) -> None:
    copy = tmp_path / "hosts.md"
    copy.write_text((ROOT / "docs" / "hosts.md").read_text())
    assert not rewrite_block(copy, "host-keys", render_host_keys()), "run: python -m mcpx.config.host_keys"


# ---- ${VAR} substitution -------------------------------------------------------------------------


def test_variables_expand_in_command_args_env_url_and_headers() -> None:
    environ = {"BIN": "/opt/srv", "TOKEN": "t0k", "HOST": "127.0.0.1"}
    cfg = parse_config(
        {
            "mcpServers": {
                "s": {
                    "command": "${BIN}",
                    "args": ["--x=${env:TOKEN}", "${MISSING:-fallback}"],
                    "env": {"K": "${TOKEN}"},
                },
                "h": {"url": "http://${HOST}:${PORT:-9}/mcp", "headers": {"Authorization": "Bearer ${env:TOKEN}"}},
            }
        },
        "c",
        environ=environ,
    )
    s, h = cfg.mcpServers["s"], cfg.mcpServers["h"]
    assert (s.command, s.args, s.env) == ("/opt/srv", ["--x=t0k", "fallback"], {"K": "t0k"})
    assert (h.url, h.headers) == ("http://127.0.0.1:9/mcp", {"Authorization": "Bearer t0k"})


def test_an_unset_variable_is_an_error_naming_it_and_the_server() -> None:
    message = refusal(
        {"mcpServers": {"gh": {"url": "http://h/mcp", "headers": {"Authorization": "Bearer ${GH_TOKEN}"}}}}
    )
    assert "cfg.json: mcpServers.gh.headers.Authorization: environment variable GH_TOKEN is not set" in message
    assert "server 'gh'" in message and "${GH_TOKEN:-value}" in message


def test_an_empty_variable_takes_the_default_and_a_vs_code_input_is_refused() -> None:
    cfg = parse_config({"mcpServers": {"s": {"command": "${E:-dflt}"}}}, "c", environ={"E": ""})
    assert cfg.mcpServers["s"].command == "dflt"
    assert "is a VS Code prompt" in refusal({"mcpServers": {"s": {"command": "x", "env": {"K": "${input:key}"}}}})


def test_env_file_is_read_relative_to_the_config_and_env_wins(tmp_path: Path) -> None:
    (tmp_path / "secrets.env").write_text("# comment\nexport A='from file'\nB=\"2\"\n\nC=3\n")
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"mcpServers": {"s": {"command": "x", "envFile": "secrets.env", "env": {"C": "env"}}}}))
    assert load_config(path, environ={}).mcpServers["s"].env == {"A": "from file", "B": "2", "C": "env"}
    path.write_text(json.dumps({"mcpServers": {"s": {"command": "x", "envFile": "${HOME:-.}/nope.env"}}}))
    with pytest.raises(ConfigError, match=r"server 's': cannot read its envFile '.*nope.env'"):
        load_config(path, environ={})


def test_parse_env_file_skips_comments_and_unquotes() -> None:
    assert parse_env_file("X=1\n# y=2\nexport Z = 'a b'\nbad line\n") == {"X": "1", "Z": "a b"}
