"""A server entry's `oauth` object: how mcpx signs in to an HTTP upstream that wants OAuth 2.1.

The keys Claude Code writes (`clientId`, `callbackPort`, `authServerMetadataUrl`, `scopes` as one
space-separated string; Gemini CLI's list of scopes is taken too) and mcpx's own. None is needed for
a server that offers discovery and registration: mcpx signs in to any HTTP upstream that answers
401 with a Bearer challenge (docs/auth.md).
"""

from __future__ import annotations

import ipaddress
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SigningAlgorithm = Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]


def loopback_host(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _https_or_loopback(url: str, key: str) -> str:
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return url
    if parts.scheme == "http" and loopback_host(parts.hostname):
        return url
    raise ValueError(f"`{key}` must be an https:// URL (http:// only on loopback)")


class OAuthConfig(BaseModel):
    # Gemini CLI's own keys (enabled, authorizationUrl, tokenUrl, ...) are let through by
    # host_keys.OAUTH_KEYS_FROM_OTHER_HOSTS and kept as extras; any other key is a typo.
    model_config = ConfigDict(extra="allow")

    clientId: str | None = Field(
        None,
        min_length=1,
        description="A client registered beforehand with the server's authorization server (used before any"
        " client ID metadata document or dynamic registration).",
    )
    clientSecret: str | None = Field(
        None, min_length=1, description="That client's secret, if it has one (use `${VAR}` to keep it out of the file)."
    )
    callbackPort: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="Sign-ins return to `http://localhost:<port>/callback` (a listener the daemon opens for the"
        " sign-in), as Claude Code does; unset: the daemon's own `/oauth/callback`. Set it when the client was"
        " registered with a fixed redirect URI.",
    )
    authServerMetadataUrl: str | None = Field(
        None,
        description="The authorization server's metadata document, read instead of discovering it from the"
        " server (https://; http:// only on loopback).",
    )
    scopes: str | None = Field(
        None,
        min_length=1,
        description="The scopes to ask for, space-separated; unset: the server's challenge, else its"
        " `scopes_supported`, else none.",
    )
    clientMetadataUrl: str | None = Field(
        None,
        description="An https URL of a client ID metadata document (SEP-991) that names mcpx's redirect URI;"
        " used as the client id where the authorization server supports such documents.",
    )
    grantType: Literal["authorization_code", "client_credentials"] = Field(
        "authorization_code",
        description="`authorization_code`: a person signs in (`mcpx login NAME`). `client_credentials`: mcpx"
        " gets tokens on its own with `clientId` and `clientSecret` or a private key (SEP-1046).",
    )
    privateKey: str | None = Field(
        None, description="A PEM private key for `private_key_jwt` client authentication (RFC 7523)."
    )
    privateKeyFile: str | None = Field(
        None, description="A file holding that PEM key, instead of `privateKey` (relative to the config file)."
    )
    signingAlgorithm: SigningAlgorithm = Field(
        "RS256", description="The JWS algorithm of the private key's client assertions (ES256 for an EC P-256 key)."
    )

    @field_validator("scopes", mode="before")
    @classmethod
    def _scopes_text(cls, v: object) -> object:
        if isinstance(v, list) and all(isinstance(s, str) for s in v):
            return " ".join(v)  # Gemini CLI writes a list
        return v

    @field_validator("authServerMetadataUrl")
    @classmethod
    def _metadata_url(cls, v: str | None) -> str | None:
        return None if v is None else _https_or_loopback(v, "authServerMetadataUrl")

    @field_validator("clientMetadataUrl")
    @classmethod
    def _client_metadata_url(cls, v: str | None) -> str | None:
        if v is None:
            return None
        parts = urlsplit(v)
        if parts.scheme != "https" or not parts.hostname or parts.path in ("", "/"):
            raise ValueError("`clientMetadataUrl` must be an https:// URL with a path (SEP-991)")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> OAuthConfig:
        if self.privateKey is not None and self.privateKeyFile is not None:
            raise ValueError("give `privateKey` or `privateKeyFile`, not both")
        if self.grantType == "client_credentials":
            if self.clientId is None:
                raise ValueError("`grantType: client_credentials` needs `clientId`")
            if self.clientSecret is None and self.privateKey is None and self.privateKeyFile is None:
                raise ValueError(
                    "`grantType: client_credentials` needs `clientSecret`, `privateKey` or `privateKeyFile`"
                )
        if self.clientSecret is not None and self.clientId is None:
            raise ValueError("`clientSecret` belongs to a `clientId`: give both")
        return self

    @property
    def scope_list(self) -> list[str] | None:
        return self.scopes.split() if self.scopes else None
