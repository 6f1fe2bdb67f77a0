"""Run every benchmark as a subprocess and collect their key figures in one markdown table.

Each bench prints a final machine-readable line `RESULT {json}`; this collects those lines and
writes the table to stdout and to bench/RESULTS.md, headed by the machine (CPU model, cores,
Python, date, load average: the figures of one run are only comparable with each other).

    python bench/run_all.py            # fuller sizes (several minutes)
    python bench/run_all.py --quick    # a fast pass
    python bench/run_all.py --only proxy_overhead --only store_scale

bench/console_load.py runs too when it exists (skipped otherwise). A bench that fails or times out
gets a row saying so, and the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent

# name -> (script, [(label, quick args, full args)])
PLAN: dict[str, tuple[str, list[tuple[str, list[str], list[str]]]]] = {
    "call_latency": (
        "call_latency.py",
        [
            ("modern", ["--calls", "200", "--rounds", "2"], ["--calls", "500", "--rounds", "3"]),
            ("legacy", ["--calls", "200", "--rounds", "2", "--era", "legacy"], ["--era", "legacy"]),
            ("stdio", ["--calls", "200", "--rounds", "2", "--upstream", "stdio"], ["--upstream", "stdio"]),
        ],
    ),
    "tasks_throughput": (
        "tasks_throughput.py",
        [("", ["--tasks", "900", "--rounds", "3"], ["--tasks", "10000", "--rounds", "3"])],
    ),
    "feed_latency": (
        "feed_latency.py",
        [
            (
                "",
                ["--live", "200", "--rate", "200", "--seconds", "4"],
                ["--live", "1000", "--rate", "500", "--seconds", "10"],
            )
        ],
    ),
    "proxy_overhead": (
        "proxy_overhead.py",
        [
            (
                "",
                ["--calls", "150", "--rounds", "3", "--conc-calls", "10"],
                ["--calls", "1000", "--rounds", "4", "--conc-calls", "25"],
            )
        ],
    ),
    "store_scale": (
        "store_scale.py",
        [("", ["--gets", "100", "--rounds", "2"], ["--gets", "500", "--rounds", "3"])],
    ),
    "console_load": ("console_load.py", [("", ["--quick"], [])]),
    "scale_out": ("scale_out.py", [("", ["--tasks", "400"], [])]),
    "http_clients": ("http_clients.py", [("", ["--requests", "500", "--rounds", "2"], [])]),
    "soak": (
        "soak.py",
        [("", ["--hosts", "100", "--seconds", "20", "--warmup", "5"], ["--hosts", "200", "--seconds", "60"])],
    ),
}


def machine() -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "commit": commit.stdout.strip() or "?",
    }


def run(script: Path, args: list[str], timeout: float) -> tuple[list[dict[str, Any]], str, float]:
    """The bench's RESULT lines, and an error text ('' when it ran), and its seconds."""
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, str(script), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return [], f"timed out after {timeout:.0f} s", time.monotonic() - started
    took = time.monotonic() - started
    sys.stderr.write(proc.stdout)
    results = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        return results, f"exit {proc.returncode}: {tail[:200]}", took
    if not results:
        return [], "no RESULT line", took
    return results, "", took


def ok(flag: bool | None) -> str:
    return "" if flag is None else ("yes" if flag else "**NO**")


def rows_for(name: str, label: str, r: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(bench, what, figure, target, ok) rows of one RESULT."""
    if name == "call_latency":
        what = f"tools/call p50, {r['era']} host, {r['upstream']} upstream ({r['calls']} calls)"
        fig = f"direct {r['direct_ms']:.2f} ms, through {r['via_mcpx_ms']:.2f} ms ({r['ratio']:.2f}x)"
        return [(name, what, fig, "", "")]
    if name == "tasks_throughput":
        out = []
        for side, key in (
            ("mcpx 2026", "mcpx_modern"),
            ("mcpx 2025", "mcpx_legacy"),
            ("mcpx 2026, durability process-crash", "mcpx_modern_process_crash"),
            ("mcpx 2025, durability process-crash", "mcpx_legacy_process_crash"),
            ("FastMCP-tasks", "fastmcp_tasks"),
        ):
            if key not in r:
                continue
            t = r[key]
            what = f"{side}: {r['tasks_per_side']} tasks created, polled, completed ({r['workers']} connections)"
            fig = f"{t['created_per_s']} created/s, {t['done_per_s']} done/s (min {t['done_min']}, max {t['done_max']})"
            if "cpu_ms_per_task" in t:
                fig += f"; CPU/task {t['cpu_ms_per_task']:.2f} ms"
                if "keeper_cpu_ms_per_task" in t:
                    fig += f" (keeper {t['keeper_cpu_ms_per_task']:.2f}, server {t['server_cpu_ms_per_task']:.2f})"
            target, flag = "", None
            if key in ("mcpx_modern", "mcpx_legacy"):
                target = ">= 600 done/s (stretch 1000), <= 1 ms CPU/task, power-loss durable"
                flag = t["done_per_s"] >= 600 and t.get("cpu_ms_per_task", 0) <= 1
                if (ratio := r.get(f"{key}_vs_fastmcp")) is not None:
                    fig += f"; {ratio:.2f}x FastMCP-tasks"
                    target += "; >= 3x FastMCP-tasks"
                    flag = flag and ratio >= 3
                fig += f"; {r[f'{key}_durable_vs_opt_out']:.2f}x the opt-out"
            out.append((name, what, fig, target, ok(flag)))
        return out
    if name == "soak":
        what = f"{r['hosts']} hosts, {r['seconds']:.0f} s: quick calls, tasks, operator-answered questions"
        fig = (
            f"{r['steps']} steps, {r['failures']} failed, {r['open_after']} left open; RSS warm {r['rss_baseline_mb']}"
            f" MB, peak {r['rss_peak_mb']}, after rounds {r['rss_after_rounds_mb']} (frame log {r['frames_mb_after_rounds']} MB)"
        )
        target = "every call answered, every task ended"
        return [(name, what, fig, target, ok(r["failures"] == 0 and r["open_after"] == 0 and r["daemon_alive"]))]
    if name == "feed_latency":
        what = f"event latency, {r['live']} live tasks, {r['events_per_s']} events/s"
        fig = f"p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, max {r['max_ms']} ms"
        return [(name, what, fig, "p99 <= 20 ms", ok(r["p99_ms"] <= 20))]
    if name == "proxy_overhead":
        out = []
        for row in r["rows"]:
            d, v = row["direct"], row["through"]
            what = f"{row['pair']} {row['transport']} {row['era']} {row['mode']} ({d['n']} calls/side)"
            fig = (
                f"p50 {d['median_ms']:.2f} -> {v['median_ms']:.2f} ms ({row['median_ratio']:.2f}x, {row['added_ms']:+.2f} ms);"
                f" p99 {d['p99_ms']:.2f} -> {v['p99_ms']:.2f} ms; {d['calls_per_s']:.0f} -> {v['calls_per_s']:.0f} calls/s"
                f" ({row['throughput_ratio']:.2f}x)"
            )
            out.append((name, what, fig, row["target"], ok(row["ok"])))
        return out
    if name == "store_scale":
        out = []
        rows = r["rows"]
        for i, row in enumerate(rows):
            what = f"tasks/get with {row['tasks']} stored tasks"
            fig = (
                f"p50 {row['p50_ms']:.2f} ms ({row['p50_ratio']:.2f}x first), p99 {row['p99_ms']:.2f} ms;"
                f" RSS {row['rss_mb']} MB (peak {row['peak_rss_mb']}); db {row['db_mb']} MB"
            )
            target, flag = "p50 within +-20 % of first", 0.8 <= row["p50_ratio"] <= 1.2
            if i == len(rows) - 1 and row["tasks"] >= 100_000:
                target += "; RSS <= 120 MB"
                flag = flag and row["rss_mb"] <= 120
            out.append((name, what, fig, target, ok(flag)))
        return out
    # Any other bench (console_load): its RESULT's fields as they are.
    fields = {k: v for k, v in r.items() if k != "bench"}
    target = str(fields.pop("target", ""))
    flag = fields.pop("ok", None)
    fig = ", ".join(f"{k} {v}" for k, v in fields.items())
    return [(name, label or "result", fig, target, ok(flag if isinstance(flag, bool) else None))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes: a fast pass")
    ap.add_argument("--only", action="append", choices=sorted(PLAN), help="benches to run (default all)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per bench run")
    ap.add_argument("--out", default=str(BENCH / "RESULTS.md"))
    args = ap.parse_args()
    info = machine()
    table: list[tuple[str, str, str, str, str]] = []
    for name in args.only or list(PLAN):
        script_name, runs = PLAN[name]
        script = BENCH / script_name
        if not script.exists():
            print(f"[run_all] {script_name}: absent, skipped", file=sys.stderr, flush=True)
            table.append((name, "(skipped)", f"bench/{script_name} does not exist", "", ""))
            continue
        for label, quick, full in runs:
            argv = quick if args.quick else full
            if name == "console_load" and args.quick:
                argv = ["--quick"] if '"--quick"' in script.read_text() else []  # only if it has the flag
            print(f"[run_all] {script_name} {' '.join(argv)}", file=sys.stderr, flush=True)
            results, error, took = run(script, argv, args.timeout)
            print(f"[run_all] {script_name}: {took:.0f} s{' ' + error if error else ''}", file=sys.stderr, flush=True)
            for r in results:
                table.extend(rows_for(name, label, r))
            if error:
                table.append((name, label or "run", f"FAILED: {error}", "", "**NO**"))
    mode = "quick" if args.quick else "full"
    lines = [
        f"# Benchmark results ({mode} pass)",
        "",
        f"Machine: {info['cpu']}, {info['cores']} cores; {info['python']}; {info['date']};"
        f" load average at start {info['load']}; commit {info['commit']}.",
        "Numbers from a shared machine are noisy: compare figures within one run (each bench measures"
        " its sides interleaved), not across runs.",
        "",
        "| bench | what | figure | target | ok |",
        "|---|---|---|---|---|",
        *(f"| {' | '.join(cells)} |" for cells in table),
        "",
        f"Made by `python bench/run_all.py{' --quick' if args.quick else ''}`.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
