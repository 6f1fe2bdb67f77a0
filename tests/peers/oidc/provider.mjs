#!/usr/bin/env node
// oidc-provider (panva's certified OpenID provider, pinned in package.json) as the authorization
// server of mcpx's real sign-in test (tests/test_upstream_oidc.py). Configured as its docs say a
// deployment does, not bent to mcpx:
//
//   node provider.mjs --resource URL [--access-ttl S] [--ready-file PATH] [--log PATH]
//                     [--client ID:SECRET]
//
// - dynamic client registration (RFC 7591), open (no initial access token);
// - PKCE required for every client (S256: the only method oidc-provider 9 has);
// - resource indicators (RFC 8707): the one resource server `--resource` (scopes mcp:read and
//   mcp:write, declared there and not in `scopes`, as the docs ask), JWT access tokens signed RS256
//   with its audience the resource, living `--access-ttl` seconds;
// - refresh tokens for `offline_access` (rotated for public clients: the default policy);
// - the development login and consent pages (any name, any password);
// - `--client ID:SECRET`: also a pre-registered confidential client (client_secret_basic), whose
//   redirect URIs are any loopback one (what a native app's are).
//
// It listens on 127.0.0.1, a free port; the issuer is http://127.0.0.1:PORT, written to
// `--ready-file` when it listens. `--log` gets one JSON line per registration, authorization and
// token request (grant type, client auth method, resource, scope, outcome: never a token).
// `GET /control/tokens` lists every access token, refresh token, client secret and registration
// access token it issued (for the test that searches mcpx's outputs for them).

import { appendFileSync, renameSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';

import * as jose from 'jose';
import Provider, { errors } from 'oidc-provider';

const { values: args } = parseArgs({
  options: {
    resource: { type: 'string', multiple: true, default: [] },
    'access-ttl': { type: 'string', default: '3600' },
    'ready-file': { type: 'string' },
    log: { type: 'string' },
    client: { type: 'string' },
  },
});

const resources = new Set(args.resource);
const accessTtl = Number(args['access-ttl']);
const issued = []; // every secret this provider handed out (GET /control/tokens)

function log(entry) {
  if (args.log) appendFileSync(args.log, `${JSON.stringify({ t: Date.now() / 1000, ...entry })}\n`);
}

const { privateKey } = await jose.generateKeyPair('RS256', { extractable: true });
const signingKey = { ...(await jose.exportJWK(privateKey)), use: 'sig', alg: 'RS256', kid: 'test-rs256' };

const server = createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const clients = [];
if (args.client) {
  const [clientId, clientSecret] = args.client.split(':');
  clients.push({
    client_id: clientId,
    client_secret: clientSecret,
    application_type: 'native',
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
    // A native app's loopback redirect: oidc-provider matches any port of it (RFC 8252 7.3).
    redirect_uris: ['http://127.0.0.1/oauth/callback'],
  });
}

const provider = new Provider(issuer, {
  clients,
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // The one resource of the request (the authorization code's) when the token request names none.
      defaultResource: async (ctx, client, oneOf) => oneOf,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (ctx, resourceIndicator) => {
        if (!resources.has(resourceIndicator)) throw new errors.InvalidTarget();
        return {
          scope: 'mcp:read mcp:write',
          accessTokenTTL: accessTtl,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  findAccount: async (ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  ttl: {
    AccessToken: (ctx, token) => token.resourceServer?.accessTokenTTL ?? accessTtl,
    AuthorizationCode: 60,
    Grant: 24 * 3600,
    IdToken: 3600,
    Interaction: 600,
    RefreshToken: 24 * 3600,
    Session: 24 * 3600,
  },
});

// What each request of interest did, after oidc-provider answered it.
provider.use(async (ctx, next) => {
  await next();
  const route = ctx.oidc?.route;
  if (route === 'registration' && ctx.status === 201) {
    const b = ctx.body;
    for (const s of [b.client_secret, b.registration_access_token]) if (s) issued.push(s);
    log({
      route,
      status: ctx.status,
      client_id: b.client_id,
      application_type: b.application_type,
      auth_method: b.token_endpoint_auth_method,
      redirect_uris: b.redirect_uris,
      grant_types: b.grant_types,
    });
  } else if (route === 'registration') {
    log({ route, status: ctx.status, error: ctx.body?.error, error_description: ctx.body?.error_description });
  } else if (route === 'authorization' || route === 'resume') {
    const p = ctx.oidc.params ?? {};
    log({
      route,
      status: ctx.status,
      location: ctx.status === 303 || ctx.status === 302 ? new URL(ctx.response.get('location'), issuer).pathname : undefined,
      scope: p.scope,
      resource: p.resource,
      code_challenge_method: p.code_challenge_method,
      prompt: p.prompt,
      error: ctx.body?.error,
    });
  } else if (route === 'token') {
    const p = ctx.oidc.params ?? {};
    const b = ctx.body ?? {};
    if (ctx.status === 200) for (const s of [b.access_token, b.refresh_token]) if (s) issued.push(s);
    log({
      route,
      status: ctx.status,
      grant_type: p.grant_type,
      client_auth: ctx.oidc.client?.clientAuthMethod,
      resource: p.resource,
      scope: b.scope,
      expires_in: b.expires_in,
      refresh_token: Boolean(b.refresh_token),
      error: b.error,
      error_description: b.error_description,
    });
  }
});

provider.on('server_error', (ctx, err) => log({ route: 'server_error', error: String(err) }));

const app = provider.callback();
server.on('request', (req, res) => {
  if (req.url === '/control/tokens') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ issued }));
    return;
  }
  app(req, res);
});

if (args['ready-file']) {
  const tmp = `${args['ready-file']}.tmp`;
  writeFileSync(tmp, issuer);
  renameSync(tmp, args['ready-file']);
}
process.stdout.write(`${issuer}\n`);
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
