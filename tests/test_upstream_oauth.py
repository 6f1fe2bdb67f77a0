"""OAuth 2.1 upstreams, end to end: a real daemon, an OAuth-protected MCP server with its own
authorization server (tests/fixtures/oauth_server.py), `mcpx login` with a `$BROWSER` that follows
the redirects, and a host calling through.

Each test names the behaviour it proves: discovery, dynamic registration, PKCE, `resource` and
`iss`, refresh of a short-lived token with no person, step-up on 403, client credentials (a secret
and private_key_jwt), a sign-in kept across a daemon restart, and the error a plain call gets while
the upstream waits for a person.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pgcluster
import pytest
from harness import Api, Daemon, RawHost, postgres_only, wait_until
from oauth_fixture import OAuthServer, mcpx_login

# A daemon, an OAuth server and `mcpx login` processes per test: about a minute and a half for the
# file, so its worker takes it first (tests/conftest.py).
pytestmark = [
    pytest.mark.long,
    pytest.mark.sqlite_only("the OAuth client's flows (the PostgreSQL sharing test is its own)"),
    pytest.mark.heavy,
]


@pytest.fixture
def oauth_server(tmp_path: Path) -> Iterator[Callable[..., OAuthServer]]:
    servers: list[OAuthServer] = []

    def start(*args: str, name: str = "oauth") -> OAuthServer:
        servers.append(OAuthServer(tmp_path, *args, name=name))
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


def upstream(daemon: Daemon, name: str = "secure") -> dict[str, Any]:
    with Api(daemon) as api:
        rows = api.get("/v1/upstreams").json()["upstreams"]
    return next(r for r in rows if r["name"] == name)


def wait_state(daemon: Daemon, state: str, name: str = "secure") -> dict[str, Any]:
    return wait_until(lambda: (r := upstream(daemon, name))["state"] == state and r, 20, f"{name} {state}")


def call(daemon: Daemon, tool: str) -> dict[str, Any]:
    with RawHost(daemon.url) as host:
        host.initialize()
        reply: dict[str, Any] = host.legacy("tools/call", {"name": tool, "arguments": {}}).json()
        return reply


def events(daemon: Daemon, kind: str) -> list[dict[str, Any]]:
    with Api(daemon) as api:
        found: list[dict[str, Any]] = api.get("/v1/events", params={"kind": kind}).json()["events"]
        return found


def signed_in(daemon: Daemon, server: OAuthServer) -> None:
    """Run `mcpx login secure` and wait for the upstream to be ready with its token."""
    done = mcpx_login(daemon.state_dir, "secure")
    assert done.returncode == 0, done.stdout + done.stderr
    assert server.base in done.stdout  # the authorization URL was printed
    wait_state(daemon, "ready")


def test_a_plain_call_to_an_upstream_that_needs_a_sign_in_names_mcpx_login(
    tmp_path: Path, oauth_server: Callable[..., OAuthServer], start_daemon: Callable[..., Daemon]
) -> None:
    server = oauth_server()
    heard = tmp_path / "hook.jsonl"  # a notify command hook told of the event (docs/notify.md)
    hook = {"run": [sys.executable, "-c", f"import sys; open({str(heard)!r}, 'a').write(sys.stdin.read() + '\\n')"],
            "events": ["upstream.needs_login"]}  # fmt: skip
    config = {"mcpServers": {"secure": {"url": server.url}}, "notify": {"commands": [hook]}}
    daemon = start_daemon(config, wait_upstreams=False)
    row = wait_state(daemon, "needs login")
    assert row["auth"]["needsLogin"] == "the server asks for a sign-in" and not row["auth"]["signedIn"]
    reply = call(daemon, "secure__whoami")
    assert "`mcpx login secure`" in reply["error"]["message"], reply
    (event,) = events(daemon, "upstream.needs_login")
    assert event["data"] == {"upstream": "secure", "reason": "the server asks for a sign-in", "scopes": ["mcp:read"],
                             "login": "mcpx login secure"}  # fmt: skip
    assert "needs login" in daemon.status()["upstreams"][0]["state"]
    told = wait_until(lambda: heard.exists() and heard.read_text().strip(), 10, "the hook's event")
    assert json.loads(told)["kind"] == "upstream.needs_login" and json.loads(told)["data"]["upstream"] == "secure"
    # Nothing was asked of the authorization server before a person wanted to sign in.
    assert not server.entries(path="/register") and not server.entries(path="/token")


def test_login_discovers_registers_and_signs_in_with_pkce_resource_and_iss(
    oauth_server: Callable[..., OAuthServer], start_daemon: Callable[..., Daemon]
) -> None:
    server = oauth_server()
    daemon = start_daemon({"mcpServers": {"secure": {"url": server.url}}}, wait_upstreams=False)
    wait_state(daemon, "needs login")
    signed_in(daemon, server)
    reply = call(daemon, "secure__whoami")
    assert json.loads(reply["result"]["content"][0]["text"])["scope"] == ["mcp:read", "offline_access"]
    (reg,) = server.entries(path="/register")
    assert (
        reg["application_type"] == "native" and "refresh_token" in reg["grant_types"] and reg["auth_method"] == "none"
    )
    assert reg["redirect_uris"] == [f"http://127.0.0.1:{daemon.port}/oauth/callback"]
    (authz,) = server.entries(path="/authorize")
    assert authz["method"] == "S256" and authz["resource"] == server.url and authz["scope"] == "mcp:read offline_access"
    assert authz["prompt"] == "consent"  # OpenID Connect Core 11: offline access is asked with consent
    (token,) = server.entries(path="/token")
    assert token["pkce_ok"] and token["resource_matches"] and token["client_auth"] == "none"
    # Every request to the server carries the token once it is signed in.
    after = [e for e in server.entries(path="/mcp") if e["t"] > token["t"]]
    assert after and all(e["auth"] == "Bearer" and e["live"] for e in after)
    auth = upstream(daemon)["auth"]
    assert auth["signedIn"] and auth["by"] == "operator:tester" and auth["refreshable"]
    assert auth["scopes"] == ["mcp:read", "offline_access"] and auth["issuer"] == server.base
    (event,) = events(daemon, "upstream.signed_in")
    assert event["by"] == "operator:tester" and event["data"]["scopes"] == ["mcp:read", "offline_access"]


def test_a_short_lived_token_is_refreshed_without_a_person(
    oauth_server: Callable[..., OAuthServer], start_daemon: Callable[..., Daemon]
) -> None:
    server = oauth_server("--token-ttl", "2")
    daemon = start_daemon({"mcpServers": {"secure": {"url": server.url}}}, wait_upstreams=False)
    wait_state(daemon, "needs login")
    signed_in(daemon, server)
    first = upstream(daemon)["auth"]["expiresMs"]
    wait_until(lambda: not server.entries(path="/mcp", live=True) or _expired(first), 10, "the first token to expire")
    assert "result" in call(daemon, "secure__whoami")
    assert server.entries(path="/token", grant="refresh_token", ok=True)
    assert upstream(daemon)["auth"]["expiresMs"] > first
    assert upstream(daemon)["state"] == "ready"


def _expired(expires_ms: int) -> bool:
    import time

    return time.time() * 1000 > expires_ms


def test_a_401_on_a_signed_in_server_refreshes_once_and_retries(
    oauth_server: Callable[..., OAuthServer], start_daemon: Callable[..., Daemon]
) -> None:
    server = oauth_server()
    daemon = start_daemon({"mcpServers": {"secure": {"url": server.url}}}, wait_upstreams=False)
    wait_state(daemon, "needs login")
    signed_in(daemon, server)
    httpx.post(f"{server.base}/control/revoke")  # the server forgets every access token
    assert "result" in call(daemon, "secure__whoami")
    assert len(server.entries(path="/token", grant="refresh_token", ok=True)) == 1
    assert not events(daemon, "upstream.needs_login")[1:]  # only the first sign-in's


def test_step_up_on_insufficient_scope_asks_for_the_union_then_the_call_works(
    oauth_server: Callable[..., OAuthServer], start_daemon: Callable[..., Daemon]
) -> None:
    server = oauth_server()
    daemon = start_daemon({"mcpServers": {"secure": {"url": server.url}}}, wait_upstreams=False)
    wait_state(daemon, "needs login")
    signed_in(daemon, server)
    refused = call(daemon, "secure__write")
    assert "`mcpx login secure`" in refused["error"]["message"] and "more scope" in refused["error"]["message"]
    assert refused["error"]["data"]["needsLogin"] is True
    assert upstream(daemon)["state"] == "needs login"
    done = mcpx_login(daemon.state_dir, "secure")
    assert done.returncode == 0, done.stderr
    assert server.entries(path="/authorize")[-1]["scope"] == "mcp:read offline_access mcp:write"
    assert call(daemon, "secure__write")["result"]["content"][0]["text"] == "written"
    assert upstream(daemon)["state"] == "ready"


@pytest.mark.parametrize("how", ["client_secret_basic", "private_key_jwt"])
def test_client_credentials_need_no_person(
    how: str, tmp_path: Path, oauth_server: Callable[..., OAuthServer], start_daemon: Callable[..., Daemon]
) -> None:
    oauth: dict[str, Any] = {"grantType": "client_credentials", "clientId": "robot"}
    if how == "client_secret_basic":
        server = oauth_server("--client-id", "robot", "--client-secret", "robot-secret-123")
        oauth["clientSecret"] = "${ROBOT_SECRET:-robot-secret-123}"
    else:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        key = ec.generate_private_key(ec.SECP256R1())
        public = tmp_path / "robot.pub.pem"
        public.write_bytes(
            key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )
        (tmp_path / "robot.pem").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        server = oauth_server("--client-id", "robot", "--client-key-file", str(public))
        oauth.update(privateKeyFile=str(tmp_path / "robot.pem"), signingAlgorithm="ES256")
    daemon = start_daemon({"mcpServers": {"secure": {"url": server.url, "oauth": oauth}}})
    assert json.loads(call(daemon, "secure__whoami")["result"]["content"][0]["text"])["client"] == "robot"
    (token,) = server.entries(path="/token", ok=True)
    assert token["grant"] == "client_credentials" and token["client_auth"] == how and token["resource"] == server.url
    assert upstream(daemon)["auth"]["by"] == "mcpx" and not events(daemon, "upstream.needs_login")


def test_a_sign_in_survives_a_daemon_restart(
    oauth_server: Callable[..., OAuthServer], start_daemon: Callable[..., Daemon]
) -> None:
    server = oauth_server()
    daemon = start_daemon({"mcpServers": {"secure": {"url": server.url}}}, wait_upstreams=False)
    wait_state(daemon, "needs login")
    signed_in(daemon, server)
    daemon.stop()
    daemon.start(wait_upstreams=False)
    wait_state(daemon, "ready")
    assert "result" in call(daemon, "secure__whoami")
    assert len(server.entries(path="/token")) == 1 and len(server.entries(path="/register")) == 1
    # The store holds the sign-in sealed: no token, refresh token or client secret in it as text.
    key = daemon.state_dir / "secrets.key"
    assert key.stat().st_mode & 0o777 == 0o600


def test_a_server_that_moves_to_another_authorization_server_is_signed_in_there_afresh(
    oauth_server: Callable[..., OAuthServer], start_daemon: Callable[..., Daemon]
) -> None:
    """Authorization-server migration: the resource names another authorization server. The
    registration and tokens of the old one are bound to it: not refreshed, not sent to the new one;
    the upstream needs a sign-in, which registers with the new server and works."""
    server = oauth_server()
    daemon = start_daemon({"mcpServers": {"secure": {"url": server.url}}}, wait_upstreams=False)
    wait_state(daemon, "needs login")
    signed_in(daemon, server)
    assert "result" in call(daemon, "secure__whoami")
    httpx.post(f"{server.base}/control/move").raise_for_status()
    (moved,) = server.entries(path="/control/move")
    new_issuer = f"{server.base}/as2"
    reply = call(daemon, "secure__whoami")
    assert "`mcpx login secure`" in reply["error"]["message"], reply
    row = wait_state(daemon, "needs login")
    assert row["auth"]["needsLogin"] == f"it moved to the authorization server {new_issuer}", row["auth"]
    assert not row["auth"]["signedIn"]
    after = [e for e in server.entries(path="/token") if e["t"] > moved["t"]]
    assert not after, after  # the old refresh token went to no one
    signed_in(daemon, server)
    assert "result" in call(daemon, "secure__whoami")
    (reg,) = [e for e in server.entries(path="/register") if e["t"] > moved["t"]]
    assert reg["issuer"] == new_issuer
    (authz,) = [e for e in server.entries(path="/authorize") if e["t"] > moved["t"]]
    assert authz["issuer"] == new_issuer and authz["client_known"]
    tokens = [e for e in server.entries(path="/token") if e["t"] > moved["t"]]
    assert [(e["issuer"], e["grant"], e["ok"]) for e in tokens] == [(new_issuer, "authorization_code", True)]
    assert upstream(daemon)["auth"]["issuer"] == new_issuer


def test_logout_forgets_the_tokens(
    oauth_server: Callable[..., OAuthServer], start_daemon: Callable[..., Daemon]
) -> None:
    server = oauth_server()
    daemon = start_daemon({"mcpServers": {"secure": {"url": server.url}}}, wait_upstreams=False)
    wait_state(daemon, "needs login")
    signed_in(daemon, server)
    with Api(daemon) as api:
        assert api.post("/v1/upstreams/secure/logout", json={"by": "tester"}).status_code == 200
    wait_state(daemon, "needs login")
    assert not upstream(daemon)["auth"]["signedIn"]
    assert events(daemon, "upstream.signed_out")[0]["by"] == "operator:tester"


def test_login_to_a_server_without_s256_is_refused_with_a_clear_error(
    oauth_server: Callable[..., OAuthServer], start_daemon: Callable[..., Daemon]
) -> None:
    server = oauth_server("--no-s256")
    daemon = start_daemon({"mcpServers": {"secure": {"url": server.url}}}, wait_upstreams=False)
    wait_state(daemon, "needs login")
    done = mcpx_login(daemon.state_dir, "secure")
    assert done.returncode == 1 and "S256" in done.stderr
    assert not server.entries(path="/authorize")


def test_login_with_a_callback_port_comes_back_to_localhost_callback(
    oauth_server: Callable[..., OAuthServer], start_daemon: Callable[..., Daemon]
) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = oauth_server()
    daemon = start_daemon(
        {"mcpServers": {"secure": {"url": server.url, "oauth": {"callbackPort": port}}}}, wait_upstreams=False
    )
    wait_state(daemon, "needs login")
    signed_in(daemon, server)
    assert server.entries(path="/register")[0]["redirect_uris"] == [f"http://localhost:{port}/callback"]
    # The listener opened for the sign-in closes after it.
    wait_until(lambda: _refused(port), 10, "the callback listener to close")


def _refused(port: int) -> bool:
    try:
        httpx.get(f"http://127.0.0.1:{port}/callback", timeout=1)
    except httpx.ConnectError:
        return True
    except httpx.TransportError:  # reset mid-answer: the listener is closing; ask again
        return False
    return False


@postgres_only
def test_a_second_daemon_on_postgresql_uses_the_same_sign_in(
    tmp_path: Path,
    oauth_server: Callable[..., OAuthServer],
    start_daemon: Callable[..., Daemon],
    pg_cluster: pgcluster.Cluster,
) -> None:
    """Two daemons on one database with one key file (`store.secretsKeyFile`): one signs in, the
    other is ready with the same token, without a sign-in of its own; one's refresh serves both."""
    server = oauth_server("--token-ttl", "3")
    store = {"url": pg_cluster.database(), "secretsKeyFile": str(tmp_path / "shared-secrets.key")}

    def config(instance: str) -> dict[str, Any]:
        return {"mcpServers": {"secure": {"url": server.url}}, "store": {**store, "instance": instance}}

    a = start_daemon(config("a"), name="a", wait_upstreams=False)
    b = start_daemon(config("b"), name="b", wait_upstreams=False)
    wait_state(a, "needs login")
    wait_state(b, "needs login")
    signed_in(a, server)
    wait_state(b, "ready")  # it read the sign-in a wrote (it polls the store while it waits)
    assert "result" in call(b, "secure__whoami")
    assert len(server.entries(path="/token", grant="authorization_code")) == 1
    assert (tmp_path / "shared-secrets.key").stat().st_mode & 0o777 == 0o600


def test_concurrent_calls_with_an_expired_token_share_one_refresh(
    oauth_server: Callable[..., OAuthServer], start_daemon: Callable[..., Daemon]
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    server = oauth_server("--token-ttl", "2", "--token-delay", "1")  # calls arrive while the refresh runs
    daemon = start_daemon({"mcpServers": {"secure": {"url": server.url}}}, wait_upstreams=False)
    wait_state(daemon, "needs login")
    signed_in(daemon, server)
    expires = upstream(daemon)["auth"]["expiresMs"]
    wait_until(lambda: _expired(expires), 10, "the token to expire")
    with ThreadPoolExecutor(6) as pool:
        replies = list(pool.map(lambda _: call(daemon, "secure__whoami"), range(6)))
    assert all("result" in r for r in replies), replies
    assert len(server.entries(path="/token", grant="refresh_token")) == 1
