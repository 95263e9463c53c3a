// Test OpenID Provider (npm `oidc-provider` 9.x) issuing JWT access tokens via client credentials, plus a token-fetching helper.
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
    })),
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
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
      return claimsByClient.get(token.clientId);
    },
    ttl: {
      ClientCredentials: (ctx, token) => token.resourceServer?.accessTokenTTL ?? 300,
    },
  });
  provider.on('server_error', (ctx, err) => console.error('server_error:', err));

  const server = http.createServer(provider.callback());
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
