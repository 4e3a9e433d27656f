#!/usr/bin/env python3
"""The web app's CIBA section (docs/oidc.md, "Approvals the bank asks for"), in real headless Chromium
with a WebAuthn virtual authenticator: a bank's backend registered with `--ciba-approver passkey`
asks on the backchannel (this test calls POST /oauth2/bc-authorize itself, with client_secret_basic),
the signed-in person sees the request on the page with the bank's name, the binding message and every
member of the payment in words, approves it with a passkey step-up, and the bank's poll of
/oauth2/token gets the tokens (the payment and the step-up's receipt in the access token). A second
request is denied on the page and the bank's poll says access_denied. A client whose approver is a
device key is listed too, but the page sends its person to the phone's app instead of approving. In
German (the switcher) the section's words come from the catalog and the lines from the server.

Run through Tests/Browser/run.sh (LATCHKEY_URL, LATCHKEY_BIN, LATCHKEY_DATABASE_URL). Synchronisation
is on DOM state (data-* attributes the app sets), never sleeps. Each auth_req_id is polled at most
once after its previous poll, so no interval is waited for.
Prints one line per test and closes with 'N passed, N failed'; exit 1 on any failure.
"""
import base64
import json
import os
import secrets
import subprocess
import sys
import traceback
import urllib.error
import urllib.parse
import urllib.request

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

sys.path.insert(0, os.path.dirname(__file__))
from test_web import Browser, page_request, wait_for_server  # noqa: E402

BASE = os.environ.get('LATCHKEY_URL', 'http://localhost:8080').rstrip('/')
BIN = os.environ['LATCHKEY_BIN']
SHOTS = os.environ.get('LATCHKEY_SCREENSHOTS', os.path.join('data', 'screenshots'))
IBAN = 'DE02120300000000202051'
DETAILS = [{'type': 'payment_initiation', 'instructedAmount': {'currency': 'EUR', 'amount': '42.00'}, 'creditorName': 'Merchant A',
            'creditorAccount': {'iban': IBAN}}]
CLIENTS = {}


def add_client(name, *flags):
    out = subprocess.run([BIN, 'clients', 'add', name, '--redirect-uri', 'https://bank.example/cb', '--grant-type', 'ciba',
                          '--ciba-mode', 'poll', *flags],
                         capture_output=True, text=True, check=True,
                         env=dict(os.environ, DATABASE_URL=os.environ['LATCHKEY_DATABASE_URL'], LATCHKEY_DEV='1',
                                  LATCHKEY_RP_ID='localhost')).stdout
    fields = dict(line.split(': ', 1) for line in out.strip().splitlines())
    return fields['client_id'], fields['client_secret']


def backchannel(client, path, form):
    """(status, JSON) of a client-authenticated form POST, as the bank's backend sends it."""
    cid, secret = CLIENTS[client]
    req = urllib.request.Request(BASE + path, data=urllib.parse.urlencode(form).encode(), method='POST', headers={
        'Content-Type': 'application/x-www-form-urlencoded',
        'Authorization': 'Basic ' + base64.b64encode(f'{cid}:{secret}'.encode()).decode()})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b'{}')


def ask(client, username, **extra):
    status, body = backchannel(client, '/oauth2/bc-authorize', {'scope': 'openid', 'login_hint': username, **extra})
    assert status == 200 and body.get('auth_req_id'), (status, body)
    return body['auth_req_id']


def poll(client, auth_req_id):
    return backchannel(client, '/oauth2/token', {'grant_type': 'urn:openid:params:grant-type:ciba', 'auth_req_id': auth_req_id})


def claims(jwt):
    return json.loads(base64.urlsafe_b64decode(jwt.split('.')[1] + '=='))


def sign_up(b):
    """A new account in the web app, with a passkey in the virtual authenticator."""
    username = 'ciba-' + secrets.token_hex(3)
    b.load()
    b.wait_view('welcome')
    b.wait_autofill_idle()
    b.el('signup-username').send_keys(username)
    b.el('signup-button').click()
    b.wait_view('account')
    user_id = b.d.execute_script("return JSON.parse(sessionStorage.getItem('latchkey.session')).user.id")
    return username, user_id


def refresh(b, count):
    b.el('ciba-refresh').click()
    b.until(lambda: b.el('ciba-requests').get_attribute('data-count') == str(count), f'{count} CIBA requests listed')


def item(b, auth_req_id):
    return b.d.find_element(By.CSS_SELECTOR, f'#ciba-requests > li[data-id="{auth_req_id}"]')


def test_nothing_waiting(b, who):
    refresh(b, 0)
    assert b.el('ciba-empty').is_displayed()


def test_approve_with_a_passkey_and_the_poll_gets_tokens(b, who):
    username, user_id = who
    paying = ask('web', username, binding_message='W-7 · 42 EUR', authorization_details=json.dumps(DETAILS))
    phone = ask('phone', username, binding_message='TV code 1234')
    refresh(b, 2)
    li = item(b, paying)
    assert li.get_attribute('data-approver') == 'passkey'
    assert 'North Bank' in li.find_element(By.CLASS_NAME, 'ciba-client').text
    assert li.find_element(By.CLASS_NAME, 'ciba-binding-text').text == 'W-7 · 42 EUR'
    lines = li.find_element(By.CLASS_NAME, 'ciba-lines').text.replace('\xa0', ' ')
    for shown in ['€42.00', 'Payee: Merchant A', IBAN, 'Sign you in with your Latchkey account']:
        assert shown in lines, (shown, lines)
    approve = li.find_element(By.CLASS_NAME, 'ciba-approve')
    assert approve.text.replace('\xa0', ' ') == 'Approve €42.00 to Merchant A', approve.text
    # The device-key client: listed, deniable, but approved only in the phone's app.
    other = item(b, phone)
    assert other.get_attribute('data-approver') == 'attested-device-key'
    assert not other.find_elements(By.CLASS_NAME, 'ciba-approve')
    assert other.find_element(By.CLASS_NAME, 'ciba-elsewhere').is_displayed()
    assert other.find_element(By.CLASS_NAME, 'ciba-deny').is_displayed()
    b.shot('ciba-requests')
    # Still pending for the bank: its first poll.
    status, body = poll('phone', phone)
    assert status == 400 and body.get('error') == 'authorization_pending', (status, body)

    approve.click()
    b.wait_banner('ciba_approved')
    assert b.body('ciba') == 'approved'
    b.until(lambda: b.el('ciba-requests').get_attribute('data-count') == '1', 'the approved request gone from the list')
    # The bank's first poll of that request: the tokens, with the payment and the step-up's receipt.
    status, tokens = poll('web', paying)
    assert status == 200, (status, tokens)
    access = claims(tokens['access_token'])
    assert access['sub'] == user_id and access['client_id'] == CLIENTS['web'][0], access
    assert access.get('receipt_id'), access
    assert access['authorization_details'][0]['creditorName'] == 'Merchant A', access
    assert claims(tokens['id_token'])['sub'] == user_id
    # Once only.
    status, again = poll('web', paying)
    assert status == 400 and again.get('error') == 'invalid_grant', (status, again)

    # The phone's request denied here too (any session may deny).
    item(b, phone).find_element(By.CLASS_NAME, 'ciba-deny').click()
    b.wait_banner('ciba_denied')
    b.until(lambda: b.el('ciba-requests').get_attribute('data-count') == '0', 'the list empty')


def test_deny_and_the_poll_says_access_denied(b, who):
    username, _ = who
    asked = ask('web', username, binding_message='Sign-in on the TV')
    refresh(b, 1)
    item(b, asked).find_element(By.CLASS_NAME, 'ciba-deny').click()
    b.wait_banner('ciba_denied')
    assert b.body('ciba') == 'denied'
    b.until(lambda: b.el('ciba-requests').get_attribute('data-count') == '0', 'the denied request gone')
    status, body = poll('web', asked)
    assert status == 400 and body.get('error') == 'access_denied', (status, body)


def test_a_request_answered_elsewhere_says_so(b, who):
    username, _ = who
    asked = ask('web', username)
    refresh(b, 1)
    # Denied meanwhile elsewhere (here: this session's own latchkey.js, behind the page's back; the
    # session is DPoP-bound, so a copy of its token would be refused).
    status, body = page_request(b.d.execute_async_script, 'POST', f'/v1/ciba/requests/{asked}/deny')
    assert status == 200 and body == b'null', (status, body)
    item(b, asked).find_element(By.CLASS_NAME, 'ciba-approve').click()
    text = b.wait_banner('not_found')
    assert text == 'This request was already answered or has expired. Nothing was approved.', text
    b.until(lambda: b.el('ciba-requests').get_attribute('data-count') == '0', 'the list refreshed')


def test_in_german_the_page_and_the_lines(b, who):
    """The switcher's German: the section's own words from the catalog, the request's lines and the
    approve button in the server's German (the list is asked for with Accept-Language: de)."""
    username, _ = who
    asked = ask('web', username, binding_message='W-8', authorization_details=json.dumps(DETAILS))
    try:
        Select(b.el('language')).select_by_value('de')
        b.until(lambda: b.d.execute_script('return document.documentElement.lang') == 'de' and b.body('ready') == 'true'
                and b.body('view') == 'account', 'the page again, in German')
        b.until(lambda: b.el('ciba-requests').get_attribute('data-count') == '1', 'the request listed')
        assert b.el('ciba-title').text == 'Anfragen zur Freigabe', b.el('ciba-title').text
        li = item(b, asked)
        assert li.find_element(By.CLASS_NAME, 'ciba-client').text == 'North Bank bittet um Ihre Freigabe'
        lines = li.find_element(By.CLASS_NAME, 'ciba-lines').text.replace('\xa0', ' ')
        assert 'Empfänger: Merchant A' in lines, lines
        approve = li.find_element(By.CLASS_NAME, 'ciba-approve').text.replace('\xa0', ' ')
        assert approve == '42,00 € an Merchant A freigeben', approve
        b.shot('ciba-requests-de')
        li.find_element(By.CLASS_NAME, 'ciba-deny').click()
        assert b.wait_banner('ciba_denied') == 'Sie haben die Anfrage von North Bank abgelehnt.'
    finally:
        b.d.execute_script("localStorage.removeItem('latchkey.language')")


def main():
    os.makedirs(SHOTS, exist_ok=True)
    wait_for_server()
    CLIENTS['web'] = add_client('North Bank', '--ciba-approver', 'passkey', '--authorization-details-type', 'payment_initiation')
    CLIENTS['phone'] = add_client('Phone-only Bank')
    b = Browser()
    results = []
    try:
        who = sign_up(b)
        for t in [test_nothing_waiting, test_approve_with_a_passkey_and_the_poll_gets_tokens, test_deny_and_the_poll_says_access_denied,
                  test_a_request_answered_elsewhere_says_so, test_in_german_the_page_and_the_lines]:
            try:
                t(b, who)
                results.append(True)
                print(f'ok   {t.__name__}', flush=True)
            except Exception:
                results.append(False)
                print(f'FAIL {t.__name__}\n{traceback.format_exc()}', flush=True)
                try:
                    b.d.save_screenshot(os.path.join(SHOTS, f'ciba-fail-{t.__name__}.png'))
                except Exception:
                    pass
    finally:
        b.d.quit()
    print(f'{sum(results)} passed, {len(results) - sum(results)} failed')
    return 0 if all(results) else 1


if __name__ == '__main__':
    sys.exit(main())
