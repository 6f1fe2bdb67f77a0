"""#26 item 4 against the real daemon: `mcpx stop` (SIGTERM) while 50 plain calls are ending. Each
host gets its result or an honest error, never silence; and no stored row says a result was lost
for a call whose result its host got. (The engine and store halves: tests/unit/test_stop_drains.py.)"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from harness import RawHost, read_jsonl, stdio_server, wait_until

CALLS = 50


def test_a_stop_while_fifty_plain_calls_end_loses_no_result_a_host_got(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}, "calls": {"showAfterMs": 100}})
    host = raw_host(d.url)
    host.initialize()
    got: dict[int, dict[str, Any]] = {}

    def call(n: int) -> None:
        # Staggered lengths: some end before the stop, some while it drains, some are cut.
        args = {"seconds": 0.6 + n * 0.02, "steps": 1}
        try:
            with RawHost(d.url) as h:
                h.session_id, h.revision = host.session_id, host.revision
                got[n] = h.legacy("tools/call", {"name": "fx__slow", "arguments": args}).json()
        except Exception as exc:  # a cut connection is an honest error too
            got[n] = {"transport error": repr(exc)}

    threads = [threading.Thread(target=call, args=(n,), daemon=True) for n in range(CALLS)]
    for t in threads:
        t.start()
    wait_until(
        lambda: sum(e.get("event") == "finished" for e in read_jsonl(tmp_path / "fixture.log.jsonl")) >= 10,
        20,
        "the first calls to end upstream",
    )
    stopped_at = time.monotonic()
    d.stop()
    for t in threads:
        t.join(15)
    assert len(got) == CALLS, "a host got nothing at all"
    results = {n for n, frame in got.items() if "result" in frame and not frame["result"].get("isError")}
    errors = {n for n, frame in got.items() if "error" in frame or "transport error" in frame}
    assert results | errors == set(range(CALLS)), {n: got[n] for n in set(range(CALLS)) - results - errors}
    assert results, "no call ended before the stop"
    print(f"stopped {time.monotonic() - stopped_at:.2f} s; {len(results)} results, {len(errors)} errors")

    d.start()  # the next daemon settles whatever the last one left open
    bodies = [json.loads(r[0]) for r in d.store_rows("SELECT body FROM tasks")]
    by_seconds = {b["arguments"]["seconds"]: b for b in bodies if b.get("kind") == "call"}
    for n in results:
        row = by_seconds.get(0.6 + n * 0.02)
        if row is None:
            continue  # never listed (the host got it before showAfterMs)
        assert row["status"] == "completed", (n, row["status"], row.get("status_message"))
