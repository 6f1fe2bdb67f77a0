"""URLs and other values in the config, checked at load the way the code that uses them parses them.

A value the runtime cannot use (a letter O in a port, a space in a host, a port past 65535, a NUL in a
program's argument) is refused when the file is read, naming its key, instead of failing at the first
delivery or call, or worse, in background work (docs/security.md, "The config").

- `parse_http_url` is how mcpx's own HTTP/1.1 client reads an upstream's `url` (mcpx/upstream/http/h1.py
  uses it), and how `daemon.publicUrl` and `traces.endpoint` are checked;
- `check_webhook_url` adds what httpx, the webhook sender, makes of the URL;
- `check_postgres_url` asks asyncpg's own DSN parser, which the store's connections use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

_UNPRINTABLE = re.compile(r"[\s\x00-\x1f\x7f]")
_BAD_HEADER = re.compile(r"[\r\n\x00]")
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP field name (RFC 9110 5.1)


@dataclass(frozen=True)
class HttpUrl:
    tls: bool
    host: str  # ASCII: a name beyond it is IDNA-encoded
    port: int
    path: str
    query: str
    username: str | None
    password: str | None


def parse_http_url(url: str) -> HttpUrl:
    """An http(s) URL's parts, or ValueError saying what makes it unusable."""
    if _UNPRINTABLE.search(url):
        raise ValueError("has a space or a control character in it")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError("must start with http:// or https://")
    try:
        port = parts.port
    except ValueError:
        port_text = parts.netloc.rpartition("@")[2].rpartition("]")[2].partition(":")[2]
        raise ValueError(f"port {port_text!r} is not a number from 1 to 65535") from None
    if port == 0:
        raise ValueError("port 0 cannot be connected to")
    hostname = parts.hostname
    if not hostname:
        raise ValueError("names no host")
    if not hostname.isascii():
        try:
            hostname = hostname.encode("idna").decode()
        except UnicodeError:
            raise ValueError(f"host {hostname!r} is not a valid international domain name") from None
    tls = parts.scheme == "https"
    return HttpUrl(tls, hostname, port or (443 if tls else 80), parts.path, parts.query, parts.username, parts.password)


def check_http_url(url: str) -> str:
    """`url` when `parse_http_url` takes it (a pydantic validator)."""
    parse_http_url(url)
    return url


def check_webhook_url(url: str) -> str:
    """`url` when both mcpx's check and httpx, which POSTs to it, take it."""
    parse_http_url(url)
    try:
        parsed = httpx.URL(url)
        usable = parsed.scheme in ("http", "https") and bool(parsed.host)  # `host` decodes IDNA: it may raise
    except (httpx.InvalidURL, ValueError) as exc:  # idna's errors are ValueErrors too
        raise ValueError(f"httpx cannot use it: {exc}") from None
    if not usable:
        raise ValueError("httpx cannot use it: it names no http(s) host")
    return url


def check_postgres_url(url: str) -> str:
    """`url` when asyncpg's DSN parser takes it (it runs again at each connect: a bad port, an unknown
    `sslmode` would otherwise stop the daemon at start with a traceback)."""
    if _UNPRINTABLE.search(url):
        raise ValueError("has a space or a control character in it")
    try:
        from asyncpg import connect_utils

        parse = getattr(connect_utils, "_parse_connect_dsn_and_args", None)  # private: it may move
    except ImportError:
        parse = None
    if parse is not None:
        try:
            hosts = parse(
                dsn=url, host=None, port=None, user=None, password=None, passfile=None, database=None, ssl=None,
                service=None, servicefile=None, direct_tls=None, server_settings=None, target_session_attrs=None,
                krbsrvname=None, gsslib=None,
            )[0]  # fmt: skip
        except TypeError:  # another asyncpg's signature: not this check's business
            hosts = []
        except Exception as exc:  # noqa: BLE001 - whatever asyncpg refuses, it refuses at connect too
            raise ValueError(f"asyncpg cannot use it: {exc}") from None
        for _, port in hosts:
            if isinstance(port, int) and not 1 <= port <= 65535:
                raise ValueError(f"port {port} is not a number from 1 to 65535")
    return url


def check_origin(origin: str) -> str:
    """`origin` when a browser's `Origin` header can equal it: it is compared as a string with what
    browsers send, `scheme://host[:port]` in lower case with no path (not even `/`); an entry written
    otherwise never matches, silently. `null` (an opaque origin) is taken as written."""
    if origin == "null":
        return origin
    if _UNPRINTABLE.search(origin):
        raise ValueError("has a space or a control character in it")
    parts = urlsplit(origin)
    try:
        parts.port  # noqa: B018 - raises ValueError unless the port is a number in range
    except ValueError:
        raise ValueError("its port is not a number from 1 to 65535") from None
    if not parts.scheme or not parts.hostname or "@" in parts.netloc:
        raise ValueError("an origin is scheme://host[:port], as browsers send it")
    if parts.path or parts.query or parts.fragment or origin.endswith(("?", "#")):
        raise ValueError("an origin has no path (not even a trailing /), query or fragment: browsers send none")
    if origin != origin.lower():
        raise ValueError("browsers send an origin in lower case: write it so, or it never matches")
    return origin


def check_header(name: str, value: str) -> None:
    """A header mcpx's HTTP client would refuse to send (h1.py: no CR, LF or NUL), as ValueError."""
    if not _TOKEN.match(name):
        raise ValueError(f"header name {name!r} is not an HTTP token")
    if _BAD_HEADER.search(value):
        raise ValueError(f"header {name!r} has a CR, LF or NUL in its value")


def check_process_text(text: str, what: str) -> None:
    """A string passed to a new process (a program, an argument, a folder, an environment entry):
    the OS takes no NUL in one, and Python refuses it before trying."""
    if "\x00" in text:
        raise ValueError(f"{what} has a NUL character in it")
