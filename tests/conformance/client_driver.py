#!/usr/bin/env python3
"""mcpx as the client under test of the official conformance suite's client scenarios.

    /work/shared/conformance/run-client.sh OUT 2025-11-25 -- python3 tests/conformance/client_driver.py

The suite starts a scenario server and runs this with its URL appended (MCP_CONFORMANCE_SCENARIO names
the scenario, MCP_CONFORMANCE_PROTOCOL_VERSION its revision, MCP_CONFORMANCE_CONTEXT carries JSON for
some). Every check is about what mcpx sends the scenario server, so this driver:

1. starts `mcpx daemon` (its own state folder in a temporary folder, port 0) with the scenario URL as
   its one HTTP upstream, `conformance`, passthrough (no name prefixes). For an `auth/*` scenario the
   upstream gets an `oauth` object built from the context (see `oauth_settings`);
2. waits for the upstream: `ready`, or (an upstream that needs a person to sign in) runs
   `mcpx login conformance` with `$BROWSER` set to `browser.py`, which follows the authorization
   server's redirects back to the daemon as a person's browser would;
3. acts as an ordinary host through mcpx's `/mcp` (client_host.py): initialize, tools/list, a call of
   each listed tool, prompts and resources, answering elicitation, sampling and roots;
4. stops the daemon and prints the tail of its log on stderr (the suite keeps it as stderr.txt).

Exit 0 when the host could do its steps (a refused call is the scenario's to judge), 1 when mcpx did
not start or never offered the upstream.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from client_host import Host, HostError, exercise, log  # noqa: E402 - after the path above

UPSTREAM = "conformance"
# The client ID metadata document URL the suite's authorization servers expect (auth/basic-cimd):
# used as the client_id where a server supports SEP-991 documents (the suite never fetches it).
CIMD_URL = "https://conformance-test.local/client-metadata.json"
# Waits scale with MCPX_TEST_TIME_SCALE, as the test harness's do: a requirement set starts all its
# scenarios (~25 drivers and daemons) at once, on two shared cores.
SCALE = float(os.environ.get("MCPX_TEST_TIME_SCALE", "1"))
START_WAIT_S = 60.0 * SCALE  # the daemon writes its info file
READY_WAIT_S = 12.0 * SCALE  # the upstream becomes ready (or asks for a login)
LOGIN_TIMEOUT_S = 30.0 * SCALE
MAX_LOGINS = 3  # sign-ins one run may make (a first one and step-ups): never a loop of the driver's


def oauth_settings(scenario: str, context: dict[str, Any]) -> dict[str, Any] | None:
    """The `oauth` object of the upstream's config entry for an `auth/*` scenario, from its context
    (snake_case keys: client_id, client_secret, private_key_pem, signing_algorithm)."""
    if not scenario.startswith("auth/"):
        return None
    out: dict[str, Any] = {}
    if scenario.startswith("auth/client-credentials-"):
        out["grantType"] = "client_credentials"  # a server without a person: no browser
    else:
        out["clientMetadataUrl"] = CIMD_URL
    for key, ours in (
        ("client_id", "clientId"),
        ("client_secret", "clientSecret"),
        ("private_key_pem", "privateKey"),
        ("signing_algorithm", "signingAlgorithm"),
    ):
        if isinstance(context.get(key), str):
            out[ours] = context[key]
    return out


def config_for(url: str, scenario: str, context: dict[str, Any]) -> dict[str, Any]:
    server: dict[str, Any] = {"url": url, "mcpx": {"passthrough": True}}
    oauth = oauth_settings(scenario, context)
    if oauth is not None:
        server["oauth"] = oauth
    return {"mcpServers": {UPSTREAM: server}, "keepers": {"enabled": False}}


class DaemonProcess:
    def __init__(self, tmp: Path, config: dict[str, Any]) -> None:
        self.tmp = tmp
        self.state_dir = tmp / "state"
        self.config_path = tmp / "config.json"
        self.config_path.write_text(json.dumps(config, indent=2))
        self.log_path = tmp / "daemon.log"
        self.env = dict(
            os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.base = ""
        self.token = ""

    def mcpx(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "mcpx", *args, "--state-dir", str(self.state_dir)]

    def start(self) -> None:
        with open(self.log_path, "ab") as err:
            self.proc = subprocess.Popen(
                [*self.mcpx("daemon", "--config", str(self.config_path), "--port", "0"), "--log-level", "debug"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=self.env,
                cwd=self.tmp,
            )
        info = self.state_dir / "daemon.json"
        deadline = time.monotonic() + START_WAIT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mcpx daemon exited with {self.proc.returncode}")
            try:
                port = json.loads(info.read_text())["port"]
                self.token = (self.state_dir / "token").read_text().strip()
                break
            except (OSError, ValueError, KeyError):
                time.sleep(0.05)
        else:
            raise RuntimeError("mcpx daemon did not start in time")
        self.base = f"http://127.0.0.1:{port}"

    def upstream(self) -> dict[str, Any]:
        resp = httpx.get(f"{self.base}/v1/status", headers={"Authorization": f"Bearer {self.token}"}, timeout=5)
        return next((u for u in resp.json()["upstreams"] if u["name"] == UPSTREAM), {})

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def log_tail(self, lines: int = 80) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def needs_login(upstream: dict[str, Any]) -> bool:
    """How the upstream says a person must sign in: its state (`needs login`), or its last error
    naming `mcpx login`."""
    state = str(upstream.get("state") or "").replace("_", " ")
    return "login" in state or "mcpx login" in str(upstream.get("lastError") or "")


class Logins:
    """`mcpx login conformance` with a $BROWSER that follows the redirects, at most MAX_LOGINS times."""

    def __init__(self, daemon: DaemonProcess) -> None:
        self.daemon = daemon
        self.made = 0
        self.browser = daemon.tmp / "browser"
        self.browser.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{HERE / "browser.py"}" "$@"\n')
        self.browser.chmod(0o755)

    def login(self) -> bool:
        if self.made >= MAX_LOGINS:
            log(f"not signing in again: {self.made} sign-ins already")
            return False
        self.made += 1
        env = dict(self.daemon.env, BROWSER=str(self.browser))
        log(f"mcpx login {UPSTREAM} (sign-in {self.made})")
        try:
            done = subprocess.run(
                self.daemon.mcpx("login", UPSTREAM),
                env=env,
                capture_output=True,
                text=True,
                timeout=LOGIN_TIMEOUT_S,
                cwd=self.daemon.tmp,
            )
        except subprocess.TimeoutExpired:
            log("mcpx login did not return in time")
            return False
        log(f"mcpx login exited {done.returncode}: {(done.stdout + done.stderr).strip()[-800:]}")
        return done.returncode == 0


def wait_ready(daemon: DaemonProcess, logins: Logins, auth: bool) -> None:
    deadline = time.monotonic() + READY_WAIT_S
    upstream: dict[str, Any] = {}
    while time.monotonic() < deadline:
        upstream = daemon.upstream()
        if upstream.get("state") == "ready":
            return
        if auth and needs_login(upstream):
            if not logins.login():
                return
            deadline = time.monotonic() + READY_WAIT_S
        elif upstream.get("state") in ("restarting", "down"):
            break  # its first start failed, and not for want of a sign-in: the host sees what it gets
        time.sleep(0.1)
    log(f"upstream not ready: {upstream.get('state')} {upstream.get('lastError') or ''}")


class LoggingInHost(Host):
    """A host whose call that fails for want of a sign-in gets one, then is made again (step-up)."""

    def __init__(self, url: str, revision: str, logins: Logins | None) -> None:
        super().__init__(url, revision)
        self.logins = logins

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        while True:
            try:
                return super().request(method, params)
            except HostError as exc:
                if self.logins is None or "mcpx login" not in str(exc) or not self.logins.login():
                    raise


def take_a_slot() -> IO[str]:
    """Wait for one of MCPX_CONFORMANCE_CLIENTS (4) places, held until this process ends. A
    requirement set starts every scenario at once (25-39 drivers, each with a daemon); all of them
    starting together on two shared cores starved each daemon past any sane start-up wait, while a
    few at a time each run in seconds. Waiting here changes nothing the suite judges: no scenario
    server has been spoken to yet."""
    folder = Path(tempfile.gettempdir()) / "mcpx-conformance-client-slots"
    folder.mkdir(exist_ok=True)
    places = max(1, int(os.environ.get("MCPX_CONFORMANCE_CLIENTS", "4")))
    while True:
        for i in range(places):
            slot = open(folder / f"slot-{i}", "a")  # noqa: SIM115 - the caller holds it (locked) while it runs
            try:
                fcntl.flock(slot.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return slot
            except BlockingIOError:
                slot.close()
        time.sleep(0.1)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: client_driver.py SERVER_URL (the conformance suite appends it)", file=sys.stderr)
        return 2
    url = argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    revision = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "2025-11-25")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    # The suite ends a client that runs too long with SIGTERM: the daemon goes down with it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    auth = scenario.startswith("auth/")
    log(f"scenario {scenario or '?'} at {revision}, upstream {url}")
    with take_a_slot(), tempfile.TemporaryDirectory(prefix="mcpx-conformance-client-") as folder:
        daemon = DaemonProcess(Path(folder), config_for(url, scenario, context))
        try:
            daemon.start()
            logins = Logins(daemon)
            wait_ready(daemon, logins, auth)
            host = LoggingInHost(f"{daemon.base}/mcp", revision, logins if auth else None)
            try:
                failed = exercise(host, scenario, context)
            finally:
                host.close()
            log(f"done: {failed} step(s) failed")
            return 0
        except (RuntimeError, OSError, httpx.HTTPError) as exc:
            log(f"driver failed: {exc}")
            return 1
        finally:
            daemon.stop()
            print(f"---- mcpx daemon log (tail) ----\n{daemon.log_tail()}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
