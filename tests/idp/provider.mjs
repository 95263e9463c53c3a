// Test OpenID Provider (npm `oidc-provider` 9.x) issuing JWT access tokens via client credentials,
// and to people (`sidecar login`) via the authorization code flow with PKCE and the device flow,
// with refresh tokens; its interactions (login, consent) are approved at once for the configured
// person, so `person.mjs` can play the person's browser. Plus a token-fetching helper.
//
// Usage:
//   SQLTUNNEL_IDP_MODULES=/path/to/node_modules node provider.mjs serve CONFIG_JSON_PATH
//   node provider.mjs token ISSUER CLIENT_ID CLIENT_SECRET RESOURCE
//
// `serve` prints exactly one line `ready <issuer>` on stdout once listening; everything
// else (oidc-provider notices, errors) goes to stderr. Public keys: <issuer>/jwks,
// discovery: <issuer>/.well-known/openid-configuration, token endpoint: <issuer>/token.
// `token` needs only Node's global fetch, not the oidc-provider package.

import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

// ---------------------------------------------------------------------------
// token mode: POST grant_type=client_credentials to the token endpoint.
// ---------------------------------------------------------------------------
async function fetchToken(issuer, clientId, clientSecret, resource) {
  // Discover the token endpoint rather than assuming its path.
  const base = issuer.replace(/\/$/, '');
  const discovery = await fetch(`${base}/.well-known/openid-configuration`);
  if (!discovery.ok) throw new Error(`discovery failed: HTTP ${discovery.status}`);
  const { token_endpoint: tokenEndpoint } = await discovery.json();

  // client_secret_basic: RFC 6749 section 2.3.1 form-encodes id and secret first.
  const enc = (s) => encodeURIComponent(s).replace(/%20/g, '+');
  const basic = Buffer.from(`${enc(clientId)}:${enc(clientSecret)}`).toString('base64');
  const res = await fetch(tokenEndpoint, {
    method: 'POST',
    headers: {
      authorization: `Basic ${basic}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams({ grant_type: 'client_credentials', resource }),
  });
  const text = await res.text();
  let body;
  try { body = JSON.parse(text); } catch { body = undefined; }
  if (!res.ok || !body?.access_token) {
    throw new Error(`token request failed: HTTP ${res.status} ${text}`);
  }
  return body.access_token;
}

// ---------------------------------------------------------------------------
// serve mode
// ---------------------------------------------------------------------------

// oidc-provider 9 is ESM-only, and ESM imports ignore NODE_PATH, so resolve the
// package entry inside $SQLTUNNEL_IDP_MODULES and import it by file URL
// (without the variable, a plain import from the script's own location).
async function loadProvider() {
  const modules = process.env.SQLTUNNEL_IDP_MODULES;
  if (!modules) return import('oidc-provider');
  const require = createRequire(path.join(path.resolve(modules), 'noop.js'));
  const entry = require.resolve('oidc-provider');
  return import(pathToFileURL(entry).href);
}

// Loads the private JWKS from `file`, or generates a fresh one (RS256, ES256,
// EdDSA, each with a random kid) and writes it there.
function loadOrCreateKeys(file) {
  if (fs.existsSync(file)) return JSON.parse(fs.readFileSync(file, 'utf8'));
  const make = (type, options, alg) => {
    const { privateKey } = crypto.generateKeyPairSync(type, options);
    const jwk = privateKey.export({ format: 'jwk' });
    return { ...jwk, kid: crypto.randomBytes(12).toString('base64url'), alg, use: 'sig' };
  };
  const jwks = {
    keys: [
      make('rsa', { modulusLength: 2048 }, 'RS256'),
      make('ec', { namedCurve: 'P-256' }, 'ES256'),
      make('ed25519', {}, 'EdDSA'),
    ],
  };
  fs.writeFileSync(file, JSON.stringify(jwks, null, 2), { mode: 0o600 });
  return jwks;
}

async function serve(configPath) {
  // oidc-provider prints its NOTICEs with console.info (stdout); keep stdout
  // for the single `ready` line.
  console.info = console.error;

  const config = JSON.parse(fs.readFileSync(configPath, 'utf8'));
  const audience = config.audience ?? 'sqltunnel';
  const resourceServers = {
    'https://sqltunnel.test/rs256': { audience, alg: 'RS256' },
    'https://sqltunnel.test/es256': { audience, alg: 'ES256' },
    'https://sqltunnel.test/eddsa': { audience, alg: 'EdDSA' },
    'https://sqltunnel.test/short': { audience, alg: 'ES256', ttl: 2 },
    'https://other.test/': { audience: 'other', alg: 'ES256' },
  };
  const claimsByClient = new Map(config.clients.map((c) => [c.client_id, c.claims ?? {}]));
  // People's clients (`sidecar login`): public, native (a loopback redirect on any port).
  const publicClients = config.public_clients ?? [];
  const refreshTtl = new Map(publicClients.map((c) => [c.client_id, c.refresh_ttl ?? 3600]));
  // Who logs in at the interactions, and the claims of their tokens.
  const person = config.person ?? { id: 'person-1', claims: {} };

  const { default: Provider, errors } = await loadProvider();
  const provider = new Provider(config.issuer, {
    jwks: loadOrCreateKeys(config.keys_file),
    clients: config.clients.map((c) => ({
      client_id: c.client_id,
      client_secret: c.client_secret,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      // Either HTTP Basic or form-post credentials are accepted for this method.
      token_endpoint_auth_method: 'client_secret_basic',
    })).concat(publicClients.map((c) => ({
      client_id: c.client_id,
      application_type: 'native',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token', 'urn:ietf:params:oauth:grant-type:device_code'],
      response_types: ['code'],
      redirect_uris: ['http://127.0.0.1/callback'],
    }))),
    findAccount: (ctx, id) => ({ accountId: id, claims: () => ({ sub: id, ...person.claims }) }),
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    issueRefreshToken: (ctx, client) => client.grantTypeAllowed('refresh_token'),
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      deviceFlow: { enabled: true },
      resourceIndicators: {
        enabled: true,
        useGrantedResource: () => true,
        // No `resource` parameter: no resource server, so an opaque token.
        defaultResource: () => undefined,
        getResourceServerInfo(ctx, resource) {
          const rs = resourceServers[resource];
          if (!rs) throw new errors.InvalidTarget(`unknown resource ${resource}`);
          return {
            scope: '',
            audience: rs.audience,
            accessTokenFormat: 'jwt',
            accessTokenTTL: rs.ttl ?? 300,
            jwt: { sign: { alg: rs.alg } },
          };
        },
      },
    },
    // Copy the client's configured claims into its access tokens. They cannot
    // override the standard ones (iss, sub, aud, exp, ...).
    extraTokenClaims(ctx, token) {
      return token.accountId ? person.claims : claimsByClient.get(token.clientId);
    },
    ttl: {
      ClientCredentials: (ctx, token) => token.resourceServer?.accessTokenTTL ?? 300,
      AccessToken: (ctx, token) => token.resourceServer?.accessTokenTTL ?? 300,
      // A login lasts its client's `refresh_ttl` from when the person logged in: a rotated
      // refresh token keeps what was left of the one it replaces.
      RefreshToken: (ctx, token, client) => ctx?.oidc?.entities?.RotatedRefreshToken?.remainingTTL
        ?? refreshTtl.get(client.clientId) ?? 3600,
    },
  });
  provider.on('server_error', (ctx, err) => console.error('server_error:', err));

  // The person approves every interaction at once: logged in as `person.id`, and every
  // scope, claim and resource asked for granted.
  async function approve(req, res) {
    const details = await provider.interactionDetails(req, res);
    const { prompt, params } = details;
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: person.id, clientId: params.client_id });
    const missing = prompt.details ?? {};
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [resource, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
      grant.addResourceScope(resource, scopes.join(' '));
    }
    const result = { login: { accountId: person.id }, consent: { grantId: await grant.save() } };
    await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
  }
  const callback = provider.callback();
  const server = http.createServer((req, res) => {
    if (!req.url.startsWith('/interaction/')) return callback(req, res);
    approve(req, res).catch((err) => {
      console.error('interaction:', err);
      res.statusCode = 500;
      res.end(String(err));
    });
  });
  server.on('error', (err) => {
    console.error(err);
    process.exit(1);
  });
  server.listen(config.port, '127.0.0.1', () => {
    process.stdout.write(`ready ${config.issuer}\n`);
  });

  const stop = () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

// ---------------------------------------------------------------------------
const [mode, ...args] = process.argv.slice(2);
try {
  if (mode === 'serve' && args.length === 1) {
    await serve(args[0]);
  } else if (mode === 'token' && args.length === 4) {
    process.stdout.write(`${await fetchToken(...args)}\n`);
  } else {
    console.error('usage: provider.mjs serve CONFIG_JSON_PATH\n'
      + '       provider.mjs token ISSUER CLIENT_ID CLIENT_SECRET RESOURCE');
    process.exit(2);
  }
} catch (err) {
  console.error(err.message ?? err);
  process.exit(1);
}
