#!/usr/bin/env python3
"""The web app's own session bound to a DPoP key (RFC 9449) in headless Chromium.

- a sign-up and a sign-in from the app answer `token_type` `DPoP`, and the access token's `cnf.jkt` is the
  thumbprint of the key latchkey.js keeps in IndexedDB;
- that key's private half is not extractable (WebCrypto refuses to export it);
- the app keeps working with it (the passkey list is read with `Authorization: DPoP` and a proof);
- the access token and the refresh token copied out of the page and replayed from Python without
  the key are refused: 401 `unauthorized` with `WWW-Authenticate: DPoP …`.

Prints one line per test and closes with 'N passed, N failed, N skipped'.
"""
import base64
import json
import os
import secrets
import sys

sys.path.insert(0, os.path.dirname(__file__))
import test_web as w  # noqa: E402

KEY_INFO = """
const done = arguments[arguments.length - 1];
(async () => {
  const { Latchkey } = await import('/latchkey.js');
  const lk = new Latchkey({ storageKey: 'latchkey.session' });
  const key = await lk.dpopKey();
  let exported = 'refused';
  try { await crypto.subtle.exportKey('jwk', key.privateKey); exported = 'exported'; } catch (e) { exported = 'refused'; }
  // What IndexedDB holds is the CryptoKey itself, still not extractable.
  const stored = await new Promise((resolve, reject) => {
    const r = indexedDB.open('latchkey-dpop', 1);
    r.onsuccess = () => {
      const get = r.result.transaction('keys', 'readonly').objectStore('keys').get('latchkey.session');
      get.onsuccess = () => { resolve(get.result); r.result.close(); };
      get.onerror = () => reject(get.error);
    };
    r.onerror = () => reject(r.error);
  });
  return { enabled: lk.dpopEnabled, jkt: await lk.dpopThumbprint(), extractable: key.privateKey.extractable, exported,
           storedIsKey: stored && stored.privateKey instanceof CryptoKey, storedExtractable: stored && stored.privateKey.extractable };
})().then(done, (e) => done({ error: String(e) }));
"""


def claims(token):
    part = token.split('.')[1]
    return json.loads(base64.urlsafe_b64decode(part + '=' * (-len(part) % 4)))


def session(b):
    return json.loads(b.d.execute_script("return sessionStorage.getItem('latchkey.session')"))


def test_the_apps_session_is_dpop_bound(b):
    b.load()
    b.wait_view('welcome')
    b.wait_autofill_idle()
    w.type_into(b, 'signup-username', f'dpop-{secrets.token_hex(3)}')
    b.el('signup-button').click()
    b.wait_view('account')
    b.wait_passkeys(1)
    # The sign-up's own session is bound already (its verify carried a proof).
    assert session(b)['tokens']['token_type'] == 'DPoP', session(b)['tokens']['token_type']
    b.sign_out_keeping_credential()
    b.user_verified(False)
    b.tab_to(b.el('signin-button'))
    b.wait_autofill_idle()
    b.user_verified(True)
    b.el('signin-button').click()
    b.wait_view('account')
    b.wait_passkeys(1)
    tokens = session(b)['tokens']
    assert tokens['token_type'] == 'DPoP', tokens['token_type']
    info = b.d.execute_async_script(KEY_INFO)
    assert 'error' not in info, info
    assert info['enabled'] is True, info
    assert claims(tokens['access_token'])['cnf']['jkt'] == info['jkt'], (claims(tokens['access_token']), info)
    assert info['extractable'] is False and info['exported'] == 'refused', info
    assert info['storedIsKey'] is True and info['storedExtractable'] is False, info
    # The app works on with the bound session: a fresh page reads the list with DPoP proofs.
    b.load()
    b.wait_view('account')
    b.wait_passkeys(1)
    b.shot('dpop-bound-session')


def test_copied_tokens_are_refused_without_the_key(b):
    tokens = session(b)['tokens']
    access, refresh = tokens['access_token'], tokens['refresh_token']
    for authorization in [f'Bearer {access}', f'DPoP {access}']:
        status, headers, body = w.http('GET', '/v1/sessions', headers={'Authorization': authorization})
        problem = json.loads(body)
        assert status == 401 and problem['code'] == 'unauthorized', (authorization[:5], status, body)
        assert headers['WWW-Authenticate'].startswith('DPoP error='), headers['WWW-Authenticate']
    status, headers, body = w.http('POST', '/v1/token', {'grant_type': 'refresh_token', 'refresh_token': refresh})
    assert status == 401 and json.loads(body)['code'] == 'unauthorized', (status, body)
    assert 'invalid_dpop_proof' in headers['WWW-Authenticate'], headers['WWW-Authenticate']
    # The refused attempts left the session as it was: the page still refreshes and reads.
    b.d.execute_script("const s = JSON.parse(sessionStorage.getItem('latchkey.session')); s.tokens.access_token = 'expired';"
                       "sessionStorage.setItem('latchkey.session', JSON.stringify(s));")
    b.load()
    b.wait_view('account')
    b.wait_passkeys(1)
    after = session(b)['tokens']
    assert after['refresh_token'] != refresh and after['token_type'] == 'DPoP', after


TESTS = [test_the_apps_session_is_dpop_bound, test_copied_tokens_are_refused_without_the_key]

if __name__ == '__main__':
    sys.exit(1 if w.run_suite(TESTS, label='dpop: ') else 0)
