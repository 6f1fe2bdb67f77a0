"""A token response (OAuth 2.1 3.2.3) as mcpx keeps it, and when to refresh it (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .auth_errors import AuthError

# Refresh when this little is left of a token's life (or a tenth of it, for short-lived tokens), so a
# call does not leave with a token that expires on the way.
REFRESH_BEFORE_S = 60.0


@dataclass(frozen=True)
class TokenSet:
    access_token: str
    token_type: str = "Bearer"
    refresh_token: str | None = None
    expires_at: float | None = None  # seconds since the epoch; None: the server did not say
    issued_at: float = 0.0
    scopes: list[str] | None = None  # granted, as the response said (None: as asked)

    def due(self, now: float) -> bool:
        """Time to refresh (or to get a new one): the token expires soon, or has expired."""
        if self.expires_at is None:
            return False
        life = max(self.expires_at - self.issued_at, 0.0)
        return now >= self.expires_at - min(REFRESH_BEFORE_S, life / 10)

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    def wire(self) -> dict[str, Any]:
        return {
            "access_token": self.access_token,
            "token_type": self.token_type,
            "refresh_token": self.refresh_token,
            "expires_at": self.expires_at,
            "issued_at": self.issued_at,
            "scopes": self.scopes,
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> TokenSet:
        return cls(
            access_token=str(data["access_token"]),
            token_type=str(data.get("token_type") or "Bearer"),
            refresh_token=data.get("refresh_token"),
            expires_at=data.get("expires_at"),
            issued_at=float(data.get("issued_at") or 0.0),
            scopes=data.get("scopes"),
        )


def from_response(body: object, now: float, asked: list[str], previous: TokenSet | None = None) -> TokenSet:
    """The tokens of a successful token response; a refresh that returns no new refresh token keeps
    the old one (RFC 6749 6)."""
    if not isinstance(body, dict):
        raise AuthError("the token endpoint answered something that is not a JSON object")
    access = body.get("access_token")
    if not isinstance(access, str) or not access:
        raise AuthError("the token endpoint answered without an access_token")
    token_type = body.get("token_type")
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise AuthError(f"the token endpoint gave a token of type {token_type!r}; mcpx sends Bearer tokens only")
    expires_in = body.get("expires_in")
    expires_at = now + float(expires_in) if isinstance(expires_in, (int, float)) and expires_in > 0 else None
    refresh = body.get("refresh_token")
    if not isinstance(refresh, str) or not refresh:
        refresh = previous.refresh_token if previous is not None else None
    scope = body.get("scope")
    if isinstance(scope, str):
        scopes: list[str] | None = scope.split()
    elif previous is not None and previous.scopes is not None:
        scopes = previous.scopes
    else:
        scopes = list(asked) or None
    return TokenSet(access, "Bearer", refresh, expires_at, now, scopes)


def error_of(body: object, status: int) -> str:
    """A token or registration endpoint's error response, in one line (RFC 6749 5.2)."""
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        detail = body.get("error_description")
        return str(body["error"]) + (f": {detail}" if isinstance(detail, str) and detail else "")
    return f"HTTP {status}"
