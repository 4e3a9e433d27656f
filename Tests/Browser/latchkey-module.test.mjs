// Unit tests of web/latchkey.js outside a browser (node --test): the pure parts (base64url, the
// address explanation, error mapping) and the HTTP logic over a scripted fetch (typed errors with
// Latchkey's code, one refresh for many 401s, the step-up retry, signals). The ceremonies
// themselves run against a real server in real browsers (test_module.py in Chromium,
// test_firefox.py in Firefox).
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { runInNewContext } from 'node:vm';
import {
  VERSION, Latchkey, LatchkeyError, base64url, explainOrigin, ceremonyError, actions, passSignals, CLIENT_CODES,
} from '../../web/latchkey.js';

const memory = () => { const m = new Map(); return { getItem: (k) => m.get(k) ?? null, setItem: (k, v) => m.set(k, v), removeItem: (k) => m.delete(k) }; };

/** A fetch that answers from a list of [status, body] in order and records what was asked. */
function scripted(answers) {
  const calls = [];
  const fetch = async (url, init) => {
    calls.push({ url, ...init, headers: { ...init.headers } });
    const [status, body, headers = {}] = answers.shift() || [500, { code: 'internal_error' }];
    return new Response(status === 204 ? null : JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', ...headers } });
  };
  return { fetch, calls };
}

test('VERSION matches the version the server serves it under', () => {
  const swift = readFileSync(new URL('../../Sources/LatchkeyServer/Web/WebRoutes.swift', import.meta.url), 'utf8');
  assert.match(swift, new RegExp(`clientVersion = "${VERSION.replace(/\./g, '\\.')}"`));
});

test('base64url encodes a buffer made in another realm (WebCrypto results handed to a WebDriver script in Firefox)', () => {
  const foreign = runInNewContext('new Uint8Array([1, 2, 3, 250]).buffer');
  assert.equal(foreign instanceof ArrayBuffer, false);
  assert.equal(base64url.encode(foreign), 'AQID-g');
  assert.equal(base64url.encode(runInNewContext('new Uint8Array([9, 1, 2, 3]).subarray(1)')), 'AQID');
});

test('base64url round-trips every byte, without padding', () => {
  const bytes = new Uint8Array(256).map((_, i) => i);
  const s = base64url.encode(bytes);
  assert.doesNotMatch(s, /[+/=]/);
  assert.deepEqual(new Uint8Array(base64url.decode(s)), bytes);
  assert.equal(base64url.encode(new Uint8Array([0xfb, 0xff])), '-_8');
  assert.deepEqual(new Uint8Array(base64url.decode('-_8')), new Uint8Array([0xfb, 0xff]));
  assert.equal(base64url.encode(new Uint8Array(0)), '');
});

test('explainOrigin says why 127.0.0.1 and plain http cannot use passkeys, in words', () => {
  const ip = explainOrigin({ protocol: 'http:', hostname: '127.0.0.1', host: '127.0.0.1:8080', port: '8080', pathname: '/' });
  assert.equal(ip.code, 'security');
  assert.equal(ip.suggestion, 'http://localhost:8080');
  assert.match(ip.message, /IP address.*localhost/s);
  const plain = explainOrigin({ protocol: 'http:', hostname: 'login.example.com', host: 'login.example.com', port: '', pathname: '/' });
  assert.equal(plain.code, 'insecure_context');
  assert.match(plain.message, /https:\/\/login\.example\.com/);
  for (const ok of [{ protocol: 'http:', hostname: 'localhost', host: 'localhost:9', port: '9' },
    { protocol: 'https:', hostname: 'login.example.com', host: 'login.example.com', port: '' },
    { protocol: 'http:', hostname: 'app.localhost', host: 'app.localhost', port: '' }]) {
    assert.equal(explainOrigin(ok).code, 'ok', JSON.stringify(ok));
  }
  assert.equal(explainOrigin({ protocol: 'https:', hostname: '[::1]', host: '[::1]:8443', port: '8443' }).suggestion, 'https://localhost:8443');
  // With the server's rpId known (a SecurityError after options arrived): the address that works.
  const other = explainOrigin({ protocol: 'http:', hostname: '127.0.0.1', host: '127.0.0.1:8080', port: '8080', pathname: '/' }, 'localhost');
  assert.equal(other.suggestion, 'http://localhost:8080');
  assert.match(other.message, /work at localhost, not at 127\.0\.0\.1\. Open http:\/\/localhost:8080\/ instead/);
  assert.equal(explainOrigin({ protocol: 'https:', hostname: 'shop.example.com', host: 'shop.example.com', port: '' }, 'login.example.org').suggestion,
    'https://login.example.org');
  assert.equal(explainOrigin({ protocol: 'https:', hostname: 'app.example.com', host: 'app.example.com', port: '' }, 'example.com').code, 'ok');
});

test('ceremony failures become typed errors; a NotAllowedError at the timeout is a timeout', () => {
  const dom = (name) => Object.assign(new Error(name), { name });
  assert.equal(ceremonyError(dom('NotAllowedError'), { started: Date.now(), timeout: 60000 }).code, 'cancelled');
  assert.equal(ceremonyError(dom('NotAllowedError'), { started: Date.now() - 60000, timeout: 60000 }).code, 'timeout');
  assert.equal(ceremonyError(dom('InvalidStateError'), { kind: 'create' }).code, 'invalid_state');
  assert.equal(ceremonyError(dom('AbortError')).code, 'aborted');
  assert.equal(ceremonyError(dom('NotSupportedError')).code, 'not_supported');
  assert.equal(ceremonyError(dom('SecurityError')).code, 'security');
  const e = ceremonyError(dom('NotAllowedError'));
  assert.ok(e instanceof LatchkeyError && e.isCancellation && e.status === 0);
  for (const c of ['cancelled', 'timeout', 'network', 'declined']) assert.ok(CLIENT_CODES.includes(c));
});

test('a problem answer is a LatchkeyError with Latchkey\'s code, status, problem and Retry-After', async () => {
  const { fetch } = scripted([
    [409, { type: 'about:blank', title: 'Conflict', status: 409, detail: 'username taken', code: 'conflict' }],
    [429, { code: 'rate_limited', detail: 'slow down' }, { 'Retry-After': '17' }],
    [502, 'not json'],
  ]);
  const lk = new Latchkey({ storage: memory(), fetch });
  await assert.rejects(lk.request('POST', '/v1/passkeys/registration/options', { body: { username: 'x' } }),
    (e) => e instanceof LatchkeyError && e.code === 'conflict' && e.status === 409 && e.message === 'username taken' && e.problem.title === 'Conflict');
  await assert.rejects(lk.request('POST', '/v1/recovery/challenges', { body: {} }), (e) => e.code === 'rate_limited' && e.retryAfter === 17);
  await assert.rejects(lk.request('GET', '/v1/passkeys'), (e) => e.code === 'internal_error' && e.status === 502);
  const down = new Latchkey({ storage: memory(), fetch: async () => { throw new TypeError('Failed to fetch'); } });
  await assert.rejects(down.request('GET', '/healthz'), (e) => e.code === 'network' && e.status === 0);
});

test('many 401s together rotate the refresh token once, and the calls are sent again', async () => {
  const storage = memory();
  storage.setItem('latchkey.session', JSON.stringify({ user: { id: 'u' }, tokens: { access_token: 'old', refresh_token: 'r1' } }));
  let refreshes = 0;
  const fetch = async (url, init) => {
    const auth = init.headers.Authorization;
    if (url.endsWith('/v1/token')) {
      refreshes++;
      await new Promise((r) => setTimeout(r, 10));
      return new Response(JSON.stringify({ access_token: 'new', refresh_token: 'r2', token_type: 'Bearer', expires_in: 300 }), { status: 200 });
    }
    if (auth === 'Bearer old') return new Response(JSON.stringify({ code: 'unauthorized' }), { status: 401 });
    return new Response(JSON.stringify({ passkeys: [{ id: 'p' }], sessions: [] }), { status: 200 });
  };
  const lk = new Latchkey({ storage, fetch, baseURL: 'https://login.example.com/' });
  const [a, b, c] = await Promise.all([lk.passkeys.list(), lk.passkeys.list(), lk.sessions.list()]);
  assert.equal(refreshes, 1);
  assert.equal(a.length, 1); assert.equal(b.length, 1); assert.deepEqual(c, []);
  assert.equal(JSON.parse(storage.getItem('latchkey.session')).tokens.refresh_token, 'r2');
});

test('a refused refresh ends the session and says so once', async () => {
  const storage = memory();
  storage.setItem('latchkey.session', JSON.stringify({ user: { id: 'u' }, tokens: { access_token: 'a', refresh_token: 'gone' } }));
  const { fetch } = scripted([[401, { code: 'unauthorized' }], [400, { code: 'invalid_grant' }]]);
  const ended = [];
  const lk = new Latchkey({ storage, fetch, onSessionEnded: (e) => ended.push(e && e.code) });
  await assert.rejects(lk.passkeys.list(), (e) => e.code === 'unauthorized');
  assert.deepEqual(ended, ['invalid_grant']);
  assert.equal(lk.session, null);
  assert.equal(storage.getItem('latchkey.session'), null);
});

test('withStepUp: sent without, then approved for exactly that action and sent again; declined sends nothing more', async () => {
  const { fetch, calls } = scripted([[403, { code: 'step_up_required' }], [403, { code: 'step_up_required' }]]);
  const lk = new Latchkey({ storage: memory(), fetch, confirmStepUp: () => false });
  lk.session = { user: { id: 'u' }, tokens: { access_token: 't' } };
  await assert.rejects(lk.email.setAddress('a@example.com'), (e) => e.code === 'declined');
  assert.equal(calls.length, 1);
  const seen = [];
  const lk2 = new Latchkey({ storage: memory(), fetch, confirmStepUp: (info) => { seen.push(info); return true; } });
  lk2.session = lk.session;
  lk2.stepUp = async (action) => { seen.push(action); return { token: 'step-up-jwt' }; };
  const sent = [];
  const r = await lk2.withStepUp(actions.revokePasskey('cred1'), async (headers) => {
    sent.push(headers);
    if (!headers['Latchkey-Step-Up']) throw new LatchkeyError('step_up_required', 'needs', { status: 403 });
    return 'done';
  }, 'why');
  assert.equal(r, 'done');
  assert.deepEqual(sent, [{}, { 'Latchkey-Step-Up': 'step-up-jwt' }]);
  assert.deepEqual(seen[0], { action: { type: 'latchkey.passkey.revoke', credentialId: 'cred1' }, reason: 'why' });
  assert.deepEqual(actions.admin('DELETE', '/admin/v1/origins/x'), { type: 'latchkey.admin', method: 'DELETE', path: '/admin/v1/origins/x', body: null });
});

test('ciba: approving binds exactly the listed request (nulls kept) and sends its step-up; deny needs none', async () => {
  const request = { authReqId: 'lkb_1', client: { id: 'bank', name: 'Bank', cibaApprover: 'passkey' }, bindingMessage: null,
    scopes: ['openid'], authorizationDetails: null };
  assert.deepEqual(actions.approveCIBA(request),
    { type: 'latchkey.ciba.approve', authReqId: 'lkb_1', clientId: 'bank', bindingMessage: null, authorizationDetails: null });
  const { fetch, calls } = scripted([[200, { requests: [request] }], [204, null], [204, null]]);
  const lk = new Latchkey({ storage: memory(), fetch });
  lk.session = { user: { id: 'u' }, tokens: { access_token: 't' } };
  const stepped = [];
  lk.stepUp = async (action) => { stepped.push(action); return { token: 'step-up-jwt', receiptId: 'rcpt' }; };
  const [listed] = await lk.ciba.list();
  assert.equal(lk.ciba.approvable(listed), true);
  assert.equal(lk.ciba.approvable({ ...listed, client: { ...listed.client, cibaApprover: 'attested-device-key' } }), false);
  assert.deepEqual(await lk.ciba.approve(listed), { receiptId: 'rcpt' });
  assert.deepEqual(stepped, [actions.approveCIBA(request)]);
  assert.equal(calls[1].url, '/v1/ciba/requests/lkb_1/approve');
  assert.equal(calls[1].headers['Latchkey-Step-Up'], 'step-up-jwt');
  await lk.ciba.deny('lkb_1');
  assert.equal(calls[2].url, '/v1/ciba/requests/lkb_1/deny');
  assert.equal(calls[2].headers['Latchkey-Step-Up'], undefined);
});

test('signals from answers reach PublicKeyCredential.signal… and only the three known ones', async () => {
  const got = [];
  globalThis.PublicKeyCredential = {
    signalUnknownCredential: async (o) => { got.push(['unknown', o]); },
    signalAllAcceptedCredentials: async (o) => { got.push(['all', o]); },
    signalCurrentUserDetails: async () => { throw new Error('provider said no'); },
    evil: () => { got.push(['evil']); },
  };
  try {
    passSignals({ signals: [{ method: 'signalAllAcceptedCredentials', options: { rpId: 'x', userId: 'u', allAcceptedCredentialIds: [] } },
      { method: 'signalCurrentUserDetails', options: {} }, { method: 'evil', options: {} }] });
    passSignals({ code: 'credential_unknown', signal: { method: 'signalUnknownCredential', options: { rpId: 'x', credentialId: 'c' } } });
    await new Promise((r) => setTimeout(r, 0));
    assert.deepEqual(got.map((g) => g[0]).sort(), ['all', 'unknown']);
  } finally { delete globalThis.PublicKeyCredential; }
});

test('signOut forgets the session here at once and tells the server with the old token', async () => {
  const { fetch, calls } = scripted([[204, null]]);
  const storage = memory();
  const lk = new Latchkey({ storage, fetch });
  lk.session = { user: { id: 'u' }, tokens: { access_token: 'tok', refresh_token: 'r' } };
  const p = lk.signOut();
  assert.equal(lk.session, null);
  await p;
  assert.equal(calls[0].url, '/v1/logout');
  assert.equal(calls[0].headers.Authorization, 'Bearer tok');
});

test('a registration whose answer was lost is sent again; a saved first try is a credential_exists naming the passkey', async () => {
  const { fetch, calls } = scripted([
    [503, { code: 'internal_error', detail: 'failing over' }],
    [409, { code: 'credential_exists', detail: 'already saved', passkey: { id: 'cred1', name: 'Chrome on Linux' } }],
  ]);
  const lk = new Latchkey({ storage: memory(), fetch });
  const body = { id: 'cred1', type: 'public-key' };
  await assert.rejects(lk.verifyRegistration(body),
    (e) => e instanceof LatchkeyError && e.code === 'credential_exists' && e.passkey.id === 'cred1' && e.status === 409);
  assert.equal(calls.length, 2);
  assert.equal(calls[0].body, calls[1].body, 'the same response both times');
  const { fetch: f2, calls: c2 } = scripted([[400, { code: 'challenge_invalid' }]]);
  await assert.rejects(new Latchkey({ storage: memory(), fetch: f2 }).verifyRegistration(body), (e) => e.code === 'challenge_invalid' && e.passkey === null);
  assert.equal(c2.length, 1, 'a refusal is not retried');
});

test('signIn asks with mediation "immediate" where offered; nothing to offer at once or the value refused → the modal; a dismissal → no modal', async () => {
  const options = { challenge: 'AAAA', rpId: 'localhost', timeout: 60000 };
  const credential = { toJSON: () => ({ id: 'c', rawId: 'c', type: 'public-key', response: {} }) };
  const notAllowed = () => Object.assign(new Error('The operation either timed out or was not allowed.'), { name: 'NotAllowedError' });
  const realNow = Date.now;
  const hadNavigator = Object.getOwnPropertyDescriptor(globalThis, 'navigator');
  function browser(immediate) {
    const asked = [];
    globalThis.PublicKeyCredential = { getClientCapabilities: async () => ({ immediateGet: true }) };
    Object.defineProperty(globalThis, 'navigator', { configurable: true, value: { credentials: { get: async (o) => {
      asked.push(o.mediation ?? 'modal');
      if (o.mediation === 'immediate') return immediate();
      return credential;
    } } } });
    return asked;
  }
  try {
    // Nothing to offer: refused at once, then the modal, then the verify.
    let asked = browser(async () => { throw notAllowed(); });
    let { fetch, calls } = scripted([[200, options], [200, { user: { id: 'u' }, tokens: { access_token: 'a', refresh_token: 'r' } }]]);
    await new Latchkey({ storage: memory(), fetch }).signIn();
    assert.deepEqual(asked, ['immediate', 'modal']);
    assert.equal(calls[1].url, '/v1/passkeys/authentication/verify');

    // The person dismissed the browser's own prompt (the refusal came after a person could act): no modal.
    asked = browser(async () => { const t = realNow(); Date.now = () => t + 5000; throw notAllowed(); });
    ({ fetch, calls } = scripted([[200, options]]));
    await assert.rejects(new Latchkey({ storage: memory(), fetch }).signIn(), (e) => e instanceof LatchkeyError && e.code === 'cancelled');
    assert.deepEqual(asked, ['immediate']);
    assert.equal(calls.length, 1);

    // A browser that reports the capability but refuses the value (Chromium before it ships it): the modal.
    asked = browser(async () => { throw new TypeError("The provided value 'immediate' is not a valid enum value of type CredentialMediationRequirement."); });
    ({ fetch, calls } = scripted([[200, options], [200, { user: { id: 'u' }, tokens: { access_token: 'a', refresh_token: 'r' } }]]));
    await new Latchkey({ storage: memory(), fetch }).signIn();
    assert.deepEqual(asked, ['immediate', 'modal']);

    // A browser without the capability: the modal alone.
    asked = browser(async () => credential);
    globalThis.PublicKeyCredential = { getClientCapabilities: async () => ({ conditionalGet: true }) };
    ({ fetch } = scripted([[200, options], [200, { user: { id: 'u' }, tokens: { access_token: 'a', refresh_token: 'r' } }]]));
    await new Latchkey({ storage: memory(), fetch }).signIn();
    assert.deepEqual(asked, ['modal']);
  } finally {
    Date.now = realNow;
    delete globalThis.PublicKeyCredential;
    if (hadNavigator) Object.defineProperty(globalThis, 'navigator', hadNavigator); else delete globalThis.navigator;
  }
});
