"""HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY for HTTP upstreams, as httpx honoured them.

The upstream clients were httpx clients with its default `trust_env`; h1 took their place and
keeps that contract: an `http://` upstream goes through the proxy in absolute form, an `https://`
one through an HTTP CONNECT tunnel with TLS to the upstream inside it (certificates checked as
without a proxy). The proxy itself may be `http://` or `https://`; another scheme (socks5) is refused
with an error that names it rather than silently bypassed. NO_PROXY takes `*`, host names (a leading
`.` or `*.` allowed; a name matches itself and its subdomains), IP addresses, CIDR blocks, and any
of them with `:port`. The variables are read when a client is made (once per upstream connection).
"""

from __future__ import annotations

import base64
import ipaddress
import re
import urllib.request
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from anyio.abc import ByteStream

MAX_REPLY_HEAD = 64 * 1024
_HEAD_END = re.compile(rb"\r?\n\r?\n")


class ProxyError(Exception):
    """The proxy is of a kind mcpx cannot use, or it refused the tunnel."""


@dataclass(frozen=True)
class Proxy:
    scheme: str  # of the proxy itself
    host: str
    port: int
    authorization: str | None = field(repr=False)  # Proxy-Authorization, from the URL's credentials

    @property
    def shown(self) -> str:
        """For messages and logs: never the credentials."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def tls(self) -> bool:
        return self.scheme == "https"


def for_origin(scheme: str, host: str, port: int) -> Proxy | None:
    """The proxy the environment names for this origin, or None to connect directly."""
    env = urllib.request.getproxies_environment()  # lower-case names win, as in httpx and curl
    url = env.get(scheme) or env.get("all")
    if not url or bypassed(host, port, env.get("no", "")):
        return None
    return parse(url)


def parse(url: str) -> Proxy:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ProxyError(
            f"proxy {scheme}://{parts.hostname} is not supported: mcpx speaks to http:// and https:// proxies"
            " (list the upstream's host in NO_PROXY to connect directly)"
        )
    if not parts.hostname:
        raise ProxyError(f"the {scheme} proxy URL in the environment names no host")  # not shown: credentials
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise ProxyError(f"proxy {scheme}://{parts.hostname} has a bad port") from None
    auth = None
    if parts.username is not None:
        creds = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        auth = "Basic " + base64.b64encode(creds).decode()
    return Proxy(scheme, parts.hostname, port, auth)


def bypassed(host: str, port: int, no_proxy: str) -> bool:
    host = host.lower().strip("[]")
    addr = _ip(host)
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        if "://" in entry:
            entry = entry.split("://", 1)[1]
        entry, entry_port = _split_port(entry)
        if entry_port is not None and entry_port != port:
            continue
        if addr is not None:
            try:
                if addr in ipaddress.ip_network(entry.strip("[]"), strict=False):
                    return True
            except ValueError:
                pass
            continue
        name = entry.removeprefix("*").removeprefix(".")
        if name and (host == name or host.endswith("." + name)):
            return True
    return False


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _split_port(entry: str) -> tuple[str, int | None]:
    """`host:port`, `[v6]:port` or a bare v6 address (whose colons are not a port)."""
    if entry.startswith("["):
        addr, _, rest = entry[1:].partition("]")
        return addr, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    if entry.count(":") == 1:
        name, _, port = entry.partition(":")
        if port.isdigit():
            return name, int(port)
    return entry, None


async def open_tunnel(stream: ByteStream, proxy: Proxy, authority: str, user_agent: str) -> None:
    """Ask the proxy for a tunnel to `authority` (host:port) and wait for its 2xx."""
    lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}", f"User-Agent: {user_agent}"]
    if proxy.authorization is not None:
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    await stream.send(("\r\n".join(lines) + "\r\n\r\n").encode())
    buf = b""
    while (m := _HEAD_END.search(buf)) is None:
        if len(buf) > MAX_REPLY_HEAD:
            raise ProxyError(f"proxy {proxy.shown} sent a reply head too large to CONNECT")
        chunk = await stream.receive()
        buf += chunk
    status_line = buf[: m.start()].split(b"\r\n", 1)[0].split(b"\n", 1)[0].decode("latin-1")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProxyError(f"proxy {proxy.shown} answered CONNECT with {status_line[:60]!r}")
    if not 200 <= int(parts[1]) < 300:
        raise ProxyError(f"proxy {proxy.shown} refused the tunnel to {authority}: {status_line[:80]}")
    if buf[m.end() :]:
        # A tunnel carries nothing before the TLS handshake we start: bytes here are not ours.
        raise ProxyError(f"proxy {proxy.shown} sent data after its CONNECT reply")
