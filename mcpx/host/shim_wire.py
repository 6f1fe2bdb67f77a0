"""What `mcpx serve` and the daemon agree on for the shim socket (pure: no I/O).

The socket is `shim.sock` in the state folder (0600 in a 0700 folder: its file mode is the
credential, as the API token file's is). Frames are JSON-RPC messages, one per line, UTF-8, no
other framing. The shim's first line is a hello that names it for the operator (the daemon reads
its pid from the socket itself where the platform tells):

    {"mcpx-shim": 1, "label": "...", "process": "claude in ~/src/api"}

Everything after it is the host's and the daemon's own frames, relayed untouched.
"""

from __future__ import annotations

import json
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


@dataclass(frozen=True)
class Hello:
    label: str | None = None  # MCPX_HOST_LABEL
    process: str | None = None  # the process that spawned the shim

    def encode(self) -> bytes:
        data: dict[str, object] = {HELLO_KEY: VERSION}
        if self.label:
            data["label"] = self.label
        if self.process:
            data["process"] = self.process
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def parse_hello(line: bytes) -> Hello:
    """The shim's first line; ValueError when it is not a hello of a version we speak."""
    data = json.loads(line)
    if not isinstance(data, dict) or data.get(HELLO_KEY) != VERSION:
        raise ValueError("the first line is not an mcpx serve hello")
    label, process = data.get("label"), data.get("process")
    return Hello(label if isinstance(label, str) else None, process if isinstance(process, str) else None)
