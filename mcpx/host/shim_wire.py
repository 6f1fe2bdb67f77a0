"""What `mcpx serve` and the daemon agree on for the shim socket (pure: no I/O).

The socket is `shim.sock` in the state folder (0600 in a 0700 folder: its file mode is the
credential, as the API token file's is). Frames are JSON-RPC messages, one per line, UTF-8, no
other framing. The shim's first line is a hello that names it for the operator (the daemon reads
its pid from the socket itself where the platform tells):

    {"mcpx-shim": 1, "label": "...", "process": "claude in ~/src/api", "instance": "<random>"}

Everything after it is the host's and the daemon's own frames, relayed untouched, but for one
line of the shim's own: a request of its host that a previous daemon never answered (the daemon
restarted), sent again to the next daemon as `{"mcpx-shim": 1, "resume": <the request>}`. With the
shim's `instance` (random, for the life of the `mcpx serve` process) the next daemon finds the
call the previous one made for it, and collects its reply instead of making it again.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

SOCKET = "shim.sock"
HELLO_KEY = "mcpx-shim"
VERSION = 1
MAX_LINE = 64 * 1024 * 1024  # as the websocket's frame bound (daemon/root.py ws_max_size)
# A unix socket path holds about 107 bytes; a longer one is reached through its folder's fd.
SUN_PATH_MAX = 100
TRANSPORT_ENV = "MCPX_SHIM_TRANSPORT"  # "unix" or "ws" forces one; unset: the socket, else the websocket


def socket_path(folder: Path) -> Path:
    return folder / SOCKET


RESUME_KEY = "resume"
_INSTANCE = re.compile(r"[A-Za-z0-9_-]{16,64}")  # what a shim's instance id may look like


@dataclass(frozen=True)
class Hello:
    label: str | None = None  # MCPX_HOST_LABEL
    process: str | None = None  # the process that spawned the shim
    instance: str | None = None  # this `mcpx serve` process, across the daemons it talks to

    def encode(self) -> bytes:
        data: dict[str, object] = {HELLO_KEY: VERSION}
        if self.label:
            data["label"] = self.label
        if self.process:
            data["process"] = self.process
        if self.instance:
            data["instance"] = self.instance
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def parse_hello(line: bytes) -> Hello:
    """The shim's first line; ValueError when it is not a hello of a version we speak."""
    data = json.loads(line)
    if not isinstance(data, dict) or data.get(HELLO_KEY) != VERSION:
        raise ValueError("the first line is not an mcpx serve hello")
    label, process = data.get("label"), data.get("process")
    return Hello(
        label if isinstance(label, str) else None,
        process if isinstance(process, str) else None,
        valid_instance(data.get("instance")),
    )


def valid_instance(value: object) -> str | None:
    return value if isinstance(value, str) and _INSTANCE.fullmatch(value) else None


def connection_id(instance: str | None) -> str | None:
    """The owner id of a shim's connections: the same for every daemon the `mcpx serve` process
    talks to, so its host still owns the tasks it made before a restart. A digest: the instance
    itself (what claims the shim's calls back) appears in no row or log."""
    if instance is None:
        return None
    return "shim-" + hashlib.sha256(instance.encode()).hexdigest()[:24]


def resume_line(request: dict[str, object]) -> dict[str, object]:
    """A request of the host's that a previous daemon never answered, for the next one."""
    return {HELLO_KEY: VERSION, RESUME_KEY: request}


def resumed(frame: object) -> dict[str, object] | None:
    """The request inside a resume line; None for any other frame."""
    if isinstance(frame, dict) and frame.get(HELLO_KEY) == VERSION and isinstance(frame.get(RESUME_KEY), dict):
        inner: dict[str, object] = frame[RESUME_KEY]
        return inner
    return None
