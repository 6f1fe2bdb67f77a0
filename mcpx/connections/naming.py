"""What an operator tells host connections apart by: the process behind one, and its own name.

Two agents on one machine often send the same `clientInfo` (a Python SDK host that names nothing
says `mcp 0.1.0`), so a connection is named after the process that runs the host where mcpx can
find it: `claude in ~/src/api`. `mcpx serve` names its parent (the host that spawned it); the
daemon names a loopback HTTP host's peer process through /proc (Linux). Two scripts run from one
folder are the same process name and folder, so a `clientInfo.name` that says more than an SDK's
default leads the label: `research-agent · python in ~/src/api`. An explicit label wins over all
of it: `MCPX_HOST_LABEL` in the shim's environment, or the `X-Mcpx-Host-Label` header of an HTTP
host. Elsewhere, or when the process cannot be read, the name stays empty and the surfaces fall
back to `clientInfo` and the peer address. A label is display only: the host controls every part.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import anyio

from . import loopback_owner

LABEL_ENV = "MCPX_HOST_LABEL"
LABEL_HEADER = "x-mcpx-host-label"  # an HTTP host's explicit name, as mcpx serve sends it too
PROCESS_HEADER = "x-mcpx-host-process"  # mcpx serve: the process that started it
MAX_LABEL = 120
MAX_CLIENT_NAME = 48  # of a label's clientInfo part: the process and folder stay readable after it
JOIN = " · "
# The `clientInfo.name` an SDK sends when the host's author set none: it names the library, not the
# agent. The Python SDK (1.x and 2.x, and FastMCP's client over it) says "mcp"; the Rust SDK's
# `Implementation::from_build_env()` says "rmcp"; the Java SDK's client builder "Java SDK MCP Client".
# The TypeScript and Go SDKs have no default (the host must name itself). Compared case-folded.
SDK_DEFAULT_NAMES = frozenset({"mcp", "rmcp", "java sdk mcp client"})
PROC = loopback_owner.PROC
_LOOPBACK = ("127.", "::1", "::ffff:127.")


def clean_label(value: str | None) -> str | None:
    """A label as shown: printable, one line, bounded; None when nothing is left."""
    if value is None:
        return None
    text = "".join(ch if ch.isprintable() else " " for ch in value).strip()[:MAX_LABEL]
    return text or None


def client_name(client_info: Mapping[str, Any]) -> str | None:
    """A host's `clientInfo.name` when it says more than its SDK's default; None otherwise."""
    name = client_info.get("name")
    if not isinstance(name, str):
        return None
    text = clean_label(name)
    if text is None or text.casefold() in SDK_DEFAULT_NAMES:
        return None
    return text if len(text) <= MAX_CLIENT_NAME else text[: MAX_CLIENT_NAME - 1] + "…"


def shown_label(given: str | None, process: str | None, client_info: Mapping[str, Any]) -> str | None:
    """What a host is shown as: the label it gave itself, as it is; else its process, led by its
    `clientInfo.name` when that says more than the SDK's default and than the process's own command
    (`research-agent · python in ~/src/api`, not `claude · claude in ~/src/api`); None when mcpx
    could not see the process (the surfaces then show `clientInfo` and the peer)."""
    if given is not None:
        return clean_label(given)
    if process is None:
        return None
    name = client_name(client_info)
    command = process.partition(" in ")[0]
    if name is None or name.casefold() == command.casefold():
        return clean_label(process)
    return clean_label(f"{name}{JOIN}{process}")


def to_header(label: str) -> str:
    """A label as a header value: UTF-8, percent-encoded where HTTP's ASCII does not reach."""
    return quote(clean_label(label) or "", safe=" !\"#$&'()*+,-./:;<=>?@[]^_`{|}~")


def from_header(value: str | None) -> str | None:
    """A label from a header (percent-encoded UTF-8, or plain ASCII), cleaned."""
    return clean_label(unquote(value)) if value else None


def process_label(pid: int, proc: Path = PROC, home: str | None = None) -> str | None:
    """`<command> in <working folder>` of a process (the folder with `~` for the home folder), or
    None when /proc does not show it (another platform, another user's process, gone)."""
    try:
        command = (proc / str(pid) / "comm").read_text().strip()
        cwd = os.readlink(proc / str(pid) / "cwd")
    except OSError:
        return None
    home = os.path.expanduser("~") if home is None else home
    if home and home != "/" and (cwd == home or cwd.startswith(home + "/")):
        cwd = "~" + cwd[len(home) :]
    return clean_label(f"{command} in {cwd}" if command else None)


def parent_label() -> str | None:
    """mcpx serve's parent: the host that spawned it."""
    return process_label(os.getppid())


def is_loopback(host: str) -> bool:
    return host.startswith(_LOOPBACK) or host == "localhost"


def peer_label(peer: str | None) -> str | None:
    """The label of a loopback HTTP host's process, from its `address:port`; None otherwise."""
    if not peer:
        return None
    host, _, port = peer.rpartition(":")
    host = host.strip("[]")
    if not port.isdigit() or not is_loopback(host):
        return None
    delay = os.environ.get(SLOW_LOOKUP_ENV)
    if delay:  # tests: the scan as slow as on a busy machine
        time.sleep(float(delay))
    pid = loopback_owner.socket_owner(host, int(port))
    return process_label(pid) if pid is not None else None


PEER_LOOKUP_S = 1.0  # a loopback host's process is looked up at most this long (/proc, off the loop)
SLOW_LOOKUP_ENV = "MCPX_TEST_PEER_LOOKUP_DELAY_S"  # tests: seconds each lookup sleeps first


async def process_of(peer: str | None, timeout: float = PEER_LOOKUP_S) -> str | None:
    """An HTTP host's process, `python in ~/src/api`, when it is on loopback (Linux); else None:
    the process holding the socket `peer` (address:port), looked up off the loop (at most `timeout`)."""
    if peer is None:
        return None
    with anyio.move_on_after(timeout):
        return await anyio.to_thread.run_sync(peer_label, peer, abandon_on_cancel=True)
    return None
