"""One HTTP upstream's OAuth state: its tokens, and what to do on a 401 or a 403.

The transport asks `token()` before each request (a token due soon is refreshed first; concurrent
callers share one refresh), and hands a 401 to `unauthorized()` and a 403 to `forbidden()`, which
say whether a new token is there to retry with. When none can be had without a person, the upstream
`needs_login` (an `upstream.needs_login` event says so once) until `mcpx login NAME` completes a
sign-in (`start_login`, then `complete` from the redirect back).

- A 401 on a signed-in server: the server's metadata is read again (its authorization server may
  have changed: then the old registration and tokens are dropped, SEP-2352), then one refresh.
- A 403 `insufficient_scope`: step-up to the union of the scopes asked before and the challenged
  ones; after MAX_STEP_UPS sign-ins that the server still answers so, mcpx stops asking (a retry
  limit, MCP "Step-Up Authorization Flow").
- `client_credentials`: tokens are got and renewed with no person at all (SEP-1046).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

from ...config.oauth import OAuthConfig
from ...events.bus import Event
from . import authorize, client_auth, discover, grants, scopes
from .auth_errors import AuthError
from .authorize import LoginRequest
from .challenge import Challenge, bearer
from .client_auth import Client
from .credentials import Credentials
from .metadata import AuthServer, ProtectedResource
from .tokens import TokenSet
from .vault import Vault

log = logging.getLogger("mcpx.upstream.auth")

MAX_STEP_UPS = 2  # sign-ins in a row that a 403 insufficient_scope may answer before mcpx stops asking
LOGIN_TTL_S = 600.0  # a started sign-in waits this long for the browser to come back
SHARED_POLL_S = 5.0  # while it needs a sign-in, how often the store is read (another daemon may sign in)
OnEvent = Callable[[Event], Awaitable[Any]]


class Redirects:
    """Where sign-ins come back to (the desk, desk.py): a redirect URI for an upstream, and the
    pending logins by `state`."""

    async def redirect_uri(self, auth: UpstreamAuth) -> str:
        raise NotImplementedError

    def pending(self, state: str, auth: UpstreamAuth) -> None:
        raise NotImplementedError

    def done(self, state: str) -> None:
        raise NotImplementedError


@dataclass
class Login:
    """A sign-in between its authorization URL and the browser's return."""

    request: LoginRequest
    server: AuthServer
    client: Client
    client_source: str
    by: str
    expires: float
    done: anyio.Event = field(default_factory=anyio.Event)
    error: str | None = None


class UpstreamAuth:
    def __init__(
        self,
        name: str,
        server_url: str,
        oauth: OAuthConfig | None,
        vault: Vault,
        http: httpx.AsyncClient,
        redirects: Redirects,
        on_event: OnEvent,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self.server_url = server_url
        self.oauth = oauth or OAuthConfig()
        self.vault = vault
        self.http = http
        self.redirects = redirects
        self.on_event = on_event
        self.clock = clock
        self.creds: Credentials | None = None
        self.loaded = False
        self.challenge: Challenge | None = None  # the last 401/403 Bearer challenge
        self.needs_login: str | None = None  # why a person must sign in now
        self.failure: str | None = None  # why the last automatic attempt failed (refresh, step-up, client credentials)
        self.wanted: list[str] = []  # the scopes the next sign-in asks for (step-up: a union)
        self.step_ups = 0
        self.login: Login | None = None  # the sign-in waiting for the browser
        self.last_login: Login | None = None  # the latest one started, waiting or ended
        self._lock = anyio.Lock()  # one refresh (or token request) at a time, shared by every caller
        self._signed_in = anyio.Event()
        self._registered: dict[tuple[str, str], Client] = {}  # (issuer, redirect URI) -> a client registered now

    # ---- what the transport asks ----------------------------------------------------------
    @property
    def grant_type(self) -> str:
        return self.oauth.grantType

    async def token(self) -> str | None:
        """The access token to send now, refreshed first when it is due (None: send none)."""
        if not self.loaded:
            await self._load()
        tokens = self.creds.tokens if self.creds is not None else None
        if tokens is None:
            return None
        if tokens.due(self.clock()):
            async with self._lock:
                current = self._tokens()
                if current is not None and current.access_token == tokens.access_token:
                    await self._renew(current, why="it expires")
            tokens = self._tokens()
            if tokens is None or tokens.expired(self.clock()):
                return None
        return tokens.access_token

    def succeeded(self) -> None:
        """A request with our token was answered: a step-up that worked ends the count."""
        self.step_ups = 0

    async def unauthorized(self, header: str | None, sent: str | None) -> bool:
        """A 401. True when there is a new token to retry with."""
        found = bearer(header)
        if found is not None:
            self.challenge = found
        async with self._lock:
            if self._fresh_since(sent):
                return True
            if await self._adopt_stored(sent):
                return True
            current = self._tokens()
            had_tokens = current is not None
            moved = await self._moved() if current is not None else None
            if moved is None and current is not None and await self._renew(current, why="the server refused the token"):
                return True
            if self.grant_type == "client_credentials":
                return await self._client_credentials(by="mcpx")
            if moved is not None:
                await self._need_login(f"it moved to the authorization server {moved}")
            else:
                await self._need_login(
                    "its sign-in is no longer accepted" if had_tokens else "the server asks for a sign-in"
                )
            return False

    async def forbidden(self, header: str | None, sent: str | None) -> bool:
        """A 403. True when there is a new token with more scope to retry with; False leaves the
        403 to the caller (not a scope problem, or mcpx stopped asking)."""
        found = bearer(header)
        if found is None or found.error != "insufficient_scope":
            return False
        self.challenge = found
        async with self._lock:
            if self._fresh_since(sent):
                return True
            asked = self.creds.scopes if self.creds is not None else []
            held = self._tokens()
            granted = held.scopes if held is not None else None
            wanted = scopes.union(asked or (granted or []), found.scopes)
            if scopes.covers(asked or granted, found.scopes):
                self.step_ups += 1  # it was asked for and granted, and still refused
            if self.step_ups >= MAX_STEP_UPS:
                self.failure = (
                    f"the server still refuses with insufficient_scope ({' '.join(found.scopes or [])}) after"
                    f" {self.step_ups} sign-ins that asked for it: mcpx stops asking"
                )
                log.warning("upstream %s: %s", self.name, self.failure)
                return False
            self.wanted = wanted
            if self.grant_type == "client_credentials":
                return await self._client_credentials(by="mcpx")
            await self._need_login(f"the server needs more scope ({' '.join(found.scopes or []) or 'unnamed'})")
            return False

    def refusal(self) -> str:
        """What a request gets when no token could be had."""
        if self.needs_login is not None:
            return f"upstream {self.name!r} needs a sign-in ({self.needs_login}): run `mcpx login {self.name}`"
        return f"upstream {self.name!r}: {self.failure or 'its authorization failed'}"

    # ---- waiting for a person --------------------------------------------------------------
    async def wait_signed_in(self) -> None:
        """Until a sign-in completes here, or another daemon sharing the store signed in."""
        while self.needs_login is not None:
            event = self._signed_in
            with anyio.move_on_after(SHARED_POLL_S):
                await event.wait()
                return
            async with self._lock:
                held = self._tokens()
                await self._adopt_stored(held.access_token if held is not None else None)

    # ---- signing in -------------------------------------------------------------------------
    async def start_login(self, by: str) -> Login:
        """Discover, register, and make the authorization URL of a new sign-in (client credentials:
        get a token at once, and the login is done)."""
        if not self.loaded:
            await self._load()
        if self.grant_type == "client_credentials":
            login = Login(_no_request(self), _no_server(), Client(self.oauth.clientId or ""), "config", by, 0.0)
            async with self._lock:
                if not await self._client_credentials(by=by):
                    login.error = self.failure
            login.done.set()
            self.last_login = login
            return login
        prm, server = await self._discover()
        redirect_uri = await self.redirects.redirect_uri(self)
        wanted = self._login_scopes(prm, server)
        client, source = await self._client(server, redirect_uri)
        request = authorize.request(server, client.client_id, redirect_uri, prm.resource, wanted)
        if self.login is not None:
            self.redirects.done(self.login.request.state)
        login = Login(request, server, client, source, by, self.clock() + LOGIN_TTL_S)
        self.login = self.last_login = login
        self.redirects.pending(request.state, self)
        log.info("upstream %s: sign-in started by %s at %s", self.name, by, server.issuer)
        return login

    async def complete(self, query: dict[str, str]) -> Login:
        """The browser came back with `query` (its `state` named this upstream's login)."""
        login = self.login
        if login is None or login.request.state != query.get("state"):
            raise AuthError("this sign-in is not (or no longer) pending: start it again with `mcpx login`")
        self.redirects.done(login.request.state)
        self.login = None
        try:
            if self.clock() > login.expires:
                raise AuthError("the sign-in took too long and expired: start it again")
            code = authorize.code_of(query, login.request, login.server.iss_parameter_supported)
            tokens = await grants.exchange_code(
                self.http,
                login.server,
                login.client,
                code,
                login.request.verifier,
                login.request.redirect_uri,
                login.request.resource,
                login.request.scopes,
            )
            async with self._lock:
                await self._signed(
                    login.server,
                    login.request.resource,
                    login.client,
                    login.client_source,
                    tokens,
                    login.request.scopes,
                    login.by,
                    login.request.redirect_uri,
                )
        except AuthError as exc:
            login.error = str(exc)
            log.warning("upstream %s: sign-in failed: %s", self.name, exc)
        login.done.set()
        return login

    async def logout(self, by: str) -> None:
        """Forget the tokens (and the registration): the next 401 needs a sign-in again."""
        async with self._lock:
            self.creds = None
            self.loaded = True
            self.wanted = []
            self.step_ups = 0
            event = Event("upstream.signed_out", {"upstream": self.name}, by=by)
            await self.vault.forget(self.name, [event])
            if self.login is not None:
                self.redirects.done(self.login.request.state)
                self.login = None

    def summary(self) -> dict[str, Any]:
        """What /v1 shows of it: never a token or a secret."""
        creds = self.creds
        tokens = creds.tokens if creds is not None else None
        return {
            "grantType": self.grant_type,
            "signedIn": tokens is not None,
            "needsLogin": self.needs_login,
            "error": self.failure,
            "issuer": creds.issuer if creds is not None else None,
            "clientId": (
                creds.client.client_id if creds is not None and creds.client is not None else self.oauth.clientId
            ),
            "scopes": (tokens.scopes if tokens is not None else None),
            "expiresMs": int(tokens.expires_at * 1000)
            if tokens is not None and tokens.expires_at is not None
            else None,
            "refreshable": tokens is not None and tokens.refresh_token is not None,
            "by": creds.by if creds is not None and tokens is not None else None,
            "signedInMs": creds.signed_in_ms if creds is not None and tokens is not None else None,
            "loginPending": self.login is not None,
        }

    # ---- inside ------------------------------------------------------------------------------
    def _tokens(self) -> TokenSet | None:
        return self.creds.tokens if self.creds is not None else None

    def _fresh_since(self, sent: str | None) -> bool:
        """Another caller renewed the token after `sent` went out: retry with the new one."""
        current = self._tokens()
        return current is not None and current.access_token != sent and not current.expired(self.clock())

    async def _load(self) -> None:
        stored = await self.vault.load(self.name)
        if stored is not None and stored.server_url != self.server_url:
            log.info(
                "upstream %s: its stored sign-in was for %s, not %s: not used",
                self.name,
                stored.server_url,
                self.server_url,
            )
            stored = None
        self.creds = stored
        self.loaded = True

    async def _adopt_stored(self, sent: str | None) -> bool:
        """Tokens another daemon on the shared store (or a sign-in here) wrote since `sent` went out."""
        stored = await self.vault.load(self.name)
        if stored is None or stored.server_url != self.server_url or stored.tokens is None:
            return False
        if stored.tokens.access_token == sent or stored.tokens.expired(self.clock()):
            return False
        self.creds = stored
        self._now_signed_in()
        return True

    async def _renew(self, current: TokenSet, why: str) -> bool:
        """A new token for `current`: refreshed, or (client credentials) asked for again. Holds the lock."""
        creds = self.creds
        if creds is None:
            return False
        if self.grant_type == "client_credentials":
            return await self._client_credentials(by=creds.by or "mcpx")
        if current.refresh_token is None:
            return False
        try:
            server = await self._server_for(creds.issuer)
            client = self._client_of(creds, server)
            tokens = await grants.refresh(self.http, server, client, current, creds.resource)
        except grants.RefreshRefused as exc:
            log.info("upstream %s: refresh refused (%s): a sign-in is needed", self.name, exc)
            self.creds = creds.with_tokens(None)
            await self.vault.save(self.name, self.creds)
            await self._need_login("its refresh token was refused")
            return False
        except AuthError as exc:
            self.failure = f"refreshing its token failed: {exc}"
            log.warning("upstream %s: %s", self.name, self.failure)
            return False
        self.creds = creds.with_tokens(tokens)
        await self.vault.save(self.name, self.creds)
        self.failure = None
        log.info("upstream %s: token refreshed (%s)", self.name, why)
        return True

    async def _moved(self) -> str | None:
        """The authorization server the server names now, when it is not the one we are registered
        with; the registration and tokens are then dropped (credentials are bound to their issuer)."""
        creds = self.creds
        if creds is None or self.oauth.authServerMetadataUrl is not None:
            return None
        try:
            prm = await discover.resource(self.http, self.server_url, self.challenge)
        except AuthError:
            return None
        if creds.issuer in prm.authorization_servers:
            return None
        moved = prm.authorization_servers[0]
        log.warning("upstream %s: it now names the authorization server %s (was %s): its sign-in there is dropped",
                    self.name, moved, creds.issuer)  # fmt: skip
        self.creds = None
        self.wanted = []
        await self.vault.forget(self.name)
        return moved

    async def _client_credentials(self, by: str) -> bool:
        """A token with no person (SEP-1046). Holds the lock."""
        try:
            prm, server = await self._discover()
            client = self._configured_client(server)
            if client is None:
                raise AuthError("client credentials need `oauth.clientId`")
            wanted = self.wanted or scopes.initial(
                self.oauth.scope_list, self.challenge.scopes if self.challenge else None, prm.scopes_supported
            )
            tokens = await grants.client_credentials(self.http, server, client, prm.resource, wanted)
        except AuthError as exc:
            self.failure = f"getting a token with client credentials failed: {exc}"
            log.warning("upstream %s: %s", self.name, self.failure)
            return False
        await self._signed(server, prm.resource, None, "config", tokens, wanted, by, "")
        return True

    async def _signed(
        self,
        server: AuthServer,
        resource: str,
        registered: Client | None,
        source: str,
        tokens: TokenSet,
        asked: list[str],
        by: str,
        redirect_uri: str,
    ) -> None:
        was_signed_in = self.creds is not None and self.creds.tokens is not None
        self.creds = Credentials(
            server_url=self.server_url,
            issuer=server.issuer,
            resource=resource,
            client=registered if source == "registration" else None,
            client_source=source,
            redirect_uri=redirect_uri,
            tokens=tokens,
            scopes=list(asked),
            by=by,
            signed_in_ms=int(self.clock() * 1000),
            grant_type=self.grant_type,
        )
        self.loaded = True
        event = Event(
            "upstream.signed_in",
            {
                "upstream": self.name,
                "grantType": self.grant_type,
                "issuer": server.issuer,
                "scopes": tokens.scopes or [],
                "expiresMs": int(tokens.expires_at * 1000) if tokens.expires_at is not None else None,
            },
            by=by,
        )
        # A person's sign-in is always told; tokens mcpx renews alone only when they were missing.
        await self.vault.save(self.name, self.creds, [event] if by != "mcpx" or not was_signed_in else [])
        self.failure = None
        self._now_signed_in()
        log.info(
            "upstream %s: signed in at %s (scopes: %s)",
            self.name,
            server.issuer,
            " ".join(tokens.scopes or []) or "none",
        )

    def _now_signed_in(self) -> None:
        self.needs_login = None
        self._signed_in.set()
        self._signed_in = anyio.Event()

    async def _need_login(self, why: str) -> None:
        if self.needs_login is not None:
            return
        self.needs_login = why
        log.warning("upstream %s needs a sign-in (%s): run `mcpx login %s`", self.name, why, self.name)
        await self.on_event(
            Event(
                "upstream.needs_login",
                {
                    "upstream": self.name,
                    "reason": why,
                    "scopes": self.wanted
                    or (self.challenge.scopes if self.challenge and self.challenge.scopes else []),
                    "login": f"mcpx login {self.name}",
                },
                by="mcpx",
            )
        )

    async def _discover(self) -> tuple[ProtectedResource, AuthServer]:
        if self.oauth.authServerMetadataUrl is not None:
            server = await discover.auth_server_at(self.http, self.oauth.authServerMetadataUrl)
            try:
                prm = await discover.resource(self.http, self.server_url, self.challenge)
            except AuthError:
                prm = ProtectedResource(self.server_url, [server.issuer])
            return prm, server
        prm = await discover.resource(self.http, self.server_url, self.challenge)
        creds = self.creds
        issuer = prm.authorization_servers[0]
        if creds is not None and creds.issuer in prm.authorization_servers:
            issuer = creds.issuer  # the one it is registered with, among several
        return prm, await discover.auth_server(self.http, issuer)

    async def _server_for(self, issuer: str) -> AuthServer:
        if self.oauth.authServerMetadataUrl is not None:
            return await discover.auth_server_at(self.http, self.oauth.authServerMetadataUrl)
        return await discover.auth_server(self.http, issuer)

    def _login_scopes(self, prm: ProtectedResource, server: AuthServer) -> list[str]:
        if self.wanted:
            wanted = self.wanted
        else:
            wanted = scopes.initial(
                self.oauth.scope_list,
                self.challenge.scopes if self.challenge is not None else None,
                prm.scopes_supported,
            )
            if self.creds is not None and self.creds.scopes:
                wanted = scopes.union(self.creds.scopes, wanted)
        return scopes.with_offline_access(wanted, server.scopes_supported)

    def _private_key(self) -> str | None:
        if self.oauth.privateKey is not None:
            return self.oauth.privateKey
        if self.oauth.privateKeyFile is not None:
            try:
                return Path(self.oauth.privateKeyFile).read_text()
            except OSError as exc:
                raise AuthError(
                    f"cannot read oauth.privateKeyFile {self.oauth.privateKeyFile}: {exc.strerror}"
                ) from None
        return None

    def _configured_client(self, server: AuthServer) -> Client | None:
        if self.oauth.clientId is None:
            return None
        key = self._private_key()
        method = client_auth.choose(
            server.token_auth_methods, has_secret=self.oauth.clientSecret is not None, has_key=key is not None
        )
        return Client(self.oauth.clientId, self.oauth.clientSecret, method, key, self.oauth.signingAlgorithm)

    def _client_of(self, creds: Credentials, server: AuthServer) -> Client:
        """The client the stored tokens were got with."""
        if creds.client_source == "registration" and creds.client is not None:
            return creds.client
        if creds.client_source == "metadata-document" and self.oauth.clientMetadataUrl is not None:
            key = self._private_key()
            return Client(
                self.oauth.clientMetadataUrl,
                None,
                "private_key_jwt" if key else "none",
                key,
                self.oauth.signingAlgorithm,
            )
        configured = self._configured_client(server)
        if configured is None:
            raise AuthError("the client these tokens were got with is no longer configured")
        return configured

    async def _client(self, server: AuthServer, redirect_uri: str) -> tuple[Client, str]:
        """Registration, in MCP's order: pre-registered, a client ID metadata document, dynamic."""
        configured = self._configured_client(server)
        if configured is not None:
            return configured, "config"
        if self.oauth.clientMetadataUrl is not None and server.client_id_metadata_document_supported:
            key = self._private_key()
            method = "private_key_jwt" if key is not None else "none"
            return Client(
                self.oauth.clientMetadataUrl, None, method, key, self.oauth.signingAlgorithm
            ), "metadata-document"
        creds = self.creds
        if (
            creds is not None
            and creds.client is not None
            and creds.client_source == "registration"
            and creds.issuer == server.issuer
            and creds.redirect_uri == redirect_uri
        ):
            return creds.client, "registration"
        held = self._registered.get((server.issuer, redirect_uri))
        if held is not None:
            return held, "registration"
        client = await grants.register(self.http, server, redirect_uri)
        self._registered[(server.issuer, redirect_uri)] = client
        log.info("upstream %s: registered with %s as client %s", self.name, server.issuer, client.client_id)
        return client, "registration"


def _no_request(auth: UpstreamAuth) -> LoginRequest:
    return LoginRequest("", "", "", "", "", auth.server_url, [], "")


def _no_server() -> AuthServer:
    return AuthServer(issuer="", token_endpoint="")
