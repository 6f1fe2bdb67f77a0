"""mcpx.upstream.pool: the route listing every call resolves through is cached, and rebuilt when
(and only when) a server's list is replaced."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpx.config.model import parse_config
from mcpx.protocol.errors import InvalidParams, UpstreamUnavailable
from mcpx.upstream.pool import UpstreamPool


def pool(tmp_path: Path) -> UpstreamPool:
    config = parse_config({"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}}, "c")
    p = UpstreamPool(config, tmp_path)
    p.servers["a"].lists["tools"] = [{"name": "echo", "inputSchema": {"type": "object"}}]
    p.servers["b"].lists["tools"] = [{"name": "echo", "inputSchema": {"type": "object"}}]
    return p


def test_the_listing_is_built_once_while_no_list_changes(tmp_path: Path) -> None:
    p = pool(tmp_path)
    first = p.listing("tools")
    assert [r.item["name"] for r in first] == ["a__echo", "b__echo"]
    assert p.listing("tools") is first
    assert p.resolve("b__echo").server == "b"


def test_a_replaced_server_list_shows_at_once(tmp_path: Path) -> None:
    p = pool(tmp_path)
    p.listing("tools")
    p.servers["b"].lists["tools"] = [{"name": "sum", "inputSchema": {"type": "object"}}]  # a refetch
    assert [r.item["name"] for r in p.listing("tools")] == ["a__echo", "b__sum"]
    assert p.resolve("b__sum").name == "sum"
    with pytest.raises(UpstreamUnavailable):  # (no session in this test: "not available", not "unknown")
        p.resolve("b__echo")
    with pytest.raises(InvalidParams, match="Unknown tool: c__echo"):
        p.resolve("c__echo")
