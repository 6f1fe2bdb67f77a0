"""No background failure ends serving (docs/daemon-behavior.md, "Background work"), on a real daemon.

A fault is injected into each long-lived loop the daemon root starts, while it runs, through the
test-only hook (MCPX_TEST_BACKGROUND_FAULT, mcpx/daemon/background.py): each is logged at ERROR with
its cause, becomes a `daemon.background_failed` event, shows in /v1/status, and the loop runs again;
meanwhile a call through /mcp works, /v1/status says serving and daemon.json stays. Real faults too:
a config file that is not UTF-8 on SIGHUP, on the file watcher and on `mcpx reload` (#37 item 3), and
typo'd webhook URLs, refused at start naming the key (#37 item 2)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import ROOT, Api, Daemon, RawHost, SuiteStore, reply_of, run_for_module, stdio_server, wait_until
from notify_receiver import Receiver

from mcpx.daemon.background import FAULT_ENV

pytestmark = [
    pytest.mark.heavy,
    pytest.mark.sqlite_only("the supervisor's rule; a faulted writer restarts through the queue both stores share"),
]

SECRET = "a-webhook-secret-0123"


def _config(tmp: Path, rx: Receiver) -> dict[str, Any]:
    return {
        "mcpServers": {"fx": stdio_server(tmp)},
        # Every 2025 session's initialize is an event for the webhook: the notifier's work is easy to see.
        "notify": {"webhooks": [{"url": rx.url, "secret": SECRET, "events": ["connection.opened"]}]},
    }


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory, suite_store: SuiteStore) -> Iterator[tuple[Daemon, Receiver]]:
    tmp = tmp_path_factory.mktemp("background-faults")
    (tmp / "faults").mkdir()
    with Receiver() as rx:
        d = Daemon(tmp, _config(tmp, rx), store=suite_store)
        before = os.environ.get(FAULT_ENV)
        os.environ[FAULT_ENV] = str(tmp / "faults")  # the daemon's environment is this one's, copied at start
        try:
            yield from ((d, rx) for _ in run_for_module(d))
        finally:
            if before is None:
                del os.environ[FAULT_ENV]
            else:
                os.environ[FAULT_ENV] = before


def serves(d: Daemon) -> None:
    """A call through /mcp, /v1/status serving, daemon.json in place: what a fault must not take away."""
    with RawHost(d.url) as host:
        host.initialize()
        reply = reply_of(host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "still here"}}))
        assert reply["result"]["content"][0]["text"] == "still here", reply
    assert d.status()["phase"] == "serving"
    assert json.loads((d.state_dir / "daemon.json").read_text())["port"] == d.port


def failures(api: Api, work: str) -> list[dict[str, Any]]:
    events = api.get("/v1/events", params={"kind": "daemon.background_failed", "limit": 5000}).json()["events"]
    return [e for e in events if e["data"]["task"] == work]


def _write_config(d: Daemon, config: dict[str, Any]) -> None:
    spare = d.config_path.with_suffix(".tmp")
    spare.write_text(json.dumps(config))
    spare.replace(d.config_path)


def _reloads(api: Api, trigger: str) -> int:
    events = api.get("/v1/events", params={"kind": ["config.reloaded", "config.refused"], "limit": 5000}).json()
    return sum(1 for e in events["events"] if e["data"]["trigger"] == trigger)


# What shows each loop works again after its fault (beyond its state in /v1/status).
def _notifier_delivers(d: Daemon, rx: Receiver, api: Api) -> None:
    seen = len(rx.got)
    with RawHost(d.url) as host:
        host.initialize()
    wait_until(lambda: len(rx.got) > seen, 10, "a webhook delivery after the fault")


def _watcher_reloads(d: Daemon, rx: Receiver, api: Api) -> None:
    before = _reloads(api, "file")
    config = json.loads(d.config_path.read_text())
    config["mcpServers"]["off"] = {"command": "never-started", "disabled": True}  # an edit that starts nothing
    _write_config(d, config)
    wait_until(lambda: _reloads(api, "file") > before, 15, "the watcher to reload the edited file")


def _sighup_reloads(d: Daemon, rx: Receiver, api: Api) -> None:
    before = _reloads(api, "signal")
    assert d.proc is not None
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: _reloads(api, "signal") > before, 10, "a reload on SIGHUP after the fault")


def _store_writes(d: Daemon, rx: Receiver, api: Api) -> None:
    last = api.get("/v1/events", params={"limit": 1}).json()["lastSeq"]
    with RawHost(d.url) as host:
        host.initialize()  # a connection record and its event: committed by the writer
    wait_until(lambda: api.get("/v1/events", params={"since": last}).json()["events"], 10, "a write committed")


def _upstream_answers(d: Daemon, rx: Receiver, api: Api) -> None:
    wait_until(lambda: d.status()["upstreams"][0]["state"] == "ready", 20, "the upstream ready again")


WORKS_AGAIN: dict[str, Callable[[Daemon, Receiver, Api], None]] = {
    "notifier": _notifier_delivers,
    "metrics": lambda d, rx, api: None,
    "plain-calls": lambda d, rx, api: None,
    "retention": lambda d, rx, api: None,
    "registry": lambda d, rx, api: None,
    "config-watch": _watcher_reloads,
    "signals": _sighup_reloads,
    "store-writer": _store_writes,
    "task-expiry": lambda d, rx, api: None,
    "host-instances": lambda d, rx, api: None,
    "upstream:fx": _upstream_answers,
    "lease": lambda d, rx, api: None,  # these two run on a shared (PostgreSQL) store only
    "remote-changes": lambda d, rx, api: None,
}
SHARED_STORE_ONLY = ("lease", "remote-changes")


@pytest.mark.parametrize("work", list(WORKS_AGAIN))
def test_a_fault_in_background_work_is_logged_recorded_and_retried_while_the_daemon_serves(
    faulty: tuple[Daemon, Receiver], work: str
) -> None:
    d, rx = faulty
    if work in SHARED_STORE_ONLY and d.store_url is None:
        pytest.skip("runs only on a store several daemons share (PostgreSQL)")
    with Api(d) as api:
        had = len(failures(api, work))
        (d.tmp / "faults" / work.replace("/", "_")).touch()
        [*_, event] = wait_until(lambda: (f := failures(api, work)) and len(f) > had and f, 15, f"{work}'s event")
        assert event["by"] == "mcpx"
        assert event["data"]["action"] == "restarting" and event["data"]["retryInS"] > 0
        assert event["data"]["error"] == f"InjectedFault: a fault injected into {work} through {FAULT_ENV}"
        shown = wait_until(
            lambda: [w for w in d.status()["background"] if w["task"] == work and w["state"] == "running"],
            15,
            f"{work} running again",
        )
        assert shown[0]["failures"] == had + 1
        serves(d)
        WORKS_AGAIN[work](d, rx, api)
    log = d.stderr()
    assert f"mcpx.daemon ERROR background work {work} failed: InjectedFault" in log
    assert "Traceback (most recent call last)" in log  # its cause, with the line it came from


def test_mcpx_status_names_the_background_work_that_failed(faulty: tuple[Daemon, Receiver]) -> None:
    d, _ = faulty
    (d.tmp / "faults" / "retention").touch()
    wait_until(lambda: any(w["task"] == "retention" for w in d.status()["background"]), 15, "retention's failure")
    shown = _mcpx(d, "status").stdout
    assert "background retention failed" in shown and "InjectedFault" in shown, shown


def _mcpx(d: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    argv = [sys.executable, "-m", "mcpx", *args, "--state-dir", str(d.state_dir)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env)


# ---- a config file that is not UTF-8 (#37 item 3) ---------------------------------------------------


LATIN1 = '{"mcpServers": {"caf\u00e9": {"command": "x"}}}'.encode("latin-1")


def _last_reload(d: Daemon) -> dict[str, Any]:
    return d.status()["lastReload"] or {}


def test_a_config_file_that_is_not_utf8_is_refused_on_sighup_watcher_and_reload_and_the_daemon_serves_on(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    good = d.config_path.read_bytes()
    d.config_path.write_bytes(LATIN1)
    assert d.proc is not None
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: _last_reload(d).get("result") == "refused", 10, "the reload refused")
    with Api(d) as api:
        refused = api.get("/v1/events", params={"kind": "config.refused"}).json()["events"]
    assert {e["data"]["trigger"] for e in refused} <= {"signal", "file"} and refused
    why = f"{d.config_path}: not UTF-8 text: byte 0xe9 at line 1 (offset 20); save the file as UTF-8"
    assert all(e["data"]["error"] == why for e in refused)
    assert _last_reload(d)["error"] == why
    serves_fx(d)
    # Other bytes that are not UTF-8 either: the file watcher reads them, and refuses them the same way.
    d.config_path.write_bytes(LATIN1.replace(b"caf", b"cafe"))
    wait_until(lambda: _last_reload(d).get("trigger") == "file", 15, "the watcher's reload")
    assert _last_reload(d)["result"] == "refused" and "not UTF-8 text: byte 0xe9" in _last_reload(d)["error"]
    serves_fx(d)
    reload = _mcpx(d, "reload")
    assert reload.returncode == 1 and "not UTF-8 text: byte 0xe9" in reload.stdout, reload
    status = _mcpx(d, "status")
    assert "refused" in status.stdout and "not UTF-8 text" in status.stdout, status.stdout
    assert f"ERROR config reload (signal) refused, still serving the previous config: {why}" in d.stderr()
    serves_fx(d)
    d.config_path.write_bytes(good)  # put right: the next reload applies it
    assert _mcpx(d, "reload").returncode == 0


def serves_fx(d: Daemon) -> None:
    with RawHost(d.url) as host:
        host.initialize()
        reply = reply_of(host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "ok"}}))
        assert reply["result"]["content"][0]["text"] == "ok"
    assert (d.state_dir / "daemon.json").exists() and d.status()["phase"] == "serving"


# ---- typo'd URLs are refused at start and at a reload, naming the key (#37 item 2) ----------------


TYPOS = ["http://hooks.example:8O80/x", "http://hooks .example/x", "hooks.example/x"]


def test_typod_webhook_urls_stop_the_daemon_at_start_naming_each_key(tmp_path: Path) -> None:
    path = tmp_path / "cfg.json"
    hooks = [{"url": url, "secret": SECRET} for url in TYPOS]
    path.write_text(json.dumps({"notify": {"webhooks": hooks}}))
    proc = subprocess.run(
        [sys.executable, "-m", "mcpx", "daemon", "--config", str(path), "--state-dir", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{path}: notify.webhooks.0.url: port '8O80' is not a number from 1 to 65535" in proc.stderr
    assert f"{path}: notify.webhooks.1.url: has a space or a control character in it" in proc.stderr
    assert f"{path}: notify.webhooks.2.url: must start with http:// or https://" in proc.stderr
    assert not (tmp_path / "s" / "daemon.json").exists()


def test_a_typod_webhook_url_in_a_reload_is_refused_and_the_running_notify_delivers_on(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    with Receiver() as rx:
        config = _config(tmp_path, rx)
        d = start_daemon(config)
        broken = {**config, "notify": {"webhooks": [{"url": TYPOS[0], "secret": SECRET}]}}
        _write_config(d, broken)
        reload = _mcpx(d, "reload")
        assert reload.returncode == 1 and "notify.webhooks.0.url: port '8O80'" in reload.stdout, reload
        seen = len(rx.got)
        serves_fx(d)  # a new session: connection.opened, delivered by the webhook the daemon had
        wait_until(lambda: len(rx.got) > seen, 10, "a delivery to the running config's webhook")
        assert d.status()["background"] == []
