"""Where an upstream's authorization metadata lives and which documents to accept (pure).

- Protected resource metadata (RFC 9728; MCP authorization-server-discovery): the URL a 401's
  `resource_metadata` names, else the path-based well-known URI, then the root one. Its `resource`
  must identify the server we talk to (same origin; the server's path at or under it): a document
  naming another resource is refused, so a token is never asked for someone else's server.
- Authorization server metadata (RFC 8414 3.1 with path insertion, then OpenID Connect Discovery,
  inserted then appended for an issuer with a path). Its `issuer` must be identical to the issuer
  the URL was built from (RFC 8414 3.3): simple string comparison, no normalisation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .auth_errors import AuthError

PRM_SUFFIX = "/.well-known/oauth-protected-resource"


@dataclass(frozen=True)
class ProtectedResource:
    """A validated RFC 9728 document."""

    resource: str  # exactly as published: sent as RFC 8707 `resource`
    authorization_servers: list[str]
    scopes_supported: list[str] | None = None
    url: str = ""  # where it was read


@dataclass(frozen=True)
class AuthServer:
    """A validated RFC 8414 / OpenID Connect Discovery document."""

    issuer: str
    token_endpoint: str
    authorization_endpoint: str | None = None
    registration_endpoint: str | None = None
    scopes_supported: list[str] | None = None
    code_challenge_methods: list[str] | None = None
    token_auth_methods: list[str] | None = None  # absent: RFC 8414's default, client_secret_basic
    token_auth_signing_algs: list[str] | None = None
    grant_types: list[str] | None = None
    iss_parameter_supported: bool = False  # RFC 9207 `authorization_response_iss_parameter_supported`
    client_id_metadata_document_supported: bool = False
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def supports_s256(self) -> bool:
        return "S256" in (self.code_challenge_methods or [])


def prm_urls(server_url: str) -> list[str]:
    """The well-known URIs of a server's protected resource metadata, in the order they are tried."""
    parts = urlsplit(server_url)
    path = parts.path.rstrip("/")
    root = urlunsplit((parts.scheme, parts.netloc, PRM_SUFFIX, "", ""))
    if not path:
        return [root]
    return [urlunsplit((parts.scheme, parts.netloc, PRM_SUFFIX + path, "", "")), root]


def check_prm(doc: object, server_url: str, where: str) -> ProtectedResource:
    """The document read from `where`, if it is a usable PRM for the server at `server_url`."""
    if not isinstance(doc, dict):
        raise AuthError(f"the protected resource metadata at {where} is not a JSON object")
    resource = doc.get("resource")
    if not isinstance(resource, str) or not resource:
        raise AuthError(f"the protected resource metadata at {where} names no `resource`")
    if not resource_matches(resource, server_url):
        raise AuthError(
            f"the protected resource metadata at {where} is for {resource!r}, not for this server ({server_url}):"
            " refusing to sign in for another resource"
        )
    servers = doc.get("authorization_servers")
    if not isinstance(servers, list) or not servers or not all(_is_http_url(s) for s in servers):
        raise AuthError(f"the protected resource metadata at {where} names no authorization server")
    return ProtectedResource(resource, list(servers), _strings(doc.get("scopes_supported")), where)


def resource_matches(resource: str, server_url: str) -> bool:
    """Whether a PRM `resource` identifies the server at `server_url`: the same scheme, host and
    port (scheme and host compared without case), and the server's path is the resource's path or
    lies under it (RFC 9728 3.3; a root document names the origin)."""
    r, s = urlsplit(resource), urlsplit(server_url)
    if r.scheme.lower() not in ("http", "https") or r.fragment:
        return False
    if (r.scheme.lower(), (r.hostname or "").lower(), _port(r)) != (
        s.scheme.lower(),
        (s.hostname or "").lower(),
        _port(s),
    ):
        return False
    base = r.path.rstrip("/")
    path = s.path.rstrip("/")
    return path == base or path.startswith(base + "/")


def as_metadata_urls(issuer: str) -> list[str]:
    """The metadata URLs of an issuer, in the order MCP clients must try them."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")

    def at(p: str) -> str:
        return urlunsplit((parts.scheme, parts.netloc, p, "", ""))

    if not path:
        return [at("/.well-known/oauth-authorization-server"), at("/.well-known/openid-configuration")]
    return [
        at("/.well-known/oauth-authorization-server" + path),
        at("/.well-known/openid-configuration" + path),
        at(path + "/.well-known/openid-configuration"),
    ]


def check_as_metadata(doc: object, issuer: str | None, where: str) -> AuthServer:
    """The document read from `where` for `issuer` (None: a configured metadata URL, whose own
    issuer is taken), if its issuer is identical and it names a token endpoint."""
    if not isinstance(doc, dict):
        raise AuthError(f"the authorization server metadata at {where} is not a JSON object")
    got = doc.get("issuer")
    if not isinstance(got, str) or not got:
        raise AuthError(f"the authorization server metadata at {where} names no issuer")
    if issuer is not None and got != issuer:
        raise AuthError(
            f"the authorization server metadata at {where} says its issuer is {got!r}, not {issuer!r}:"
            " not using it (RFC 8414 3.3)"
        )
    token = doc.get("token_endpoint")
    if not _is_http_url(token):
        raise AuthError(f"the authorization server metadata at {where} names no token endpoint")
    assert isinstance(token, str)
    auth = doc.get("authorization_endpoint")
    reg = doc.get("registration_endpoint")
    return AuthServer(
        issuer=got,
        token_endpoint=token,
        authorization_endpoint=auth if _is_http_url(auth) else None,
        registration_endpoint=reg if _is_http_url(reg) else None,
        scopes_supported=_strings(doc.get("scopes_supported")),
        code_challenge_methods=_strings(doc.get("code_challenge_methods_supported")),
        token_auth_methods=_strings(doc.get("token_endpoint_auth_methods_supported")),
        token_auth_signing_algs=_strings(doc.get("token_endpoint_auth_signing_alg_values_supported")),
        grant_types=_strings(doc.get("grant_types_supported")),
        iss_parameter_supported=doc.get("authorization_response_iss_parameter_supported") is True,
        client_id_metadata_document_supported=doc.get("client_id_metadata_document_supported") is True,
        raw=dict(doc),
    )


def _port(parts: Any) -> int | None:
    try:
        port: int | None = parts.port
    except ValueError:
        return None
    if port is None:
        return {"http": 80, "https": 443}.get(parts.scheme.lower())
    return port


def _is_http_url(value: object) -> bool:
    if not isinstance(value, str):
        return False
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def _strings(value: object) -> list[str] | None:
    if not isinstance(value, list):
        return None
    return [v for v in value if isinstance(v, str)]
