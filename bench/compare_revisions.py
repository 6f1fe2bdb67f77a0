"""Two checkouts' proxy overhead, side by side: `proxy_overhead.py` run from each in turn.

    git worktree add /tmp/before <rev>
    python bench/compare_revisions.py --before /tmp/before [--after .] [--runs 5] [--only raw --only stdio]

Each run of each checkout starts its own daemon (its own code: the harness puts the checkout first
on PYTHONPATH) on the same machine, alternating before/after so drift hits both alike. Per
sequential row it prints the through-mcpx median of each run, the median of those, and the
difference; the target is an issue's (#25: no row more than 0.05 ms slower at the median).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

TARGET_MS = 0.05


def one_run(checkout: Path, calls: int, only: list[str]) -> dict[str, float]:
    argv = [sys.executable, str(checkout / "bench" / "proxy_overhead.py"), "--calls", str(calls)]
    for row in only:
        argv += ["--only", row]
    out = subprocess.run(argv, cwd=checkout, capture_output=True, text=True, check=True, timeout=900).stdout
    [line] = [line for line in out.splitlines() if line.startswith("RESULT ")]
    rows = json.loads(line.removeprefix("RESULT "))["rows"]
    return {
        f"{r['pair']} {r['transport']} {r['era']}": float(r["through"]["median_ms"]) for r in rows if r["mode"] == "seq"
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--calls", type=int, default=600)
    ap.add_argument("--only", action="append", default=None, choices=["raw", "stdio", "keeper", "sdk"])
    args = ap.parse_args()
    only = args.only or ["raw", "stdio"]
    seen: dict[str, dict[str, list[float]]] = {}
    for n in range(args.runs):
        for side, checkout in (("before", args.before), ("after", args.after)):
            for row, ms in one_run(checkout.resolve(), args.calls, only).items():
                seen.setdefault(row, {"before": [], "after": []})[side].append(ms)
        print(f"run {n + 1}/{args.runs} done", file=sys.stderr)
    print(f"through-mcpx median per sequential call, ms ({args.runs} runs each, alternating, {args.calls} calls)")
    print("| row | before runs | after runs | before | after | after - before | ok |")
    print("|---|---|---|---|---|---|---|")
    worst = 0.0
    for row, sides in seen.items():
        before, after = statistics.median(sides["before"]), statistics.median(sides["after"])
        worst = max(worst, after - before)
        runs = [" ".join(f"{v:.3f}" for v in sides[s]) for s in ("before", "after")]
        ok = "yes" if after - before <= TARGET_MS else "NO"
        print(f"| {row} | {runs[0]} | {runs[1]} | {before:.3f} | {after:.3f} | {after - before:+.3f} | {ok} |")
    print(f"target: no row more than {TARGET_MS} ms slower at the median; worst {worst:+.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
