"""mcpx.connections.naming: what a host connection is called, from a fake /proc folder."""

from __future__ import annotations

import os
from pathlib import Path

from mcpx.connections import naming


def fake_proc(root: Path, pid: int, comm: str, cwd: Path) -> Path:
    folder = root / str(pid)
    folder.mkdir(parents=True)
    (folder / "comm").write_text(comm + "\n")
    os.symlink(cwd, folder / "cwd")
    return root


def test_a_process_is_named_by_its_command_and_folder_with_the_home_folder_as_tilde(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "src" / "api").mkdir(parents=True)
    proc = fake_proc(tmp_path / "proc", 42, "claude", home / "src" / "api")
    assert naming.process_label(42, proc, home=str(home)) == "claude in ~/src/api"
    assert naming.process_label(42, proc, home=str(tmp_path / "elsewhere")) == f"claude in {home}/src/api"
    assert naming.process_label(43, proc, home=str(home)) is None  # gone, or not ours to read


def test_labels_are_one_printable_line_and_bounded() -> None:
    assert naming.clean_label("  a\tb\nc ") == "a b c"
    assert naming.clean_label("\n") is None and naming.clean_label(None) is None
    assert len(naming.clean_label("x" * 500) or "") == naming.MAX_LABEL


def test_a_label_survives_a_header_round_trip_whatever_its_characters() -> None:
    for label in ("claude in ~/src/api", "node in ~/src/café", "50%20 off", "日本語 agent"):
        header = naming.to_header(label)
        assert header.isascii() and naming.from_header(header) == label
    assert naming.from_header("plain ascii") == "plain ascii" and naming.from_header("") is None


def test_only_loopback_peers_are_looked_up() -> None:
    assert naming.peer_label("10.1.2.3:5000") is None
    assert naming.peer_label("127.0.0.1:notaport") is None and naming.peer_label(None) is None
    assert naming.is_loopback("127.0.0.1") and naming.is_loopback("::1") and not naming.is_loopback("192.168.1.2")


def test_a_process_label_is_led_by_a_client_name_that_says_more_than_the_sdks_default() -> None:
    process = "python in ~/src/api"
    assert naming.shown_label(None, process, {"name": "research-agent", "version": "1"}) == (
        "research-agent · python in ~/src/api"
    )
    # What the official SDKs send when the host names nothing says nothing: the process alone.
    for default in ("mcp", "MCP", "rmcp", "Java SDK MCP Client"):
        assert naming.shown_label(None, process, {"name": default, "version": "0.1.0"}) == process
    # Nor does a name that repeats the process's own command, or none at all.
    assert naming.shown_label(None, "claude in ~/src/api", {"name": "Claude"}) == "claude in ~/src/api"
    assert naming.shown_label(None, process, {}) == process
    assert naming.shown_label(None, process, {"name": 42}) == process
    assert naming.shown_label(None, process, {"name": " \n\t"}) == process


def test_a_given_label_is_shown_as_it_is_and_no_process_means_no_label() -> None:
    assert naming.shown_label("reviewer", "python in ~/src/api", {"name": "research-agent"}) == "reviewer"
    assert naming.shown_label(None, None, {"name": "research-agent"}) is None  # clientInfo then names it


def test_a_hostile_client_name_is_one_bounded_printable_line_and_leaves_the_process_readable() -> None:
    shown = naming.shown_label(None, "python in ~/src/api", {"name": "evil\n\x1b[2J" + "x" * 500})
    assert shown is not None and shown.isprintable() and len(shown) <= naming.MAX_LABEL
    assert shown.endswith(" · python in ~/src/api") and shown.startswith("evil  [2J")
