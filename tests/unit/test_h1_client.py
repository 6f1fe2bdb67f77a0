"""`mcpx.upstream.http.h1` against real raw socket servers on 127.0.0.1: framing, keep-alive, cookies, TLS."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from anyio.abc import ByteStream, SocketAttribute
from anyio.streams.tls import TLSListener
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from mcpx.upstream.http import h1

pytestmark = pytest.mark.anyio

Handler = Callable[[ByteStream], Awaitable[None]]


@asynccontextmanager
async def serve(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    """Serve `handler` per connection on 127.0.0.1; yields the port, stops the listener on exit."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(SocketAttribute.local_port)

    async def one(stream: ByteStream) -> None:
        async with stream:
            try:
                await handler(stream)
            except (anyio.BrokenResourceError, anyio.EndOfStream, anyio.ClosedResourceError, OSError):
                pass

    served = TLSListener(listener, tls, standard_compatible=False) if tls is not None else listener
    async with served, anyio.create_task_group() as tg:
        tg.start_soon(served.serve, one)
        try:
            yield port
        finally:
            tg.cancel_scope.cancel()


async def read_request(stream: ByteStream, buf: bytearray) -> bytes:
    """One request head (no body: the tests send GETs); leftover bytes stay in `buf`."""
    while b"\r\n\r\n" not in buf:
        buf.extend(await stream.receive())
    head, _, rest = bytes(buf).partition(b"\r\n\r\n")
    buf[:] = rest
    return head


async def get(client: h1.Client) -> tuple[h1.Response, bytes]:
    async with client.stream("GET", {}) as resp:
        return resp, await resp.aread()


async def test_chunked_reply_is_reassembled() -> None:
    async def handler(stream: ByteStream) -> None:
        await read_request(stream, bytearray())
        await stream.send(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'5\r\nhello\r\n1;ext=val\r\n \r\nA; name="q"\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n'
        )
        await anyio.sleep(1)  # keep the connection open: the body must end by its framing

    async with serve(handler) as port:
        client = h1.Client(f"http://127.0.0.1:{port}/")
        try:
            resp, body = await get(client)
            assert resp.status_code == 200
            assert body == b"hello 0123456789"
            assert resp.complete
        finally:
            await client.aclose()


async def test_close_delimited_reply() -> None:
    payload = b"x" * 200_000 + b"END"

    async def handler(stream: ByteStream) -> None:
        await read_request(stream, bytearray())
        await stream.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
        await stream.send(payload)
        # leaving closes the connection: that is the end of the body

    async with serve(handler) as port:
        client = h1.Client(f"http://127.0.0.1:{port}/")
        try:
            resp, body = await get(client)
            assert resp.status_code == 200
            assert body == payload
        finally:
            await client.aclose()


class OneReplyPerConnection:
    """A server that answers one request per connection with "conn-N" and then closes, without
    Connection: close, as an idle timeout on the server would."""

    def __init__(self) -> None:
        self.connections = 0
        self.first_closed = anyio.Event()

    async def __call__(self, stream: ByteStream) -> None:
        self.connections += 1
        n = self.connections
        await read_request(stream, bytearray())
        await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nconn-" + str(n).encode())
        await stream.aclose()  # here, not in serve(), so the test can wait for it
        if n == 1:
            self.first_closed.set()


async def test_server_closing_idle_keepalive_connection_is_transparent() -> None:
    handler = OneReplyPerConnection()
    async with serve(handler) as port:
        client = h1.Client(f"http://127.0.0.1:{port}/")
        try:
            _, first = await get(client)
            assert first == b"conn-1"
            assert len(client._idle) == 1  # kept for reuse
            with anyio.fail_after(5):
                await handler.first_closed.wait()  # its FIN is sent
            resp, second = await get(client)
            assert resp.status_code == 200
            assert second == b"conn-2"
            assert handler.connections == 2
        finally:
            await client.aclose()


async def test_stale_connection_without_fin_seen_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """The close races the request: the reused connection is only found dead when the reply head is read."""
    handler = OneReplyPerConnection()
    async with serve(handler) as port:
        client = h1.Client(f"http://127.0.0.1:{port}/")
        try:
            assert (await get(client))[1] == b"conn-1"
            with anyio.fail_after(5):
                await handler.first_closed.wait()  # the idle connection is dead
            monkeypatch.setattr(h1._Conn, "reusable", lambda self, now: True)  # miss the FIN
            assert (await get(client))[1] == b"conn-2"
        finally:
            await client.aclose()


async def test_two_set_cookie_headers_are_both_kept() -> None:
    requests: list[bytes] = []

    async def handler(stream: ByteStream) -> None:
        buf = bytearray()
        requests.append(await read_request(stream, buf))
        await stream.send(
            b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1; Path=/\r\nSet-Cookie: b=2; Path=/\r\nContent-Length: 2\r\n\r\nok"
        )
        requests.append(await read_request(stream, buf))
        await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    async with serve(handler) as port:
        client = h1.Client(f"http://127.0.0.1:{port}/")
        try:
            resp, body = await get(client)
            assert body == b"ok"
            assert resp.headers.set_cookie == ["a=1; Path=/", "b=2; Path=/"]
            await get(client)
            cookie = [line for line in requests[1].split(b"\r\n") if line.lower().startswith(b"cookie:")]
            assert len(cookie) == 1
            assert sorted(cookie[0].split(b":", 1)[1].strip().split(b"; ")) == [b"a=1", b"b=2"]
        finally:
            await client.aclose()


async def test_slow_server_small_pieces() -> None:
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 26\r\nX-Slow: yes\r\n\r\nabcdefghijklmnopqrstuvwxyz"

    async def handler(stream: ByteStream) -> None:
        await read_request(stream, bytearray())
        for i in range(0, len(reply), 3):
            await stream.send(reply[i : i + 3])
            await anyio.sleep(0.005)

    async with serve(handler) as port:
        client = h1.Client(f"http://127.0.0.1:{port}/")
        try:
            resp, body = await get(client)
            assert resp.headers["x-slow"] == "yes"
            assert body == b"abcdefghijklmnopqrstuvwxyz"
        finally:
            await client.aclose()


async def test_sse_stream_read_incrementally() -> None:
    first_seen = anyio.Event()

    async def handler(stream: ByteStream) -> None:
        await read_request(stream, bytearray())
        await stream.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        await stream.send(b"4\r\ndata\r\n")  # a line split across chunks and sends
        await anyio.sleep(0.01)
        await stream.send(b"7\r\n: one\r\n\r\n2\r\n\r\n\r\n")
        with anyio.fail_after(5):
            await first_seen.wait()  # the client saw event one before event two exists
        for piece in (b"C\r\ndata: two\r\n\r\r\n", b"1\r\n\n\r\n", b"0\r\n\r\n"):
            await stream.send(piece)
            await anyio.sleep(0.01)
        await anyio.sleep(1)

    async with serve(handler) as port:
        client = h1.Client(f"http://127.0.0.1:{port}/")
        try:
            lines: list[str] = []
            with anyio.fail_after(5):
                async with client.stream("GET", {"Accept": "text/event-stream"}) as resp:
                    async for line in resp.aiter_lines():
                        lines.append(line)
                        if line == "":
                            first_seen.set()
            assert lines == ["data: one", "", "data: two", ""]
            assert len(client._idle) == 1  # read to its end: the connection is kept
        finally:
            await client.aclose()


def make_cert(tmp_path: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


async def test_tls_self_signed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cert_path, key_path = make_cert(tmp_path)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert_path, key_path)

    handshakes = 0

    async def handler(stream: ByteStream) -> None:
        nonlocal handshakes
        handshakes += 1
        buf = bytearray()
        while True:  # keep-alive: serve requests until the client leaves
            head = await read_request(stream, buf)
            path = head.split(b" ")[1]
            await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(path)).encode() + b"\r\n\r\n" + path)

    async with serve(handler, tls=server_ctx) as port:
        # h1 verifies with its process-wide context (SSL_CERT_FILE when set): default trust rejects the cert
        monkeypatch.setattr(h1, "_ssl_context", None)
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        client = h1.Client(f"https://127.0.0.1:{port}/secure?x=1")
        try:
            with pytest.raises(h1.ConnectionFailed, match="cannot connect"):
                await get(client)
        finally:
            await client.aclose()

        monkeypatch.setattr(h1, "_ssl_context", None)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert_path))
        client = h1.Client(f"https://127.0.0.1:{port}/secure?x=1")
        try:
            resp, body = await get(client)
            assert resp.status_code == 200
            assert body == b"/secure?x=1"
            assert (await get(client))[1] == b"/secure?x=1"
            assert handshakes == 1  # the refused handshake never reached the handler; both requests on one connection
        finally:
            await client.aclose()
    monkeypatch.setattr(h1, "_ssl_context", None)


async def test_a_body_the_server_never_reads_fails_after_the_write_timeout_not_the_call_s() -> None:
    """A request larger than the transport's high-water mark can wait on the socket: its send keeps
    the write timeout. (A smaller one is sent with no timer: it cannot wait, see NEVER_WAITS_BYTES.)"""
    # A listener that never accepts: the kernel takes the connection, and its small receive buffer
    # fills (an asyncio server would read everything into memory, unasked).
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = h1.Client(f"http://127.0.0.1:{listener.getsockname()[1]}/mcp", write_timeout=0.3)
        body = b"x" * (256 * h1.NEVER_WAITS_BYTES)  # 16 MiB: more than the send buffer (4 MiB at most)
        with anyio.fail_after(10), pytest.raises(TimeoutError, match=r"stalled for 0\.3 s"):
            async with client.stream("POST", {"Content-Type": "application/json"}, body):
                pass
        await client.aclose()


class _Chunks:
    """What `aiter_lines` reads: a body in the pieces a server's writes arrived in."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


async def _lines(*chunks: bytes, max_line: int = h1.MAX_LINE_BYTES) -> list[str]:
    return [line async for line in h1.Response.aiter_lines(_Chunks(*chunks), max_line)]  # type: ignore[arg-type]  # only its aiter_bytes is read


async def test_lines_end_at_crlf_lf_or_cr_wherever_the_chunks_are_cut() -> None:
    body = b"data: a\r\ndata: b\ndata: c\r\rid: 7\r\n\r\n"
    expected = ["data: a", "data: b", "data: c", "", "id: 7", ""]
    assert await _lines(body) == expected
    for cut in range(1, len(body)):  # a CR at a chunk's end may be the first half of a CRLF
        assert await _lines(body[:cut], body[cut:]) == expected, cut
    assert await _lines(*(bytes([b]) for b in body)) == expected
    assert await _lines(b"no end", b" here") == ["no end here"]


async def test_a_line_longer_than_the_limit_fails_the_stream_instead_of_growing_forever() -> None:
    assert await _lines(b"x" * 40, b"x" * 20 + b"\n", max_line=64) == ["x" * 60]
    with pytest.raises(h1.ConnectionFailed, match="longer than 64 bytes"):
        await _lines(b"ok\n", *(b"x" * 30 for _ in range(3)), max_line=64)
