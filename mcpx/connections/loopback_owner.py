"""Which local process is at the other end of a loopback TCP connection the daemon accepted (Linux).

/proc/net/tcp{,6} lists every socket by its local and remote address. A client's ephemeral port is
not unique on its own: Linux gives one port to several connections with different destinations (a
busy machine with many local servers, the test suite's parallel daemons), and a closed connection
lingers in TIME_WAIT with no owner (inode 0). So the peer's socket is the one whose local address
is the peer and whose remote address is this daemon's own side of the connection (a socket among
this process's fds); only then are the other processes' fds searched for its inode.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import NamedTuple

PROC = Path("/proc")
_ESTABLISHED = "01"

Address = tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]


class _Socket(NamedTuple):
    local: Address
    remote: Address
    state: str
    inode: str


def parse_address(field: str) -> Address | None:
    """An address as /proc/net/tcp{,6} spells it (little-endian 32-bit words, then the port in hex),
    with an IPv4-mapped IPv6 address as IPv4 (a dual-stack listener's view of an IPv4 client)."""
    raw, _, port = field.partition(":")
    try:
        words = bytes.fromhex(raw)
        if len(words) not in (4, 16):
            return None
        packed = b"".join(words[i : i + 4][::-1] for i in range(0, len(words), 4))
        ip = ipaddress.ip_address(packed)
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return ip, int(port, 16)
    except ValueError:
        return None


def _sockets(proc: Path, port: int) -> list[_Socket]:
    """The sockets with `port` at either end: only those rows are parsed (a busy machine lists
    thousands, and this scan is what a host's label waits for)."""
    suffix = f":{port:04X}"
    out = []
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) <= 9 or not (fields[1].endswith(suffix) or fields[2].endswith(suffix)):
                continue
            local, remote = parse_address(fields[1]), parse_address(fields[2])
            if local is not None and remote is not None:
                out.append(_Socket(local, remote, fields[3], fields[9]))
    return out


def _socket_inodes(fd_folder: Path) -> set[str]:
    found = set()
    for fd in fd_folder.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            found.add(target[len("socket:[") : -1])
    return found


def socket_owner(host: str, port: int, proc: Path = PROC, me: int | None = None) -> int | None:
    """The pid of the local process whose TCP socket is host:port and is connected to this process
    (`me`), or None. Reads /proc: run it off the event loop."""
    try:
        peer: Address = (ipaddress.ip_address(host), port)
    except ValueError:
        return None
    if isinstance(peer[0], ipaddress.IPv6Address) and peer[0].ipv4_mapped is not None:
        peer = (peer[0].ipv4_mapped, port)
    me = os.getpid() if me is None else me
    sockets = [s for s in _sockets(proc, port) if s.state == _ESTABLISHED and s.inode != "0"]
    try:
        mine = _socket_inodes(proc / str(me) / "fd")
    except OSError:
        return None
    ours = {s.local for s in sockets if s.remote == peer and s.inode in mine}  # the daemon's side
    theirs = {s.inode for s in sockets if s.local == peer and s.remote in ours}
    if not theirs:
        return None
    try:
        entries = list(proc.iterdir())
    except OSError:
        return None
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if _socket_inodes(entry / "fd") & theirs:
                return int(entry.name)
        except OSError:
            continue  # gone, or not ours to read
    return None
