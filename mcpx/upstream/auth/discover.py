"""Discovery (MCP authorization-server-discovery): the server's protected resource metadata, then
its authorization server's metadata, each validated (metadata.py) before anything is taken from it."""

from __future__ import annotations

import httpx

from . import fetch, metadata
from .auth_errors import AuthError
from .challenge import Challenge
from .metadata import AuthServer, ProtectedResource


async def resource(client: httpx.AsyncClient, server_url: str, challenge: Challenge | None) -> ProtectedResource:
    """The PRM the challenge names, else the first well-known one that answers."""
    if challenge is not None and challenge.resource_metadata:
        urls = [challenge.resource_metadata]
    else:
        urls = metadata.prm_urls(server_url)
    tried: list[str] = []
    for url in urls:
        reply = await fetch.get_json(client, url)
        if reply.status == 200 and reply.body is not None:
            return metadata.check_prm(reply.body, server_url, url)
        tried.append(f"{url} (HTTP {reply.status})")
    raise AuthError("no protected resource metadata for this server: tried " + ", ".join(tried))


async def auth_server(client: httpx.AsyncClient, issuer: str) -> AuthServer:
    """The first metadata document of `issuer` that answers; one whose issuer differs is refused at
    once (a document that lies about who it is ends the sign-in)."""
    tried: list[str] = []
    for url in metadata.as_metadata_urls(issuer):
        reply = await fetch.get_json(client, url)
        if reply.status == 200 and reply.body is not None:
            return metadata.check_as_metadata(reply.body, issuer, url)
        tried.append(f"{url} (HTTP {reply.status})")
    raise AuthError(f"no metadata for the authorization server {issuer}: tried " + ", ".join(tried))


async def auth_server_at(client: httpx.AsyncClient, url: str) -> AuthServer:
    """A configured metadata document (`oauth.authServerMetadataUrl`): its own issuer is taken."""
    reply = await fetch.get_json(client, url)
    if reply.status != 200 or reply.body is None:
        raise AuthError(f"cannot read the authorization server metadata at {url} (HTTP {reply.status})")
    return metadata.check_as_metadata(reply.body, None, url)
