"""OAuth sign-in rules, pure: scope selection, the authorization request and its answer, token
responses, client authentication, registration bodies, and sealing at rest."""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import parse_qs, urlsplit

import pytest

from mcpx.upstream.auth import authorize, client_auth, registration, scopes, seal, tokens
from mcpx.upstream.auth.auth_errors import AuthError
from mcpx.upstream.auth.client_auth import Client
from mcpx.upstream.auth.credentials import Credentials
from mcpx.upstream.auth.metadata import AuthServer

# ---- scopes ------------------------------------------------------------------------------------


def test_scopes_come_from_the_challenge_then_scopes_supported_then_none() -> None:
    assert scopes.initial(None, ["a"], ["b", "c"]) == ["a"]
    assert scopes.initial(None, None, ["b", "c"]) == ["b", "c"]
    assert scopes.initial(None, None, None) == []


def test_configured_scopes_beat_the_servers() -> None:
    assert scopes.initial(["x", "y"], ["a"], ["b"]) == ["x", "y"]


def test_step_up_asks_for_the_union_in_order() -> None:
    assert scopes.union(["mcp:basic"], ["mcp:write", "mcp:basic"]) == ["mcp:basic", "mcp:write"]


def test_offline_access_only_where_the_authorization_server_lists_it() -> None:
    assert scopes.with_offline_access(["mcp:basic"], ["mcp:basic", "offline_access"]) == ["mcp:basic", "offline_access"]
    assert scopes.with_offline_access(["mcp:basic"], ["mcp:basic", "mcp:read"]) == ["mcp:basic"]
    assert scopes.with_offline_access(["offline_access"], None) == []  # MUST NOT ask where not listed
    assert scopes.with_offline_access([], ["offline_access"]) == []  # no scope at all stays no scope


def test_covers() -> None:
    assert scopes.covers(["a", "b"], ["a"]) and not scopes.covers(["a"], ["a", "b"])
    assert scopes.covers(None, None) and not scopes.covers(None, ["a"])


# ---- the authorization request -----------------------------------------------------------------

SERVER = AuthServer(
    issuer="https://as.example.com",
    token_endpoint="https://as.example.com/token",
    authorization_endpoint="https://as.example.com/authorize?tenant=t1",
    code_challenge_methods=["S256"],
)


def test_authorization_url_carries_pkce_s256_state_resource_and_scope() -> None:
    req = authorize.request(SERVER, "cid", "http://127.0.0.1:5/oauth/callback", "https://mcp.example.com", ["a", "b"])
    q = {k: v[0] for k, v in parse_qs(urlsplit(req.url).query).items()}
    digest = hashlib.sha256(req.verifier.encode()).digest()
    assert q["code_challenge"] == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    assert q["code_challenge_method"] == "S256" and q["response_type"] == "code"
    assert q["resource"] == "https://mcp.example.com" and q["scope"] == "a b" and q["state"] == req.state
    assert q["tenant"] == "t1" and q["client_id"] == "cid"
    assert len(req.verifier) >= 43 and req.issuer == SERVER.issuer


def test_no_scope_parameter_when_there_is_no_scope() -> None:
    req = authorize.request(SERVER, "cid", "http://r", "https://m", [])
    assert "scope" not in parse_qs(urlsplit(req.url).query)


def test_asking_for_offline_access_asks_for_consent() -> None:
    """OpenID Connect Core 11: an OpenID provider (oidc-provider among them) grants offline_access,
    so a refresh token, only with prompt=consent (tests/test_upstream_oidc.py)."""
    offline = authorize.request(SERVER, "c", "http://r", "https://m", ["a", "offline_access"])
    assert parse_qs(urlsplit(offline.url).query)["prompt"] == ["consent"]
    online = authorize.request(SERVER, "c", "http://r", "https://m", ["a"])
    assert "prompt" not in parse_qs(urlsplit(online.url).query)


def test_each_login_has_its_own_state_and_verifier() -> None:
    a, b = (authorize.request(SERVER, "c", "http://r", "https://m", []) for _ in range(2))
    assert a.state != b.state and a.verifier != b.verifier


@pytest.mark.parametrize("methods", [None, ["plain"]])
def test_a_server_without_s256_is_refused(methods: list[str] | None) -> None:
    server = AuthServer("https://as", "https://as/t", "https://as/a", code_challenge_methods=methods)
    with pytest.raises(AuthError, match="S256"):
        authorize.request(server, "c", "http://r", "https://m", [])


# ---- the answer: RFC 9207's table -----------------------------------------------------------------

LOGIN = authorize.LoginRequest("st", "v", "https://as.example.com", "http://r", "c", "https://m", [], "u")


@pytest.mark.parametrize(
    ("advertised", "iss", "accepted"),
    [
        (True, "https://as.example.com", True),
        (True, None, False),
        (False, "https://as.example.com", True),
        (False, None, True),
        (True, "https://evil.example.com", False),
        (False, "https://evil.example.com", False),
        (True, "https://as.example.com/", False),  # no normalisation: a trailing slash is another issuer
        (True, "HTTPS://as.example.com", False),
    ],
)
def test_iss_is_checked_by_simple_string_comparison(advertised: bool, iss: str | None, accepted: bool) -> None:
    query = {"code": "abc", "state": "st"} | ({"iss": iss} if iss is not None else {})
    if accepted:
        assert authorize.code_of(query, LOGIN, advertised) == "abc"
    else:
        with pytest.raises(AuthError, match="RFC 9207"):
            authorize.code_of(query, LOGIN, advertised)


def test_an_error_answer_from_the_wrong_issuer_is_not_shown() -> None:
    with pytest.raises(AuthError) as err:
        authorize.code_of({"error": "access_denied", "error_description": "spoof", "iss": "https://evil"}, LOGIN, True)
    assert "spoof" not in str(err.value)


def test_an_error_answer_is_reported() -> None:
    with pytest.raises(AuthError, match="access_denied"):
        authorize.code_of({"error": "access_denied", "iss": "https://as.example.com"}, LOGIN, True)


# ---- token responses ---------------------------------------------------------------------------


def test_token_response_is_read_with_expiry_and_granted_scopes() -> None:
    t = tokens.from_response(
        {"access_token": "at", "token_type": "bearer", "expires_in": 100, "refresh_token": "rt", "scope": "a b"},
        1000.0,
        ["x"],
    )
    assert (t.access_token, t.refresh_token, t.expires_at, t.scopes) == ("at", "rt", 1100.0, ["a", "b"])


def test_a_refresh_without_a_new_refresh_token_keeps_the_old_one() -> None:
    old = tokens.TokenSet("at", refresh_token="rt", scopes=["a"])
    t = tokens.from_response({"access_token": "at2", "token_type": "Bearer"}, 0.0, [], old)
    assert t.refresh_token == "rt" and t.scopes == ["a"] and t.expires_at is None


@pytest.mark.parametrize("body", [None, [], {"token_type": "Bearer"}, {"access_token": "x", "token_type": "DPoP"}])
def test_unusable_token_responses_are_refused(body: object) -> None:
    with pytest.raises(AuthError):
        tokens.from_response(body, 0.0, [])


def test_a_token_is_due_before_it_expires() -> None:
    long = tokens.TokenSet("a", expires_at=3600.0, issued_at=0.0)
    assert not long.due(3500.0) and long.due(3541.0) and not long.expired(3599.0) and long.expired(3600.0)
    short = tokens.TokenSet("a", expires_at=10.0, issued_at=0.0)
    assert not short.due(8.9) and short.due(9.0)  # a tenth of a short life
    assert not tokens.TokenSet("a").due(1e12)


def test_token_errors_are_one_line() -> None:
    assert tokens.error_of({"error": "invalid_grant", "error_description": "expired"}, 400) == "invalid_grant: expired"
    assert tokens.error_of("nope", 502) == "HTTP 502"


# ---- client authentication ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("supported", "secret", "key", "method"),
    [
        (["client_secret_basic"], True, False, "client_secret_basic"),
        (["client_secret_post"], True, False, "client_secret_post"),
        (["client_secret_post", "client_secret_basic"], True, False, "client_secret_basic"),
        (None, True, False, "client_secret_basic"),
        (["none"], False, False, "none"),
        (["none"], True, False, "none"),
        (["private_key_jwt"], False, True, "private_key_jwt"),
        (["client_secret_basic", "private_key_jwt"], True, True, "private_key_jwt"),
    ],
)
def test_token_endpoint_auth_method_as_metadata_allows(
    supported: list[str] | None, secret: bool, key: bool, method: str
) -> None:
    assert client_auth.choose(supported, has_secret=secret, has_key=key) == method


def test_no_usable_method_is_an_error() -> None:
    with pytest.raises(AuthError):
        client_auth.choose(["private_key_jwt"], has_secret=True, has_key=False)


def test_registration_asks_for_a_public_client_where_allowed() -> None:
    assert client_auth.for_registration(["client_secret_basic", "none"]) == "none"
    assert client_auth.for_registration(["client_secret_post"]) == "client_secret_post"
    assert client_auth.for_registration(None) == "client_secret_basic"


def test_client_secret_basic_and_post_and_none_fill_the_request() -> None:
    form: dict[str, str] = {}
    headers: dict[str, str] = {}
    client_auth.apply(Client("id", "s3cret", "client_secret_basic"), form, headers, "https://as")
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"id:s3cret").decode() and form == {}
    form, headers = {}, {}
    client_auth.apply(Client("id", "s3cret", "client_secret_post"), form, headers, "https://as")
    assert form == {"client_id": "id", "client_secret": "s3cret"} and headers == {}
    form = {}
    client_auth.apply(Client("id", None, "none"), form, headers, "https://as")
    assert form == {"client_id": "id"}


def test_private_key_jwt_signs_an_assertion_for_the_authorization_server() -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from joserfc import jwk, jwt

    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    form: dict[str, str] = {}
    client_auth.apply(Client("cid", None, "private_key_jwt", pem, "ES256"), form, {}, "https://as.example.com")
    assert form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    claims = jwt.decode(form["client_assertion"], jwk.ECKey.import_key(pem)).claims
    assert claims["iss"] == claims["sub"] == "cid" and claims["aud"] == "https://as.example.com" and claims["jti"]


def test_a_key_of_the_wrong_family_is_a_clear_error() -> None:
    with pytest.raises(AuthError, match="PEM"):
        client_auth.load_key("not a key", "ES256")


# ---- registration (RFC 7591) -------------------------------------------------------------------


def test_registration_body_names_a_native_app_with_refresh_tokens_and_no_scope() -> None:
    body = registration.request_body("http://127.0.0.1:1/oauth/callback", "none")
    assert body["application_type"] == "native" and "refresh_token" in body["grant_types"]
    assert body["redirect_uris"] == ["http://127.0.0.1:1/oauth/callback"]
    # Scopes go in the authorization request: oidc-provider refuses a resource server's scopes in a
    # registration (tests/test_upstream_oidc.py), and a registered scope can fence off a step-up.
    assert "scope" not in body


def test_registered_client_method_follows_the_response() -> None:
    c = registration.client_of(
        {"client_id": "x", "client_secret": "s", "token_endpoint_auth_method": "client_secret_post"}, "none"
    )
    assert (c.client_id, c.client_secret, c.method) == ("x", "s", "client_secret_post")
    assert registration.client_of({"client_id": "x", "client_secret": "s"}, "none").method == "none"
    assert registration.client_of({"client_id": "x"}, "client_secret_basic").method == "none"  # no secret to send
    with pytest.raises(AuthError):
        registration.client_of({"client_secret": "s"}, "none")


# ---- sealing -----------------------------------------------------------------------------------


def test_sealed_credentials_open_only_with_the_key_and_name_they_were_sealed_with() -> None:
    creds = Credentials("https://m/mcp", "https://as", "https://m", Client("c", "sec", "client_secret_basic"), "registration",
                        tokens=tokens.TokenSet("AT-123", refresh_token="RT-456"))  # fmt: skip
    key = seal.new_key()
    sealed = seal.seal(key, "oauth:a", repr(creds.wire()).encode())
    for secret in ("AT-123", "RT-456", "sec"):
        assert secret not in sealed
    assert b"AT-123" in seal.open_sealed(key, "oauth:a", sealed)
    with pytest.raises(seal.SealError, match="another key"):
        seal.open_sealed(seal.new_key(), "oauth:a", sealed)
    with pytest.raises(seal.SealError, match="altered"):
        seal.open_sealed(key, "oauth:b", sealed)  # moved to another upstream's name
    tampered = sealed[:-4] + ("AAAA" if not sealed.endswith("AAAA") else "BBBB")
    with pytest.raises(seal.SealError):
        seal.open_sealed(key, "oauth:a", tampered)


def test_credentials_round_trip() -> None:
    creds = Credentials("https://m/mcp", "https://as", "https://m", Client("c", None, "none"), "registration", "http://r",
                        tokens.TokenSet("a", refresh_token="r", expires_at=5.0, scopes=["x"]), ["x"], "operator:o", 7)  # fmt: skip
    assert Credentials.from_wire(creds.wire()) == creds


def test_key_files_hold_32_bytes_of_base64() -> None:
    key = seal.new_key()
    assert seal.parse_key(base64.b64encode(key) + b"\n") == key
    with pytest.raises(seal.SealError):
        seal.parse_key(base64.b64encode(b"short"))
    with pytest.raises(seal.SealError):
        seal.parse_key(b"!!not base64!!")
