"""Token requests (OAuth 2.1 4.1.3, 4.3, 4.2 client credentials; RFC 8707 `resource` in each) and
dynamic registration (RFC 7591). Each returns what it got or raises an AuthError saying why."""

from __future__ import annotations

import time

import httpx

from . import client_auth, fetch, registration, tokens
from .auth_errors import AuthError
from .client_auth import Client
from .metadata import AuthServer
from .tokens import TokenSet


class RefreshRefused(AuthError):
    """The authorization server refused the refresh token (expired, revoked): a new sign-in is needed."""


async def exchange_code(
    client: httpx.AsyncClient,
    server: AuthServer,
    who: Client,
    code: str,
    verifier: str,
    redirect_uri: str,
    resource: str,
    scopes: list[str],
) -> TokenSet:
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "code_verifier": verifier,
        "resource": resource,
    }
    return await _token(client, server, who, form, scopes, None)


async def refresh(
    client: httpx.AsyncClient, server: AuthServer, who: Client, current: TokenSet, resource: str
) -> TokenSet:
    if current.refresh_token is None:
        raise RefreshRefused("there is no refresh token")
    form = {"grant_type": "refresh_token", "refresh_token": current.refresh_token, "resource": resource}
    return await _token(client, server, who, form, current.scopes or [], current)


async def client_credentials(
    client: httpx.AsyncClient, server: AuthServer, who: Client, resource: str, scopes: list[str]
) -> TokenSet:
    form = {"grant_type": "client_credentials", "resource": resource}
    if scopes:
        form["scope"] = " ".join(scopes)
    return await _token(client, server, who, form, scopes, None)


async def _token(
    client: httpx.AsyncClient,
    server: AuthServer,
    who: Client,
    form: dict[str, str],
    asked: list[str],
    previous: TokenSet | None,
) -> TokenSet:
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    client_auth.apply(who, form, headers, server.issuer)
    reply = await fetch.post_form(client, server.token_endpoint, form, headers)
    if reply.status != 200:
        why = tokens.error_of(reply.body, reply.status)
        if form["grant_type"] == "refresh_token" and reply.status in (400, 401):
            raise RefreshRefused(f"the authorization server refused the refresh token ({why})")
        raise AuthError(f"the token endpoint {server.token_endpoint} refused the {form['grant_type']} request: {why}")
    return tokens.from_response(reply.body, time.time(), asked, previous)


async def register(client: httpx.AsyncClient, server: AuthServer, redirect_uri: str) -> Client:
    if server.registration_endpoint is None:
        raise AuthError(
            f"the authorization server {server.issuer} offers no dynamic registration and no client ID metadata"
            " document is configured: register a client there and give `oauth.clientId`"
        )
    method = client_auth.for_registration(server.token_auth_methods)
    body = registration.request_body(redirect_uri, method)
    reply = await fetch.post_json(client, server.registration_endpoint, body)
    if reply.status not in (200, 201):
        raise AuthError(
            f"the registration endpoint {server.registration_endpoint} refused mcpx:"
            f" {tokens.error_of(reply.body, reply.status)}"
        )
    return registration.client_of(reply.body, method)
