#!/usr/bin/env python3
"""The whole OpenID redirect dance in real headless Chromium with a WebAuthn virtual authenticator:
a tiny relying-party web app served by this test (its own HTTP server on loopback, a confidential
client registered with `latchkey clients add`) sends the browser to /oauth2/authorize, Latchkey's
/authorize page signs the person in with a passkey (conditional UI first) into the OP session
cookie, shows the server's display lines, and the browser lands back on the app signed in. The
payment variant shows every member of its authorization detail (the IBAN and the remittance text
too, SPEC "The `/authorize` page") in the page's language, says "Approve €42.00 to Merchant A", and
needs the passkey step-up before it approves. Screenshots of the payment consent in the four
languages at desktop and phone width go to docs/screenshots/oauth-consent-<lang>-<desktop|phone>.png.

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
import urllib.error
import urllib.parse
import urllib.request

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

sys.path.insert(0, os.path.dirname(__file__))
from test_web import Browser, wait_for_server  # noqa: E402

BASE = os.environ.get('LATCHKEY_URL', 'http://localhost:8080').rstrip('/')
BIN = os.environ['LATCHKEY_BIN']
SHOTS = os.environ.get('LATCHKEY_SCREENSHOTS', os.path.join('data', 'screenshots'))
# The committed screenshots of the consent page (docs/), beside the suite's own under SHOTS.
DOCS_SHOTS = os.path.join(os.path.dirname(__file__), '..', '..', 'docs', 'screenshots')
WIDTHS = {'desktop': (1280, 900), 'phone': (390, 844)}
RP = {}
IBAN = 'DE02120300000000202051'
REMITTANCE = 'Invoice 2024-117, customer 88'
# An attacker's favourite members: where the money goes, what the bank statement says, and one
# member no one told the page about. Every one of them must be on the page.
DETAILS = [{'type': 'payment_initiation', 'instructedAmount': {'currency': 'EUR', 'amount': '42.00'}, 'creditorName': 'Merchant A',
            'creditorAccount': {'iban': IBAN}, 'remittanceInformationUnstructured': REMITTANCE, 'x-note': 'ships Friday'}]


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


def text(b, element_id):
    """An element's text as shown; WebDriver already reads a no-break space as a space, this makes sure."""
    return b.d.find_element(By.ID, element_id).text.replace('\xa0', ' ')


def page_lang(b):
    return b.d.execute_script('return document.documentElement.lang')


def start(b, path):
    """The app's sign-in link, to Latchkey's page for a new pending request; returns the request id."""
    b.d.get(RP['base'] + path)
    b.d.find_element(By.ID, 'login').click()
    b.until(lambda: b.d.current_url.startswith(BASE + '/authorize?request='), 'the /authorize page')
    return urllib.parse.parse_qs(urllib.parse.urlparse(b.d.current_url).query)['request'][0]


def back_at_app(b):
    b.until(lambda: b.d.current_url.startswith(RP['base'] + '/cb') and b.d.find_elements(By.ID, 'result'), 'back at the app')
    return b.d.find_element(By.ID, 'result').text


def test_sign_in_with_latchkey(b, user_id):
    start(b, '/')
    # No OP session cookie yet: the page signs in, conditional UI first (the virtual authenticator
    # answers the autofill request with its passkey).
    b.until(lambda: state(b) == 'consent', 'the page signs in and asks for consent')
    assert 'Demo shop' in text(b, 'request-title'), text(b, 'request-title')
    # The app's redirect URI is on 127.0.0.1: SPEC's words for a loopback one.
    assert 'an app on this device' in text(b, 'client-host'), text(b, 'client-host')
    assert 'See your username and display name' in text(b, 'lines'), text(b, 'lines')
    assert text(b, 'approve') == 'Allow', text(b, 'approve')
    assert b.d.execute_script("return Object.keys(sessionStorage).filter((k) => !k.startsWith('latchkey.op.signedInFor.'))") == []
    b.d.save_screenshot(os.path.join(SHOTS, 'oidc-consent.png'))
    b.d.find_element(By.ID, 'approve').click()
    assert back_at_app(b) == f'Signed in as {user_id}; receipt none'


def test_payment_shows_every_member_in_en_and_de(b, user_id):
    request_id = start(b, '/pay')
    # The OP session cookie of the first test signs this request in: straight to consent.
    b.until(lambda: state(b) == 'consent', 'consent for the payment')
    assert page_lang(b) == 'en'
    lines = text(b, 'lines')
    for shown in ['€42.00', 'Merchant A', IBAN, REMITTANCE, 'x-note: ships Friday', 'payment_initiation']:
        assert shown in lines, (shown, lines)
    assert text(b, 'approve') == 'Approve €42.00 to Merchant A', text(b, 'approve')
    # The switcher asks the server again in German: the lines, and the step-up that binds them.
    Select(b.d.find_element(By.ID, 'language')).select_by_value('de')
    b.until(lambda: page_lang(b) == 'de' and state(b) == 'consent', 'the page again, in German')
    assert f'request={request_id}' in b.d.current_url and 'lang=de' in b.d.current_url, b.d.current_url
    lines = text(b, 'lines')
    for shown in ['42,00 €', 'Empfänger: Merchant A', IBAN, 'Verwendungszweck: ' + REMITTANCE, 'x-note: ships Friday']:
        assert shown in lines, (shown, lines)
    assert text(b, 'approve') == '42,00 € an Merchant A freigeben', text(b, 'approve')
    assert text(b, 'deny') == 'Ablehnen', text(b, 'deny')
    assert 'möchte Ihr Latchkey-Konto verwenden' in text(b, 'request-title'), text(b, 'request-title')
    # The committed screenshots: the payment consent in each language, at desktop and phone width.
    os.makedirs(DOCS_SHOTS, exist_ok=True)
    try:
        for lang in ['en', 'de', 'pl', 'zh-Hans']:
            for width, (w, h) in WIDTHS.items():
                b.d.set_window_size(w, h)
                b.d.get(f'{BASE}/authorize?request={request_id}&lang={lang}')
                b.until(lambda: page_lang(b) == lang and state(b) == 'consent', f'consent in {lang}')
                assert IBAN in text(b, 'lines') and REMITTANCE in text(b, 'lines'), (lang, text(b, 'lines'))
                wide = b.d.execute_script('return document.documentElement.scrollWidth - document.documentElement.clientWidth')
                assert wide <= 1, f'{lang} {width}: {wide}px wider than the window'
                # The whole page in one picture: the window as tall as the page.
                tall = b.d.execute_script('return document.documentElement.scrollHeight')
                b.d.set_window_size(w, max(h, tall + (h - b.d.execute_script('return window.innerHeight'))))
                b.d.save_screenshot(os.path.join(DOCS_SHOTS, f'oauth-consent-{lang}-{width}.png'))
    finally:
        b.d.set_window_size(*WIDTHS['desktop'])
    # Nothing was approved: deny, so the app hears access_denied.
    b.d.get(f'{BASE}/authorize?request={request_id}')
    b.until(lambda: state(b) == 'consent', 'consent again')
    b.d.find_element(By.ID, 'deny').click()
    assert back_at_app(b) == 'error access_denied'


def test_payment_needs_step_up(b, user_id):
    start(b, '/pay')
    b.until(lambda: state(b) == 'consent', 'consent for the payment')
    b.d.find_element(By.ID, 'approve').click()
    text_ = back_at_app(b)
    assert text_.startswith(f'Signed in as {user_id}; receipt ') and not text_.endswith('receipt none'), text_


def test_deny(b, user_id):
    start(b, '/')
    b.until(lambda: state(b) == 'consent', 'consent')
    b.d.find_element(By.ID, 'deny').click()
    assert back_at_app(b) == 'error access_denied'


def test_unknown_request_says_so_in_words(b, user_id):
    # Well formed (lkq_ + 32 bytes), never issued: the page says so in Polish, not in the browser's words.
    b.d.get(f'{BASE}/authorize?request=lkq_{b64u(secrets.token_bytes(32))}&lang=pl')
    b.until(lambda: state(b) == 'error', 'the error state')
    shown = text(b, 'banner-text')
    assert shown == 'To żądanie logowania jest nieznane, wygasło lub zostało już użyte. Wróć do aplikacji i spróbuj ponownie.', shown


def test_error_page_in_browser_language(b, user_id):
    # An unknown client: the styled 400 page in the browser's language, never a redirect (SPEC "Authorization").
    query = urllib.parse.urlencode({'response_type': 'code', 'client_id': 'no-such-client', 'redirect_uri': RP['redirect'], 'scope': 'openid'})
    req = urllib.request.Request(f'{BASE}/oauth2/authorize?{query}', headers={'Accept-Language': 'de-DE,de;q=0.9,en;q=0.5'})
    try:
        urllib.request.urlopen(req, timeout=10)
        raise AssertionError('an unknown client was answered 2xx')
    except urllib.error.HTTPError as e:
        assert e.code == 400, e.code
        body = e.read().decode()
        assert e.headers.get('Cache-Control') == 'no-store', e.headers
    assert '<html lang="de">' in body and 'href="/app.css"' in body, body
    assert 'Diese App (client_id) ist bei diesem Server nicht registriert.' in body, body


def test_dismissed_passkey_prompt_is_a_translated_sentence(b, user_id):
    """The hole: the /authorize page showed the browser's raw NotAllowedError text when the passkey
    prompt was dismissed. SPEC "The `/authorize` page": browser errors are never shown raw. A German
    browser of its own (no OP session cookie) whose authenticator's user verification fails, as a
    person who dismisses the prompt: the banner is the page's German sentence for a cancelled sign-in."""
    with open(os.path.join(os.path.dirname(__file__), '..', '..', 'web', 'i18n', 'de.json'), encoding='utf-8') as f:
        german = json.load(f)
    own = {german[k] for k in ['Sign-in was cancelled. Press “Sign in with a passkey” to try again.',
                               'The passkey prompt timed out. Press “Sign in with a passkey” to try again.']}
    other = Browser('de-DE')
    try:
        register_passkey(other)  # a passkey of its own, so the prompt has something to offer
        other.d.set_user_verified(False)
        start(other, '/')
        other.until(lambda: state(other) == 'signin', 'the sign-in form')
        assert page_lang(other) == 'de', page_lang(other)
        other.d.find_element(By.ID, 'signin-button').click()
        other.until(lambda: other.d.find_element(By.ID, 'banner').is_displayed() and state(other) == 'signin', 'the banner after the refused prompt')
        shown = text(other, 'banner-text')
        assert shown in own, f'not the page\'s own German sentence: {shown!r}'
        for raw in ['NotAllowedError', 'not allowed', 'timed out or was not allowed', 'privacy-considerations', 'DOMException']:
            assert raw.lower() not in shown.lower(), (raw, shown)
        other.d.save_screenshot(os.path.join(SHOTS, 'oidc-prompt-dismissed-de.png'))
    finally:
        other.d.quit()


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
        for t in [test_sign_in_with_latchkey, test_payment_shows_every_member_in_en_and_de, test_payment_needs_step_up, test_deny,
                  test_unknown_request_says_so_in_words, test_error_page_in_browser_language,
                  test_dismissed_passkey_prompt_is_a_translated_sentence]:
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
