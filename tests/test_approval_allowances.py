"""What "allow for this host" covers (#37 item 4): an identity no other process can claim.

A 2025 session (its id is a secret), a `mcpx serve` connection (one process) and an `auth`
principal can be given an allowance; a stateless 2026 host without `auth` is known only by what any
local process could say (`clientInfo`, its address), so it is offered "allow once" alone, and an
answer that picks "allow for this host" anyway is refused. The prompt names the process that sent
this very call: two processes with the same `clientInfo`, in two folders, are named apart.
(A 2025 session's allowance not reaching another session: tests/test_approvals.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from harness import MODERN, UNIT, Api, ShimHost, modern_meta, read_jsonl, stdio_server, wait_until

from mcpx.connections import naming

# One 2026 tools/call from its own process, in the folder it runs in; prints the reply.
CALLER = """
import json, sys, httpx
url, text, token, meta, version = sys.argv[1:6]
params = {"name": "fx__echo", "arguments": {"text": text}, "_meta": json.loads(meta)}
headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": version, "Mcp-Method": "tools/call", "Mcp-Name": "fx__echo"}
if token:
    headers["Authorization"] = "Bearer " + token
body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
print(httpx.post(url, json=body, headers=headers, timeout=60).text)
"""
SAME_CLIENT = modern_meta(**{"io.modelcontextprotocol/clientInfo": {"name": "agent", "version": "1.0"}})


def _config(tmp: Path, **top: Any) -> dict[str, Any]:
    return {"mcpServers": {"fx": stdio_server(tmp, approve=["echo"])}, **top}


def _echoes(tmp: Path) -> list[str]:
    return [
        e["msg"]["params"]["arguments"]["text"]
        for e in read_jsonl(tmp / "fixture.log.jsonl")
        if e.get("msg", {}).get("method") == "tools/call" and e["msg"]["params"].get("name") == "echo"
    ]


class Process:
    """A 2026 host process in its own folder, calling fx__echo once."""

    def __init__(self, url: str, folder: Path, text: str, token: str = "") -> None:
        folder.mkdir(exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CALLER, url, text, token, json.dumps(SAME_CLIENT), MODERN],
            cwd=folder,
            stdout=subprocess.PIPE,
            text=True,
        )

    def label(self) -> str | None:
        """As mcpx shows it: its clientInfo name leads the process (connections/naming.py)."""
        return naming.shown_label(None, naming.process_label(self.proc.pid), {"name": "agent"})

    def result(self) -> dict[str, Any]:
        out, _ = self.proc.communicate(timeout=30 * UNIT)
        result: dict[str, Any] = json.loads(out)["result"]
        return result


def _decision(q: dict[str, Any]) -> list[str]:
    return [c["const"] for c in q["params"]["requestedSchema"]["properties"]["decision"]["oneOf"]]


def test_a_stateless_2026_host_without_auth_is_allowed_once_and_each_process_is_named(
    start_daemon: Any, tmp_path: Path
) -> None:
    d = start_daemon(_config(tmp_path))
    with Api(d) as api:
        first = Process(d.url, tmp_path / "first-folder", "from first")
        [q] = wait_until(api.open_questions, 10, "the first process's approval")
        # "Allow for this host", picked by hand past the form: refused, and the question stays open.
        content = {"decision": "allow-for-host", "minutes": 60}
        refused = api.answer(q["id"], "accept", by="olga", content=content)
        assert refused.status_code == 422 and "content.decision" in refused.text, refused.text
        assert _decision(q) == ["allow", "deny"] and "minutes" not in q["params"]["requestedSchema"]["properties"]
        assert q["params"]["_meta"]["io.mcpx/approval"]["allowanceFor"] is None
        label = first.label()
        assert label is not None and label.endswith("/first-folder"), label
        assert q["params"]["message"].startswith(f"mcpx asks: may {label} run fx__echo"), q["params"]["message"]
        assert api.answer(q["id"], "accept", by="olga", content={"decision": "allow"}).status_code == 200
        assert first.result()["content"][0]["text"] == "from first"
        # Same clientInfo, same address, another folder: asked again, and named as itself.
        second = Process(d.url, tmp_path / "second-folder", "from second")
        [q2] = wait_until(api.open_questions, 10, "the second process's approval")
        label2 = second.label()
        assert label2 is not None and label2.endswith("/second-folder") and label2 != label
        assert q2["params"]["message"].startswith(f"mcpx asks: may {label2} run fx__echo"), q2["params"]["message"]
        assert q2["params"]["_meta"]["io.mcpx/approval"]["host"] == label2
        assert api.answer(q2["id"], "accept", by="olga", content={"decision": "deny"}).status_code == 200
        assert second.result()["isError"] is True
        assert api.get("/v1/allowances").json()["allowances"] == []
    assert _echoes(tmp_path) == ["from first"]


def test_an_auth_principal_can_be_allowed_and_the_allowance_covers_its_token(start_daemon: Any, tmp_path: Path) -> None:
    auth = {"tokens": [{"principal": "alice", "token": "alice-token-0123456789"}]}
    d = start_daemon(_config(tmp_path, auth=auth))
    with Api(d) as api:
        first = Process(d.url, tmp_path / "one", "one", token="alice-token-0123456789")
        [q] = wait_until(api.open_questions, 10, "the approval")
        assert _decision(q) == ["allow", "allow-for-host", "deny"]
        offered = q["params"]["requestedSchema"]["properties"]["decision"]["oneOf"][1]["title"]
        assert offered == "Allow this tool for principal alice for a while"
        content = {"decision": "allow-for-host", "minutes": 5}
        assert api.answer(q["id"], "accept", by="olga", content=content).status_code == 200
        assert first.result()["content"][0]["text"] == "one"
        # Any process presenting alice's token is alice: unasked.
        assert (
            Process(d.url, tmp_path / "two", "two", token="alice-token-0123456789").result()["content"][0]["text"]
            == "two"
        )
        [allowance] = api.get("/v1/allowances").json()["allowances"]
        assert allowance["by"] == "operator:olga"
    assert _echoes(tmp_path) == ["one", "two"]


def _shim_call(shim: ShimHost, text: str, box: dict[str, Any]) -> threading.Thread:
    def call() -> None:
        box["result"] = shim.request("tools/call", {"name": "fx__echo", "arguments": {"text": text}}, 30)["result"]

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread


def test_a_shim_connection_s_allowance_is_its_own(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon(_config(tmp_path))
    a, b = ShimHost(d, "same-client"), ShimHost(d, "same-client")
    try:
        with Api(d) as api:
            box: dict[str, Any] = {}
            thread = _shim_call(a, "a1", box)
            [q] = wait_until(api.open_questions, 10, "shim a's approval")
            assert _decision(q) == ["allow", "allow-for-host", "deny"]
            meta = q["params"]["_meta"]["io.mcpx/approval"]
            assert meta["allowanceFor"].startswith("this `mcpx serve` connection (pid "), meta
            content = {"decision": "allow-for-host", "minutes": 5}
            assert api.answer(q["id"], "accept", by="olga", content=content).status_code == 200
            thread.join(10)
            assert box["result"]["content"][0]["text"] == "a1"
            assert (
                a.request("tools/call", {"name": "fx__echo", "arguments": {"text": "a2"}})["result"]["content"][0][
                    "text"
                ]
                == "a2"
            )  # unasked
            other: dict[str, Any] = {}
            thread = _shim_call(b, "b1", other)
            [q2] = wait_until(api.open_questions, 10, "shim b's approval: another process, asked")
            assert q2["connectionId"] != q["connectionId"]
            assert api.answer(q2["id"], "accept", by="olga", content={"decision": "deny"}).status_code == 200
            thread.join(10)
            assert other["result"]["isError"] is True
    finally:
        a.close()
        b.close()
    assert _echoes(tmp_path) == ["a1", "a2"]
