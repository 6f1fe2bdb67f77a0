"""The connection registry as operators see it through /v1: sessions, shims and stateless hosts,
when each opens and closes, and what survives a daemon restart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from harness import ROOT, Api, RawHost, SseStream, modern_meta, stdio_server, wait_until


def _connections(api: Api) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in api.get("/v1/connections").json()["connections"]}


def test_a_deleted_session_shows_closed_and_keeps_its_tasks(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    with RawHost(d.url) as host, Api(d) as api:
        host.initialize()
        tid = host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "a"}, "task": {}}).json()
        tid = tid["result"]["task"]["taskId"]
        [conn] = _connections(api).values()
        assert conn["kind"] == "session" and conn["revision"] == "2025-11-25" and conn["closedMs"] is None
        assert conn["clientInfo"]["name"] == "pytest-raw"
        # Let the task end first, so the close is the connection's last event (not a late task.status).
        wait_until(lambda: api.get(f"/v1/tasks/{tid}").json()["status"] == "completed", 10, "task done")
        assert host.client.delete(d.url, headers=host._legacy_headers()).status_code == 200
        closed = _connections(api)[conn["id"]]
        assert closed["closedMs"] and closed["closeReason"] == "session deleted by the host"
        listed = api.get("/v1/tasks", params={"connection": conn["id"]}).json()["tasks"]
        assert [t["id"] for t in listed] == [tid]  # still listed under who made it
        kinds = [e["kind"] for e in api.get("/v1/events").json()["events"] if e.get("connectionId") == conn["id"]]
        assert kinds[0] == "connection.opened" and kinds[-1] == "connection.closed"


def test_a_process_found_after_the_hosts_initialize_relabels_its_connection(
    start_daemon: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """On a busy machine the /proc scan for a host's process outlasts the wait its initialize allows
    (1 s): the scan goes on, and the connection is relabelled once it answers, so the operator's
    surfaces name the process, not only the host's clientInfo, for the rest of the session."""
    from mcpx.connections import naming

    monkeypatch.setenv(naming.SLOW_LOOKUP_ENV, "2.5")
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    with RawHost(d.url) as host, Api(d) as api:
        host.initialize()
        [conn] = _connections(api).values()
        assert conn["label"] is None  # initialize did not wait for the scan
        me = naming.shown_label(None, naming.process_label(os.getpid()), {"name": "pytest-raw"})
        wait_until(lambda: _connections(api)[conn["id"]]["label"] == me, 15, "the late label")

        def relabelled() -> list[str]:
            updates = api.get("/v1/events", params={"kind": "connection.updated"}).json()["events"]
            return [e["data"]["label"] for e in updates if e["connectionId"] == conn["id"]]

        # The record is relabelled as its event is written: the event may land a moment later.
        wait_until(relabelled, 10, "the connection.updated event")
        assert relabelled() == [me]


def test_an_approval_asked_while_the_hosts_process_is_being_looked_up_names_the_process(
    start_daemon: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """A gated call made while that scan still runs: the prompt waits for it (a person is about to be
    asked anyway) and names the process, for a 2025 session and a stateless 2026 host alike, instead
    of only the clientInfo a host may copy from another; and for a session whose initialize's
    connection closed before the scan got to it (SDK 1.30 and 2.3 hosts do so), from the call's own."""
    from mcpx.connections import naming

    monkeypatch.setenv(naming.SLOW_LOOKUP_ENV, "2.5")
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path, approve=["echo"])}})
    process = naming.process_label(os.getpid())
    echo = {"name": "fx__echo", "arguments": {"text": "hi"}}
    replies: list[int] = []

    def declined_prompt(api: Api, call: Any) -> str:
        """Make a gated call aside, decline its approval, and say what the prompt asked."""
        caller = threading.Thread(target=lambda: replies.append(call().status_code))
        caller.start()
        [q] = wait_until(api.open_questions, 20, "the approval")
        assert api.answer(q["id"], "decline").status_code == 200
        caller.join(20)
        return str(q["params"]["message"])

    with RawHost(d.url) as host, Api(d) as api:
        host.initialize()  # 1 s: the scan goes on
        asked = [declined_prompt(api, lambda: host.legacy("tools/call", echo))]
        with RawHost(d.url) as stateless:
            asked.append(declined_prompt(api, lambda: stateless.modern("tools/call", echo)))
        # As an SDK host does: its initialize's connection closed before the scan got to it, the
        # call on a connection of its own.
        with RawHost(d.url) as first:
            first.initialize()
        with RawHost(d.url) as later:
            later.session_id, later.revision = first.session_id, first.revision
            asked.append(declined_prompt(api, lambda: later.legacy("tools/call", echo)))
    assert replies == [200, 200, 200]
    hosts = [naming.shown_label(None, process, {"name": name}) for name in ("pytest-raw", "pytest", "pytest-raw")]
    assert [m[: m.index(" run fx__echo")] for m in asked] == [f"mcpx asks: may {me}" for me in hosts]


def test_a_stateless_host_closes_when_idle_and_comes_back_with_the_same_record(
    start_daemon: Any, tmp_path: Path
) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}, "connections": {"idleCloseS": 0.5}})
    with RawHost(d.url) as host, Api(d) as api:
        assert host.modern("tools/list").status_code == 200
        [first] = _connections(api).values()
        assert first["kind"] == "stateless" and first["clientInfo"] == {"name": "pytest", "version": "0"}
        wait_until(lambda: _connections(api)[first["id"]]["closedMs"], 10, "idle close")
        assert _connections(api)[first["id"]]["closeReason"] == "idle for 0.5 s"
        assert host.modern("tools/list").status_code == 200
        # One record per host, however often it comes back (#26 retention): open again.
        assert list(_connections(api)) == [first["id"]] and _connections(api)[first["id"]]["closedMs"] is None


def test_connections_page_oldest_first(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    with Api(d) as api:
        for i in range(5):
            with RawHost(d.url) as host:
                info = {"io.modelcontextprotocol/clientInfo": {"name": f"h{i}", "version": "1"}}
                assert host.modern("tools/list", meta=info).status_code == 200
        seen: list[str] = []
        cursor = None
        for _ in range(5):
            page = api.get("/v1/connections", params={"limit": 2, **({"cursor": cursor} if cursor else {})}).json()
            seen += [c["clientInfo"]["name"] for c in page["connections"]]
            cursor = page["nextCursor"]
            if cursor is None:
                break
        assert seen == ["h0", "h1", "h2", "h3", "h4"]
        assert api.get("/v1/connections", params={"cursor": "nope"}).status_code == 422


def test_a_quiet_session_closes_when_idle_unless_its_stream_is_open_and_comes_back_with_its_next_request(
    start_daemon: Any, tmp_path: Path
) -> None:
    """An abandoned session (no DELETE) must not hold memory forever: past idleCloseS without a
    request, an open GET stream or a call in flight it is closed and dropped from memory; it stays
    stored, so its host's next request opens the same record again."""
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}, "connections": {"idleCloseS": 0.5}})
    with RawHost(d.url) as quiet, RawHost(d.url) as streaming, RawHost(d.url) as witness, Api(d) as api:
        quiet.initialize()
        [quiet_id] = _connections(api)
        streaming.initialize()
        [streaming_id] = set(_connections(api)) - {quiet_id}
        stream = SseStream("GET", d.url, {"Accept": "text/event-stream", **streaming._legacy_headers()})
        try:
            # A witness: a session last seen after the stream opened, so after anything the streaming
            # session sent. The idle sweep that closes it finds the streaming session quiet for longer
            # than idleCloseS too: from then on only its open stream can be keeping it open.
            witness.initialize()
            [witness_id] = set(_connections(api)) - {quiet_id, streaming_id}
            ids = {quiet_id, streaming_id, witness_id}
            wait_until(lambda: _connections(api)[witness_id]["closedMs"], 10, "the witness's idle close")
            conns = _connections(api)
            assert set(conns) == ids, conns
            assert conns[streaming_id]["closedMs"] is None, conns  # open: its stream is
            for closed in (conns[quiet_id], conns[witness_id]):
                assert closed["closedMs"] and closed["closeReason"] == "idle for 0.5 s", conns
            reply = quiet.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "back"}}).json()
            assert reply["result"]["content"][0]["text"] == "back"
            again = _connections(api)[quiet_id]
            assert again["closedMs"] is None and set(_connections(api)) == ids  # the same record, open again
        finally:
            stream.close()


def test_after_a_restart_sessions_stay_open_and_shims_are_closed(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    shim = subprocess.Popen(
        [sys.executable, "-m", "mcpx", "serve", "--state-dir", str(d.state_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        with RawHost(d.url) as host, Api(d) as api:
            host.initialize()
            wait_until(lambda: len(_connections(api)) == 2, 20, "a session and a shim")
            before = _connections(api)
        d.stop(signal.SIGKILL)
        d.start(port=d.port)
        with Api(d) as api:
            after = _connections(api)
        kinds = {c["kind"]: c for cid, c in after.items() if cid in before}
        assert set(before) <= set(after)
        assert kinds["session"]["closedMs"] is None  # a session survives a restart
        assert kinds["shim"]["closeReason"] == "the mcpx daemon restarted"
        # The shim reconnects at once over its socket: a new record, open, for the same process.
        reconnected = [c for cid, c in after.items() if cid not in before]
        assert all(c["kind"] == "shim" and c["closedMs"] is None for c in reconnected), after
        with RawHost(d.url) as again:
            again.session_id, again.revision = host.session_id, host.revision
            assert "result" in again.legacy("tools/list").json()
        with Api(d) as api:
            now = _connections(api)
            assert sum(c["kind"] == "session" for c in now.values()) == 1  # the session's old record, not a new one
    finally:
        shim.kill()
        shim.wait()
        assert shim.stdin is not None
        shim.stdin.close()


def _comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def _tilde(folder: str) -> str:
    home = os.path.expanduser("~")
    return "~" + folder[len(home) :] if folder == home or folder.startswith(home + "/") else folder


HTTP_HOST = """
import sys, httpx
url = sys.argv[1]
body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {}, "clientInfo": {"name": "mcp", "version": "0.1.0"}}}
with httpx.Client() as client:
    # A forwarded address names no process: the host is still told by the socket it came on.
    headers = {"Accept": "application/json, text/event-stream", "X-Forwarded-For": "203.0.113.9"}
    reply = client.post(url, json=body, headers=headers)
    print(reply.headers["mcp-session-id"], flush=True)
    sys.stdin.read()  # stays connected until the test is done
"""


def test_hosts_alike_in_client_info_are_told_apart_by_their_process_or_label(start_daemon: Any, tmp_path: Path) -> None:
    """Every SDK host says `mcp 0.1.0`: a shim is named after the process that spawned it (or its
    MCPX_HOST_LABEL), a loopback HTTP host after its own process (or its X-Mcpx-Host-Label)."""
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("MCPX_HOST_LABEL", None)
    agent_a, agent_b = tmp_path / "agent-a", tmp_path / "agent-b"
    agent_a.mkdir()
    agent_b.mkdir()
    serve = [sys.executable, "-m", "mcpx", "serve", "--state-dir", str(d.state_dir)]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    # The shim's parent is this test's process: it is named after it (and its working folder).
    plain = subprocess.Popen(serve, env=env, cwd=agent_a, **pipes)  # type: ignore[call-overload]  # the pipes as keywords
    labelled = subprocess.Popen(serve, env={**env, "MCPX_HOST_LABEL": "reviewer bot é"}, **pipes)  # type: ignore[call-overload]  # as above
    http = subprocess.Popen(
        [sys.executable, "-c", HTTP_HOST, d.url], cwd=agent_b, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert http.stdout is not None and http.stdout.readline().strip()
        with Api(d) as api, RawHost(d.url) as named:
            named.modern("tools/list", headers={"X-Mcpx-Host-Label": "nightly%20sweep"})
            conns = wait_until(lambda: _connections(api) if len(_connections(api)) == 4 else None, 20, "4 hosts")
        labels = {c["kind"] + ":" + str(c["shimPid"] or ""): c["label"] for c in conns.values()}
        # The parent's folder, not the shim's own (agent-a).
        assert labels[f"shim:{plain.pid}"] == f"{_comm(os.getpid())} in {_tilde(os.getcwd())}"
        assert labels[f"shim:{labelled.pid}"] == "reviewer bot é"
        assert labels["session:"] == f"{_comm(http.pid)} in {_tilde(str(agent_b))}"
        assert labels["stateless:"] == "nightly sweep"
    finally:
        for proc in (plain, labelled, http):
            proc.kill()
            proc.wait()
            assert proc.stdin is not None
            proc.stdin.close()
        assert http.stdout is not None
        http.stdout.close()


AGENT = """
import json, sys, httpx
url, name, call = sys.argv[1], sys.argv[2], sys.argv[3] == "call"
headers = {"Accept": "application/json, text/event-stream"}
init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {}, "clientInfo": {"name": name, "version": "1.0"}}}
with httpx.Client(timeout=None) as client:
    sid = client.post(url, json=init, headers=headers).headers["mcp-session-id"]
    print(sid, flush=True)
    if call:  # a gated tool: the call waits for an operator
        headers = {**headers, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
        echo = {"name": "fx__echo", "arguments": {"text": "hi"}}
        client.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": echo}, headers=headers)
    sys.stdin.read()
"""


def _labels(api: Api) -> dict[str, str | None]:
    return {c["clientInfo"].get("name", "?"): c["label"] for c in _connections(api).values()}


def test_two_agents_run_from_one_folder_are_told_apart_by_their_client_names(start_daemon: Any, tmp_path: Path) -> None:
    """Two scripts from one folder are the same process name and folder: each one's clientInfo
    name leads its label, unless it is an SDK's default (`mcp`), in /v1, the feed and the operator's
    approval prompt. A shim's is learnt at its initialize (or a 2026 host's first request), after
    its record opened."""
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path, approve=["echo"])}})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("MCPX_HOST_LABEL", None)
    folder = tmp_path / "hosts"
    folder.mkdir()
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE}
    agents = [
        subprocess.Popen([sys.executable, "-c", AGENT, d.url, name, call], cwd=folder, text=True, **pipes)  # type: ignore[call-overload]  # the pipes as keywords
        for name, call in (("research-agent", "call"), ("review-agent", "-"), ("mcp", "-"))
    ]
    serve = [sys.executable, "-m", "mcpx", "serve", "--state-dir", str(d.state_dir)]
    shims = [subprocess.Popen(serve, env=env, cwd=folder, **pipes) for _ in range(2)]  # type: ignore[call-overload]  # as above
    legacy = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
              "capabilities": {}, "clientInfo": {"name": "shim-agent", "version": "2"}}}  # fmt: skip
    modern = {"jsonrpc": "2.0", "id": 1, "method": "tools/list",
              "params": {"_meta": modern_meta(**{"io.modelcontextprotocol/clientInfo": {"name": "modern-agent"}})}}  # fmt: skip
    try:
        for agent in agents:
            assert agent.stdout is not None and agent.stdout.readline().strip()
        for shim, frame in zip(shims, (legacy, modern), strict=True):
            assert shim.stdin is not None and shim.stdout is not None
            shim.stdin.write(json.dumps(frame).encode() + b"\n")
            shim.stdin.flush()
            assert json.loads(shim.stdout.readline())["id"] == 1
        process = f"{_comm(agents[0].pid)} in {_tilde(str(folder))}"
        assert all(_comm(a.pid) == _comm(agents[0].pid) for a in agents)  # alike but for their names
        # A shim's parent is this test's process, in this test's folder; so is a RawHost.
        here = f"{_comm(os.getpid())} in {_tilde(os.getcwd())}"
        want = {
            "research-agent": f"research-agent · {process}",
            "review-agent": f"review-agent · {process}",
            "mcp": process,  # the Python SDK's default name says nothing more
            "shim-agent": f"shim-agent · {here}",
            "modern-agent": f"modern-agent · {here}",
            "nightly-agent": f"nightly-agent · {here}",
        }
        with Api(d) as api, RawHost(d.url) as stateless:
            info = {"io.modelcontextprotocol/clientInfo": {"name": "nightly-agent", "version": "1"}}
            assert stateless.modern("tools/list", meta=info).status_code == 200
            try:
                wait_until(lambda: _labels(api) == want, 20, "every host's label")
            finally:
                assert _labels(api) == want

            # The feed carries it: each shim's record was updated with its label once its client was
            # known (an HTTP host's too, where a busy machine found its process after its initialize).
            def updated() -> set[str]:
                events = api.get("/v1/events", params={"kind": "connection.updated"}).json()["events"]
                return {e["data"]["label"] for e in events}

            # A record is relabelled as its event is written: the event may land a moment later.
            wait_until(lambda: {want["shim-agent"], want["modern-agent"]} <= updated(), 10, "the updated events")
            assert updated() <= set(want.values())
            [q] = wait_until(api.open_questions, 20, "the approval question")
            assert q["params"]["message"].startswith(f"mcpx asks: may research-agent · {process} run fx__echo")
    finally:
        for proc in (*agents, *shims):
            proc.kill()
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()
