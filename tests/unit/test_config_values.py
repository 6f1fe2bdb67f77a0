"""A config value the runtime cannot use is refused at load, naming its key (docs/security.md, "The
config"): URLs are parsed as their sender parses them (httpx for webhooks, mcpx's HTTP client for
upstreams, asyncpg for the store), a program's arguments hold no NUL, and the file is UTF-8 JSON.
What the config takes, the runtime takes: checked with hypothesis against the real parsers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpx.config.model import ConfigError, load_config, parse_config
from mcpx.upstream.http import h1

SECRET = "sixteen-chars-or-more"


def refused(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(data, "cfg.json")
    return str(info.value)


def webhook(url: str) -> dict[str, Any]:
    return {"notify": {"webhooks": [{"url": url, "secret": SECRET}]}}


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://hooks.example:8O80/x", "port '8O80' is not a number from 1 to 65535"),  # a letter O
        ("http://hooks.example :8080/x", "has a space"),
        ("http://hooks.example/a path", "has a space"),
        ("hooks.example:8080/x", "must start with http:// or https://"),
        ("http://hooks.example:99999/x", "port '99999' is not a number"),  # httpx takes it, connecting raises
        ("http://hooks.example:0/x", "port 0"),
        ("http://:8080/x", "names no host"),
        ("http://user@/x", "names no host"),
        ("http://xn--a/x", "httpx cannot use it"),  # bad punycode: idna raises inside httpx
        ("http://\u2603\u2603-.com/x", "httpx cannot use it: Invalid IDNA hostname"),
    ],
)
def test_a_typo_in_a_webhook_url_is_refused_at_load_naming_the_key(url: str, says: str) -> None:
    message = refused(webhook(url))
    assert message.startswith("cfg.json: notify.webhooks.0.url: ") and says in message, message
    assert "/x" not in message.replace(url, "")  # the path (often the secret) is not repeated past the URL


@pytest.mark.parametrize(
    ("data", "key", "says"),
    [
        ({"mcpServers": {"up": {"url": "http://api.example:8O80/mcp"}}}, "mcpServers.up", "`url` port '8O80'"),
        ({"mcpServers": {"up": {"url": "api.example/mcp"}}}, "mcpServers.up", "`url` must start with http"),
        ({"mcpServers": {"up": {"url": "http://api example/mcp"}}}, "mcpServers.up", "`url` has a space"),
        ({"mcpServers": {"up": {"url": "http://a/mcp", "headers": {"X-K": "a\r\nb"}}}}, "mcpServers.up", "CR, LF"),
        ({"mcpServers": {"up": {"url": "http://a/mcp", "headers": {"X K": "v"}}}}, "mcpServers.up", "not an HTTP"),
        ({"mcpServers": {"up": {"command": "srv\x00"}}}, "mcpServers.up", "`command` has a NUL"),
        ({"mcpServers": {"up": {"command": "srv", "args": ["a\x00"]}}}, "mcpServers.up", "`args[0]` has a NUL"),
        ({"mcpServers": {"up": {"command": "srv", "env": {"A=B": "1"}}}}, "mcpServers.up", "`env` key 'A=B'"),
        ({"mcpServers": {"up": {"command": "srv", "env": {"A": "\x00"}}}}, "mcpServers.up", "`env.A` has a NUL"),
        ({"mcpServers": {"up": {"command": "srv", "cwd": "/t\x00"}}}, "mcpServers.up", "`cwd` has a NUL"),
        ({"store": {"url": "postgresql://db.example:8O80/mcpx"}}, "store.url", "asyncpg cannot use it"),
        ({"store": {"url": "postgresql://db.example:70000/mcpx"}}, "store.url", "port 70000"),
        ({"store": {"url": "postgresql://db.example/mcpx?sslmode=sure"}}, "store.url", "sslmode"),
        ({"daemon": {"publicUrl": "https://box.tail.example:8O80"}}, "daemon.publicUrl", "port '8O80'"),
        ({"traces": {"endpoint": "http://collector:43I8"}}, "traces.endpoint", "port '43I8'"),
        ({"notify": {"commands": [{"run": ["notify-send", "a\x00b"]}]}}, "notify.commands.0.run", "item 1 has a NUL"),
        ({"notify": {"commands": [{"run": [""]}]}}, "notify.commands.0.run", "the program (its first item) is empty"),
        ({"mcpServers": {"up": {"command": " "}}}, "mcpServers.up", "`command` is empty"),
        ({"daemon": {"allowedOrigins": ["https://app.example/"]}}, "daemon.allowedOrigins.0", "no path"),
        ({"daemon": {"allowedOrigins": ["https://App.example"]}}, "daemon.allowedOrigins.0", "lower case"),
        ({"tasks": {"ttlMs": 10**20}}, "tasks.ttlMs", "a number beyond 2^53"),  # SQLite's INTEGER overflows
        (
            {"mcpServers": {"up": {"command": "s", "mcpx": {"callTimeout": 1e400}}}},
            "mcpServers.up.mcpx.callTimeout",
            "a number beyond 2^53 (or not finite)",
        ),
    ],
)
def test_every_value_the_runtime_parses_later_is_checked_at_load(data: dict[str, Any], key: str, says: str) -> None:
    message = refused(data)
    assert message.startswith(f"cfg.json: {key}: ") and says in message, message


def test_the_values_the_runtime_can_use_still_load() -> None:
    config = parse_config(
        {
            "mcpServers": {
                "api": {"url": "https://user:pw@api.example:8443/mcp?x=1", "headers": {"Authorization": "Bearer t"}},
                "intl": {"url": "http://b\u00fccher.example/mcp"},
                "v6": {"url": "http://[::1]:9000/mcp"},
                "local": {"command": "srv", "args": ["--x", ""], "env": {"K": "v"}, "cwd": "/tmp"},
            },
            "store": {"url": "postgresql://u:p@db1:5432,db2:5433/mcpx?sslmode=require"},
            "daemon": {
                "publicUrl": "https://box.tail.example/mcpx",
                "allowedOrigins": ["https://app.example:8443", "null"],
            },
            "traces": {"endpoint": "http://127.0.0.1:4318"},
            **webhook("https://hooks.example/T0/B1/secret?x=y"),
        },
        "cfg.json",
    )
    assert h1.Client(config.mcpServers["intl"].url or "").host == "xn--bcher-kva.example"
    assert h1.Client(config.mcpServers["v6"].url or "").port == 9000


# ---- the file itself -------------------------------------------------------------------------------


def test_a_file_that_is_not_utf8_is_refused_naming_the_byte_and_line(tmp_path: Path) -> None:
    path = tmp_path / "cfg.json"
    path.write_bytes('{\n  "mcpServers": {"caf\u00e9": {"command": "x"}}\n}\n'.encode("latin-1"))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: not UTF-8 text: byte 0xe9 at line 2 (offset 23); save the file as UTF-8"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"daemon": {"port": NaN}}', "NaN is not a JSON number"),
        ('{"connections": {"stallS": Infinity}}', "Infinity is not a JSON number"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"daemon": {"port": ' + "9" * 5000 + "}}", "not valid JSON"),
    ],
    ids=["nan", "infinity", "deep", "huge-number"],
)
def test_json_python_would_read_but_no_runtime_value_can_be_is_refused(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "cfg.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=says):
        load_config(path)


def test_a_lone_surrogate_escape_is_refused_where_it_is() -> None:
    # `"\ud800"` is valid JSON escaping but no UTF-8 can carry it: a secret, a header, an argument with it
    # would fail when first encoded (a webhook's signature, a process's argv).
    message = refused(
        json.loads('{"notify": {"webhooks": [{"url": "https://h.example/x", "secret": "0123456789abcdef\\ud800"}]}}')
    )
    assert message == "cfg.json: notify.webhooks.0.secret: not valid Unicode text (a lone surrogate escape)"
    message = refused(json.loads('{"mcpServers": {"a\\udfff": {"command": "x"}}}'))
    assert message == "cfg.json: mcpServers.(a key): not valid Unicode text (a lone surrogate escape)"


def test_an_env_file_that_is_not_utf8_is_a_problem_of_its_server(tmp_path: Path) -> None:
    (tmp_path / "vars.env").write_bytes("TOKEN=caf\u00e9\n".encode("latin-1"))
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"mcpServers": {"up": {"command": "srv", "envFile": "vars.env"}}}))
    with pytest.raises(ConfigError, match=r"mcpServers\.up\.envFile: server 'up': cannot use its envFile .*utf-8"):
        load_config(path)


# ---- what the config takes, the runtime takes --------------------------------------------------------

_HOST = st.one_of(
    st.from_regex(r"[a-z0-9][a-z0-9.-]{0,20}", fullmatch=True),
    st.text(min_size=1, max_size=12),
    st.sampled_from(["[::1]", "127.0.0.1", "b\u00fccher.example", "xn--bcher-kva.example", ""]),
)
_PORT = st.one_of(st.none(), st.integers(-5, 70000).map(str), st.text(max_size=6))
_URLS = st.one_of(
    st.builds(
        lambda scheme, userinfo, host, port, path: (
            f"{scheme}{userinfo}{host}{'' if port is None else ':' + port}{path}"
        ),
        st.sampled_from(["http://", "https://", "ftp://", "http:/", ""]),
        st.sampled_from(["", "u@", "u:p@", "@"]),
        _HOST,
        _PORT,
        st.text(max_size=15).map(lambda t: "/" + t),
    ),
    st.text(max_size=40),
)


@settings(max_examples=300, deadline=None)
@given(_URLS)
def test_a_webhook_url_the_config_takes_is_one_httpx_sends_to(url: str) -> None:
    try:
        config = parse_config(webhook(url), "cfg.json")
    except ConfigError:
        return
    request = httpx.Request("POST", config.notify.webhooks[0].url)  # what the sender builds at each attempt
    assert request.url.scheme in ("http", "https") and request.url.host
    assert request.url.port is None or 1 <= request.url.port <= 65535


@settings(max_examples=300, deadline=None)
@given(_URLS)
def test_an_upstream_url_the_config_takes_is_one_mcpxs_http_client_opens(url: str) -> None:
    try:
        config = parse_config({"mcpServers": {"up": {"url": url}}}, "cfg.json")
    except ConfigError:
        return
    client = h1.Client(config.mcpServers["up"].url or "")
    assert client.host.isascii() and 1 <= client.port <= 65535
