"""Median `tools/call` latency: direct to an upstream vs through mcpx, measured side by side in one run.

One fixture upstream process serves both paths over HTTP, so the only difference is mcpx. The
client is a minimal keep-alive HTTP/1.1 socket client (one write per request) so that client
overhead does not hide the gateway's. Rounds alternate direct/mcpx to spread machine noise.

    python bench/call_latency.py [--calls 500] [--rounds 3] [--era modern|legacy] [--upstream http|stdio]

With `--upstream stdio` the mcpx path uses the same fixture over stdio (direct stays HTTP).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from harness import SQLITE, Daemon, FixtureHttp, RawHost, modern_meta, stdio_server


class RawClient:
    """Keep-alive HTTP/1.1 POSTs to /mcp with exact headers; reads one JSON response."""

    def __init__(self, port: int, headers: dict[str, str]) -> None:
        self.port = port
        self.headers = headers
        self._connect()

    def _connect(self) -> None:
        self.sock = socket.create_connection(("127.0.0.1", self.port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def post(self, msg: dict[str, Any], extra: dict[str, str]) -> dict[str, Any]:
        body = json.dumps(msg).encode()
        head = {
            "Host": "127.0.0.1",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **self.headers,
            **extra,
            "Content-Length": str(len(body)),
        }
        request = (
            b"POST /mcp HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items()).encode() + b"\r\n" + body
        )
        buf = b""
        try:
            self.sock.sendall(request)
            while b"\r\n\r\n" not in buf:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise ConnectionResetError("closed before the response")
                buf += chunk
        except (BrokenPipeError, ConnectionResetError):
            if buf:
                raise
            # The server closed an idle keep-alive connection (uvicorn: after 5 s): reconnect, resend.
            self.sock.close()
            self._connect()
            return self.post(msg, extra)
        raw_head, rest = buf.split(b"\r\n\r\n", 1)
        length = next(
            int(line.split(b":")[1]) for line in raw_head.split(b"\r\n") if line.lower().startswith(b"content-length")
        )
        while len(rest) < length:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed mid-response")
            rest += chunk
        reply: dict[str, Any] = json.loads(rest[:length])
        return reply

    def close(self) -> None:
        self.sock.close()


def client_for(url: str, era: str) -> RawClient:
    port = int(url.split(":")[2].split("/")[0])
    if era == "legacy":
        with RawHost(url) as h:
            h.initialize()
            return RawClient(port, {"Mcp-Session-Id": h.session_id or "", "MCP-Protocol-Version": h.revision})
    return RawClient(port, {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"})


def measure(client: RawClient, era: str, tool: str, calls: int) -> list[float]:
    times = []
    for i in range(calls):
        params: dict[str, Any] = {"name": tool, "arguments": {"text": f"t{i}"}}
        if era == "modern":
            params["_meta"] = modern_meta()
        started = time.perf_counter()
        reply = client.post(
            {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params},
            {"Mcp-Name": tool} if era == "modern" else {},
        )
        times.append(time.perf_counter() - started)
        assert "result" in reply, reply
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--era", choices=["modern", "legacy"], default="modern")
    ap.add_argument("--upstream", choices=["http", "stdio"], default="http")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        upstream = FixtureHttp(tmp)
        entry = {"url": upstream.url} if args.upstream == "http" else stdio_server(tmp)
        daemon = Daemon(tmp, {"mcpServers": {"fx": entry}}, store=SQLITE)
        try:
            daemon.start()
            direct, via = client_for(upstream.url, args.era), client_for(daemon.url, args.era)
            measure(direct, args.era, "echo", 50)  # warm both paths
            measure(via, args.era, "fx__echo", 50)
            d_all: list[float] = []
            m_all: list[float] = []
            for _ in range(args.rounds):
                d_all += measure(direct, args.era, "echo", args.calls)
                m_all += measure(via, args.era, "fx__echo", args.calls)
            d_med, m_med = statistics.median(d_all) * 1000, statistics.median(m_all) * 1000
            n = args.calls * args.rounds
            print(
                json.dumps(
                    {
                        "era": args.era,
                        "upstream": args.upstream,
                        "calls": n,
                        "direct_ms": round(d_med, 3),
                        "via_mcpx_ms": round(m_med, 3),
                        "ratio": round(m_med / d_med, 2),
                    }
                )
            )
            print(
                f"tools/call echo, {args.era} host: direct (HTTP) {d_med:.2f} ms, through mcpx ({args.upstream} upstream) {m_med:.2f} ms ({m_med / d_med:.2f}x), medians of {n} calls each"
            )
            result = {"bench": "call_latency", "era": args.era, "upstream": args.upstream, "calls": n}
            result |= {"direct_ms": round(d_med, 3), "via_mcpx_ms": round(m_med, 3), "ratio": round(m_med / d_med, 2)}
            print("RESULT " + json.dumps(result))  # for bench/run_all.py
            direct.close()
            via.close()
        finally:
            daemon.stop()
            upstream.stop()


if __name__ == "__main__":
    main()
