"""Upstream OAuth tokens are secrets: after a whole sign-in (a pre-registered client with a secret,
a refresh of a short-lived token, a restart), none of the access tokens, refresh tokens or the
client secret appears in the daemon's log (at debug), any event, the feed, any `/v1` body, the
metrics, an exported span, or the store's rows as text."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import otlp_receiver
import pytest
from harness import Api, Daemon, FeedClient, RawHost, wait_until
from oauth_fixture import OAuthServer, mcpx_login

pytestmark = [pytest.mark.heavy]

CLIENT_SECRET = "CLIENT-SECRET-" + "q7" * 12


@pytest.fixture
def server(tmp_path: Path) -> Iterator[OAuthServer]:
    s = OAuthServer(tmp_path, "--token-ttl", "2", "--client-id", "pre-registered", "--client-secret", CLIENT_SECRET)
    yield s
    s.stop()


def test_no_token_or_client_secret_is_written_anywhere_but_sealed(
    server: OAuthServer, start_daemon: Callable[..., Daemon], monkeypatch: pytest.MonkeyPatch
) -> None:
    with otlp_receiver.running() as otlp:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.url)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        monkeypatch.setenv("PRE_SECRET", CLIENT_SECRET)
        oauth = {"clientId": "pre-registered", "clientSecret": "${PRE_SECRET}"}
        config = {"mcpServers": {"secure": {"url": server.url, "oauth": oauth}}, "metrics": {"public": True}}
        daemon = start_daemon(config, wait_upstreams=False, extra_args=["--log-level", "debug"])
        feed = FeedClient(daemon)
        seen: list[str] = []
        with Api(daemon) as api:
            wait_until(lambda: api.get("/v1/upstreams").json()["upstreams"][0]["state"] == "needs login", 20)
            done = mcpx_login(daemon.state_dir, "secure", "--json")
            assert done.returncode == 0, done.stderr
            seen += [done.stdout, done.stderr]
            wait_until(lambda: api.get("/v1/upstreams").json()["upstreams"][0]["state"] == "ready", 20)
            with RawHost(daemon.url) as host:
                host.initialize()
                seen.append(host.legacy("tools/call", {"name": "secure__whoami", "arguments": {}}).text)
                time.sleep(2.5)  # the first access token expires: the next call refreshes it
                seen.append(host.legacy("tools/call", {"name": "secure__whoami", "arguments": {}}).text)
            assert server.entries(path="/token", grant="refresh_token", ok=True)
            assert server.entries(path="/token", client_auth="client_secret_basic", ok=True)
            for path in (
                "/v1/status",
                "/v1/upstreams",
                "/v1/upstreams/secure/auth",
                "/v1/events?limit=5000",
                "/v1/openapi.json",
            ):
                seen.append(api.get(path).text)
            seen.append(httpx.get(f"http://127.0.0.1:{daemon.port}/metrics").text)
        wait_until(lambda: otlp.spans, 15, "exported spans")
        daemon.stop()
        daemon.start(wait_upstreams=False)  # the restart reads the sealed row back
        wait_until(lambda: daemon.status()["upstreams"][0]["state"] == "ready", 20, "ready after the restart")
        feed.close()
        seen += [json.dumps(m) for m in feed.messages]
        seen += [json.dumps([s.name, s.attributes]) for s in otlp.spans]
        seen.append(daemon.stderr())
        rows = daemon.store_rows("SELECT name, body FROM secrets UNION ALL SELECT kind, body FROM events")
        assert any(name == "oauth:secure" for name, _ in rows)
        seen += [f"{name} {body}" for name, body in rows]
    issued = httpx.get(f"{server.base}/control/tokens").json()["issued"]
    assert len(issued) >= 4  # two access tokens, two refresh tokens (rotated)
    everything = "\n".join(seen)
    assert "signed in" in everything and "secure" in everything  # the search does look at real output
    for secret in [*issued, CLIENT_SECRET]:
        assert secret not in everything, f"{secret[:6]}... leaked"
