"""The OAuth-protected fixture server (tests/fixtures/oauth_server.py) as a process, and the
`$BROWSER` that follows an authorization URL back to the daemon (tests/fixtures/follow_browser.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness import ROOT, wait_until

SERVER = ROOT / "tests" / "fixtures" / "oauth_server.py"
FOLLOW = ROOT / "tests" / "fixtures" / "follow_browser.py"


class OAuthServer:
    def __init__(self, tmp: Path, *args: str, name: str = "oauth") -> None:
        self.log = tmp / f"{name}.log.jsonl"
        ready = tmp / f"{name}.port"
        with open(tmp / f"{name}.stderr", "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(SERVER), "--port", "0", "--ready-file", str(ready), "--log", str(self.log), *args],
                stdin=subprocess.DEVNULL,
                stderr=err,
                env=dict(os.environ, PYTHONPATH=str(ROOT / "tests" / "fixtures")),
            )
        port = wait_until(lambda: ready.exists() and ready.read_text().strip(), what="oauth fixture server")
        self.base = f"http://127.0.0.1:{int(port)}"
        self.url = f"{self.base}/mcp"

    def entries(self, **match: Any) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]
        return [r for r in rows if all(r.get(k) == v for k, v in match.items())]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(5)


def browser_env() -> dict[str, str]:
    """The environment of `mcpx login` with a `$BROWSER` that follows the redirects."""
    return dict(os.environ, BROWSER=f"{sys.executable} {FOLLOW} %s", PYTHONPATH=str(ROOT))


def mcpx_login(state_dir: Path, name: str, *extra: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpx", "login", name, "--state-dir", str(state_dir), "--by", "tester", *extra],
        env=browser_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
