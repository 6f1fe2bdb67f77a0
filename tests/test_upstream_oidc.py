"""#36 "A real sign-in": mcpx's OAuth client against an authorization server we did not write
(oidc-provider, pinned in tests/peers/oidc/), with the distribution's headless Chromium as the
person's browser.

oidc-provider is configured as its documentation says a deployment is (tests/peers/oidc/provider.mjs):
open dynamic registration, PKCE required, resource indicators issuing JWT access tokens for our
resource server only (its scopes declared there, not among the provider's own), refresh tokens for
`offline_access` (rotated), its development login and consent pages. Our resource server
(tests/fixtures/oidc_resource_server.py) checks each token against the provider's JWKS.

The sign-in: `mcpx login oidc --no-browser` prints the authorization URL; Chromium opens it, signs in
on the provider's login page, clicks Continue on its consent page, and follows the redirect to the
daemon's /oauth/callback. Then an SDK 2.3 host's calls through mcpx work, across the access token's
expiry (refreshed with no person), and across a daemon restart (no browser). No token, refresh token
or registration secret the provider issued appears in the daemon's log, its events, the feed, a /v1
body or the store as text. On PostgreSQL a second daemon on the same store uses the same token.
Also: a pre-registered confidential client (client_secret_basic), a person who clicks Cancel on the
consent page (mcpx login exits 1 with the provider's reason), and step-up to a second scope.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pgcluster
import pytest
from harness import ROOT, Api, Daemon, FeedClient, RawHost, postgres_only, read_jsonl, wait_until
from peers.npm_peers import oidc_provider_command
from peers.run_host import run_host
from peers.venvs import peer_python

# A browser, a Node authorization server, SDK hosts: the slow tier. About 40 s for the file (the
# first test 12-18 s, of which 7 s wait for an access token to expire; the others 3-9 s each).
pytestmark = [pytest.mark.browser, pytest.mark.peers, pytest.mark.long, pytest.mark.timeout(300)]

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
RESOURCE_SERVER = ROOT / "tests" / "fixtures" / "oidc_resource_server.py"
ACCESS_TTL_S = 6  # the provider's access tokens live this long: the test waits one out
# MCPX_SCREENSHOTS=1 writes the consent page and mcpx's signed-in page, at phone width, into screenshots/.
SHOTS = ROOT / "screenshots" if os.environ.get("MCPX_SCREENSHOTS") else None
PHONE = (390, 844)


@dataclass
class Realm:
    """oidc-provider and the MCP server it protects, each a process with a JSON-lines log."""

    issuer: str
    url: str  # the MCP server's /mcp
    provider_log: Path
    server_log: Path

    def provider(self, **match: Any) -> list[dict[str, Any]]:
        return [r for r in read_jsonl(self.provider_log) if all(r.get(k) == v for k, v in match.items())]

    def server(self, **match: Any) -> list[dict[str, Any]]:
        return [r for r in read_jsonl(self.server_log) if all(r.get(k) == v for k, v in match.items())]

    def issued(self) -> list[str]:
        found: list[str] = httpx.get(f"{self.issuer}/control/tokens").json()["issued"]
        return found


@pytest.fixture
def start_realm(tmp_path: Path) -> Iterator[Callable[..., Realm]]:
    """`start_realm(access_ttl=S, client="ID:SECRET")`: the resource server, then oidc-provider for it."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(access_ttl: int = ACCESS_TTL_S, client: str | None = None) -> Realm:
        issuer_file, rs_ready = tmp_path / "issuer", tmp_path / "rs.port"
        provider_log, server_log = tmp_path / "provider.log.jsonl", tmp_path / "rs.log.jsonl"
        with open(tmp_path / "rs.stderr", "wb") as err:
            procs.append(subprocess.Popen(
                [sys.executable, str(RESOURCE_SERVER), "--port", "0", "--ready-file", str(rs_ready),
                 "--issuer-file", str(issuer_file), "--log", str(server_log)],
                stdin=subprocess.DEVNULL, stderr=err, env=dict(os.environ, PYTHONPATH=str(ROOT / "tests" / "fixtures")),
            ))  # fmt: skip
        port = int(wait_until(lambda: rs_ready.exists() and rs_ready.read_text().strip(), what="resource server"))
        url = f"http://127.0.0.1:{port}/mcp"
        args = ["--resource", url, "--access-ttl", str(access_ttl), "--ready-file", str(issuer_file),
                "--log", str(provider_log), *(["--client", client] if client else [])]  # fmt: skip
        with open(tmp_path / "provider.stderr", "wb") as err:
            procs.append(subprocess.Popen(
                oidc_provider_command(tmp_path / "oidc", *args), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err
            ))  # fmt: skip
        issuer = wait_until(lambda: issuer_file.exists() and issuer_file.read_text().strip(), 30, "oidc-provider")
        return Realm(issuer, url, provider_log, server_log)

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(5)


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_window_size(*PHONE)
    try:
        yield driver
    finally:
        driver.quit()


def upstream(daemon: Daemon) -> dict[str, Any]:
    with Api(daemon) as api:
        rows = api.get("/v1/upstreams").json()["upstreams"]
    return next(r for r in rows if r["name"] == "oidc")


def wait_state(daemon: Daemon, state: str) -> dict[str, Any]:
    return wait_until(lambda: (r := upstream(daemon))["state"] == state and r, 30, f"oidc {state}")


def sign_in_with_chromium(
    daemon: Daemon, realm: Realm, browser: Any, shots: Path | None = None, *, consent: bool = True
) -> tuple[int, str]:
    """`mcpx login oidc --no-browser`; Chromium opens the URL it prints, signs in on the provider's
    login page (unless the provider still knows the browser), and clicks Continue (or Cancel) on
    its consent page. mcpx login's exit code and output, once Chromium is back at the daemon."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    login = subprocess.Popen(
        [sys.executable, "-m", "mcpx", "login", "oidc", "--no-browser", "--timeout", "60",
         "--state-dir", str(daemon.state_dir), "--by", "tester"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )  # fmt: skip
    try:
        assert login.stdout is not None
        printed = ""
        while not printed.endswith("\n") or not printed.splitlines()[-1].strip().startswith("http"):
            line = login.stdout.readline()
            assert line, f"mcpx login printed no URL: {printed}{login.stderr.read() if login.stderr else ''}"
            printed += line
        url = printed.splitlines()[-1].strip()
        assert url.startswith(f"{realm.issuer}/auth?")
        wait = WebDriverWait(browser, 20)
        browser.get(url)
        wait.until(lambda d: d.find_elements(By.NAME, "login") or "Continue" in d.page_source)
        if browser.find_elements(By.NAME, "login"):
            browser.find_element(By.NAME, "login").send_keys("alice")
            browser.find_element(By.NAME, "password").send_keys("any password")
            browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
            wait.until(lambda d: "Continue" in d.page_source and not d.find_elements(By.NAME, "login"))
        assert "mcp:read" in browser.page_source and realm.url in browser.page_source  # what is consented to
        if shots:
            browser.save_screenshot(str(shots / "oauth-consent-oidc-provider-phone.png"))
        if consent:
            browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        else:
            browser.find_element(By.LINK_TEXT, "[ Cancel ]").click()
        wait.until(lambda d: d.current_url.startswith(f"http://127.0.0.1:{daemon.port}/oauth/callback"))
        page = browser.find_element(By.TAG_NAME, "body").text
        if shots:
            browser.save_screenshot(str(shots / "oauth-signed-in-phone.png"))
        out, err = login.communicate(timeout=30)
    finally:
        if login.poll() is None:
            login.kill()
            login.wait()
    said = printed + out + err
    assert (login.returncode == 0) == consent and ("signed in" in page.lower()) == consent, said + page
    return login.returncode, said + page


def sdk_calls(daemon: Daemon, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    lines = run_host(peer_python("mcp-2.3"), "sdk2_host.py", ["--mode", "legacy", "--url", daemon.url], steps)
    return lines[1:]


def whoami(line: dict[str, Any]) -> dict[str, Any]:
    """The resource server's view of the token a call carried: sub, client, scope, jti."""
    assert line["ok"] and not line["result"].get("isError"), line
    found: dict[str, Any] = json.loads(line["result"]["content"][0]["text"])
    return found


def raw_whoami(daemon: Daemon) -> tuple[str, dict[str, Any]]:
    """A plain call through mcpx (no SDK): its reply's text, and what it says of the token."""
    with RawHost(daemon.url) as host:
        host.initialize()
        reply = host.legacy("tools/call", {"name": "oidc__whoami", "arguments": {}})
        return reply.text, json.loads(reply.json()["result"]["content"][0]["text"])


def assert_no_secret_written(daemon: Daemon, realm: Realm, seen: list[str], *also: str) -> None:
    """None of the secrets the provider issued (access and refresh tokens, client secrets,
    registration access tokens), nor `also`, is in what mcpx wrote or answered: `seen` (what the
    test got from mcpx), the /v1 bodies, the daemon's log, and the store's events and secrets rows."""
    with Api(daemon) as api:
        for path in ("/v1/status", "/v1/upstreams", "/v1/upstreams/oidc/auth", "/v1/events?limit=5000"):
            seen.append(api.get(path).text)
    seen.append(daemon.stderr())
    rows = daemon.store_rows("SELECT name, body FROM secrets UNION ALL SELECT kind, body FROM events")
    assert any(name == "oauth:oidc" for name, _ in rows)  # the sign-in is in the store, sealed
    seen += [f"{name} {body}" for name, body in rows]
    everything = "\n".join(seen)
    assert "upstream.signed_in" in everything and "alice" in everything  # the search reads real output
    secrets = [*realm.issued(), *also]
    assert secrets
    for secret in secrets:
        assert secret not in everything, f"{secret[:8]}... leaked"


@pytest.mark.parametrize("suite_store", ["sqlite"], indirect=True)
def test_a_real_sign_in_refreshes_alone_and_survives_a_restart(
    tmp_path: Path, start_realm: Callable[..., Realm], browser: Any, start_daemon: Callable[..., Daemon]
) -> None:
    realm = start_realm()
    daemon = start_daemon(
        {"mcpServers": {"oidc": {"url": realm.url}}}, wait_upstreams=False, extra_args=["--log-level", "debug"]
    )
    feed = FeedClient(daemon)
    wait_state(daemon, "needs login")
    seen = [sign_in_with_chromium(daemon, realm, browser, SHOTS or tmp_path)[1]]
    row = wait_state(daemon, "ready")
    assert (
        row["auth"]["issuer"] == realm.issuer and row["auth"]["refreshable"] and row["auth"]["by"] == "operator:tester"
    )

    # What oidc-provider saw: one open registration of a public native client (no scope: the
    # provider refuses its resource server's scopes there), an authorization request with PKCE
    # S256, our resource and prompt=consent (else it drops offline_access), one code exchange that
    # gave a refresh token.
    (reg,) = realm.provider(route="registration", status=201)
    assert reg["auth_method"] == "none" and reg["application_type"] == "native"
    assert reg["redirect_uris"] == [f"http://127.0.0.1:{daemon.port}/oauth/callback"]
    authz = realm.provider(route="authorization")[0]
    assert authz["code_challenge_method"] == "S256" and authz["resource"] == realm.url
    assert authz["scope"] == "mcp:read offline_access" and authz["prompt"] == "consent"
    (code,) = realm.provider(route="token", grant_type="authorization_code")
    assert code["status"] == 200 and code["refresh_token"] and code["resource"] == realm.url

    # An SDK 2.3 host calls through mcpx; then again once the first access token has expired.
    expires_ms = row["auth"]["expiresMs"]
    wait_s = max(expires_ms / 1000 - time.time(), 0) + 1
    steps = [
        {"op": "call", "name": "oidc__whoami"},
        {"op": "sleep", "seconds": wait_s},
        {"op": "call", "name": "oidc__whoami"},
    ]
    first, _, second = sdk_calls(daemon, steps)
    seen += [json.dumps(first), json.dumps(second)]
    assert whoami(first)["sub"] == "alice" and whoami(first)["client"] == reg["client_id"]
    assert whoami(second)["sub"] == "alice" and whoami(second)["jti"] != whoami(first)["jti"]
    refreshes = realm.provider(route="token", grant_type="refresh_token")
    assert refreshes and all(r["status"] == 200 and r["client_auth"] == "none" for r in refreshes)
    assert upstream(daemon)["auth"]["expiresMs"] > expires_ms
    assert len(realm.provider(route="token", grant_type="authorization_code")) == 1  # no person was asked again

    # A restart keeps the sign-in: ready again and a call works, with no new registration or code.
    daemon.stop()
    daemon.start(wait_upstreams=False)
    wait_state(daemon, "ready")
    text, claims = raw_whoami(daemon)
    seen.append(text)
    assert claims["sub"] == "alice"
    assert len(realm.provider(route="registration")) == 1
    assert len(realm.provider(route="token", grant_type="authorization_code")) == 1

    feed.close()
    seen += [json.dumps(m) for m in feed.messages]
    assert "token refreshed" in daemon.stderr()
    assert len(realm.issued()) >= 5  # two access and two refresh tokens at least, and the registration access token
    assert_no_secret_written(daemon, realm, seen)


@pytest.mark.parametrize("suite_store", ["sqlite"], indirect=True)
def test_a_pre_registered_confidential_client_signs_in_with_its_secret(
    start_realm: Callable[..., Realm],
    browser: Any,
    start_daemon: Callable[..., Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client registered at oidc-provider beforehand (a native app: any loopback port) with a
    secret, given as `oauth.clientId` / `clientSecret`: no registration, client_secret_basic at the
    token endpoint, and the secret in no output."""
    secret = "OIDC-CLIENT-SECRET-" + "k3" * 16
    realm = start_realm(client=f"mcpx-preregistered:{secret}")
    monkeypatch.setenv("OIDC_CLIENT_SECRET", secret)
    oauth = {"clientId": "mcpx-preregistered", "clientSecret": "${OIDC_CLIENT_SECRET}"}
    daemon = start_daemon(
        {"mcpServers": {"oidc": {"url": realm.url, "oauth": oauth}}},
        wait_upstreams=False,
        extra_args=["--log-level", "debug"],
    )
    wait_state(daemon, "needs login")
    seen = [sign_in_with_chromium(daemon, realm, browser)[1]]
    wait_state(daemon, "ready")
    text, claims = raw_whoami(daemon)
    seen.append(text)
    assert claims["sub"] == "alice" and claims["client"] == "mcpx-preregistered"
    assert not realm.provider(route="registration")
    (code,) = realm.provider(route="token", grant_type="authorization_code")
    assert code["status"] == 200 and code["client_auth"] == "client_secret_basic" and code["refresh_token"]
    assert_no_secret_written(daemon, realm, seen, secret)


@pytest.mark.parametrize("suite_store", ["sqlite"], indirect=True)
def test_a_refused_consent_ends_mcpx_login_with_the_providers_reason(
    start_realm: Callable[..., Realm], browser: Any, start_daemon: Callable[..., Daemon]
) -> None:
    """The person clicks Cancel on the consent page: the provider redirects back with
    error=access_denied (and its `iss`); `mcpx login` exits 1 saying so, and the upstream still
    needs a sign-in."""
    realm = start_realm()
    daemon = start_daemon({"mcpServers": {"oidc": {"url": realm.url}}}, wait_upstreams=False)
    wait_state(daemon, "needs login")
    code, said = sign_in_with_chromium(daemon, realm, browser, consent=False)
    assert code == 1 and "refused the sign-in: access_denied" in said, said
    assert upstream(daemon)["state"] == "needs login" and not realm.provider(route="token")


@pytest.mark.parametrize("suite_store", ["sqlite"], indirect=True)
def test_step_up_signs_in_again_for_more_scope(
    start_realm: Callable[..., Realm], browser: Any, start_daemon: Callable[..., Daemon]
) -> None:
    """A tool that needs mcp:write gets 403 insufficient_scope: the upstream needs a sign-in for
    mcp:read and mcp:write; the provider still knows the browser, so only its consent page shows;
    then the tool works, with the same registered client."""
    realm = start_realm()
    daemon = start_daemon({"mcpServers": {"oidc": {"url": realm.url}}}, wait_upstreams=False)
    wait_state(daemon, "needs login")
    sign_in_with_chromium(daemon, realm, browser)
    wait_state(daemon, "ready")
    with RawHost(daemon.url) as host:
        host.initialize()
        refused = host.legacy("tools/call", {"name": "oidc__write", "arguments": {}}).json()
        assert "`mcpx login oidc`" in refused["error"]["message"] and "more scope" in refused["error"]["message"]
        sign_in_with_chromium(daemon, realm, browser)
        wait_state(daemon, "ready")
        wrote = host.legacy("tools/call", {"name": "oidc__write", "arguments": {}}).json()
        assert wrote["result"]["content"][0]["text"] == "written", wrote
    second = realm.provider(route="authorization")[-1]
    assert second["scope"] == "mcp:read offline_access mcp:write" and second["prompt"] == "consent"
    assert len(realm.provider(route="registration")) == 1
    assert [t["scope"] for t in realm.provider(route="token", grant_type="authorization_code")] == [
        "mcp:read",
        "mcp:read mcp:write",
    ]


@postgres_only
def test_a_second_daemon_on_postgresql_uses_the_same_token(
    tmp_path: Path,
    start_realm: Callable[..., Realm],
    browser: Any,
    start_daemon: Callable[..., Daemon],
    pg_cluster: pgcluster.Cluster,
) -> None:
    """Two daemons on one database with one key file (`store.secretsKeyFile`): a signs in with the
    browser; b becomes ready without a sign-in of its own and calls with the very token a got
    (the same `jti`: the access token outlives the test)."""
    realm = start_realm(access_ttl=600)
    store = {"url": pg_cluster.database(), "secretsKeyFile": str(tmp_path / "shared-secrets.key")}

    def config(instance: str) -> dict[str, Any]:
        return {"mcpServers": {"oidc": {"url": realm.url}}, "store": {**store, "instance": instance}}

    a = start_daemon(config("a"), name="a", wait_upstreams=False)
    b = start_daemon(config("b"), name="b", wait_upstreams=False)
    wait_state(a, "needs login")
    wait_state(b, "needs login")
    sign_in_with_chromium(a, realm, browser)
    wait_state(b, "ready")  # it read the sign-in a wrote
    (line,) = sdk_calls(b, [{"op": "call", "name": "oidc__whoami"}])
    _, from_a = raw_whoami(a)
    assert whoami(line)["sub"] == "alice" and whoami(line)["jti"] == from_a["jti"]
    assert len(realm.provider(route="registration")) == 1
    assert [t["grant_type"] for t in realm.provider(route="token")] == ["authorization_code"]
