"""`notify` on a real daemon: a reload applies it live (#39 item 9), and no webhook's path, secret or
any token reaches the daemon's log, even at debug level (#39 item 8)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import ROOT, Daemon, RawHost, stdio_server, wait_until
from notify_receiver import Receiver

SECRET = "a-webhook-secret-0123"


def _hook(rx: Receiver, secret: str = SECRET) -> dict[str, Any]:
    return {"url": rx.url, "secret": secret, "events": ["connection.opened"]}


def _reload(d: Daemon, config: dict[str, Any]) -> dict[str, Any]:
    """Write `config` (with the store the harness gave the daemon, which a reload cannot change)
    and reload it."""
    store = json.loads(d.config_path.read_text()).get("store")
    spare = d.config_path.with_suffix(".tmp")
    spare.write_text(json.dumps({**config, "store": store} if store is not None else config))
    spare.replace(d.config_path)
    proc = subprocess.run(
        [sys.executable, "-m", "mcpx", "reload", "--json", "--state-dir", str(d.state_dir)],
        capture_output=True,
        text=True,
        timeout=30,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    outcome: dict[str, Any] = json.loads(proc.stdout)
    return outcome


def _session(d: Daemon, token: str | None = None) -> None:
    """A 2025 session: its `connection.opened` is what the webhooks here are sent."""
    with RawHost(d.url) as host:
        if token is not None:
            host.client.headers["Authorization"] = f"Bearer {token}"
        host.initialize()


def _sinks(d: Daemon) -> list[dict[str, Any]]:
    return list(d.status()["notify"])


def test_a_reload_applies_notify_live_keeping_an_unchanged_sinks_counts(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    servers = {"fx": stdio_server(tmp_path)}
    with Receiver() as a, Receiver() as b:
        d = start_daemon({"mcpServers": servers})
        outcome = _reload(d, {"mcpServers": servers, "notify": {"webhooks": [_hook(a)]}})
        assert outcome["result"] == "applied" and outcome["needsRestart"] == [], outcome
        _session(d)
        wait_until(lambda: len(a.got) == 1, 10, "the added webhook's first delivery")
        assert [s["target"] for s in _sinks(d)] == [a.url.removesuffix("/hook")]

        # Another edit leaves the webhook's entry as it was: its worker, queue and counts carry on.
        servers["off"] = {"command": "never-started", "disabled": True}
        _reload(d, {"mcpServers": servers, "notify": {"webhooks": [_hook(a)]}})
        assert _sinks(d)[0]["delivered"] == 1

        # Pointed elsewhere: the old receiver hears nothing more, the new one everything from now.
        _reload(d, {"mcpServers": servers, "notify": {"webhooks": [_hook(b)], "commands": []}})
        _session(d)
        wait_until(lambda: len(b.got) == 1, 10, "the new webhook's first delivery")
        assert len(a.got) == 1 and _sinks(d)[0]["delivered"] == 1  # a new sink: its own counts

        outcome = _reload(d, {"mcpServers": servers})
        assert outcome["needsRestart"] == [] and _sinks(d) == []
        _session(d)
        assert len(b.got) == 1


def test_no_webhook_path_secret_or_token_reaches_the_log(start_daemon: Callable[..., Daemon], tmp_path: Path) -> None:
    path = "/services/T0PATHSECRET/B1PATHSECRET"  # a Slack-like URL: its path is the credential
    secret = "whsec-0123456789-SIGNINGKEY"
    host_token = "host-bearer-TOKEN-0123456789"
    with Receiver([500], path=path) as rx, Receiver(path=path + "/second") as rx2:
        config = {
            "mcpServers": {"fx": stdio_server(tmp_path)},
            "auth": {"tokens": [{"principal": "ada", "token": host_token}]},
            "notify": {"webhooks": [_hook(rx, secret), _hook(rx2, secret)]},
        }
        d = start_daemon(config, extra_args=["--log-level", "debug"])
        _session(d, host_token)
        # Delivered to both, the first after a 500 (a retry and its warning are logged).
        wait_until(lambda: len(rx.got) == 2 and len(rx2.got) == 1, 15, "the deliveries")
        wait_until(lambda: _sinks(d)[0]["delivered"] == 1, 10, "the retry's success")
        api_token = d.token
        d.stop()
    log = d.stderr()
    assert " DEBUG " in log and "serving on" in log  # the run's whole log is here, at debug level
    for secret_text in ("PATHSECRET", "SIGNINGKEY", host_token, api_token, rx.url, rx2.url):
        assert secret_text not in log, f"{secret_text!r} is in the daemon's log"
