"""mcpx.connections.loopback_owner: the process at the other end of a loopback connection, from a
fake /proc whose tables hold the decoys a busy machine has (a TIME_WAIT socket and another
process's connection on the same ephemeral port), and from the real /proc."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from mcpx.connections import loopback_owner

HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"


def v4(ip: str, port: int) -> str:
    a, b, c, d = (int(x) for x in ip.split("."))
    return f"{d:02X}{c:02X}{b:02X}{a:02X}:{port:04X}"


def mapped(ip: str, port: int) -> str:
    return "0000000000000000FFFF0000" + v4(ip, port)


def row(n: int, local: str, remote: str, state: str, inode: int) -> str:
    return f"{n:4}: {local} {remote} {state} 00000000:00000000 00:00000000 00000000     0        0 {inode} 1\n"


def fake_proc(root: Path, tcp: list[str], tcp6: list[str], fds: dict[int, list[int]]) -> Path:
    (root / "net").mkdir(parents=True)
    (root / "net" / "tcp").write_text(HEADER + "".join(tcp))
    (root / "net" / "tcp6").write_text(HEADER + "".join(tcp6))
    for pid, inodes in fds.items():
        (root / str(pid) / "fd").mkdir(parents=True)
        for n, inode in enumerate(inodes):
            os.symlink(f"socket:[{inode}]", root / str(pid) / "fd" / str(n + 3))
        os.symlink("/dev/null", root / str(pid) / "fd" / "0")
    return root


DAEMON, HOST, ELSEWHERE, OTHER_SERVER = 100, 200, 300, 400


def decoys() -> list[str]:
    """The host's port, 50000, also in TIME_WAIT (no owner) and in another process's connection to
    another server (Linux shares an ephemeral port between destinations)."""
    return [
        row(0, v4("127.0.0.1", 50000), v4("127.0.0.1", 9000), "06", 0),
        row(1, v4("127.0.0.1", 50000), v4("127.0.0.1", 9000), "01", 333),
        row(2, v4("127.0.0.1", 9000), v4("127.0.0.1", 50000), "01", 444),
    ]


def test_the_peer_is_the_process_connected_to_this_daemon_not_another_on_the_same_port(tmp_path: Path) -> None:
    tcp = [
        *decoys(),
        row(3, v4("127.0.0.1", 50000), v4("127.0.0.1", 8000), "01", 222),
        row(4, v4("127.0.0.1", 8000), v4("127.0.0.1", 50000), "01", 111),
    ]
    proc = fake_proc(tmp_path, tcp, [], {DAEMON: [111], HOST: [222], ELSEWHERE: [333], OTHER_SERVER: [444]})
    assert loopback_owner.socket_owner("127.0.0.1", 50000, proc, me=DAEMON) == HOST
    # The other server, asking the same question, finds the other process.
    assert loopback_owner.socket_owner("127.0.0.1", 50000, proc, me=OTHER_SERVER) == ELSEWHERE
    # A process this daemon holds no connection with is no one's peer.
    assert loopback_owner.socket_owner("127.0.0.1", 50001, proc, me=DAEMON) is None


def test_a_dual_stack_listener_sees_an_ipv4_host_as_an_ipv4_mapped_address(tmp_path: Path) -> None:
    tcp = [*decoys(), row(3, v4("127.0.0.1", 50000), v4("127.0.0.1", 8000), "01", 222)]
    tcp6 = [row(0, mapped("127.0.0.1", 8000), mapped("127.0.0.1", 50000), "01", 111)]
    proc = fake_proc(tmp_path, tcp, tcp6, {DAEMON: [111], HOST: [222], ELSEWHERE: [333], OTHER_SERVER: [444]})
    assert loopback_owner.socket_owner("::ffff:127.0.0.1", 50000, proc, me=DAEMON) == HOST
    assert loopback_owner.socket_owner("127.0.0.1", 50000, proc, me=DAEMON) == HOST


def test_unreadable_or_odd_input_finds_no_one(tmp_path: Path) -> None:
    assert loopback_owner.socket_owner("localhost", 50000, tmp_path) is None  # not an address
    assert loopback_owner.socket_owner("127.0.0.1", 50000, tmp_path / "missing", me=DAEMON) is None
    assert loopback_owner.parse_address("zz:1F90") is None and loopback_owner.parse_address("0100:1F90") is None


def test_a_real_loopback_connection_is_traced_to_its_process() -> None:
    """A child process connects to a server this process listens on: the real tables, fds and the
    ephemeral port the kernel picked name the child."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = f"import socket, sys; s = socket.create_connection(('127.0.0.1', {port})); sys.stdin.read()"
        child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
        try:
            accepted, peer = server.accept()
            with accepted:
                assert loopback_owner.socket_owner(peer[0], peer[1]) == child.pid
                assert loopback_owner.socket_owner(peer[0], peer[1] + 1) is None
        finally:
            child.kill()
            child.wait()
            assert child.stdin is not None
            child.stdin.close()
