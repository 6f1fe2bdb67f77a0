"""OAuth discovery, pure: WWW-Authenticate challenges, where metadata is looked for, which is accepted."""

from __future__ import annotations

import pytest

from mcpx.upstream.auth import challenge, metadata
from mcpx.upstream.auth.auth_errors import AuthError

# ---- WWW-Authenticate --------------------------------------------------------------------------


def test_bearer_challenge_gives_its_metadata_url_scope_and_error() -> None:
    c = challenge.bearer(
        'Bearer error="insufficient_scope", scope="files:read files:write",'
        ' resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource"'
    )
    assert c is not None
    assert c.error == "insufficient_scope"
    assert c.scopes == ["files:read", "files:write"]
    assert c.resource_metadata == "https://mcp.example.com/.well-known/oauth-protected-resource"


def test_bearer_is_found_among_several_challenges_and_token68() -> None:
    header = 'Negotiate abc==, Basic realm="x", Bearer scope=mcp:basic, resource_metadata="http://h/p"'
    assert [c.scheme for c in challenge.parse(header)] == ["negotiate", "basic", "bearer"]
    c = challenge.bearer(header)
    assert c is not None and c.scopes == ["mcp:basic"] and c.resource_metadata == "http://h/p"


def test_quoted_values_keep_commas_and_escaped_quotes() -> None:
    c = challenge.bearer('Bearer error_description="a, \\"b\\"", realm="OAuth"')
    assert c is not None and c.params == {"error_description": 'a, "b"', "realm": "OAuth"}


def test_names_are_case_blind_and_a_repeated_param_keeps_the_first() -> None:
    c = challenge.bearer('BEARER Scope="a", scope="b"')
    assert c is not None and c.scopes == ["a"]


@pytest.mark.parametrize("header", [None, "", '=,,="', '"quoted"', "Basic", "Bearerx scope=a"])
def test_hostile_or_empty_headers_give_no_bearer_and_never_raise(header: str | None) -> None:
    assert challenge.bearer(header) is None


@pytest.mark.parametrize("header", ['Bearer scope=""', "Bearer", "Bearer realm=", "Bearer ,,"])
def test_bare_or_broken_bearer_names_nothing(header: str) -> None:
    c = challenge.bearer(header)
    assert c is not None and c.scopes is None and c.resource_metadata is None


# ---- protected resource metadata (RFC 9728) ----------------------------------------------------


def test_prm_is_looked_for_at_the_path_then_the_root() -> None:
    assert metadata.prm_urls("https://example.com/public/mcp") == [
        "https://example.com/.well-known/oauth-protected-resource/public/mcp",
        "https://example.com/.well-known/oauth-protected-resource",
    ]
    assert metadata.prm_urls("https://example.com/") == ["https://example.com/.well-known/oauth-protected-resource"]


@pytest.mark.parametrize(
    ("resource", "server", "ok"),
    [
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com", "https://mcp.example.com/mcp", True),  # a root document names the origin
        ("HTTPS://MCP.example.com/mcp", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com:443/mcp", "https://mcp.example.com/mcp", True),
        ("https://evil.example.com/mcp", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com/other", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com/mc", "https://mcp.example.com/mcp", False),  # a prefix is not a path segment
        ("http://mcp.example.com/mcp", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com:8443/mcp", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com/mcp#frag", "https://mcp.example.com/mcp", False),
        ("mcp.example.com", "https://mcp.example.com/mcp", False),
    ],
)
def test_prm_resource_must_identify_the_server(resource: str, server: str, ok: bool) -> None:
    assert metadata.resource_matches(resource, server) is ok


def test_a_prm_for_another_resource_is_refused() -> None:
    doc = {"resource": "https://evil.example.com/mcp", "authorization_servers": ["https://as.example.com"]}
    with pytest.raises(AuthError, match="refusing to sign in for another resource"):
        metadata.check_prm(doc, "http://localhost:9/mcp", "http://localhost:9/.well-known/x")


def test_a_prm_keeps_its_resource_exactly_as_published() -> None:
    doc = {"resource": "http://localhost:9", "authorization_servers": ["http://as"], "scopes_supported": ["a", 3]}
    prm = metadata.check_prm(doc, "http://localhost:9/mcp", "u")
    assert prm.resource == "http://localhost:9" and prm.scopes_supported == ["a"]


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"authorization_servers": ["http://as"]},
        {"resource": "http://h/mcp"},
        {"resource": "http://h/mcp", "authorization_servers": ["as"]},
    ],
)
def test_unusable_prm_documents_are_refused(doc: object) -> None:
    with pytest.raises(AuthError):
        metadata.check_prm(doc, "http://h/mcp", "u")


# ---- authorization server metadata (RFC 8414, OpenID Connect Discovery) -------------------------


def test_as_metadata_order_for_an_issuer_with_a_path() -> None:
    assert metadata.as_metadata_urls("https://auth.example.com/tenant1") == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration",
    ]


def test_as_metadata_order_for_an_issuer_without_a_path() -> None:
    assert metadata.as_metadata_urls("https://auth.example.com/") == [
        "https://auth.example.com/.well-known/oauth-authorization-server",
        "https://auth.example.com/.well-known/openid-configuration",
    ]


def _as(**extra: object) -> dict[str, object]:
    return {
        "issuer": "https://as.example.com",
        "authorization_endpoint": "https://as.example.com/authorize",
        "token_endpoint": "https://as.example.com/token",
        **extra,
    }


@pytest.mark.parametrize(
    "claimed", ["https://attacker.example.com", "https://as.example.com/", "HTTPS://as.example.com"]
)
def test_as_metadata_whose_issuer_differs_at_all_is_refused(claimed: str) -> None:
    with pytest.raises(AuthError, match="not using it"):
        metadata.check_as_metadata(_as(issuer=claimed), "https://as.example.com", "u")


def test_as_metadata_fields_are_read() -> None:
    server = metadata.check_as_metadata(
        _as(
            code_challenge_methods_supported=["S256"],
            authorization_response_iss_parameter_supported=True,
            client_id_metadata_document_supported=True,
            token_endpoint_auth_methods_supported=["none"],
            scopes_supported=["offline_access"],
        ),
        "https://as.example.com",
        "u",
    )
    assert server.supports_s256 and server.iss_parameter_supported and server.client_id_metadata_document_supported
    assert server.token_auth_methods == ["none"] and server.scopes_supported == ["offline_access"]


def test_as_metadata_without_pkce_methods_does_not_support_s256() -> None:
    assert not metadata.check_as_metadata(_as(), "https://as.example.com", "u").supports_s256


def test_as_metadata_needs_a_token_endpoint() -> None:
    with pytest.raises(AuthError, match="token endpoint"):
        metadata.check_as_metadata(_as(token_endpoint=None), "https://as.example.com", "u")


def test_a_configured_metadata_url_takes_the_documents_own_issuer() -> None:
    assert metadata.check_as_metadata(_as(), None, "u").issuer == "https://as.example.com"
