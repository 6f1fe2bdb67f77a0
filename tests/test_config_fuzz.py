"""The hostile suite's config file fuzz (#37): any bytes, any JSON, and each `notify` setting fuzzed on
its own. Always a clear refusal (ConfigError; `mcpx daemon` exits 2 with one message and no traceback)
or a config every part of the runtime takes as it is: the daemon is built from it, each webhook's
request is built as httpx sends it, each command's argv as the OS takes it, each upstream URL opened
by mcpx's HTTP client. The bulk runs in-process with hypothesis (default tier); real daemons run a
handful of hostile files here, and a hypothesis-driven batch in the slow tier."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import ROOT, RawHost, reply_of, stdio_server, wait_until
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from mcpx.config.diff import diff_servers, needs_restart
from mcpx.config.model import Config, ConfigError, NotifyConfig, load_config, parse_config
from mcpx.daemon.root import Daemon
from mcpx.events.kinds import EVENT_KINDS
from mcpx.notify import signing
from mcpx.notify.command_hook import CommandHook
from mcpx.notify.notifier import routes_for
from mcpx.notify.webhook import Webhook
from mcpx.upstream.http import h1
from mcpx.upstream.stdio import keeper_wire

pytestmark = [pytest.mark.heavy]

FUZZ_DIR = Path(tempfile.mkdtemp(prefix="mcpx-config-fuzz-"))
atexit.register(shutil.rmtree, FUZZ_DIR, True)
HOSTILE = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---- strategies ------------------------------------------------------------------------------------

_NUMBERS = st.one_of(
    st.integers(-(2**64), 2**64),
    st.sampled_from([0, 1, -1, 2**53, 2**53 + 1, 10**30]),
    st.floats(allow_nan=False, allow_infinity=False),
)
_TEXT = st.one_of(st.text(max_size=30), st.sampled_from(["", "x", "\x00", "\ud800", "é", "http://h/x"]))
_LEAF = st.one_of(st.none(), st.booleans(), _NUMBERS, _TEXT)
_JSON = st.recursive(
    _LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_TEXT, inner, max_size=4)),
    max_leaves=20,
)


def _model_dict(model: type[BaseModel], depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    """A dict with some of `model`'s own keys, each valued by a plausible or a hostile value (so some
    configs load, and the rest are refused for many different reasons)."""
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for name, field in model.model_fields.items():
        sub = _nested_model(field.annotation)
        plausible = [v for v in (field.get_default(call_default_factory=True),) if _jsonable(v)]
        leaf = st.one_of(st.sampled_from(plausible) if plausible else st.nothing(), _LEAF, _JSON)
        fields[name] = st.one_of(_model_dict(sub, depth + 1), leaf) if sub is not None and depth < 2 else leaf
    return st.fixed_dictionaries({}, optional=fields)


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _jsonable(value: object) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


_URL = st.one_of(
    st.builds(
        lambda scheme, host, port, path: f"{scheme}{host}{port}{path}",
        st.sampled_from(["http://", "https://", "ftp://", ""]),
        st.one_of(st.sampled_from(["127.0.0.1", "[::1]", "hooks.example", "b\u00fccher.example", "xn--a", ""]), _TEXT),
        st.one_of(st.just(""), st.integers(-1, 70000).map(lambda p: f":{p}"), _TEXT.map(lambda t: ":" + t)),
        _TEXT.map(lambda t: "/" + t),
    ),
    _JSON,
)
_EVENTS = st.one_of(st.lists(st.sampled_from([*EVENT_KINDS, "question.asked", ""]), max_size=3), _JSON)
_WEBHOOK = st.fixed_dictionaries(
    {}, optional={"url": _URL, "secret": st.one_of(_TEXT, st.text(min_size=16), _JSON), "events": _EVENTS}
)
_RUN = st.one_of(st.lists(_TEXT, max_size=4), st.lists(st.text(min_size=1), min_size=1, max_size=3), _JSON)
_COMMAND = st.fixed_dictionaries({}, optional={"run": _RUN, "events": _EVENTS})
_NOTIFY = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "webhooks": st.one_of(st.lists(_WEBHOOK, max_size=3), _JSON),
            "commands": st.lists(_COMMAND, max_size=3),
        },
    ),
    _JSON,
)
_SERVER = st.one_of(
    st.fixed_dictionaries(
        {"command": _TEXT}, optional={"args": st.lists(_TEXT, max_size=3), "env": _JSON, "cwd": _TEXT}
    ),
    st.fixed_dictionaries({"url": _URL}, optional={"headers": st.dictionaries(_TEXT, _TEXT, max_size=2)}),
    _JSON,
)
_CONFIG = st.one_of(
    _model_dict(Config).map(lambda c: {k: v for k, v in c.items() if k != "mcpServers"}),
    st.fixed_dictionaries({}, optional={"mcpServers": st.dictionaries(_TEXT, _SERVER, max_size=2), "notify": _NOTIFY}),
    _JSON,
)


# ---- what the runtime does with an accepted config, short of running it ------------------------------


def runtime_takes(config: Config) -> None:
    """Everything that reads these settings later, built now: any exception here is a value the load
    should have refused."""
    Daemon(config, None, FUZZ_DIR / "state", 0)  # every part's constructor (the store is not opened)
    needs_restart(Config(), config)
    diff_servers({}, config.active_servers)
    notify_takes(config.notify)
    for server in config.active_servers.values():
        keeper_wire.config_hash(server)
        if server.url is not None:
            h1.Client(server.url)._head("POST", server.headers, b"{}")
        else:
            argv_takes([server.command or "", *server.args], server.env, server.cwd)


def notify_takes(notify: NotifyConfig) -> None:
    client = httpx.AsyncClient()
    for route in routes_for(notify, client):
        sink = route.sink
        if isinstance(sink, Webhook):
            headers = signing.headers(sink._secret, 1_796_540_000, b"{}")
            request = client.build_request("POST", sink.url, content=b"{}", headers=headers)
            assert request.url.host and request.url.scheme in ("http", "https")
        else:
            assert isinstance(sink, CommandHook)
            argv_takes(sink.argv, {}, None)


def argv_takes(argv: list[str], env: dict[str, str], cwd: str | None) -> None:
    """What subprocess checks before it starts a program (Popen raises ValueError on these)."""
    for text in (*argv, *env, *env.values(), cwd or ""):
        assert b"\x00" not in os.fsencode(text)
    assert all(key and "=" not in key for key in env)
    assert argv and argv[0]


def load_or_refuse(raw: bytes) -> Config | None:
    path = FUZZ_DIR / "fuzzed.json"
    path.write_bytes(raw)
    try:
        return load_config(path, environ={})
    except ConfigError as exc:
        assert str(exc).startswith(str(path)), exc  # every message names the file
        return None


# ---- in-process: the bulk ------------------------------------------------------------------------


@HOSTILE
@given(st.one_of(st.binary(max_size=200), _JSON.map(lambda v: json.dumps(v).encode())))
def test_any_bytes_are_a_config_or_a_clear_refusal(raw: bytes) -> None:
    config = load_or_refuse(raw)
    if config is not None:
        runtime_takes(config)


@HOSTILE
@given(_CONFIG, st.sampled_from(["utf-8", "utf-16", "latin-1"]), st.booleans())
def test_any_json_shaped_like_a_config_is_a_config_or_a_clear_refusal(
    data: Any, encoding: str, ascii_only: bool
) -> None:
    raw = json.dumps(data, ensure_ascii=ascii_only).encode(
        encoding, "surrogatepass" if encoding != "latin-1" else "replace"
    )
    config = load_or_refuse(raw)
    if config is not None:
        runtime_takes(config)


@HOSTILE
@given(_NOTIFY)
def test_each_notify_setting_is_usable_by_its_sender_or_refused(notify: Any) -> None:
    try:
        config = parse_config({"notify": notify}, "cfg.json", environ={})
    except ConfigError as exc:
        assert str(exc).startswith("cfg.json: ")
        return
    notify_takes(config.notify)


@HOSTILE
@given(st.dictionaries(_TEXT, _SERVER, max_size=3))
def test_each_server_entry_is_usable_by_the_runtime_or_refused(servers: Any) -> None:
    try:
        config = parse_config({"mcpServers": servers}, "cfg.json", environ={})
    except ConfigError:
        return
    runtime_takes(config)


# ---- real daemons ------------------------------------------------------------------------------------

HOSTILE_FILES: dict[str, bytes] = {
    "latin-1": '{"mcpServers": {"caf\u00e9": {"command": "x"}}}'.encode("latin-1"),
    "deep": b"[" * 50_000 + b"]" * 50_000,
    "nan": b'{"questions": {"operatorGraceMs": NaN}}',
    "surrogate": b'{"notify": {"commands": [{"run": ["notify-send", "\\udc80"]}]}}',
    "huge": b'{"tasks": {"ttlMs": 1e400}}',
    "typo-webhook": b'{"notify": {"webhooks": [{"url": "http://hooks.example:8O80/x", "secret": "0123456789abcdef"}]}}',
    "nul-argv": b'{"mcpServers": {"up": {"command": "srv", "args": ["a\\u0000b"]}}}',
}


def run_daemon(tmp: Path, raw: bytes) -> tuple[subprocess.Popen[bytes], Path]:
    path = tmp / "cfg.json"
    path.write_bytes(raw)
    state = tmp / "state"
    with open(tmp / "stderr", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcpx", "daemon", "--config", str(path), "--state-dir", str(state), "--port", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
            cwd=tmp,
        )
    return proc, state


def refused_or_serving(tmp: Path, raw: bytes) -> str:
    """Start `mcpx daemon` on `raw`: 'refused' (exit 2, one message, no traceback) or 'serving' (a
    call works, then it stops cleanly); anything else fails."""
    proc, state = run_daemon(tmp, raw)
    info = state / "daemon.json"
    try:
        wait_until(lambda: proc.poll() is not None or info.exists(), 30, "a refusal or serving")
        if proc.poll() is not None:
            err = (tmp / "stderr").read_text(errors="replace")
            assert proc.returncode == 2 and err.startswith("mcpx: bad config: "), err
            assert "Traceback" not in err and not info.exists(), err
            return "refused"
        port = json.loads(info.read_text())["port"]
        with RawHost(f"http://127.0.0.1:{port}/mcp") as host:
            host.initialize()
            assert "result" in reply_of(host.legacy("ping", {}))
        proc.terminate()
        assert proc.wait(30) == 0
        return "serving"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# Three in the default tier (each a cold `mcpx daemon`, a few seconds under load), the rest in the slow
# one (a typo'd webhook URL has its own default-tier test: tests/test_background_faults.py).
_SLOW = pytest.mark.stress
_DEFAULT_TIER = ("latin-1", "deep", "surrogate")


@pytest.mark.parametrize("name", [n if n in _DEFAULT_TIER else pytest.param(n, marks=_SLOW) for n in HOSTILE_FILES])
def test_a_hostile_file_makes_the_daemon_refuse_in_one_line(tmp_path: Path, name: str) -> None:
    assert refused_or_serving(tmp_path, HOSTILE_FILES[name]) == "refused"


def test_a_fuzzed_config_that_loads_serves(tmp_path: Path) -> None:
    raw = json.dumps(
        {"mcpServers": {"fx": stdio_server(tmp_path), "gone": {"command": "/nonexistent/mcp-server"}},
         "notify": {"webhooks": [{"url": "http://127.0.0.1:9/x", "secret": "0123456789abcdef"}],
                    "commands": [{"run": ["/nonexistent/hook"], "events": ["connection.opened"]}]}}
    ).encode()  # fmt: skip
    assert refused_or_serving(tmp_path, raw) == "serving"


@_SLOW
@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(_CONFIG)
def test_fuzzed_configs_on_real_daemons_refuse_or_serve(tmp_path: Path, data: Any) -> None:
    run = Path(tempfile.mkdtemp(dir=tmp_path))
    refused_or_serving(run, json.dumps(data).encode("utf-8", "surrogatepass"))


@_SLOW
def test_a_store_that_cannot_be_opened_stops_the_daemon_in_one_line(tmp_path: Path) -> None:
    proc, _state = run_daemon(tmp_path, b'{"store": {"url": "postgresql://127.0.0.1:1/mcpx"}}')
    assert proc.wait(60) == 1
    err = (tmp_path / "stderr").read_text()
    assert err.startswith("mcpx: cannot open the PostgreSQL store: ") and "Traceback" not in err, err
