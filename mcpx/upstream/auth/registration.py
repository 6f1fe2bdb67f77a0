"""Dynamic client registration (RFC 7591) bodies, and a client ID metadata document (SEP-991; pure)."""

from __future__ import annotations

from typing import Any

from .auth_errors import AuthError
from .client_auth import Client

CLIENT_NAME = "mcpx"


def request_body(redirect_uri: str, method: str) -> dict[str, Any]:
    """mcpx as a native app with a loopback redirect (`application_type` is required by MCP), asking
    for refresh tokens (SEP-2207: `refresh_token` among its grant types).

    No `scope` (optional in RFC 7591 2): scopes are asked for in each authorization request. A
    resource server's scopes are often unknown to its authorization server's registration
    (oidc-provider refuses them there: "scope must only contain Authorization Server supported
    scope values"), and a server that keeps the registered scope as an allow-list would refuse a
    later step-up to more."""
    return {
        "client_name": CLIENT_NAME,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
        "application_type": "native",
    }


def client_of(response: object, asked_method: str) -> Client:
    """The registered client (RFC 7591 3.2.1); the method it says, else the one asked for."""
    if not isinstance(response, dict) or not isinstance(response.get("client_id"), str) or not response["client_id"]:
        raise AuthError("the registration endpoint answered without a client_id")
    secret = response.get("client_secret")
    method = response.get("token_endpoint_auth_method")
    if not isinstance(method, str):
        method = asked_method
    if method in ("client_secret_basic", "client_secret_post") and not isinstance(secret, str):
        method = "none"
    return Client(response["client_id"], secret if isinstance(secret, str) else None, method)
