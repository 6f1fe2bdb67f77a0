"""Proxy overhead: the same client and upstream, direct vs through mcpx, side by side in one run.

Rows (each measured direct and through mcpx, in alternating rounds, same processes throughout):

- `sdk` pair: the official `mcp` SDK 2.3 client (`bench/sdk_client.py`, run in the SDK 2.3 peer
  venv that tests/peers/venvs.py builds) against the SDK 2.3 server (`tests/peers/sdk2_upstream.py`,
  HTTP). SDK 2.3 speaks both eras on one `/mcp` (client `mode="legacy"` = 2025-11-25 session,
  `mode="2026-07-28"` = stateless), so both eras are measured. Through mcpx the host-facing era is the
  client's; the era mcpx itself speaks to the upstream is printed in the header (`/v1/status`).
- `raw` pair: the keep-alive socket client of call_latency.py against the fixture upstream
  (`tests/fixtures/upstream_server.py`) over HTTP, both eras.
- `raw` over stdio: a line-per-frame stdio client against the fixture upstream over stdio (direct)
  vs against `mcpx serve` (through: shim -> daemon -> keeper -> the same fixture code over stdio),
  both eras.
- `keeper` pair: what the keeper (issue #15) costs on the hot path. The raw HTTP client calls the
  same stdio fixture upstream through two daemons side by side: one with `keepers.enabled: false`
  (the server is the daemon's own child: "direct" column) and one with keepers (daemon -> unix
  socket -> keeper -> server: "through" column). Both eras, seq and c16.

Modes: `seq`, one client making `--calls` sequential calls (split over `--rounds` rounds); `c16`,
`--concurrency` clients at once (HTTP rows only; each makes `--conc-calls` calls per round),
giving calls/s. Latencies are per call, measured in the client process.

    python bench/proxy_overhead.py [--calls 300] [--rounds 3] [--concurrency 16] [--conc-calls 25]
    python bench/proxy_overhead.py --calls 1000            # the issue's size

Targets printed beside the figures: SDK pair through/direct median <= 1.3x; c16 throughput
>= 0.75x direct; raw client added latency <= 0.5 ms at the median; the keeper adds <= 0.1 ms at
the median and keeps >= 0.9x the c16 throughput.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from call_latency import RawClient, client_for, measure
from harness import (
    FIXTURE,
    LEGACY,
    MODERN,
    ROOT,
    SQLITE,
    Daemon,
    FixtureHttp,
    end_by_eof,
    modern_meta,
    stdio_server,
    wait_until,
)
from peers.venvs import peer_python

PEERS = ROOT / "tests" / "peers"
BENCH = ROOT / "bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---- the SDK 2.3 pair ---------------------------------------------------------------------------
class SdkUpstream:
    def __init__(self, py: Path, tmp: Path) -> None:
        self.port = free_port()
        self.err = open(tmp / "sdk-upstream.stderr", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [str(py), str(PEERS / "sdk2_upstream.py"), "http", "--port", str(self.port)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.err,
        )
        self.url = f"http://127.0.0.1:{self.port}/mcp"

        def up() -> bool:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return True
            except OSError:
                return False

        wait_until(up, 30, "SDK 2.3 upstream")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self.err.close()


class SdkClient:
    """bench/sdk_client.py in the peer venv: connected once, then `run N` per round."""

    def __init__(self, py: Path, url: str, mode: str, tool: str, clients: int, argv: list[str] | None = None) -> None:
        cmd = [str(py), str(BENCH / "sdk_client.py"), "--mode", mode, "--tool", tool, "--clients", str(clients)]
        # argv: a stdio server the SDK spawns itself (as IDE hosts do) instead of the URL
        cmd += ["--env", f"PYTHONPATH={ROOT}", "--", *argv] if argv else ["--url", url]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        hello = json.loads(self._line())
        self.revision = hello["protocolVersion"]

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"sdk_client exited ({self.proc.wait()})")
        return line

    def run(self, n: int) -> tuple[float, list[float]]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"run {n}\n")
        self.proc.stdin.flush()
        out = json.loads(self._line())
        return out["wall"], out["times"]

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("quit\n")
            end_by_eof(self.proc)


# ---- raw clients --------------------------------------------------------------------------------
class RawPool:
    """`k` raw HTTP clients on threads; run(n): each makes n calls, all at once."""

    def __init__(self, url: str, era: str, tool: str, k: int) -> None:
        self.clients = [client_for(url, era) for _ in range(k)]
        self.era, self.tool = era, tool

    def run(self, n: int) -> tuple[float, list[float]]:
        times: list[float] = []
        errors: list[BaseException] = []
        lock = threading.Lock()
        gate = threading.Barrier(len(self.clients) + 1)

        def work(c: RawClient) -> None:
            gate.wait()
            try:
                got = measure(c, self.era, self.tool, n)
            except BaseException as exc:
                errors.append(exc)
                return
            with lock:
                times.extend(got)

        threads = [threading.Thread(target=work, args=(c,)) for c in self.clients]
        for t in threads:
            t.start()
        gate.wait()
        started = time.perf_counter()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return time.perf_counter() - started, times

    def close(self) -> None:
        for c in self.clients:
            c.close()


class StdioClient:
    """One stdio MCP server process: a JSON line out, read lines until the reply with that id."""

    def __init__(self, cmd: list[str], era: str, tool: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.era, self.tool, self._id = era, tool, 0
        if era == "legacy":
            init = {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "mcpx-bench", "version": "0"},
            }
            reply = self.request("initialize", init)
            assert "result" in reply, reply
            self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._id += 1
        self.send({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise ConnectionError(f"stdio server exited ({self.proc.poll()})")
            msg: dict[str, Any] = json.loads(line)
            if msg.get("id") == self._id and "method" not in msg:
                return msg

    def run(self, n: int) -> tuple[float, list[float]]:
        times = []
        started = time.perf_counter()
        for i in range(n):
            params: dict[str, Any] = {"name": self.tool, "arguments": {"text": f"t{i}"}}
            if self.era == "modern":
                params["_meta"] = modern_meta()
            t0 = time.perf_counter()
            reply = self.request("tools/call", params)
            times.append(time.perf_counter() - t0)
            assert "result" in reply, reply
        return time.perf_counter() - started, times

    def close(self) -> None:
        end_by_eof(self.proc)


# ---- figures ------------------------------------------------------------------------------------
def stats(walls: list[float], times: list[float]) -> dict[str, float]:
    q = statistics.quantiles(times, n=100) if len(times) >= 2 else [times[0]] * 99
    return {
        "n": len(times),
        "median_ms": round(statistics.median(times) * 1000, 3),
        "p99_ms": round(q[98] * 1000, 3),
        "calls_per_s": round(len(times) / sum(walls), 1),
    }


class Row:
    def __init__(self, pair: str, transport: str, era: str, mode: str, direct: Any, via: Any, n: int) -> None:
        self.pair, self.transport, self.era, self.mode = pair, transport, era, mode
        self.direct, self.via, self.n = direct, via, n
        self.d: tuple[list[float], list[float]] = ([], [])
        self.v: tuple[list[float], list[float]] = ([], [])

    def round(self, flip: bool) -> None:
        sides = [(self.direct, self.d), (self.via, self.v)]
        for client, (walls, times) in reversed(sides) if flip else sides:
            client.run(1)  # untimed: reopens keep-alive connections the server closed while idle
            wall, got = client.run(self.n)
            walls.append(wall)
            times.extend(got)

    def result(self) -> dict[str, Any]:
        d, v = stats(*self.d), stats(*self.v)
        out: dict[str, Any] = {
            "pair": self.pair,
            "transport": self.transport,
            "era": self.era,
            "mode": self.mode,
            "direct": d,
            "through": v,
            "median_ratio": round(v["median_ms"] / d["median_ms"], 2),
            "added_ms": round(v["median_ms"] - d["median_ms"], 3),
            "throughput_ratio": round(v["calls_per_s"] / d["calls_per_s"], 2),
        }
        if self.pair == "keeper":
            seq = self.mode == "seq"
            out["target"] = "added <= 0.1 ms" if seq else "throughput >= 0.9x"
            out["ok"] = out["added_ms"] <= 0.1 if seq else out["throughput_ratio"] >= 0.9
        elif self.mode != "seq":
            out["target"] = "throughput >= 0.75x"
            out["ok"] = out["throughput_ratio"] >= 0.75
        elif self.pair == "sdk":
            out["target"] = "median <= 1.3x"
            out["ok"] = out["median_ratio"] <= 1.3
        else:
            out["target"] = "added <= 0.5 ms"
            out["ok"] = out["added_ms"] <= 0.5
        return out


def table(results: list[dict[str, Any]]) -> str:
    head = (
        "| pair | transport | host era | mode | direct p50 / p99 ms | through p50 / p99 ms | direct calls/s"
        " | through calls/s | p50 ratio | added p50 ms | calls/s ratio | target | ok |"
    )
    lines = [head, "|" + "---|" * 13]
    for r in results:
        d, v = r["direct"], r["through"]
        lines.append(
            f"| {r['pair']} | {r['transport']} | {r['era']} | {r['mode']} | {d['median_ms']:.2f} / {d['p99_ms']:.2f}"
            f" | {v['median_ms']:.2f} / {v['p99_ms']:.2f} | {d['calls_per_s']:.0f} | {v['calls_per_s']:.0f}"
            f" | {r['median_ratio']:.2f}x | {r['added_ms']:+.2f} | {r['throughput_ratio']:.2f}x | {r['target']}"
            f" | {'yes' if r['ok'] else 'NO'} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300, help="sequential calls per side per row (all rounds)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--conc-calls", type=int, default=25, help="calls per concurrent client per round")
    ap.add_argument(
        "--only", choices=["sdk", "raw", "stdio", "keeper"], action="append", help="rows to run (default all)"
    )
    ap.add_argument("--wire-log", action="store_true", help="keep the harness's test-only frame log on")
    args = ap.parse_args()
    only = set(args.only or ["sdk", "raw", "stdio", "keeper"])
    per_round = max(1, args.calls // args.rounds)
    closers: list[Any] = []
    with tempfile.TemporaryDirectory(prefix="mcpx-proxy-bench-") as folder:
        tmp = Path(folder)
        py = peer_python("mcp-2.3") if "sdk" in only or "stdio" in only else None
        sdk_up = SdkUpstream(py, tmp) if py and "sdk" in only else None
        fixture = FixtureHttp(tmp)
        servers: dict[str, Any] = {"fx": {"url": fixture.url}, "fxs": stdio_server(tmp, name="fxs")}
        if sdk_up:
            servers["sdk"] = {"url": sdk_up.url}
        # The harness's test-only frame log (a line per frame sent) only with --wire-log.
        daemon = Daemon(tmp, {"mcpServers": servers}, name="bench", store=SQLITE, wire_log=args.wire_log)
        # The keeper pair's other side: the same stdio upstream as the daemon's own child.
        (tmp / "unkept").mkdir()
        unkept_config = {"mcpServers": {"fxs": stdio_server(tmp / "unkept", name="fxs")}, "keepers": {"enabled": False}}
        unkept = Daemon(tmp, unkept_config, name="bench-unkept", store=SQLITE, wire_log=args.wire_log)
        rows: list[Row] = []
        try:
            daemon.start()
            if "keeper" in only:
                unkept.start()
            ups = {u["name"]: u for u in daemon.status()["upstreams"]}
            print("mcpx -> upstream: " + ", ".join(f"{n} {u['transport']} {u['revision']}" for n, u in ups.items()))

            def keep(c: Any) -> Any:
                closers.append(c)
                return c

            if sdk_up and py:
                for era, mode in (("legacy", "legacy"), ("modern", MODERN)):
                    d = keep(SdkClient(py, sdk_up.url, mode, "echo", 1))
                    v = keep(SdkClient(py, daemon.url, mode, "sdk__echo", 1))
                    label = f"{era} {d.revision}"
                    rows.append(Row("sdk", "http", label, "seq", d, v, per_round))
                    dc = keep(SdkClient(py, sdk_up.url, mode, "echo", args.concurrency))
                    vc = keep(SdkClient(py, daemon.url, mode, "sdk__echo", args.concurrency))
                    rows.append(Row("sdk", "http", label, f"c{args.concurrency}", dc, vc, args.conc_calls))
            if "raw" in only:
                for era, rev in (("legacy", LEGACY), ("modern", MODERN)):
                    d = keep(RawPool(fixture.url, era, "echo", 1))
                    v = keep(RawPool(daemon.url, era, "fx__echo", 1))
                    rows.append(Row("raw", "http", f"{era} {rev}", "seq", d, v, per_round))
                    dc = keep(RawPool(fixture.url, era, "echo", args.concurrency))
                    vc = keep(RawPool(daemon.url, era, "fx__echo", args.concurrency))
                    rows.append(Row("raw", "http", f"{era} {rev}", f"c{args.concurrency}", dc, vc, args.conc_calls))
            if "stdio" in only:
                env = dict(
                    os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
                )
                shim = [sys.executable, "-m", "mcpx", "serve", "--state-dir", str(daemon.state_dir)]
                shim += ["--config", str(daemon.config_path)]
                for era, rev in (("legacy", LEGACY), ("modern", MODERN)):
                    d = keep(StdioClient([sys.executable, str(FIXTURE), "stdio", "--name", "fxs"], era, "echo"))
                    v = keep(StdioClient(shim, era, "fxs__echo", env))
                    rows.append(Row("raw", "stdio (serve)", f"{era} {rev}", "seq", d, v, per_round))
                if py:  # the official SDK 2.3 client spawning `mcpx serve` vs spawning the server itself
                    for era, mode in (("legacy", "legacy"), ("modern", MODERN)):
                        fixture_argv = [sys.executable, str(FIXTURE), "stdio", "--name", "fxs"]
                        d = keep(SdkClient(py, "", mode, "echo", 1, fixture_argv))
                        v = keep(SdkClient(py, "", mode, "fxs__echo", 1, shim))
                        rows.append(Row("sdk", "stdio (serve)", f"{era} {d.revision}", "seq", d, v, per_round))
            if "keeper" in only:
                for era, rev in (("legacy", LEGACY), ("modern", MODERN)):
                    d = keep(RawPool(unkept.url, era, "fxs__echo", 1))
                    v = keep(RawPool(daemon.url, era, "fxs__echo", 1))
                    rows.append(Row("keeper", "stdio via http", f"{era} {rev}", "seq", d, v, per_round))
                    dc = keep(RawPool(unkept.url, era, "fxs__echo", args.concurrency))
                    vc = keep(RawPool(daemon.url, era, "fxs__echo", args.concurrency))
                    label = f"{era} {rev}"
                    rows.append(Row("keeper", "stdio via http", label, f"c{args.concurrency}", dc, vc, args.conc_calls))
            for row in rows:  # warm every path
                for c in (row.direct, row.via):
                    c.run(10 if row.mode == "seq" else 2)
            for r in range(args.rounds):
                for row in rows:
                    row.round(flip=r % 2 == 1)
        finally:
            for c in closers:
                c.close()
            daemon.stop()
            unkept.stop()
            fixture.stop()
            if sdk_up:
                sdk_up.stop()
    results = [row.result() for row in rows]
    print(
        f"tools/call echo, direct vs through mcpx: seq = {per_round * args.rounds} sequential calls per side;"
        f" c{args.concurrency} = {args.concurrency} clients x {args.conc_calls} calls x {args.rounds} rounds per side"
    )
    print(table(results))
    print(
        "targets: sdk seq median <= 1.3x direct; c16 calls/s >= 0.75x direct; raw seq added <= 0.5 ms at the median;"
        " keeper: 'direct' = a daemon without keepers, 'through' = with them; added <= 0.1 ms, c16 >= 0.9x"
    )
    print("RESULT " + json.dumps({"bench": "proxy_overhead", "rows": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
