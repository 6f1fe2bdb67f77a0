"""A small HTTP/1.1 client for the hot path to one HTTP upstream.

Why not httpx here: it costs CPU, and on a busy machine CPU turns into latency several times over.
Measured on the 2-core dev machine in one run, a keep-alive loop of POSTs to the fixture upstream on
uvloop, median wall / CPU per request: httpx 2.73 / 2.13 ms, aiohttp 0.90 / 0.48 ms, a bare socket
client 0.58 / 0.21 ms, this client 0.63 / 0.28 ms. (httpx + httpcore run ~2,700 Python calls a
request: URL and header models, h11 events, a trace and timeout scope per step, head and body written
separately.) Through the daemon that made the HTTP upstream hop 3-5 ms a call against ~1 ms for a
stdio upstream. This client keeps to what an MCP upstream needs and no more:

- one origin per client, keep-alive connections reused LIFO, dropped after `KEEPALIVE_EXPIRY_S` idle
  or when the server has closed them. A request is sent again on a fresh connection only when mcpx
  knows the server did not act on it: the reused connection was found broken before any byte of the
  request went out, or the request is idempotent (GET, HEAD, DELETE, OPTIONS) and the connection
  closed with no byte of reply. A POST whose connection closes after it was written is an error,
  never a second POST: the server may have read it and run the tool before it went away;
- HTTP_PROXY / HTTPS_PROXY / ALL_PROXY / NO_PROXY honoured as httpx did (proxy.py);
- one write per request (head and body together), Content-Length bodies only;
- replies framed by Content-Length, chunked transfer coding, or the connection closing;
- TLS for https URLs through anyio, certificates checked as httpx's default transport did;
- cookies the origin sets are kept (stdlib `http.cookiejar`) and sent back, as httpx's client did;
- leaving a response before its end closes its connection, which is how a 2026-07-28 client cancels.

Errors: `ConnectionFailed` when the origin cannot be reached or the connection breaks or speaks
something that is not HTTP/1.x; `InvalidRequest` for a header we refuse to send; `TimeoutError` when
connecting, waiting for a free connection or sending takes too long (httpx's 30 s defaults). There
is no read timeout: SSE replies may be long.
"""

from __future__ import annotations

import base64
import email.message
import os
import re
import select
import socket
import ssl
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Mapping
from http.cookiejar import CookieJar
from types import TracebackType
from urllib.parse import quote, unquote

import anyio
from anyio.abc import ByteStream, SocketAttribute
from anyio.streams.tls import TLSStream

from ... import __version__
from ...config import urls
from . import proxy

# Below the 5 s idle timeout of uvicorn and Node, so mcpx seldom writes a POST on a connection the
# server is closing at that moment (that POST fails: it cannot be sent again, see above).
KEEPALIVE_EXPIRY_S = 4.0
MAX_IDLE = 20
KEEPALIVE_IDLE_S = 15  # TCP keepalive: first probe after this much silence, then every KEEPALIVE_PROBE_S
KEEPALIVE_PROBE_S = 5
MAX_HEAD_BYTES = 256 * 1024
READ_SIZE = 65536
USER_AGENT = f"mcpx/{__version__}"

_HEAD_END = re.compile(rb"\r?\n\r?\n")
# The longest line of a streamed body (an SSE line) mcpx holds: far above any real MCP message.
MAX_LINE_BYTES = 64 * 1024 * 1024
_BAD_HEADER = re.compile(r"[\r\n\0]")
_SAFE_PATH = "/%:@!$&'()*+,;=-._~"  # RFC 3986 pchar and "/", existing escapes kept
_SAFE_QUERY = _SAFE_PATH + "?"
_ssl_context: ssl.SSLContext | None = None
# RFC 9110 9.2.2: requests a client may repeat when a connection fails before the reply.
_IDEMPOTENT = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})


class HttpError(Exception):
    """Base of this client's errors."""


class ConnectionFailed(HttpError):
    """The origin is unreachable, or the connection broke or carried something that is not HTTP/1.x."""


class InvalidRequest(HttpError):
    """A header name or value we will not put on the wire (CR, LF or NUL in it)."""


def ssl_context() -> ssl.SSLContext:
    """One verifying context per process, trusting what httpx's default transport trusted.

    `SSL_CERT_FILE` or `SSL_CERT_DIR` when set (and nothing else); otherwise certifi's bundle when
    installed, plus the system's store.
    """
    global _ssl_context
    if _ssl_context is None:
        if os.environ.get("SSL_CERT_FILE"):
            ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
        elif os.environ.get("SSL_CERT_DIR"):
            ctx = ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
        else:
            ctx = ssl.create_default_context()
            try:
                import certifi
            except ImportError:
                pass
            else:
                ctx.load_verify_locations(certifi.where())
        _ssl_context = ctx
    return _ssl_context


class Headers(dict[str, str]):
    """Reply headers by lower-case name; repeated ones joined with ", " (Set-Cookie kept apart)."""

    set_cookie: list[str]

    def __init__(self) -> None:
        super().__init__()
        self.set_cookie = []


class _Conn:
    __slots__ = ("buf", "fd", "idle_since", "stream")

    def __init__(self, stream: ByteStream) -> None:
        self.stream = stream
        self.buf = b""
        self.idle_since = 0.0
        sock = stream.extra(SocketAttribute.raw_socket, None)
        self.fd = sock.fileno() if sock is not None else -1
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _keepalive(sock)

    def reusable(self, now: float) -> bool:
        """Not expired, and nothing to read: an idle socket that is readable was closed by the server."""
        if now - self.idle_since > KEEPALIVE_EXPIRY_S or self.fd < 0:
            return False
        try:
            if sys.platform == "win32" or not hasattr(select, "poll"):
                readable, _, _ = select.select([self.fd], [], [], 0)
                return not readable
            poller = select.poll()
            poller.register(self.fd, select.POLLIN)
            return not poller.poll(0)
        except (OSError, ValueError):
            return False

    async def fill(self) -> bool:
        """Read more into the buffer; False at end of stream."""
        try:
            chunk = await self.stream.receive(READ_SIZE)
        except anyio.EndOfStream:
            return False
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise ConnectionFailed(f"connection broken while reading: {_describe(exc)}") from None
        self.buf += chunk
        return True

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            try:
                await self.stream.aclose()
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass


def _keepalive(sock: socket.socket) -> None:
    """There is no read timeout (SSE replies may be long), so a peer that vanished without a FIN
    (host gone, network cut) is found by TCP keepalive: about KEEPALIVE_IDLE_S + 3 probes later the
    read fails and the call is resumed or failed, instead of waiting on a dead connection."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", KEEPALIVE_IDLE_S), ("TCP_KEEPINTVL", KEEPALIVE_PROBE_S), ("TCP_KEEPCNT", 3)):
        option = getattr(socket, name, None)  # Linux and recent macOS; elsewhere the OS defaults
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


class Response:
    """One reply; its body is read once, through `aread`, `aiter_bytes` or `aiter_lines`."""

    def __init__(
        self, conn: _Conn, status: int, headers: Headers, framing: str, remaining: int, keep_alive: bool
    ) -> None:
        self._conn = conn
        self.status_code = status
        self.headers = headers
        self._framing = framing  # "length", "chunked" or "close"
        self._remaining = remaining  # bytes left of the body, or of the current chunk
        self._keep_alive = keep_alive
        self.complete = framing == "length" and remaining == 0

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        conn = self._conn
        while not self.complete:
            if self._framing == "length":
                if not conn.buf and not await conn.fill():
                    raise ConnectionFailed("server closed the connection before the end of the reply")
                piece, conn.buf = conn.buf[: self._remaining], conn.buf[self._remaining :]
                self._remaining -= len(piece)
                self.complete = self._remaining == 0
                yield piece
            elif self._framing == "chunked":
                piece = await self._next_chunk_piece()
                if piece:
                    yield piece
            else:
                if conn.buf:
                    piece, conn.buf = conn.buf, b""
                    yield piece
                elif not await conn.fill():
                    self.complete = True

    async def _next_chunk_piece(self) -> bytes:
        conn = self._conn
        if self._remaining == 0:
            line = await self._line()
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ConnectionFailed(f"bad chunk size line {line[:40]!r}") from None
            if size < 0:
                raise ConnectionFailed(f"bad chunk size line {line[:40]!r}")
            if size == 0:
                while await self._line():  # trailers, up to the empty line
                    pass
                self.complete = True
                return b""
            self._remaining = size
        if not conn.buf and not await conn.fill():
            raise ConnectionFailed("server closed the connection inside a chunk")
        piece, conn.buf = conn.buf[: self._remaining], conn.buf[self._remaining :]
        self._remaining -= len(piece)
        if self._remaining == 0 and await self._line():
            raise ConnectionFailed("chunk data longer than its size")
        return piece

    async def _line(self) -> bytes:
        conn = self._conn
        while (end := conn.buf.find(b"\n")) < 0:
            if len(conn.buf) > MAX_HEAD_BYTES:
                raise ConnectionFailed("chunk framing line too long")
            if not await conn.fill():
                raise ConnectionFailed("server closed the connection inside chunked framing")
        line, conn.buf = conn.buf[:end], conn.buf[end + 1 :]
        return line.rstrip(b"\r")

    async def aread(self) -> bytes:
        if self._framing == "length" and len(self._conn.buf) >= self._remaining:
            conn = self._conn  # the usual case: the whole body came with the head
            body, conn.buf = conn.buf[: self._remaining], conn.buf[self._remaining :]
            self._remaining = 0
            self.complete = True
            return body
        return b"".join([piece async for piece in self.aiter_bytes()])

    async def aiter_lines(self, max_line: int = MAX_LINE_BYTES) -> AsyncIterator[str]:
        """Lines split at CRLF, LF or CR (as SSE wants), without their ends, decoded as UTF-8. A
        line longer than `max_line` bytes is ConnectionFailed: a server cannot make mcpx hold an
        endless line. The pieces of an unfinished line are kept apart and joined once its end
        comes (adding each to the line so far would copy it over and over)."""
        parts: list[bytes] = []  # an unfinished line, in pieces
        size = 0
        async for chunk in self.aiter_bytes():
            if b"\n" not in chunk and b"\r" not in chunk:
                parts.append(chunk)
                size += len(chunk)
                if size > max_line:
                    raise ConnectionFailed(f"the server sent a line longer than {max_line} bytes")
                continue
            if parts:
                chunk, parts, size = b"".join((*parts, chunk)), [], 0
            lines = chunk.splitlines(keepends=True)
            if not lines[-1].endswith((b"\n", b"\r")) or lines[-1].endswith(b"\r"):
                parts = [lines.pop()]  # unfinished, or a CR whose LF may be in the next chunk
                size = len(parts[0])
                if size > max_line:
                    raise ConnectionFailed(f"the server sent a line longer than {max_line} bytes")
            for line in lines:
                yield line.rstrip(b"\r\n").decode("utf-8", "replace")
        if parts:
            for line in b"".join(parts).splitlines():
                yield line.decode("utf-8", "replace")


class Client:
    """Keep-alive HTTP/1.1 to the origin of `url`; every request goes to that URL (plus a method)."""

    def __init__(
        self, url: str, *, connect_timeout: float = 30.0, write_timeout: float = 30.0, max_connections: int = 100
    ) -> None:
        # The config's load checked `url` with this same parser (config/urls.py): it cannot fail here for a
        # URL the config took.
        parts = urls.parse_http_url(url)
        self.url = url
        self.tls = parts.tls
        self.host = parts.host
        self.port = parts.port
        bracketed = f"[{self.host}]" if ":" in self.host else self.host
        default_port = self.port == (443 if self.tls else 80)
        self.host_header = bracketed if default_port else f"{bracketed}:{self.port}"
        self.target = quote(parts.path or "/", safe=_SAFE_PATH) + (
            f"?{quote(parts.query, safe=_SAFE_QUERY)}" if parts.query else ""
        )
        self.authorization: str | None = None
        if parts.username is not None:
            creds = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            self.authorization = "Basic " + base64.b64encode(creds).decode()
        self.proxy: proxy.Proxy | None = None
        self.proxy_error: str | None = None  # the environment names a proxy mcpx cannot use
        try:
            self.proxy = proxy.for_origin("https" if self.tls else "http", self.host, self.port)
        except proxy.ProxyError as exc:
            self.proxy_error = str(exc)
        if self.proxy is not None and not self.tls:
            # A plain-http proxy takes the absolute URI (RFC 9112 3.2.2); https goes through a tunnel.
            self.target = f"http://{self.host_header}{self.target}"
        self.connect_timeout = connect_timeout
        self.write_timeout = write_timeout
        self.max_connections = max_connections
        self._idle: list[_Conn] = []
        self._active = 0
        self._freed: anyio.Event | None = None
        self._jar: CookieJar | None = None
        self._closed = False

    def stream(
        self, method: str, headers: Mapping[str, str], content: bytes = b"", *, connect_timeout: float | None = None
    ) -> _Exchange:
        """`async with client.stream(...) as resp:` sends the request and yields the reply head."""
        return _Exchange(self, method, self._head(method, headers, content) + content, connect_timeout)

    def _head(self, method: str, headers: Mapping[str, str], content: bytes) -> bytes:
        lines = [f"{method} {self.target} HTTP/1.1\r\n"]
        seen = set()
        for name, value in headers.items():
            if _BAD_HEADER.search(name) or _BAD_HEADER.search(value):
                raise InvalidRequest(f"header {name!r} has a CR, LF or NUL in it")
            seen.add(name.lower())
            lines.append(f"{name}: {value}\r\n")
        if "host" not in seen:
            lines.insert(1, f"Host: {self.host_header}\r\n")
        if "user-agent" not in seen:
            lines.append(f"User-Agent: {USER_AGENT}\r\n")
        if self.authorization is not None and "authorization" not in seen:
            lines.append(f"Authorization: {self.authorization}\r\n")
        if self.proxy is not None and not self.tls and self.proxy.authorization is not None:
            lines.append(f"Proxy-Authorization: {self.proxy.authorization}\r\n")
        if self._jar is not None and "cookie" not in seen:
            cookie = self._cookie_header()
            if cookie:
                lines.append(f"Cookie: {cookie}\r\n")
        if content or method not in ("GET", "HEAD", "DELETE", "OPTIONS"):
            lines.append(f"Content-Length: {len(content)}\r\n")
        lines.append("\r\n")
        return "".join(lines).encode()

    # ---- connections -------------------------------------------------------------------------
    async def _acquire(self, timeout: float) -> tuple[_Conn, bool]:
        """A connection for one request, and whether it was reused from the idle list."""
        if self._closed:
            raise ConnectionFailed("client closed")
        if self._active >= self.max_connections:
            try:
                with anyio.fail_after(timeout):
                    while self._active >= self.max_connections:
                        if self._freed is None:
                            self._freed = anyio.Event()
                        await self._freed.wait()
            except TimeoutError:
                raise TimeoutError(
                    f"all {self.max_connections} connections to {self.host_header} stayed busy for {timeout:g} s"
                ) from None
        self._active += 1
        try:
            now = time.monotonic()
            while self._idle:
                conn = self._idle.pop()
                if conn.reusable(now):
                    return conn, True
                await conn.aclose()
            return await self._connect(timeout), False
        except BaseException:
            self._slot_free()
            raise

    async def _connect(self, timeout: float) -> _Conn:
        if self.proxy_error is not None:
            raise ConnectionFailed(f"cannot connect to {self.host_header}: {self.proxy_error}")
        via = f" through proxy {self.proxy.shown}" if self.proxy is not None else ""
        try:
            with anyio.fail_after(timeout):
                stream = await (self._open_direct() if self.proxy is None else self._open_proxied(self.proxy))
        except TimeoutError:
            raise TimeoutError(f"connecting to {self.host_header}{via} timed out after {timeout:g} s") from None
        except (OSError, anyio.BrokenResourceError, anyio.EndOfStream, proxy.ProxyError) as exc:
            raise ConnectionFailed(f"cannot connect to {self.host_header}{via}: {_describe(exc)}") from None
        return _Conn(stream)

    async def _open_direct(self) -> ByteStream:
        if self.tls:
            return await anyio.connect_tcp(
                self.host, self.port, ssl_context=ssl_context(), tls_hostname=self.host, tls_standard_compatible=False
            )
        return await anyio.connect_tcp(self.host, self.port)

    async def _open_proxied(self, via: proxy.Proxy) -> ByteStream:
        if via.tls:
            stream: ByteStream = await anyio.connect_tcp(
                via.host, via.port, ssl_context=ssl_context(), tls_hostname=via.host, tls_standard_compatible=False
            )
        else:
            stream = await anyio.connect_tcp(via.host, via.port)
        if not self.tls:
            return stream  # requests go to the proxy in absolute form
        try:
            bracketed = f"[{self.host}]" if ":" in self.host else self.host
            await proxy.open_tunnel(stream, via, f"{bracketed}:{self.port}", USER_AGENT)
            return await TLSStream.wrap(
                stream, hostname=self.host, ssl_context=ssl_context(), standard_compatible=False
            )
        except BaseException:
            await stream.aclose()
            raise

    def _slot_free(self) -> None:
        self._active -= 1
        if self._freed is not None:
            self._freed.set()
            self._freed = None

    async def _release(self, conn: _Conn, keep: bool) -> None:
        self._slot_free()
        if keep and not self._closed and len(self._idle) < MAX_IDLE:
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            await conn.aclose()

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.aclose()

    # ---- cookies -----------------------------------------------------------------------------
    def _cookie_header(self) -> str | None:
        assert self._jar is not None
        req = urllib.request.Request(self.url)
        self._jar.add_cookie_header(req)
        return req.get_header("Cookie")

    def _keep_cookies(self, headers: Headers) -> None:
        if self._jar is None:
            self._jar = CookieJar()
        msg = email.message.Message()
        for value in headers.set_cookie:
            msg["Set-Cookie"] = value
        self._jar.extract_cookies(_CookieReply(msg), urllib.request.Request(self.url))  # type: ignore[arg-type]  # only .info() is read


class _CookieReply:
    def __init__(self, msg: email.message.Message) -> None:
        self._msg = msg

    def info(self) -> email.message.Message:
        return self._msg


# A request no larger than this is written at once: the transport buffers what the socket does not
# take and pauses the sender only past its high-water mark (64 KiB in asyncio and uvloop), and a
# connection is only reused after its last reply was read to the end (its buffer drained). So its
# send never waits and needs no write timeout, which cost a timer and a cancel scope per request
# (about 11 us, a tenth of mcpx's own CPU per call). The caller's call timeout still covers it.
NEVER_WAITS_BYTES = 64 * 1024


class _Exchange:
    """Sends one request on entry; on exit keeps the connection if the reply was read to its end."""

    def __init__(self, client: Client, method: str, data: bytes, connect_timeout: float | None) -> None:
        self.client = client
        self.method = method
        self.data = data
        self.connect_timeout = client.connect_timeout if connect_timeout is None else connect_timeout
        self.conn: _Conn | None = None
        self.resp: Response | None = None

    async def __aenter__(self) -> Response:
        client = self.client
        for attempt in (1, 2):
            conn, reused = await client._acquire(self.connect_timeout)
            self.conn = conn
            try:
                try:
                    if len(self.data) <= NEVER_WAITS_BYTES:
                        await conn.stream.send(self.data)  # no timer: it cannot wait (see NEVER_WAITS_BYTES)
                    else:
                        with anyio.fail_after(client.write_timeout):
                            await conn.stream.send(self.data)
                except TimeoutError:
                    raise TimeoutError(
                        f"sending to {client.host_header} stalled for {client.write_timeout:g} s"
                    ) from None
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    # anyio raises here only for a stream already known broken or closed: nothing of
                    # this request was written, so sending it on a fresh connection cannot repeat it.
                    if reused and attempt == 1:
                        raise _Stale from None
                    raise ConnectionFailed(f"connection broken while sending: {_describe(exc)}") from None
                silent_retry = reused and attempt == 1 and self.method in _IDEMPOTENT
                self.resp = await self._read_head(conn, retry_if_silent=silent_retry)
                return self.resp
            except _Stale:
                self.conn = None
                await client._release(conn, keep=False)
            except BaseException:
                self.conn = None
                await client._release(conn, keep=False)
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        conn, resp = self.conn, self.resp
        if conn is None or resp is None:
            return
        self.conn = None
        await self.client._release(conn, keep=resp.complete and resp._keep_alive and not conn.buf)

    async def _read_head(self, conn: _Conn, retry_if_silent: bool) -> Response:
        while True:
            while (m := _HEAD_END.search(conn.buf)) is None:
                if len(conn.buf) > MAX_HEAD_BYTES:
                    raise ConnectionFailed("reply head too large")
                try:
                    more = await conn.fill()
                except ConnectionFailed:
                    if retry_if_silent and not conn.buf:
                        raise _Stale from None
                    raise
                if not more:
                    if retry_if_silent and not conn.buf:
                        raise _Stale
                    raise ConnectionFailed(
                        "server closed the connection without a reply"
                        + (
                            " (the request may have been acted on: not sent again)"
                            if self.method not in _IDEMPOTENT
                            else ""
                        )
                        if not conn.buf
                        else "server closed the connection inside the reply head"
                    )
            raw, conn.buf = conn.buf[: m.start()], conn.buf[m.end() :]
            lines = raw.decode("latin-1").splitlines()
            status_line = lines[0].split(" ", 2) if lines else []
            if len(status_line) < 2 or not status_line[0].startswith("HTTP/1.") or not status_line[1].isdigit():
                raise ConnectionFailed(f"not an HTTP/1.x reply: {raw[:60]!r}")
            status = int(status_line[1])
            headers = Headers()
            last = ""
            for line in lines[1:]:
                if line[:1] in (" ", "\t") and last:  # obsolete folding: continues the last header
                    headers[last] += " " + line.strip()
                    continue
                name, sep, value = line.partition(":")
                if not sep:
                    raise ConnectionFailed(f"bad reply header line {line[:60]!r}")
                last = name.strip().lower()
                value = value.strip()
                if last == "set-cookie":
                    headers.set_cookie.append(value)
                headers[last] = f"{headers[last]}, {value}" if last in headers else value
            if 100 <= status < 200:
                continue  # interim (100 Continue, 103 Early Hints): the real head follows
            break
        if headers.set_cookie:
            self.client._keep_cookies(headers)
        connection = headers.get("connection", "").lower()
        keep_alive = "close" not in connection and (status_line[0] != "HTTP/1.0" or "keep-alive" in connection)
        if self.method == "HEAD" or status in (204, 304):
            return Response(conn, status, headers, "length", 0, keep_alive)
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return Response(conn, status, headers, "chunked", 0, keep_alive)
        length = headers.get("content-length")
        if length is not None:
            try:
                n = int(length.split(",")[0])
            except ValueError:
                raise ConnectionFailed(f"bad Content-Length {length!r}") from None
            if n < 0:
                raise ConnectionFailed(f"bad Content-Length {length!r}")
            return Response(conn, status, headers, "length", n, keep_alive)
        return Response(conn, status, headers, "close", 0, False)


class _Stale(Exception):
    """A reused connection turned out closed, and the request may go again: try a fresh one."""


def _describe(exc: BaseException) -> str:
    while exc.__cause__ is not None and not str(exc):
        exc = exc.__cause__
    return str(exc) or type(exc).__name__
