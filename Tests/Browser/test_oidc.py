#!/usr/bin/env python3
"""The whole OpenID redirect dance in real headless Chromium with a WebAuthn virtual authenticator:
a tiny relying-party web app served by this test (its own HTTP server on loopback, a confidential
client registered with `latchkey clients add`) sends the browser to /oauth2/authorize, Latchkey's
/authorize page signs the person in with a passkey (conditional UI first), shows what the app asks,
and the browser lands back on the app signed in. The payment variant shows "Pay €42.00 to
Merchant A" and needs the passkey step-up before it approves.

Run through Tests/Browser/run.sh (LATCHKEY_URL, LATCHKEY_BIN, LATCHKEY_DATABASE_URL). Synchronisation
is on DOM state (data-state on the page, text on the app), never sleeps.
Prints one line per test and closes with 'N passed, N failed'; exit 1 on any failure.
"""
import base64
import hashlib
import html
import http.server
import json
import os
import secrets
import subprocess
import sys
import threading
import traceback
import urllib.parse
import urllib.request

from selenium.webdriver.common.by import By

sys.path.insert(0, os.path.dirname(__file__))
from test_web import Browser, wait_for_server  # noqa: E402

BASE = os.environ.get('LATCHKEY_URL', 'http://localhost:8080').rstrip('/')
BIN = os.environ['LATCHKEY_BIN']
SHOTS = os.environ.get('LATCHKEY_SCREENSHOTS', os.path.join('data', 'screenshots'))
RP = {}
DETAILS = [{'type': 'payment_initiation', 'instructedAmount': {'currency': 'EUR', 'amount': '42.00'}, 'creditorName': 'Merchant A'}]


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b'=').decode()


def claims(jwt):
    return json.loads(base64.urlsafe_b64decode(jwt.split('.')[1] + '=='))


class RelyingParty(http.server.BaseHTTPRequestHandler):
    """`/` and `/pay` start a sign-in; `/cb` exchanges the code (client_secret_basic) and says who signed in."""

    def page(self, body, status=200):
        data = f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Demo shop</title></head><body><main>{body}</main></body></html>'.encode()
        self.send_response(status)
        self.send_header('Content-Type', 'text/html; charset=utf-8')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        if url.path in ('/', '/pay'):
            verifier, state, nonce = secrets.token_urlsafe(48), secrets.token_urlsafe(8), secrets.token_urlsafe(8)
            RP[state] = (verifier, nonce)
            params = {'response_type': 'code', 'client_id': RP['client_id'], 'redirect_uri': RP['redirect'], 'scope': 'openid profile',
                      'state': state, 'nonce': nonce, 'code_challenge_method': 'S256',
                      'code_challenge': b64u(hashlib.sha256(verifier.encode()).digest())}
            if url.path == '/pay':
                params['authorization_details'] = json.dumps(DETAILS)
            href = BASE + '/oauth2/authorize?' + urllib.parse.urlencode(params)
            return self.page(f'<h1>Demo shop</h1><a id="login" href="{html.escape(href)}">Sign in with Latchkey</a>')
        if url.path == '/cb':
            q = dict(urllib.parse.parse_qsl(url.query))
            if 'error' in q:
                return self.page(f'<p id="result">error {html.escape(q["error"])}</p>')
            if q.get('iss') != BASE or q.get('state') not in RP:
                return self.page('<p id="result">mix-up or state mismatch</p>', 400)
            verifier, nonce = RP.pop(q['state'])
            form = urllib.parse.urlencode({'grant_type': 'authorization_code', 'code': q['code'], 'redirect_uri': RP['redirect'],
                                           'code_verifier': verifier}).encode()
            req = urllib.request.Request(BASE + '/oauth2/token', data=form, method='POST', headers={
                'Content-Type': 'application/x-www-form-urlencoded',
                'Authorization': 'Basic ' + base64.b64encode(f'{RP["client_id"]}:{RP["secret"]}'.encode()).decode()})
            with urllib.request.urlopen(req, timeout=10) as r:
                tokens = json.loads(r.read())
            idt, at = claims(tokens['id_token']), claims(tokens['access_token'])
            if idt.get('nonce') != nonce:
                return self.page('<p id="result">nonce mismatch</p>', 400)
            receipt = at.get('receipt_id') or 'none'
            return self.page(f'<p id="result">Signed in as {html.escape(idt["sub"])}; receipt {html.escape(receipt)}</p>')
        self.page('not found', 404)

    def log_message(self, *a):
        pass


def register_passkey(b):
    """A passkey in the virtual authenticator for a new account, made by the browser against /v1."""
    b.d.get(BASE + '/authorize')
    username = 'rp-' + secrets.token_hex(3)
    result = b.d.execute_async_script("""
        const [username, done] = arguments;
        (async () => {
          const { parseCreationOptions: creationOptions, credentialToJSON: credentialJSON } = await import('/latchkey.js');
          const post = async (p, body) => (await fetch(p, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) })).json();
          const options = await post('/v1/passkeys/registration/options', { username, displayName: username });
          const credential = await navigator.credentials.create({ publicKey: creationOptions(options) });
          const r = await post('/v1/passkeys/registration/verify', credentialJSON(credential));
          sessionStorage.clear();
          done(r.user ? r.user.id : JSON.stringify(r));
        })().catch((e) => done('error: ' + e));
    """, username)
    assert not str(result).startswith('error') and len(result) == 22, result
    return result


def state(b):
    return b.d.find_element(By.TAG_NAME, 'body').get_attribute('data-state')


def test_sign_in_with_latchkey(b, user_id):
    b.d.get(RP['base'] + '/')
    b.d.find_element(By.ID, 'login').click()
    # Conditional UI first: the virtual authenticator answers the autofill request with its passkey.
    b.until(lambda: state(b) == 'consent', 'the page signs in and asks for consent')
    assert b.d.find_element(By.ID, 'client-name').text == 'Demo shop'
    assert 'See your username and display name' in b.d.find_element(By.ID, 'scopes').text
    b.d.save_screenshot(os.path.join(SHOTS, 'oidc-consent.png'))
    b.d.find_element(By.ID, 'approve').click()
    b.until(lambda: b.d.current_url.startswith(RP['base'] + '/cb') and b.d.find_elements(By.ID, 'result'), 'back at the app')
    text = b.d.find_element(By.ID, 'result').text
    assert text == f'Signed in as {user_id}; receipt none', text


def test_payment_needs_step_up(b, user_id):
    b.d.get(RP['base'] + '/pay')
    b.d.find_element(By.ID, 'login').click()
    b.until(lambda: state(b) == 'consent', 'consent for the payment')
    details = b.d.find_element(By.ID, 'details').text
    assert 'Pay €42.00 to Merchant A' in details, details
    b.d.save_screenshot(os.path.join(SHOTS, 'oidc-payment.png'))
    b.d.find_element(By.ID, 'approve').click()
    b.until(lambda: b.d.current_url.startswith(RP['base'] + '/cb') and b.d.find_elements(By.ID, 'result'), 'back at the app after the step-up')
    text = b.d.find_element(By.ID, 'result').text
    assert text.startswith(f'Signed in as {user_id}; receipt ') and not text.endswith('receipt none'), text


def test_deny(b, user_id):
    b.d.get(RP['base'] + '/')
    b.d.find_element(By.ID, 'login').click()
    b.until(lambda: state(b) == 'consent', 'consent')
    b.d.find_element(By.ID, 'deny').click()
    b.until(lambda: b.d.find_elements(By.ID, 'result'), 'back at the app')
    assert b.d.find_element(By.ID, 'result').text == 'error access_denied'


def main():
    os.makedirs(SHOTS, exist_ok=True)
    wait_for_server()
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), RelyingParty)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    RP['base'] = f'http://127.0.0.1:{server.server_port}'
    RP['redirect'] = RP['base'] + '/cb'
    out = subprocess.run([BIN, 'clients', 'add', 'Demo shop', '--redirect-uri', RP['redirect'], '--authorization-details-type', 'payment_initiation'],
                         capture_output=True, text=True, check=True,
                         # The server's deployment: dev mode, so the app's loopback http redirect may be registered.
                         env=dict(os.environ, DATABASE_URL=os.environ['LATCHKEY_DATABASE_URL'], LATCHKEY_DEV='1', LATCHKEY_RP_ID='localhost')).stdout
    fields = dict(line.split(': ', 1) for line in out.strip().splitlines())
    RP['client_id'], RP['secret'] = fields['client_id'], fields['client_secret']
    b = Browser()
    results = []
    try:
        user_id = register_passkey(b)
        for t in [test_sign_in_with_latchkey, test_payment_needs_step_up, test_deny]:
            try:
                t(b, user_id)
                results.append(True)
                print(f'ok   {t.__name__}', flush=True)
            except Exception:
                results.append(False)
                print(f'FAIL {t.__name__}\n{traceback.format_exc()}', flush=True)
                try:
                    b.d.save_screenshot(os.path.join(SHOTS, f'oidc-fail-{t.__name__}.png'))
                except Exception:
                    pass
    finally:
        b.d.quit()
        server.shutdown()
    print(f'{sum(results)} passed, {len(results) - sum(results)} failed')
    return 0 if all(results) else 1


if __name__ == '__main__':
    sys.exit(main())
