// A person's browser for the login tests: opens URL and follows the provider's pages as a person
// would (redirects with their cookies, the device flow's confirmation form submitted), until a
// page that is neither: a loopback redirect's answer (the sidecar's), or the device flow's
// success page. Prints that page's status and text; exits 1 when it is an error.
//
// Usage: node person.mjs URL   (also as `$BROWSER`: the sidecar runs `$BROWSER URL`)

const jar = new Map();

function remember(res) {
  for (const line of res.headers.getSetCookie?.() ?? []) {
    const [pair] = line.split(';');
    const at = pair.indexOf('=');
    if (at > 0) jar.set(pair.slice(0, at).trim(), pair.slice(at + 1).trim());
  }
}

function cookies() {
  return [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
}

// The hidden inputs of the page's first form, and where it posts.
function formOf(html, base) {
  const form = html.match(/<form([^>]*)>([\s\S]*?)<\/form>/i);
  if (!form) return null;
  const action = form[1].match(/action="([^"]*)"/i)?.[1] ?? base;
  const fields = new URLSearchParams();
  for (const input of form[2].matchAll(/<input([^>]*)>/gi)) {
    const name = input[1].match(/name="([^"]*)"/i)?.[1];
    const value = input[1].match(/value="([^"]*)"/i)?.[1] ?? '';
    if (name) fields.set(name, value);
  }
  return { action: new URL(action, base).href, fields };
}

async function browse(start) {
  let url = start;
  let request = { method: 'GET' };
  let posts = 0;
  for (let hop = 0; hop < 30; hop += 1) {
    const res = await fetch(url, {
      ...request,
      redirect: 'manual',
      headers: { cookie: cookies(), ...(request.headers ?? {}) },
    });
    remember(res);
    if (res.status >= 300 && res.status < 400 && res.headers.get('location')) {
      url = new URL(res.headers.get('location'), url).href;
      request = { method: 'GET' };
      continue;
    }
    const text = await res.text();
    const form = posts < 3 && res.ok ? formOf(text, url) : null;
    if (form && form.fields.has('xsrf')) {
      // The device flow's forms: the code (sent by a self-posting form), then "Continue".
      posts += 1;
      url = form.action;
      request = {
        method: 'POST',
        body: form.fields.toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      };
      continue;
    }
    return { status: res.status, text };
  }
  throw new Error('too many hops');
}

const url = process.argv[2];
if (!url) {
  console.error('usage: node person.mjs URL');
  process.exit(2);
}
try {
  const page = await browse(url);
  console.log(`${page.status} ${page.text.replace(/\s+/g, ' ').slice(0, 300)}`);
  process.exit(page.status < 400 ? 0 : 1);
} catch (err) {
  console.error(err.message ?? err);
  process.exit(1);
}
