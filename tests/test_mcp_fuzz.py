"""Hypothesis-generated frames at the real daemon's `/mcp`, over HTTP and over `mcpx serve`:
malformed JSON, wrong types, huge and deeply nested values, lone surrogates, unknown methods,
wrong and missing headers, both eras, batches. Whatever arrives, the daemon answers with a
JSON-RPC error or a 2xx/4xx status (never a 5xx, never silence on stdio), keeps serving, and its
memory stays flat (RSS before and after is printed). Every reply frame is schema-checked at
teardown with the rest of the wire log."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import LEGACY, MODERN, Daemon, RawHost, SuiteStore, end_by_eof, modern_meta, stdio_server, wait_until
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = [pytest.mark.heavy, pytest.mark.sqlite_only("a fuzz of what hosts send: the front")]

METHODS = [
    "initialize", "ping", "tools/list", "tools/call", "prompts/list", "prompts/get", "resources/list",
    "resources/read", "resources/templates/list", "tasks/get", "tasks/result", "tasks/list", "tasks/cancel",
    "tasks/update", "server/discover", "subscriptions/listen", "logging/setLevel", "completion/complete",
    "notifications/initialized", "notifications/cancelled", "notifications/progress", "no/such/method", "",
]  # fmt: skip
MAX_BODY = 64 * 1024  # small, so "huge" is cheap to generate and to refuse

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
ids = (
    st.none() | st.integers() | st.text(max_size=20) | st.floats(allow_nan=False) | st.lists(st.integers(), max_size=2)
)


@st.composite
def metas(draw: st.DrawFn) -> Any:
    base = modern_meta()
    return draw(
        st.sampled_from([None, base, {**base, "io.modelcontextprotocol/protocolVersion": "1999-01-01"}, {}])
        | json_values
    )


@st.composite
def frames(draw: st.DrawFn) -> Any:
    frame: dict[str, Any] = {}
    if draw(st.booleans()):
        frame["jsonrpc"] = draw(st.sampled_from(["2.0", "1.0", 2]) | json_scalars)
    if draw(st.booleans()):
        frame["id"] = draw(ids)
    if draw(st.integers(0, 9)):
        frame["method"] = draw(st.sampled_from(METHODS) | st.text(max_size=30))
    if draw(st.booleans()):
        params = draw(st.dictionaries(st.sampled_from(["name", "arguments", "taskId", "cursor", "task", "uri",
                                                       "protocolVersion", "capabilities", "clientInfo",
                                                       "inputResponses", "requestState"]), json_values, max_size=4))  # fmt: skip
        meta = draw(metas())
        if meta is not None:
            params["_meta"] = meta
        frame["params"] = draw(st.just(params) | json_values)
    for key in draw(st.lists(st.sampled_from(["result", "error", "extra"]), max_size=2)):
        frame[key] = draw(json_values)
    return frame


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


bodies = st.one_of(
    st.binary(max_size=200),  # not JSON at all, or not UTF-8
    json_values.map(json.dumps),  # JSON, but not a frame
    frames().map(json.dumps),
    st.lists(frames(), min_size=0, max_size=4).map(json.dumps),  # batches (2025-11-25 has none)
    st.sampled_from(
        [
            deep(5000),
            '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"\\ud800"}}}',
            '{"jsonrpc":"2.0","id":"\\udfff","method":"ping"}',
            '{"jsonrpc":"2.0","id":1,"method":"ping"' + " " * 10,
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "y" * (MAX_BODY + 10)}}),
            json.dumps({"jsonrpc": "2.0", "id": 10**400 // 10**399, "method": "ping"}),
            '{"jsonrpc":"2.0","id":1e400,"method":"ping"}',
        ]
    ),
)
header_sets = st.fixed_dictionaries(
    {},
    optional={
        "MCP-Protocol-Version": st.sampled_from([LEGACY, MODERN, "2024-11-05", "garbage", ""]),
        "Mcp-Method": st.sampled_from(METHODS)
        | st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=20),
        "Mcp-Name": st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=20),
        "Mcp-Session-Id": st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=40),
        "Content-Type": st.sampled_from(["application/json", "text/plain", "application/json; charset=latin-1", ""]),
        "Accept": st.sampled_from(["application/json, text/event-stream", "text/html", "*/*", ""]),
    },
)


@st.composite
def plausible(draw: st.DrawFn) -> tuple[bytes, dict[str, str], bool]:
    """A frame that passes the envelope and header checks, with fuzzed params: what reaches the
    dispatcher, the task engine and the upstream. (body, headers, use the session)."""
    method = draw(st.sampled_from(METHODS[:-2]))
    params = draw(st.dictionaries(st.sampled_from(["arguments", "taskId", "cursor", "task", "uri", "inputResponses",
                                                   "requestState", "level", "ref", "argument"]), json_values, max_size=3))  # fmt: skip
    params["name"] = draw(st.sampled_from(["fx__echo", "fx__slow", "fx__nope", ""]) | json_values)
    modern = draw(st.booleans())
    headers: dict[str, str] = {}
    if modern:
        params["_meta"] = modern_meta()
        headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
        field = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}.get(method)
        if method in ("tasks/get", "tasks/update", "tasks/cancel"):
            field = "taskId"
        value = params.get(field) if field else None
        if isinstance(value, str) and value.isascii() and value.isprintable():
            headers["Mcp-Name"] = value
    else:
        headers = {"MCP-Protocol-Version": LEGACY}
    frame = {"jsonrpc": "2.0", "id": draw(st.integers(0, 10**6)), "method": method, "params": params}
    return json.dumps(frame).encode("utf-8", "surrogatepass"), headers, not modern


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory, suite_store: SuiteStore) -> Iterator[tuple[Daemon, RawHost]]:
    tmp = tmp_path_factory.mktemp("mcp-fuzz")
    d = Daemon(
        tmp,
        {"mcpServers": {"fx": stdio_server(tmp)}, "daemon": {"maxBodyBytes": MAX_BODY}},
        name="fuzz",
        store=suite_store,
    )
    d.start()
    host = RawHost(d.url)
    host.initialize()  # a real session, so some fuzzed frames reach past the handshake
    before = rss_kb(d.proc.pid)  # type: ignore[union-attr]  # started above
    try:
        yield d, host
        after = rss_kb(d.proc.pid)  # type: ignore[union-attr]  # started above
        print(f"\n/mcp fuzz: daemon RSS {before / 1024:.1f} MB before, {after / 1024:.1f} MB after")
        assert after < before * 1.5 + 20_000, (before, after)  # flat, with room for caches warming up
    finally:
        host.close()
        d.stop()
        d.check_wire()


def _still_serving(host: RawHost) -> None:
    pong = host.legacy("ping")
    assert pong.status_code == 200 and pong.json()["result"] == {}, pong.text


wild = st.tuples(
    bodies.map(lambda b: b if isinstance(b, bytes) else b.encode("utf-8", "surrogatepass")), header_sets, st.booleans()
)


@given(request=wild | plausible())
@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
def test_whatever_arrives_over_http_gets_an_answer_and_the_daemon_keeps_serving(
    fuzzed: tuple[Daemon, RawHost], request: tuple[bytes, dict[str, str], bool]
) -> None:
    _, host = fuzzed
    raw, headers, with_session = request
    h = {k: v.strip() for k, v in headers.items()}  # HTTP itself forbids edge whitespace (the client refuses it)
    if with_session and host.session_id and "Mcp-Session-Id" not in h:
        h["Mcp-Session-Id"] = host.session_id
    resp = host.post(None, h, raw=raw)
    assert resp.status_code < 500, (resp.status_code, resp.text[:500], raw[:200], h)
    if resp.status_code >= 400 and resp.content:
        frame = resp.json()  # an error is always a JSON-RPC error body
        assert isinstance(frame["error"]["code"], int) and frame["error"]["message"], frame
    _still_serving(host)


class StdioShim:
    """`mcpx serve` against the fuzzed daemon: lines in, lines out, read in a thread."""

    def __init__(self, d: Daemon) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpx", "serve", "--state-dir", str(d.state_dir)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.lines: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        assert self.proc.stdout is not None
        end_by_eof(self.proc)
        self._reader.join(5)
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def shim(fuzzed: tuple[Daemon, RawHost]) -> Iterator[StdioShim]:
    s = StdioShim(fuzzed[0])
    init = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "fuzz-stdio", "version": "0"}}
    s.send(json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": init}).encode())
    wait_until(lambda: s.lines, 20, "the shim's initialize reply")
    s.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
    yield s
    s.close()


stdio_lines = st.one_of(
    st.binary(max_size=120).map(lambda b: b.replace(b"\n", b" ")),
    json_values.map(json.dumps).map(str.encode),
    frames().map(json.dumps).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.just(deep(3000).encode()),
)


@given(line=stdio_lines)
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
def test_whatever_arrives_over_mcpx_serve_leaves_the_shim_answering(shim: StdioShim, line: bytes) -> None:
    seen = len(shim.lines)
    shim.send(line)
    probe = f"probe-{seen}"
    shim.send(json.dumps({"jsonrpc": "2.0", "id": probe, "method": "ping"}).encode())
    wait_until(lambda: any(probe.encode() in x for x in shim.lines[seen:]), 10, "the ping after a fuzzed line")
    assert shim.proc.poll() is None, "the shim exited"
    for reply in shim.lines[seen:]:
        frame = json.loads(reply)  # every line out is JSON, a frame of its own
        assert isinstance(frame, dict) and frame.get("jsonrpc") == "2.0", reply
