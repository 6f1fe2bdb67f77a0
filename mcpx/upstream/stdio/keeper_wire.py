"""What the daemon and a stdio upstream's keeper (keeper.py) say to each other, and where a keeper
is recorded in the state folder. Both sides import this; nothing here starts anything.

The socket carries one JSON object per line. Lines from the server are relayed as they are; a
line whose object has the key CONTROL is the keeper's own (or, daemon to keeper, an order):

  keeper -> daemon, first line:  {CONTROL: "welcome", runId, handshake, nextId, outstanding, replayed, lost}
                                  then the replies it replays (their ids are `replayed`), the
                                  server's unanswered requests, and what it held meanwhile
  keeper -> daemon:               {CONTROL: "exit", code}            the server ended
  daemon -> keeper:               {CONTROL: "handshake", handshake}  kept for the next daemon
  daemon -> keeper:               {CONTROL: "stop"}                  stop the server and exit
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...config.state_files import pid_alive, write_private_json
from ...protocol import fastjson

if TYPE_CHECKING:  # the keeper process imports this module: it need not load the config models
    from ...config.model import ServerConfig

CONTROL = "mcpx-keeper"
Id = str | int  # a JSON-RPC request id
FOLDER = "keepers"
MAX_LINE = 64 * 1024 * 1024
# A unix socket path may hold about 107 bytes; a longer one is reached through its folder's fd.
SUN_PATH_MAX = 100


def control(kind: str, **data: object) -> dict[str, Any]:
    return {CONTROL: kind, **data}


def is_control(msg: dict[str, Any]) -> bool:
    return CONTROL in msg


def encode(msg: dict[str, Any]) -> bytes:
    return fastjson.dumps(msg) + b"\n"


def config_hash(cfg: ServerConfig) -> str:
    """What makes a keeper's server the configured one: a change replaces the keeper."""
    spec = {"command": cfg.command, "args": cfg.args, "env": cfg.env, "cwd": cfg.cwd}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def stem(server: str) -> str:
    """A file name for a server key of any spelling: readable part plus a short digest."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", server)[:40]
    return f"{safe}-{hashlib.sha256(server.encode()).hexdigest()[:8]}"


@dataclass
class Spec:
    """What the daemon hands a new keeper on its stdin."""

    server: str
    command: str
    args: list[str]
    env: dict[str, str]
    cwd: str | None
    folder: str  # the keepers folder: the record and the socket go there
    stderr_log: str  # where the server's stderr goes
    grace_s: float
    buffer_bytes: int
    config_hash: str

    @property
    def stem(self) -> str:
        return stem(self.server)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Spec:
        return cls(**json.loads(text))


@dataclass
class Record:
    """`keepers/<stem>.json`: a keeper that runs (or ran) for one server."""

    server: str
    keeper_pid: int
    server_pid: int  # also the server's process group: it leads its own session
    run_id: str
    config_hash: str
    started: float
    exit_code: int | None = None  # set when the server ended while no daemon heard it
    extra: dict[str, Any] = field(default_factory=dict)

    def write(self, folder: Path) -> None:
        write_private_json(folder / f"{stem(self.server)}.json", asdict(self))

    @classmethod
    def read(cls, folder: Path, server: str) -> Record | None:
        try:
            data = json.loads((folder / f"{stem(server)}.json").read_text())
            return cls(**data)
        except (OSError, ValueError, TypeError):
            return None


def leave_record(folder: Path, record: Record, heard: bool) -> None:
    """A keeper's last word on its record and socket. An exit no daemon heard stays recorded (with its
    code) for the next daemon; otherwise both go. Only while the files are still this run's: a daemon that
    heard the exit may already have started the next keeper, whose files these now are."""
    current = Record.read(folder, record.server)
    if current is not None and current.run_id != record.run_id:
        return
    try:
        socket_path(folder, record.server).unlink()
    except FileNotFoundError:
        pass
    if not heard:
        record.write(folder)
        return
    try:
        record_path(folder, record.server).unlink()
    except FileNotFoundError:
        pass


def record_path(folder: Path, server: str) -> Path:
    return folder / f"{stem(server)}.json"


def socket_path(folder: Path, server: str) -> Path:
    return folder / f"{stem(server)}.sock"


def all_records(folder: Path) -> list[Record]:
    out = []
    for path in sorted(folder.glob("*.json")):
        try:
            out.append(Record(**json.loads(path.read_text())))
        except (OSError, ValueError, TypeError):
            continue
    return out


# What a keeper runs as: its module, and the alias that keepers started before the house move
# (mcpx/upstream/keeper.py) still run as, so a new daemon adopts them.
KEEPER_MODULES = (b"mcpx.upstream.stdio.keeper", b"mcpx.upstream.keeper")


def is_keeper(pid: int) -> bool:
    """The process is alive and is a keeper (not a stranger that got the pid since)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmdline = fh.read()
    except OSError:
        return False
    return any(name in cmdline for name in KEEPER_MODULES)


def alive(pid: int) -> bool:
    if not pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z"  # a zombie is gone
    except OSError:
        return False


def still_running(record: Record) -> bool:
    """Its keeper, or its server's own process group, still runs (a pid a stranger got since does not count)."""
    if is_keeper(record.keeper_pid):
        return True
    try:
        return alive(record.server_pid) and os.getpgid(record.server_pid) == record.server_pid
    except OSError:
        return False
