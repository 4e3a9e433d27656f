// Unit tests of latchkey.js's vault outside a browser (node --test): the byte formats of docs/vault.md
// against a fixed vector (the same one VaultTests holds the Swift side to), against node:crypto as a
// second implementation, and the vault API over a scripted fetch and a stubbed navigator.credentials:
// what goes to the server is the salt and ciphertext only, never the PRF output, the data key or the
// vault recovery key.
import test from 'node:test';
import assert from 'node:assert/strict';
import { hkdfSync, createCipheriv } from 'node:crypto';
import { Latchkey, LatchkeyError, base64url, vaultCrypto, withoutPRFResults, actions, CLIENT_CODES, isUnfinishedVault } from '../../web/latchkey.js';

const b = (s) => new Uint8Array(base64url.decode(s));
const enc = (u) => base64url.encode(u);

// The fixed vector (HKDF and AES-GCM from Python's `cryptography`, independent of both clients).
const V = {
  prf: 'YSKC2enbPGPVWz8qpXxzidiiCuTojPAPYIkbId9gx8k',
  userHandle: 'KjgQafJ82lXB5xkaMotUAZQ7VKN2rUXJIdWZJd6gCFw',
  credentialId: '01F9NYjkEDlZeKHE8Sn8LQ',
  dataKey: 'Gwc7BParBenbni1xfFAe0AzaxchdgS-4CjLEc2y-7DY',
  recoveryKey: '4iGqc9V5Y_882mAtCYyv9peA0Fmv3OWIsiT9ycv11zQ',
  kwk: '-UQRUPiU4FxV3W_49_Nml7mnRjrvbLQyoTMuikm6rzs',
  wrappedKey: 'AAECAwQFBgcICQoLzadGCQUibJX4C8IwxKpqlxx_haRqBD_kJbVvTwicQRBrfLe14JCEToPH7Sqgt2C6',
  recoveryKWK: 'PVdHAl1Clgb82dxIRXdU3-bILic8X0BHBYoUWio3adA',
  recoveryWrappedKey: 'DA0ODxAREhMUFRYXgGkjDQg982QPUw2lHecim--D39vLs17taTjlLIiKs-TjTr8Uu0hPRVquhDX9keWT',
};
const iv = new Uint8Array(12).map((_, i) => i), iv2 = new Uint8Array(12).map((_, i) => i + 12);

test('the key-wrapping keys and wraps match the fixed vector byte for byte', async () => {
  assert.equal(enc(await vaultCrypto.keyWrappingKey(b(V.prf), b(V.userHandle), b(V.credentialId))), V.kwk);
  assert.equal(enc(await vaultCrypto.recoveryWrappingKey(b(V.recoveryKey))), V.recoveryKWK);
  assert.equal(await vaultCrypto.wrapForPasskey(b(V.dataKey), b(V.prf), b(V.userHandle), b(V.credentialId), iv), V.wrappedKey);
  assert.equal(await vaultCrypto.wrapForRecovery(b(V.dataKey), b(V.recoveryKey), iv2), V.recoveryWrappedKey);
  assert.equal(enc(await vaultCrypto.unwrapForPasskey(V.wrappedKey, b(V.prf), b(V.userHandle), b(V.credentialId))), V.dataKey);
  assert.equal(enc(await vaultCrypto.unwrapForRecovery(V.recoveryWrappedKey, b(V.recoveryKey))), V.dataKey);
});

test('the same bytes as node:crypto, for random inputs', async () => {
  for (let i = 0; i < 20; i++) {
    const prf = crypto.getRandomValues(new Uint8Array(32)), handle = crypto.getRandomValues(new Uint8Array(32));
    const id = crypto.getRandomValues(new Uint8Array(1 + (i * 7) % 64)), dataKey = crypto.getRandomValues(new Uint8Array(32));
    const nonce = crypto.getRandomValues(new Uint8Array(12));
    const info = Buffer.concat([Buffer.from('latchkey vault v1'), handle, id]);
    const kwk = new Uint8Array(hkdfSync('sha256', prf, new Uint8Array(0), info, 32));
    assert.deepEqual(await vaultCrypto.keyWrappingKey(prf, handle, id), kwk);
    const cipher = createCipheriv('aes-256-gcm', kwk, nonce);
    cipher.setAAD(Buffer.concat([Buffer.from('latchkey vault v1'), id]));
    const expected = Buffer.concat([nonce, cipher.update(dataKey), cipher.final(), cipher.getAuthTag()]);
    const wrapped = b(await vaultCrypto.wrapForPasskey(dataKey, prf, handle, id, nonce));
    assert.equal(wrapped.length, 60);
    assert.deepEqual(Buffer.from(wrapped), expected);
  }
});

test('a wrap opens only with its own passkey, user handle and credential id; a changed byte is vault_locked', async () => {
  const other = crypto.getRandomValues(new Uint8Array(32));
  const tries = [
    () => vaultCrypto.unwrapForPasskey(V.wrappedKey, other, b(V.userHandle), b(V.credentialId)),
    () => vaultCrypto.unwrapForPasskey(V.wrappedKey, b(V.prf), other, b(V.credentialId)),
    () => vaultCrypto.unwrapForPasskey(V.wrappedKey, b(V.prf), b(V.userHandle), other.slice(0, 16)),
    () => vaultCrypto.unwrapForRecovery(V.wrappedKey, b(V.recoveryKey)),
    () => vaultCrypto.unwrapForPasskey(V.recoveryWrappedKey, b(V.prf), b(V.userHandle), b(V.credentialId)),
  ];
  const flipped = b(V.wrappedKey); flipped[30] ^= 1;
  tries.push(() => vaultCrypto.unwrapForPasskey(enc(flipped), b(V.prf), b(V.userHandle), b(V.credentialId)));
  for (const t of tries) await assert.rejects(t, (e) => e instanceof LatchkeyError && e.code === 'vault_locked');
  assert.ok(CLIENT_CODES.includes('vault_locked'));
});

test('the vault recovery key is a 52-character code and back; typos are refused', () => {
  const key = b(V.recoveryKey);
  const code = vaultCrypto.recoveryCode(key);
  assert.equal(code.length, 52);
  assert.match(code, /^[A-Z2-7]{52}$/);
  assert.deepEqual(vaultCrypto.parseRecoveryCode(code), key);
  assert.deepEqual(vaultCrypto.parseRecoveryCode(code.toLowerCase().replace(/(.{4})/g, '$1-')), key);
  for (let i = 0; i < 50; i++) {
    const k = crypto.getRandomValues(new Uint8Array(32));
    assert.deepEqual(vaultCrypto.parseRecoveryCode(vaultCrypto.recoveryCode(k)), k);
  }
  for (const bad of ['', code.slice(1), code + 'A', code.slice(0, 51) + '1', code.slice(0, 51) + 'B']) {
    assert.throws(() => vaultCrypto.parseRecoveryCode(bad), (e) => e.code === 'invalid_request', bad);
  }
});

test('a PRF output never leaves in a response JSON', () => {
  const json = { id: 'x', clientExtensionResults: { prf: { enabled: true, results: { first: 'c2VjcmV0' } }, credProps: { rk: true } } };
  const out = withoutPRFResults(json);
  assert.deepEqual(out.clientExtensionResults, { prf: { enabled: true }, credProps: { rk: true } });
  assert.equal(JSON.stringify(out).includes('c2VjcmV0'), false);
  assert.equal(withoutPRFResults({ id: 'y' }).id, 'y');
  assert.deepEqual(actions.vaultWrap('abc'), { type: 'latchkey.vault.wrap', credentialId: 'abc' });
  assert.deepEqual(actions.vaultRecovery(), { type: 'latchkey.vault.recovery' });
});

test('the vault API over a scripted server: create, unlock, encrypt, recovery key, recover; the server sees salt and ciphertext only', async () => {
  const calls = [];
  const handle = crypto.getRandomValues(new Uint8Array(32));
  const credId = crypto.getRandomValues(new Uint8Array(16));
  const secret = crypto.getRandomValues(new Uint8Array(32));  // the authenticator's PRF secret
  const prfOf = async (salt) => new Uint8Array(hkdfSync('sha256', secret, new Uint8Array(0), salt, 32));
  const outputs = [];
  let prompts = 0;
  // The authenticator: a get() with prf.eval answers its PRF output; a step-up get() answers an assertion.
  globalThis.navigator = { credentials: { get: async ({ publicKey }) => {
    prompts++;
    assert.equal(publicKey.userVerification, 'required');
    const evalFirst = publicKey.extensions?.prf?.eval?.first;
    const out = evalFirst ? await prfOf(evalFirst) : null;
    if (out) outputs.push(out);
    return { id: enc(credId), rawId: credId.buffer, type: 'public-key',
      response: { clientDataJSON: new Uint8Array([1]).buffer, authenticatorData: new Uint8Array([2]).buffer, signature: new Uint8Array([3]).buffer, userHandle: handle.buffer },
      getClientExtensionResults: () => (out ? { prf: { results: { first: out.buffer } } } : {}) };
  } } };
  const store = { vault: null, wrapped: [], recovery: null };
  const fetch = async (url, init) => {
    const path = new URL(url, 'https://lk.test').pathname;
    const body = init.body ? JSON.parse(init.body) : undefined;
    calls.push({ method: init.method, path, body: init.body || '', headers: init.headers });
    const reply = (status, json) => new Response(status === 204 ? null : JSON.stringify(json), { status, headers: { 'Content-Type': 'application/json' } });
    if (path === '/v1/passkeys/authentication/options') return reply(200, { challenge: enc(crypto.getRandomValues(new Uint8Array(32))), rpId: 'lk.test', timeout: 60000, userVerification: 'preferred' });
    if (path === '/v1/passkeys') return reply(200, { passkeys: [{ id: enc(credId), prfEnabled: true }] });
    if (path === '/v1/step-up/challenges') return reply(201, { challengeId: 'c1', publicKey: { challenge: enc(new Uint8Array(32)), rpId: 'lk.test', userVerification: 'required' } });
    if (path === '/v1/step-up/verify') return reply(200, { access_token: 'step', actionHash: 'h', receiptId: 'r', expires_in: 120 });
    if (path === '/v1/vault' && init.method === 'PUT') { store.vault = body.prfSalt; return reply(201, { prfSalt: body.prfSalt, wrapped: [], recovery: null }); }
    if (path === '/v1/vault') {
      return store.vault ? reply(200, { prfSalt: store.vault, wrapped: store.wrapped, recovery: store.recovery }) : reply(404, { code: 'not_found' });
    }
    if (path.startsWith('/v1/vault/wrapped/')) {
      if (init.headers['Latchkey-Step-Up'] !== 'step') return reply(403, { code: 'step_up_required' });
      store.wrapped = [{ credentialId: decodeURIComponent(path.split('/').pop()), wrappedKey: body.wrappedKey, alg: 'A256GCM' }];
      return reply(204);
    }
    if (path === '/v1/vault/recovery') {
      if (init.headers['Latchkey-Step-Up'] !== 'step') return reply(403, { code: 'step_up_required' });
      store.recovery = { wrappedKey: body.wrappedKey };
      return reply(204);
    }
    return reply(500, { code: 'internal_error' });
  };
  const lk = new Latchkey({ baseURL: 'https://lk.test', storage: null, fetch });
  lk.session = { user: { id: 'u' }, tokens: { access_token: 'at', refresh_token: 'rt' } };
  assert.equal(await lk.vault.get(), null);
  const opened = await lk.vault.create();
  assert.equal(b(store.vault).length, 32);
  assert.equal(b(store.wrapped[0].wrappedKey).length, 60);
  assert.equal(store.wrapped[0].credentialId, enc(credId));
  const note = await opened.encrypt('the note');
  const code = await lk.vault.makeRecoveryKey(opened);
  assert.equal(code.length, 52);
  // Unlocking again with the passkey opens the same data key.
  const again = await lk.vault.unlock();
  assert.equal(await again.decryptText(note), 'the note');
  // Every passkey lost: the recovery code opens it.
  store.wrapped = [];
  await assert.rejects(() => lk.vault.unlock(), (e) => e.code === 'vault_locked');
  const recovered = await lk.vault.recover(code);
  assert.equal(await recovered.decryptText(note), 'the note');
  await assert.rejects(() => lk.vault.recover(vaultCrypto.recoveryCode(crypto.getRandomValues(new Uint8Array(32)))), (e) => e.code === 'vault_locked');
  // What the server saw: no PRF output, no data key, no recovery key, in any request.
  const sent = calls.map((c) => c.body + JSON.stringify(c.headers)).join('\n');
  const dataKey = opened._key;
  for (const secretBytes of [...outputs, dataKey, vaultCrypto.parseRecoveryCode(code)]) {
    for (const spelling of [enc(secretBytes), Buffer.from(secretBytes).toString('base64'), Buffer.from(secretBytes).toString('hex')]) {
      assert.equal(sent.includes(spelling), false, 'a secret went to the server');
    }
  }
  assert.ok(prompts >= 4);
  delete globalThis.navigator;
});

test('a credential id or user handle given as base64url means its bytes, never its text (what lk.vault passes)', async () => {
  // lk.vault hands vaultCrypto the credential id as the base64url string the server uses; the wrap
  // must be the one SPEC's bytes give (the fixed vector, and the Swift client's VaultCrypto).
  assert.equal(await vaultCrypto.wrapForPasskey(b(V.dataKey), b(V.prf), V.userHandle, V.credentialId, iv), V.wrappedKey);
  assert.equal(enc(await vaultCrypto.keyWrappingKey(b(V.prf), V.userHandle, V.credentialId)), V.kwk);
  assert.equal(enc(await vaultCrypto.unwrapForPasskey(V.wrappedKey, b(V.prf), b(V.userHandle), V.credentialId)), V.dataKey);
});

test('a creation cancelled at a passkey prompt leaves the account able to create the vault (PUT /v1/vault is once)', async () => {
  const handle = crypto.getRandomValues(new Uint8Array(32));
  const credId = crypto.getRandomValues(new Uint8Array(16));
  const secret = crypto.getRandomValues(new Uint8Array(32));
  // The person's answers, prompt by prompt: 'cancel' refuses as a browser does (NotAllowedError).
  const answers = [];
  globalThis.navigator = { credentials: { get: async ({ publicKey }) => {
    if (answers.shift() === 'cancel') throw new DOMException('The operation either timed out or was not allowed.', 'NotAllowedError');
    const evalFirst = publicKey.extensions?.prf?.eval?.first;
    const out = evalFirst ? new Uint8Array(hkdfSync('sha256', secret, new Uint8Array(0), evalFirst, 32)) : null;
    return { id: enc(credId), rawId: credId.buffer, type: 'public-key',
      response: { clientDataJSON: new Uint8Array([1]).buffer, authenticatorData: new Uint8Array([2]).buffer, signature: new Uint8Array([3]).buffer, userHandle: handle.buffer },
      getClientExtensionResults: () => (out ? { prf: { results: { first: out.buffer } } } : {}) };
  } } };
  const store = { vault: null, wrapped: [], recovery: null, puts: 0 };
  const fetch = async (url, init) => {
    const path = new URL(url, 'https://lk.test').pathname;
    const body = init.body ? JSON.parse(init.body) : undefined;
    const reply = (status, json) => new Response(status === 204 ? null : JSON.stringify(json), { status, headers: { 'Content-Type': 'application/json' } });
    if (path === '/v1/passkeys/authentication/options') return reply(200, { challenge: enc(crypto.getRandomValues(new Uint8Array(32))), rpId: 'lk.test', userVerification: 'preferred' });
    if (path === '/v1/passkeys') return reply(200, { passkeys: [{ id: enc(credId), prfEnabled: true }] });
    if (path === '/v1/step-up/challenges') return reply(201, { challengeId: 'c1', publicKey: { challenge: enc(new Uint8Array(32)), rpId: 'lk.test', userVerification: 'required' } });
    if (path === '/v1/step-up/verify') return reply(200, { access_token: 'step', actionHash: 'h', receiptId: 'r', expires_in: 120 });
    if (path === '/v1/vault' && init.method === 'PUT') {
      store.puts++;
      if (store.vault) return reply(409, { code: 'conflict' });  // SPEC: once per account
      store.vault = body.prfSalt;
      return reply(201, { prfSalt: body.prfSalt, wrapped: [], recovery: null });
    }
    if (path === '/v1/vault') return store.vault ? reply(200, { prfSalt: store.vault, wrapped: store.wrapped, recovery: store.recovery }) : reply(404, { code: 'not_found' });
    if (path.startsWith('/v1/vault/wrapped/')) {
      if (init.headers['Latchkey-Step-Up'] !== 'step') return reply(403, { code: 'step_up_required' });
      store.wrapped = [{ credentialId: decodeURIComponent(path.split('/').pop()), wrappedKey: body.wrappedKey, alg: 'A256GCM' }];
      return reply(204);
    }
    return reply(500, { code: 'internal_error' });
  };
  const lk = new Latchkey({ baseURL: 'https://lk.test', storage: null, fetch });
  lk.session = { user: { id: 'u' }, tokens: { access_token: 'at', refresh_token: 'rt' }, method: 'passkey' };

  // Cancelled at the first prompt (the PRF one): nothing is stored.
  answers.push('cancel');
  await assert.rejects(() => lk.vault.create(), (e) => e instanceof LatchkeyError && e.code === 'cancelled');
  assert.equal(store.vault, null);
  assert.equal(store.puts, 0);

  // Cancelled at the step-up prompt, after the salt was stored: a vault with no key, which the
  // panel offers to create again and the next creation finishes with the same salt.
  answers.push('ok', 'cancel');
  await assert.rejects(() => lk.vault.create(), (e) => e.code === 'cancelled');
  const salt = store.vault;
  assert.equal(b(salt).length, 32);
  assert.equal(isUnfinishedVault(await lk.vault.get(), lk.session), true);
  assert.equal(isUnfinishedVault(await lk.vault.get(), { method: 'email' }), false);  // an email session is never shown the recovery wrap
  const opened = await lk.vault.create();
  assert.equal(store.vault, salt);
  assert.equal(store.puts, 1);
  assert.equal(store.wrapped.length, 1);
  const note = await opened.encrypt('kept');
  assert.equal(await (await lk.vault.unlock()).decryptText(note), 'kept');

  // A finished vault is not created twice.
  await assert.rejects(() => lk.vault.create(), (e) => e.code === 'conflict');
  assert.equal(isUnfinishedVault(await lk.vault.get(), lk.session), false);
  delete globalThis.navigator;
});
