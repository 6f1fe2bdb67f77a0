"""A keeper's last word on its files: an exit no daemon heard is kept for the next daemon, a heard one
is not, and the next keeper's files (a daemon that heard the exit may have started it already) are
never touched."""

from __future__ import annotations

from pathlib import Path

from mcpx.upstream.stdio import keeper_wire as wire


def record(run_id: str, exit_code: int | None = None) -> wire.Record:
    return wire.Record("fx", 100, 101, run_id, "hash", 0.0, exit_code)


def test_an_unheard_exit_is_left_for_the_next_daemon(tmp_path: Path) -> None:
    record("a").write(tmp_path)
    wire.socket_path(tmp_path, "fx").touch()
    wire.leave_record(tmp_path, record("a", exit_code=3), heard=False)
    left = wire.Record.read(tmp_path, "fx")
    assert left is not None and left.exit_code == 3
    assert not wire.socket_path(tmp_path, "fx").exists()


def test_a_heard_exit_leaves_nothing(tmp_path: Path) -> None:
    record("a").write(tmp_path)
    wire.socket_path(tmp_path, "fx").touch()
    wire.leave_record(tmp_path, record("a", exit_code=3), heard=True)
    assert wire.Record.read(tmp_path, "fx") is None
    assert not wire.socket_path(tmp_path, "fx").exists()


def test_the_next_keepers_files_are_left_alone(tmp_path: Path) -> None:
    record("b").write(tmp_path)  # the restarted server's keeper got here first
    wire.socket_path(tmp_path, "fx").touch()
    for heard in (True, False):
        wire.leave_record(tmp_path, record("a", exit_code=3), heard=heard)
        left = wire.Record.read(tmp_path, "fx")
        assert left is not None and left.run_id == "b" and left.exit_code is None
        assert wire.socket_path(tmp_path, "fx").exists()
