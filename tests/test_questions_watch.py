"""`mcpx questions watch` (#27): a terminal without the console sees questions as they open and
close, and counts as an attached operator, so a question no host can answer waits for it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import Any

from harness import ROOT, UNIT, RawHost, conformance_server, wait_until

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def test_watch_prints_a_question_as_it_opens_and_who_answered_it(start_daemon: Any) -> None:
    d = start_daemon({"mcpServers": {"up": conformance_server()}})
    watch = subprocess.Popen(
        [sys.executable, "-m", "mcpx", "questions", "watch", "--by", "wanda", "--state-dir", str(d.state_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(watch.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]  # piped above
    reader.start()
    try:
        wait_until(lambda: "wanda" in d.status()["operators"], 20, "the watcher attached as an operator")
        host = RawHost(d.url)
        host.initialize()  # no elicitation: only an operator can answer
        box: dict[str, Any] = {}
        call = threading.Thread(
            target=lambda: box.update(
                frame=host.legacy("tools/call", {"name": "test_elicitation", "arguments": {"message": "Who?"}}).json()
            ),
            daemon=True,
        )
        call.start()
        [opened] = wait_until(lambda: [line for line in lines if " open " in line], 20, "the open line")
        assert "elicitation from up: Who?" in opened
        qid = opened.split(" open ")[1].split()[0]
        answered = subprocess.run(
            [sys.executable, "-m", "mcpx", "questions", "answer", qid[:8], "--accept", "username=ada", "email=a@b.c",
             "--by", "wanda", "--state-dir", str(d.state_dir)],
            capture_output=True, text=True, env=ENV, timeout=30 * UNIT,
        )  # fmt: skip
        assert answered.returncode == 0, answered
        call.join(15)
        assert "ada" in box["frame"]["result"]["content"][0]["text"]
        [done] = wait_until(lambda: [line for line in lines if " answered " in line], 10, "the answered line")
        assert qid in done and "by operator:wanda: accept" in done
        host.close()
    finally:
        watch.send_signal(signal.SIGINT)
        try:
            assert watch.wait(10) == 0
        finally:
            watch.kill()
            for pipe in (watch.stdout, watch.stderr):
                if pipe is not None:
                    pipe.close()
