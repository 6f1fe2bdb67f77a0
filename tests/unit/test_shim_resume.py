"""The shim's side of a daemon restart (mcpx/cli/serve.py, mcpx/host/shim_wire.py): the hello names
the shim's instance (checked, never trusted to be anything but an opaque id), and what goes to the
next daemon is the host's session and every request still waiting, marked as resumed."""

from __future__ import annotations

import orjson
import pytest

from mcpx.cli.serve import REINIT_ID, Relay
from mcpx.host import shim_wire


def test_the_hello_carries_a_well_formed_instance_and_drops_any_other() -> None:
    hello = shim_wire.Hello(label="a", instance="x" * 24)
    assert shim_wire.parse_hello(hello.encode()).instance == "x" * 24
    for bad in ("short", "x" * 65, "has space in it......", 7):
        line = orjson.dumps({"mcpx-shim": 1, "instance": bad})
        assert shim_wire.parse_hello(line).instance is None


@pytest.mark.parametrize("frame", [{"mcpx-shim": 1}, {"mcpx-shim": 2, "resume": {}}, {"resume": {}}, [1], "x"])
def test_only_a_resume_line_of_this_version_is_one(frame: object) -> None:
    assert shim_wire.resumed(frame) is None


def _relay_with(lines: list[dict[str, object]]) -> Relay:
    relay = Relay(lambda: None)
    relay._to_daemon([orjson.dumps(m) for m in lines])
    return relay


def test_the_next_daemon_gets_the_session_then_each_waiting_request_as_resumed() -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t"}}
    relay = _relay_with([init, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call])
    relay._from_daemon([orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {}})])  # initialize answered
    replay = [orjson.loads(line) for line in relay._replay()]
    assert replay[0] == {**init, "id": REINIT_ID}  # the host had its answer: the shim's own id
    assert replay[1]["method"] == "notifications/initialized"
    assert [shim_wire.resumed(f) for f in replay[2:]] == [call]


def test_an_initialize_still_waiting_goes_again_under_the_hosts_own_id() -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    replay = [orjson.loads(line) for line in _relay_with([init])._replay()]
    assert replay == [init]
