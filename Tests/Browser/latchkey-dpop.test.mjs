// DPoP in web/latchkey.js outside a browser (node --test): the proofs it makes (RFC 9449 §4.2,
// checked here with WebCrypto as the server checks them), where they go (the email verify, every
// refresh, every authenticated call with `Authorization: DPoP`), and the key (non-extractable, kept
// in the key store and used again). The Chromium test (test_dpop.py) runs it against a real server.
import test from 'node:test';
import assert from 'node:assert/strict';
import { webcrypto, createHash } from 'node:crypto';
import { Latchkey, base64url, dpop, memoryKeyStore } from '../../web/latchkey.js';

const subtle = (globalThis.crypto || webcrypto).subtle;
const memory = () => { const m = new Map(); return { getItem: (k) => m.get(k) ?? null, setItem: (k, v) => m.set(k, v), removeItem: (k) => m.delete(k) }; };

function scripted(answers) {
  const calls = [];
  const fetch = async (url, init) => {
    calls.push({ url, ...init, headers: { ...init.headers } });
    const [status, body] = answers.shift() || [500, { code: 'internal_error' }];
    return new Response(status === 204 ? null : JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
  };
  return { fetch, calls };
}

const text = (s) => new TextDecoder().decode(base64url.decode(s));

/** The proof's header and claims, after its signature verified with the key its header names. */
async function verified(proof) {
  const [h, c, s] = proof.split('.');
  const header = JSON.parse(text(h));
  assert.equal(header.typ, 'dpop+jwt');
  assert.equal(header.alg, 'ES256');
  assert.deepEqual(Object.keys(header.jwk).sort(), ['crv', 'kty', 'x', 'y'], 'a public JWK only');
  const key = await subtle.importKey('jwk', header.jwk, { name: 'ECDSA', namedCurve: 'P-256' }, false, ['verify']);
  const ok = await subtle.verify({ name: 'ECDSA', hash: 'SHA-256' }, key, base64url.decode(s), new TextEncoder().encode(`${h}.${c}`));
  assert.ok(ok, 'the proof verifies with its jwk');
  return { header, claims: JSON.parse(text(c)) };
}

const tokens = (type = 'DPoP', at = 'access-1') => ({ access_token: at, token_type: type, expires_in: 300, refresh_token: 'lkr_1' });
const user = { id: 'u1', username: 'alice', displayName: 'Alice' };

test('a bound session: the verify carries a proof, every call goes as Authorization: DPoP with ath, a refresh carries a proof', async () => {
  const { fetch, calls } = scripted([
    [200, { user, tokens: tokens() }],
    [401, { code: 'unauthorized' }],
    [200, tokens('DPoP', 'access-2')],
    [200, { sessions: [{ id: 's1', current: true }] }],
  ]);
  const lk = new Latchkey({ baseURL: 'https://login.example', storage: memory(), fetch, dpop: true, dpopKeyStore: memoryKeyStore() });
  assert.equal(lk.dpopEnabled, true);
  await lk.email.finishSignIn('otp_1', '123456');
  const verify = await verified(calls[0].headers.DPoP);
  assert.equal(verify.claims.htm, 'POST');
  assert.equal(verify.claims.htu, 'https://login.example/v1/email/verify');
  assert.equal(verify.claims.ath, undefined, 'no access token: no ath');
  assert.ok(Number.isInteger(verify.claims.iat) && Math.abs(verify.claims.iat - Date.now() / 1000) < 5);
  assert.match(verify.claims.jti, /^[A-Za-z0-9_-]{22}$/);
  assert.equal(await dpop.thumbprint(verify.header.jwk), await lk.dpopThumbprint());

  const sessions = await lk.sessions.list();
  assert.equal(sessions.length, 1);
  // The 401, the refresh (a proof, no ath), then the call again with the new token and a new proof.
  assert.equal(calls[1].headers.Authorization, 'DPoP access-1');
  const first = await verified(calls[1].headers.DPoP);
  assert.equal(first.claims.ath, createHash('sha256').update('access-1').digest('base64url'));
  assert.equal(first.claims.htm, 'GET');
  assert.equal(first.claims.htu, 'https://login.example/v1/sessions');
  assert.equal(calls[2].url, 'https://login.example/v1/token');
  assert.equal(calls[2].headers.Authorization, undefined);
  const refresh = await verified(calls[2].headers.DPoP);
  assert.equal(refresh.claims.htu, 'https://login.example/v1/token');
  assert.equal(refresh.claims.ath, undefined);
  assert.equal(calls[3].headers.Authorization, 'DPoP access-2');
  const again = await verified(calls[3].headers.DPoP);
  assert.equal(again.claims.ath, createHash('sha256').update('access-2').digest('base64url'));
  assert.notEqual(again.claims.jti, first.claims.jti, 'a new jti for every proof');
});

test('the key cannot be exported, and the key store keeps it for the next client of the same storage key', async () => {
  const store = memoryKeyStore();
  const a = new Latchkey({ baseURL: 'https://login.example', storage: memory(), fetch: scripted([]).fetch, dpop: true, dpopKeyStore: store });
  const key = await a.dpopKey();
  assert.equal(key.privateKey.extractable, false);
  assert.deepEqual(key.privateKey.algorithm, { name: 'ECDSA', namedCurve: 'P-256' });
  await assert.rejects(subtle.exportKey('jwk', key.privateKey));
  await assert.rejects(subtle.exportKey('pkcs8', key.privateKey));
  const b = new Latchkey({ baseURL: 'https://login.example', storage: memory(), fetch: scripted([]).fetch, dpop: true, dpopKeyStore: store });
  assert.equal(await b.dpopThumbprint(), await a.dpopThumbprint());
  const other = new Latchkey({ baseURL: 'https://login.example', storage: memory(), storageKey: 'other', fetch: scripted([]).fetch, dpop: true,
    dpopKeyStore: store });
  assert.notEqual(await other.dpopThumbprint(), await a.dpopThumbprint());
});

test('the thumbprint is RFC 7638 (its example key)', async () => {
  // RFC 7638 §3.1 is an RSA key; the EC members are ordered the same way: crv, kty, x, y.
  const jwk = { kty: 'EC', crv: 'P-256', x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU', y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0' };
  const expected = createHash('sha256').update(`{"crv":"P-256","kty":"EC","x":"${jwk.x}","y":"${jwk.y}"}`).digest('base64url');
  assert.equal(await dpop.thumbprint({ ...jwk, d: 'private' }), expected);
});

test('a Bearer session (the server answered token_type Bearer) goes as Bearer, without a proof; DPoP off sends no proofs', async () => {
  const { fetch, calls } = scripted([[200, { user, tokens: tokens('Bearer') }], [200, { sessions: [] }]]);
  const lk = new Latchkey({ baseURL: 'https://login.example', storage: memory(), fetch, dpop: true, dpopKeyStore: memoryKeyStore() });
  await lk.email.finishSignIn('otp_1', '123456');
  assert.ok(calls[0].headers.DPoP, 'the verify offers a proof');
  await lk.sessions.list();
  assert.equal(calls[1].headers.Authorization, 'Bearer access-1');
  assert.equal(calls[1].headers.DPoP, undefined);

  const off = scripted([[200, { user, tokens: tokens('Bearer') }]]);
  const plain = new Latchkey({ baseURL: 'https://login.example', storage: memory(), fetch: off.fetch, dpop: false });
  await plain.email.finishSignIn('otp_1', '123456');
  assert.equal(off.calls[0].headers.DPoP, undefined);
  // Outside a browser (no IndexedDB) 'auto' is off.
  assert.equal(new Latchkey({ storage: memory(), fetch: off.fetch }).dpopEnabled, typeof indexedDB !== 'undefined');
});

test('signing out of a bound session sends the token as DPoP with its proof; a step-up token stays Bearer', async () => {
  const { fetch, calls } = scripted([[200, { user, tokens: tokens() }], [204, null]]);
  const lk = new Latchkey({ baseURL: 'https://login.example', storage: memory(), fetch, dpop: true, dpopKeyStore: memoryKeyStore() });
  await lk.email.finishSignIn('otp_1', '123456');
  await lk.signOut();
  assert.equal(calls[1].url, 'https://login.example/v1/logout');
  assert.equal(calls[1].headers.Authorization, 'DPoP access-1');
  assert.equal((await verified(calls[1].headers.DPoP)).claims.ath, createHash('sha256').update('access-1').digest('base64url'));

  const consume = scripted([[200, { actionHash: 'h' }]]);
  const backend = new Latchkey({ baseURL: 'https://login.example', storage: memory(), fetch: consume.fetch, dpop: true, dpopKeyStore: memoryKeyStore() });
  await backend.request('POST', '/v1/step-up/consume', { token: 'step-up-token', body: { actionHash: 'h' } });
  assert.equal(consume.calls[0].headers.Authorization, 'Bearer step-up-token');
  assert.equal(consume.calls[0].headers.DPoP, undefined);
});
