"""The OAuth 2.1 client of HTTP upstreams (MCP authorization, 2025-11-25 and 2026-07-28).

Pure protocol pieces, free of I/O and unit-tested: `challenge` (WWW-Authenticate), `metadata`
(protected-resource and authorization-server metadata: where to look, what to accept), `scopes`,
`authorize` (PKCE, the authorization URL, the redirect's checks), `client_auth` (token endpoint
authentication), `tokens`, `registration` (RFC 7591 bodies), `credentials` (what is kept per
upstream), `seal` (how it is encrypted at rest).

The I/O around them: `fetch` (HTTP to the servers), `discover`, `grants` (token requests),
`upstream_auth` (one upstream's sign-in state: refresh, step-up, login), `vault` (sealed rows in the
store), `desk` (every upstream's auth, the pending logins, the loopback callback listeners).
"""
