"""`h1.Client` honours HTTP_PROXY / HTTPS_PROXY / ALL_PROXY / NO_PROXY as httpx did: a tiny real
proxy on 127.0.0.1 (absolute-form forwarding and CONNECT tunnels) in front of real upstreams."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pytest
from anyio.abc import ByteStream
from scripted_http import Request, reply, serve, serve_streams

from mcpx.upstream.http import h1, proxy

from .test_h1_client import make_cert, read_request

pytestmark = pytest.mark.anyio

PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def clean_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@dataclass
class TinyProxy:
    """Forwards absolute-form requests and opens CONNECT tunnels; keeps each request head it got.
    `refuse` answers every request with that status instead."""

    refuse: int | None = None
    heads: list[bytes] = field(default_factory=list)

    async def handle(self, client: ByteStream) -> None:
        buf = bytearray()
        head = await read_request(client, buf)
        self.heads.append(head)
        if self.refuse is not None:
            await client.send(b"HTTP/1.1 %d Refused\r\nContent-Length: 0\r\n\r\n" % self.refuse)
            return
        method, target, version = head.split(b"\r\n", 1)[0].decode().split(" ")
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            upstream = await anyio.connect_tcp(host.strip("[]"), int(port))
            await client.send(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            first = bytes(buf)
        else:
            url = urlsplit(target)
            assert url.hostname is not None and url.port is not None
            upstream = await anyio.connect_tcp(url.hostname, url.port)
            lines = head.split(b"\r\n")[1:]
            kept = [line for line in lines if not line.lower().startswith(b"proxy-authorization:")]
            origin_form = url.path + (f"?{url.query}" if url.query else "")
            first = b"\r\n".join([f"{method} {origin_form} {version}".encode(), *kept]) + b"\r\n\r\n" + bytes(buf)
        async with upstream:
            if first:
                await upstream.send(first)
            async with anyio.create_task_group() as tg:
                tg.start_soon(pipe, client, upstream, tg.cancel_scope)
                await pipe(upstream, client, tg.cancel_scope)


async def pipe(src: ByteStream, dst: ByteStream, scope: anyio.CancelScope) -> None:
    try:
        async for chunk in src:
            await dst.send(chunk)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    scope.cancel()  # one side ended: the tunnel is over


@asynccontextmanager
async def running(p: TinyProxy) -> AsyncIterator[int]:
    async with serve_streams(p.handle) as port:
        yield port


async def post(client: h1.Client) -> tuple[int, bytes]:
    with anyio.fail_after(5):
        async with client.stream("POST", {"Content-Type": "application/json"}, b"{}") as resp:
            return resp.status_code, await resp.aread()


async def echo_target(req: Request, stream: ByteStream) -> bool:
    # The tiny proxy rewrites only a connection's first request: later ones arrive in absolute form.
    url = urlsplit(req.target)
    await stream.send(reply(200, f"{req.method} {url.path}{'?' + url.query if url.query else ''}".encode()))
    return True


async def test_http_upstream_goes_through_http_proxy_in_absolute_form(monkeypatch: pytest.MonkeyPatch) -> None:
    p = TinyProxy()
    async with serve(echo_target) as target, running(p) as proxy_port:
        monkeypatch.setenv("HTTP_PROXY", f"http://alice:s%40cret@127.0.0.1:{proxy_port}")
        client = h1.Client(f"http://127.0.0.1:{target}/mcp?x=1")
        try:
            assert await post(client) == (200, b"POST /mcp?x=1")
            assert await post(client) == (200, b"POST /mcp?x=1")  # again, on the kept connection
        finally:
            await client.aclose()
    [head] = p.heads  # one connection to the proxy, reused
    lines = head.decode().split("\r\n")
    assert lines[0] == f"POST http://127.0.0.1:{target}/mcp?x=1 HTTP/1.1"
    assert "Proxy-Authorization: Basic YWxpY2U6c0BjcmV0" in lines  # alice:s@cret
    assert f"Host: 127.0.0.1:{target}" in lines


async def test_https_upstream_goes_through_a_connect_tunnel_with_tls_checked_inside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert_path, key_path = make_cert(tmp_path)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert_path, key_path)

    async def tls_target(stream: ByteStream) -> None:
        head = await read_request(stream, bytearray())
        path = head.split(b" ")[1]
        await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(path), path))

    p = TinyProxy()
    monkeypatch.setattr(h1, "_ssl_context", None)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert_path))
    async with serve_streams(tls_target, tls=server_ctx) as target, running(p) as proxy_port:
        monkeypatch.setenv("HTTPS_PROXY", f"127.0.0.1:{proxy_port}")  # no scheme: http:// (as httpx)
        client = h1.Client(f"https://127.0.0.1:{target}/secure")
        try:
            assert await post(client) == (200, b"/secure")
        finally:
            await client.aclose()
    monkeypatch.setattr(h1, "_ssl_context", None)
    assert p.heads[0].split(b"\r\n")[0] == f"CONNECT 127.0.0.1:{target} HTTP/1.1".encode()


async def test_no_proxy_host_is_reached_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    p = TinyProxy()
    async with serve(echo_target) as target, running(p) as proxy_port:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy_port}")
        monkeypatch.setenv("NO_PROXY", "example.com, 127.0.0.0/8")
        client = h1.Client(f"http://127.0.0.1:{target}/mcp")
        try:
            assert await post(client) == (200, b"POST /mcp")
        finally:
            await client.aclose()
    assert p.heads == []


async def test_proxy_that_refuses_the_tunnel_fails_naming_the_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    p = TinyProxy(refuse=407)
    async with running(p) as proxy_port:
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy_port}")
        client = h1.Client("https://mcp.example:8443/mcp")
        try:
            with pytest.raises(h1.ConnectionFailed, match=rf"proxy http://127.0.0.1:{proxy_port} refused .* 407"):
                await post(client)
        finally:
            await client.aclose()
    assert p.heads[0].startswith(b"CONNECT mcp.example:8443 HTTP/1.1")


async def test_unsupported_proxy_scheme_fails_clearly_and_is_not_bypassed(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Request] = []

    async def target(req: Request, stream: ByteStream) -> bool:
        seen.append(req)
        return await echo_target(req, stream)

    async with serve(target) as port:
        monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
        client = h1.Client(f"http://127.0.0.1:{port}/mcp")
        try:
            with pytest.raises(h1.ConnectionFailed, match=r"socks5://127\.0\.0\.1 is not supported"):
                await post(client)
        finally:
            await client.aclose()
    assert seen == []


@pytest.mark.parametrize(
    ("host", "port", "no_proxy", "bypassed"),
    [
        ("api.example.com", 443, "example.com", True),
        ("example.com", 443, ".example.com", True),
        ("api.example.com", 443, "*.example.com", True),
        ("badexample.com", 443, "example.com", False),
        ("api.example.com", 443, "example.com:8443", False),
        ("api.example.com", 8443, "example.com:8443", True),
        ("10.1.2.3", 80, "10.0.0.0/8", True),
        ("10.1.2.3", 80, "10.1.2.4", False),
        ("::1", 80, "::1", True),
        ("::1", 80, "[::1]:80", True),
        ("anything", 80, "*", True),
        ("anything", 80, "", False),
        ("Host.Example", 80, "host.example", True),
    ],
)
def test_no_proxy_entries(host: str, port: int, no_proxy: str, bypassed: bool) -> None:
    assert proxy.bypassed(host, port, no_proxy) is bypassed


def test_proxy_is_read_from_the_environment_lower_case_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://upper:1")
    monkeypatch.setenv("https_proxy", "http://lower:2")
    monkeypatch.setenv("HTTP_PROXY", "http://plain:3")
    found = proxy.for_origin("https", "mcp.example", 443)
    assert found is not None and (found.host, found.port) == ("lower", 2)
    assert proxy.for_origin("http", "mcp.example", 80) == proxy.Proxy("http", "plain", 3, None)
    monkeypatch.setenv("no_proxy", "mcp.example")
    assert proxy.for_origin("https", "mcp.example", 443) is None


def test_ipv6_target_is_bracketed_in_the_absolute_form(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    client = h1.Client("http://[::1]:9000/mcp")
    assert client._head("GET", {}, b"").split(b"\r\n")[0] == b"GET http://[::1]:9000/mcp HTTP/1.1"
