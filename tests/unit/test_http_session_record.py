"""The remembered 2025-11-25 HTTP upstream session: written private, read back only for the same
URL and headers, and never trusted when the file is damaged."""

from __future__ import annotations

import stat
from pathlib import Path

from mcpx.config.model import ServerConfig
from mcpx.upstream.http import session_record as record

CFG = ServerConfig(url="http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer a"})
HANDSHAKE = {"protocolVersion": "2025-11-25", "capabilities": {"tasks": {}}}


def test_a_saved_session_reads_back_and_is_private(tmp_path: Path) -> None:
    folder = tmp_path / record.FOLDER
    record.save(folder, "up", CFG, "sid-1", HANDSHAKE)
    got = record.load(folder, "up", CFG)
    assert got is not None and got["sessionId"] == "sid-1" and got["handshake"] == HANDSHAKE
    [path] = folder.iterdir()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert "Bearer" not in path.read_text()  # the headers are only hashed


def test_a_changed_url_or_headers_ignores_the_record(tmp_path: Path) -> None:
    record.save(tmp_path, "up", CFG, "sid-1", HANDSHAKE)
    assert record.load(tmp_path, "up", ServerConfig(url="http://127.0.0.1:10/mcp", headers=CFG.headers)) is None
    assert record.load(tmp_path, "up", ServerConfig(url=CFG.url, headers={"Authorization": "Bearer b"})) is None
    assert record.load(tmp_path, "other", CFG) is None


def test_a_damaged_record_is_ignored_and_forget_is_idempotent(tmp_path: Path) -> None:
    record.save(tmp_path, "up", CFG, "sid-1", HANDSHAKE)
    [path] = tmp_path.iterdir()
    path.write_text('{"sessionId": ')
    assert record.load(tmp_path, "up", CFG) is None
    path.write_text(f'{{"sessionId": "", "handshake": {{}}, "configHash": "{record.config_hash(CFG)}"}}')
    assert record.load(tmp_path, "up", CFG) is None
    record.forget(tmp_path, "up")
    record.forget(tmp_path, "up")
    assert not path.exists()
