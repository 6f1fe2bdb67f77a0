"""What mcpx keeps of one upstream's sign-in (sealed in the store: see seal.py and vault.py; pure).

The client registration is bound to the authorization server that issued it (`issuer`): when the
server's protected resource metadata names another one, the registration and tokens are not sent
there (MCP client-registration "Authorization Server Binding"). The tokens are bound to the
resource (`resource`) and to the server URL they were got for: a config that points the same name
at another URL starts afresh instead of sending them there.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from .client_auth import Client
from .tokens import TokenSet


@dataclass(frozen=True)
class Credentials:
    server_url: str
    issuer: str
    resource: str
    client: Client | None = None  # registered dynamically (pre-registered clients come from the config)
    client_source: str = ""  # config, metadata-document, registration
    redirect_uri: str = ""  # the one a registered client was registered with
    tokens: TokenSet | None = None
    scopes: list[str] = field(default_factory=list)  # asked for, cumulatively (step-up unions them)
    by: str | None = None  # who signed in: operator:<name>, or mcpx (client credentials)
    signed_in_ms: int | None = None
    grant_type: str = "authorization_code"

    def with_tokens(self, tokens: TokenSet | None) -> Credentials:
        return replace(self, tokens=tokens)

    def wire(self) -> dict[str, Any]:
        client = self.client
        return {
            "v": 1,
            "serverUrl": self.server_url,
            "issuer": self.issuer,
            "resource": self.resource,
            "client": None
            if client is None
            else {"clientId": client.client_id, "clientSecret": client.client_secret, "method": client.method},
            "clientSource": self.client_source,
            "redirectUri": self.redirect_uri,
            "tokens": self.tokens.wire() if self.tokens is not None else None,
            "scopes": self.scopes,
            "by": self.by,
            "signedInMs": self.signed_in_ms,
            "grantType": self.grant_type,
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Credentials:
        c = data.get("client")
        return cls(
            server_url=str(data["serverUrl"]),
            issuer=str(data["issuer"]),
            resource=str(data["resource"]),
            client=None
            if not isinstance(c, dict)
            else Client(str(c["clientId"]), c.get("clientSecret"), str(c.get("method") or "none")),
            client_source=str(data.get("clientSource") or ""),
            redirect_uri=str(data.get("redirectUri") or ""),
            tokens=TokenSet.from_wire(data["tokens"]) if isinstance(data.get("tokens"), dict) else None,
            scopes=[str(s) for s in data.get("scopes") or []],
            by=data.get("by"),
            signed_in_ms=data.get("signedInMs"),
            grant_type=str(data.get("grantType") or "authorization_code"),
        )
