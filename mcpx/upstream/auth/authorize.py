"""The authorization code request and its answer (OAuth 2.1 4.1, PKCE S256, RFC 8707, RFC 9207; pure).

Before the browser goes to the authorization server, a login holds its PKCE verifier, its `state`
and the issuer recorded from validated metadata; the redirect back is accepted only with that
`state`, an `iss` that is the recorded issuer exactly (or no `iss` where the server does not
advertise it), and a `code`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit, urlunsplit

from authlib.oauth2.rfc7636 import create_s256_code_challenge

from .auth_errors import AuthError
from .metadata import AuthServer
from .scopes import OFFLINE_ACCESS


@dataclass(frozen=True)
class LoginRequest:
    """What one sign-in remembers between the authorization URL and the redirect back."""

    state: str
    verifier: str
    issuer: str
    redirect_uri: str
    client_id: str
    resource: str
    scopes: list[str]
    url: str  # where the person's browser goes


def new_secret() -> str:
    """43 characters of URL-safe randomness (256 bits): a PKCE verifier (RFC 7636 4.1) or a state."""
    return secrets.token_urlsafe(32)


def request(server: AuthServer, client_id: str, redirect_uri: str, resource: str, scopes: list[str]) -> LoginRequest:
    """A new login's request to `server` (which must support PKCE S256: MCP clients refuse one that does not)."""
    if server.authorization_endpoint is None:
        raise AuthError(f"the authorization server {server.issuer} names no authorization endpoint")
    if not server.supports_s256:
        raise AuthError(
            f"the authorization server {server.issuer} does not list PKCE S256 in code_challenge_methods_supported:"
            " refusing to sign in without it"
        )
    state, verifier = new_secret(), new_secret()
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "state": state,
        "code_challenge": create_s256_code_challenge(verifier),
        "code_challenge_method": "S256",
        "resource": resource,
    }
    if scopes:
        params["scope"] = " ".join(scopes)
    if OFFLINE_ACCESS in scopes:
        # OpenID Connect Core 11: a request for offline access MUST carry prompt=consent, and an
        # OpenID provider drops `offline_access` without it (oidc-provider does: no refresh token).
        # A plain OAuth server ignores the parameter (RFC 6749 3.1); the TypeScript SDK sends it too.
        params["prompt"] = "consent"
    parts = urlsplit(server.authorization_endpoint)
    query = f"{parts.query}&{urlencode(params)}" if parts.query else urlencode(params)
    url = urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))
    return LoginRequest(state, verifier, server.issuer, redirect_uri, client_id, resource, list(scopes), url)


def code_of(query: dict[str, str], login: LoginRequest, iss_supported: bool) -> str:
    """The authorization code of the redirect back, after RFC 9207 2.4's checks (the caller found
    `login` by the query's `state`). An error response is shown only once its `iss` checked out."""
    iss = query.get("iss")
    if iss is not None and iss != login.issuer:
        raise AuthError(
            f"the sign-in answer says it comes from {iss!r}, not from the authorization server {login.issuer!r}"
            " it was sent to: refused (RFC 9207)"
        )
    if iss is None and iss_supported:
        raise AuthError(
            f"the authorization server {login.issuer!r} advertises `iss` in its answers, and this answer has none:"
            " refused (RFC 9207)"
        )
    if "error" in query:
        detail = query.get("error_description")
        raise AuthError(
            f"the authorization server refused the sign-in: {query['error']}" + (f" ({detail})" if detail else "")
        )
    code = query.get("code")
    if not code:
        raise AuthError("the sign-in answer carries no authorization code")
    return code
