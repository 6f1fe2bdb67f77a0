"""How mcpx authenticates to a token endpoint (OAuth 2.1 2.4, RFC 7523 `private_key_jwt`).

The methods: `client_secret_basic`, `client_secret_post`, `none` (a public client: its id in the
form), and `private_key_jwt` (a signed assertion, SEP-1046's recommended form for client
credentials). authlib encodes each; choosing one from what the server lists is ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from authlib.oauth2.auth import encode_client_secret_basic

from .auth_errors import AuthError

JWT_BEARER_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
SIGNING_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


@dataclass(frozen=True)
class Client:
    """The client as one authorization server knows it."""

    client_id: str
    client_secret: str | None = None
    method: str = "none"  # its token endpoint auth method
    private_key: str | None = None  # PEM, for private_key_jwt
    signing_algorithm: str = "RS256"


def choose(supported: list[str] | None, *, has_secret: bool, has_key: bool) -> str:
    """The method to use with a client we hold these credentials for: a key where the server takes
    `private_key_jwt`, a secret the way it takes one, else none. An absent list means the server's
    default, client_secret_basic (RFC 8414 2)."""
    offered = supported if supported is not None else ["client_secret_basic"]
    if has_key and "private_key_jwt" in offered:
        return "private_key_jwt"
    if has_secret:
        for method in ("client_secret_basic", "client_secret_post"):
            if method in offered:
                return method
    if "none" in offered or not (has_secret or has_key):
        return "none"
    raise AuthError(
        "the authorization server takes none of the ways mcpx could authenticate with these credentials"
        f" (it lists {', '.join(offered)})"
    )


def for_registration(supported: list[str] | None) -> str:
    """What a dynamically registered client asks to use: a public client where allowed (mcpx is a
    native app with a loopback redirect), else a secret the way the server takes it."""
    offered = supported if supported is not None else ["client_secret_basic"]
    for method in ("none", "client_secret_basic", "client_secret_post"):
        if method in offered:
            return method
    return offered[0] if offered else "none"


def apply(client: Client, form: dict[str, str], headers: dict[str, str], audience: str) -> None:
    """Authenticate a token request: fill its form and headers. `audience` is the authorization
    server's issuer (what a client assertion is addressed to)."""
    method = client.method
    if method == "client_secret_basic":
        if client.client_secret is None:
            raise AuthError("client_secret_basic needs a client secret (oauth.clientSecret)")
        _, out, _ = encode_client_secret_basic(client, "POST", "", dict(headers), "")
        headers["Authorization"] = out["Authorization"]
    elif method == "client_secret_post":
        if client.client_secret is None:
            raise AuthError("client_secret_post needs a client secret (oauth.clientSecret)")
        form["client_id"] = client.client_id
        form["client_secret"] = client.client_secret
    elif method == "private_key_jwt":
        form["client_id"] = client.client_id
        form["client_assertion_type"] = JWT_BEARER_ASSERTION
        form["client_assertion"] = assertion(client, audience)
    else:
        form["client_id"] = client.client_id


def assertion(client: Client, audience: str) -> str:
    """A client assertion (RFC 7523 3): iss and sub the client id, aud the authorization server."""
    if client.private_key is None:
        raise AuthError("private_key_jwt needs a private key (oauth.privateKey or oauth.privateKeyFile)")
    from authlib.oauth2.rfc7523 import private_key_jwt_sign  # JOSE is loaded only by those who sign

    return str(
        private_key_jwt_sign(
            load_key(client.private_key, client.signing_algorithm),
            client.client_id,
            audience,
            alg=client.signing_algorithm,
        )
    )


def load_key(pem: str, algorithm: str) -> Any:
    """The PEM private key as a JOSE key of the algorithm's family."""
    from joserfc import jwk

    if algorithm not in SIGNING_ALGORITHMS:
        raise AuthError(f"signing algorithm {algorithm!r} is not one of {', '.join(SIGNING_ALGORITHMS)}")
    family: Any = jwk.RSAKey if algorithm[:2] in ("RS", "PS") else jwk.ECKey if algorithm[:2] == "ES" else jwk.OKPKey
    try:
        return family.import_key(pem)
    except (ValueError, TypeError) as exc:
        raise AuthError(f"the private key is not a PEM {family.key_type} key for {algorithm}: {exc}") from None
