#!/usr/bin/env python3
"""The web app at `/`, in real headless Chromium with a WebAuthn virtual authenticator.

Run through Tests/Browser/run.sh (it installs Chromium, Selenium, starts PostgreSQL and the server).
Environment: LATCHKEY_URL (http://localhost:PORT), LATCHKEY_SCREENSHOTS (folder for PNGs).

The tests are one story, in order, sharing one browser and one authenticator: sign up (keyboard
only), sign out, a cancelled sign-in, a taken username, sign in with the button and with autofill
(conditional mediation), token refresh after a 401, an ended session, rename (keyboard only), the "already on this
device" message, step-up approval of a 200 EUR transfer, the sessions list ("this device" marked,
another ended, keyboard only), revoke (keyboard only: it ends this session too), and a revoked
passkey failing to sign in. Synchronisation is on DOM state only (WebDriverWait conditions on
data-* attributes the app sets), never sleeps.

Chromium's virtual authenticator answers an autofill (conditional) request at once with its
credential, as if the person picked it. So where a test needs the app signed *out* with the
credential still present, it first turns user verification off: the pending autofill request
then ends without a choice, the app shows the welcome screen, and verification is turned back on.

Prints one line per test and closes with 'N passed, N failed, N skipped'; exit 1 on any failure.
"""
import json
import os
import secrets
import sys
import time
import traceback
import urllib.error
import urllib.request

from page_api import page_request  # noqa: F401 - the suites import it from here too
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.common.virtual_authenticator import Credential, VirtualAuthenticatorOptions
from selenium.webdriver.support.ui import WebDriverWait

# Starting a server of a test's own lives in serving.py (no Selenium: the Firefox tests use it too).
from serving import wait_until_ready, with_server  # noqa: F401 - re-exported for the suites
import soft_passkey

BASE = os.environ.get('LATCHKEY_URL', 'http://localhost:8080').rstrip('/')
SHOTS = os.environ.get('LATCHKEY_SCREENSHOTS', os.path.join('data', 'screenshots'))
WAIT = 20  # seconds: an upper bound for a condition, not a delay

USERNAME = f'ada-{secrets.token_hex(3)}'
DISPLAY_NAME = 'Ada Lovelace'


class Skip(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Plumbing

def http(method, path, body=None, headers=None):
    """(status, headers, body bytes) of one request to the server, without the browser."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method=method, headers=headers or {})
    if data is not None:
        req.add_header('Content-Type', 'application/json')
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def wait_for_server(seconds=90):
    """Bounded readiness poll of /readyz while the server starts (not a DOM synchronisation)."""
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        try:
            status, _, _ = http('GET', '/readyz')
            if status == 200:
                return
            last = f'HTTP {status}'
        except OSError as e:
            last = str(e)
        pid = os.environ.get('LATCHKEY_SERVER_PID')
        if pid and not os.path.exists(f'/proc/{pid}'):
            raise RuntimeError('the server exited; see data/browser/server.log')
        time.sleep(0.25)
    raise RuntimeError(f'server not ready after {seconds}s: {last}')


def make_driver(lang='en-GB'):
    options = Options()
    options.binary_location = os.environ.get('CHROMIUM', '/usr/bin/chromium')
    for arg in ['--headless=new', '--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu',
                '--window-size=1280,1100', '--force-device-scale-factor=1', f'--lang={lang}',
                '--no-first-run', '--disable-extensions', '--password-store=basic']:
        options.add_argument(arg)
    options.set_capability('goog:loggingPrefs', {'browser': 'ALL'})
    # navigator.languages and Accept-Language (the pages' and the mails' language, issue 22).
    options.add_experimental_option('prefs', {'intl.accept_languages': lang})
    service = Service(os.environ.get('CHROMEDRIVER', '/usr/bin/chromedriver'))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(30)
    return driver


def assert_inside(inner, outer, what, slack=.5):
    """`inner` lies within `outer`; both are [left, top, right, bottom] in CSS pixels, as the page's
    getBoundingClientRect() gives them (`slack` for sub-pixel rounding)."""
    l, t, r, b = inner
    L, T, R, B = outer
    assert L - slack <= l and r <= R + slack and T - slack <= t and b <= B + slack, what


class Browser:
    def __init__(self, lang='en-GB'):
        self.d = make_driver(lang)
        self.d.get(BASE + '/')
        va = VirtualAuthenticatorOptions()
        va.protocol = VirtualAuthenticatorOptions.Protocol.CTAP2
        va.transport = VirtualAuthenticatorOptions.Transport.INTERNAL
        va.has_resident_key = True
        va.has_user_verification = True
        va.is_user_verified = True
        va.is_user_consenting = True
        self.d.add_virtual_authenticator(va)

    # --- waiting on DOM state
    def until(self, condition, what):
        try:
            # A re-rendered list can replace an element between finding and reading it.
            return WebDriverWait(self.d, WAIT, ignored_exceptions=(StaleElementReferenceException,)).until(
                lambda d: condition())
        except TimeoutException:
            raise AssertionError(f'timed out waiting for {what}; {self.state()}') from None

    def body(self, attr):
        return self.d.find_element(By.TAG_NAME, 'body').get_attribute(f'data-{attr}')

    def state(self):
        try:
            banner = self.d.find_element(By.ID, 'banner')
            return (f"view={self.body('view')} conditional={self.body('conditional')} "
                    f"banner={'hidden' if not banner.is_displayed() else repr(banner.text)} "
                    f"code={banner.get_attribute('data-code')!r}")
        except Exception as e:  # noqa: BLE001 - diagnostics only
            return f'(state unavailable: {e})'

    def wait_view(self, name):
        self.until(lambda: self.body('view') == name, f'view {name}')

    def wait_autofill_idle(self):
        self.until(lambda: self.body('conditional') in ('idle', 'unavailable'), 'the autofill request to end')

    def wait_banner(self, code):
        self.until(lambda: self.el('banner').is_displayed() and self.el('banner').get_attribute('data-code') == code,
                   f'a message with code {code}')
        return self.el('banner-text').text

    def wait_passkeys(self, count):
        self.until(lambda: self.el('passkeys').get_attribute('data-count') == str(count), f'{count} passkeys listed')
        return self.d.find_elements(By.CSS_SELECTOR, '#passkeys > li')

    def load(self):
        self.d.get(BASE + '/')
        self.until(lambda: self.body('ready') == 'true', 'the app to start')

    # --- elements and keys
    def el(self, element_id):
        return self.d.find_element(By.ID, element_id)

    def focused(self):
        return self.d.switch_to.active_element

    def keys(self, *keys):
        self.focused().send_keys(*keys)

    def tab_to(self, element, limit=60, backwards=False):
        """Presses Tab (or Shift+Tab) until `element` has focus: proves it is reachable by keyboard."""
        for _ in range(limit):
            if self.focused() == element:
                return
            self.keys((Keys.SHIFT + Keys.TAB) if backwards else Keys.TAB)
        raise AssertionError(f'{element.get_attribute("id") or element.text!r} not reachable with Tab')

    def shot(self, name):
        os.makedirs(SHOTS, exist_ok=True)
        self.d.save_screenshot(os.path.join(SHOTS, f'{name}.png'))

    # --- authenticator
    def user_verified(self, value):
        self.d.set_user_verified(value)

    def sign_out_keeping_credential(self):
        """Signs out while the authenticator cannot answer autofill (see the module docstring)."""
        self.user_verified(False)
        signout = self.el('signout')
        self.until(lambda: signout.is_displayed() and signout.is_enabled(), 'the sign-out button')
        signout.click()
        self.wait_view('welcome')
        self.wait_autofill_idle()
        self.user_verified(True)


# ---------------------------------------------------------------------------------------------
# The story

def test_static_files_are_served_safely(b):
    status, headers, body = http('GET', '/')
    assert status == 200 and headers['Content-Type'].startswith('text/html'), (status, headers['Content-Type'])
    assert b'autocomplete="username webauthn"' in body
    assert "script-src 'self'" in headers['Content-Security-Policy']
    assert headers['Cache-Control'] == 'no-cache' and headers['ETag']
    status, _, _ = http('GET', '/', headers={'If-None-Match': headers['ETag']})
    assert status == 304, status
    for path, kind in [('/app.js', 'text/javascript'), ('/app.css', 'text/css')]:
        status, headers, _ = http('GET', path)
        assert status == 200 and headers['Content-Type'].startswith(kind), (path, status, headers['Content-Type'])
    for path in ['/index.html', '/aaguids.json', '/../Package.swift', '/app.js/..', '/%2e%2e/Package.swift', '/web/app.js']:
        status, _, _ = http('GET', path)
        assert status == 404, (path, status)


def test_sign_up_with_keyboard_only(b):
    b.load()
    b.wait_view('welcome')
    b.wait_autofill_idle()
    b.shot('01-welcome')
    b.tab_to(b.el('signup-username'))
    b.keys(USERNAME)
    b.keys(Keys.TAB)
    assert b.focused() == b.el('signup-display')
    b.keys(DISPLAY_NAME, Keys.ENTER)
    b.wait_view('account')
    assert b.body('signin-method') == 'signup'
    assert b.focused() == b.el('account-title'), 'focus moves to the page heading'
    items = b.wait_passkeys(1)
    provider = items[0].find_element(By.CSS_SELECTOR, '.pk-provider').text
    # Chromium's virtual authenticator has an AAGUID no provider list knows: the passkey is named
    # after the device it was made on (issue 22), not "Passkey" beside the "Passkey" provider.
    assert provider == 'Passkey', provider
    name = items[0].find_element(By.CSS_SELECTOR, '.pk-name').text
    assert name == 'Chrome on Linux', name
    assert 'Created just now' in items[0].text and 'Never used' in items[0].text, items[0].text
    assert USERNAME in b.el('who').text
    b.shot('02-signed-up')


def test_sign_out(b):
    b.sign_out_keeping_credential()
    assert b.focused() == b.el('welcome-title')
    assert not b.el('session').is_displayed()
    assert b.d.execute_script("return sessionStorage.getItem('latchkey.session')") is None
    b.shot('03-signed-out')


def test_cancelled_sign_in_says_so(b):
    b.user_verified(False)  # the authenticator refuses: what the page sees when the person cancels
    b.el('signin-button').click()
    text = b.wait_banner('cancelled')
    assert 'cancelled' in text, text
    b.shot('04-sign-in-cancelled')
    b.wait_autofill_idle()  # the autofill request offered again after the failure has ended
    b.user_verified(True)
    b.el('banner-close').click()


def test_taken_username_says_so(b):
    b.user_verified(False)
    assert b.el('signup-username').get_attribute('value') == '', 'the forms are cleared on sign-out'
    b.el('signup-username').send_keys(USERNAME)
    b.el('signup-button').click()
    text = b.wait_banner('conflict')
    assert 'taken' in text, text
    assert b.body('view') == 'welcome'
    b.el('signup-username').clear()
    b.el('banner-close').click()
    b.wait_autofill_idle()
    b.user_verified(True)


def test_sign_in_with_the_button(b):
    # Tabbing through the username field offers autofill again; keep the authenticator from
    # answering that until focus is on the button.
    b.user_verified(False)
    b.tab_to(b.el('signin-button'))
    b.wait_autofill_idle()
    b.user_verified(True)
    b.keys(Keys.ENTER)
    b.wait_view('account')
    assert b.body('signin-method') == 'button'
    items = b.wait_passkeys(1)
    assert 'Last used just now' in items[0].text, items[0].text


def test_sign_in_with_autofill(b):
    b.sign_out_keeping_credential()
    b.load()  # a fresh page starts the conditional request at once; the authenticator answers it
    b.wait_view('account')
    assert b.body('signin-method') == 'autofill', b.body('signin-method')
    assert 'autofill' in b.el('account-lede').text
    b.wait_passkeys(1)


def test_expired_access_token_is_refreshed(b):
    before = json.loads(b.d.execute_script("return sessionStorage.getItem('latchkey.session')"))
    before['tokens']['access_token'] = 'expired.' + before['tokens']['access_token'][8:]
    b.d.execute_script("sessionStorage.setItem('latchkey.session', arguments[0])", json.dumps(before))
    b.load()
    b.wait_view('account')
    b.wait_passkeys(1)
    after = json.loads(b.d.execute_script("return sessionStorage.getItem('latchkey.session')"))
    assert after['tokens']['refresh_token'] != before['tokens']['refresh_token'], 'the refresh token rotated'
    assert after['tokens']['access_token'] != before['tokens']['access_token']


def test_ended_session_asks_to_sign_in_again(b):
    session = json.loads(b.d.execute_script("return sessionStorage.getItem('latchkey.session')"))
    session['tokens']['access_token'] = 'expired'
    session['tokens']['refresh_token'] = 'revoked'
    b.d.execute_script("sessionStorage.setItem('latchkey.session', arguments[0])", json.dumps(session))
    b.user_verified(False)  # keep the autofill request the app then starts from signing in again
    b.load()
    text = b.wait_banner('invalid_grant')
    assert 'sign in again' in text, text
    b.wait_view('welcome')
    b.wait_autofill_idle()
    b.user_verified(True)
    b.el('signin-button').click()
    b.wait_view('account')
    b.wait_passkeys(1)



# Requests made by the page's own latchkey.js (page_api.py: its sessions are DPoP-bound).
def page_get(b, path):
    return page_request(b.d.execute_async_script, 'GET', path)


def test_rename_with_keyboard_only(b):
    item = b.wait_passkeys(1)[0]
    rename = item.find_element(By.CSS_SELECTOR, '.pk-rename-start')
    b.tab_to(rename)
    b.keys(Keys.ENTER)
    field = item.find_element(By.CSS_SELECTOR, '.pk-rename input')
    b.until(lambda: b.focused() == field, 'focus in the name field')
    b.keys(Keys.CONTROL, 'a')
    b.keys('Work laptop')
    b.shot('05-rename')
    b.keys(Keys.ENTER)
    b.until(lambda: b.d.find_element(By.CSS_SELECTOR, '#passkeys .pk-name').text == 'Work laptop', 'the new name')
    again = b.d.find_element(By.CSS_SELECTOR, '#passkeys .pk-rename-start')
    b.until(lambda: b.focused() == again, 'focus back on Rename')
    # Escape cancels without saving.
    b.keys(Keys.ENTER)
    b.keys(Keys.CONTROL, 'a')
    b.keys('Not saved', Keys.ESCAPE)
    b.until(lambda: b.focused() == again, 'focus back on Rename after Escape')
    assert b.d.find_element(By.CSS_SELECTOR, '#passkeys .pk-name').text == 'Work laptop'
    status, body = page_get(b, '/v1/passkeys')
    assert status == 200 and json.loads(body)['passkeys'][0]['name'] == 'Work laptop', body


def test_adding_a_passkey_this_device_already_has_says_so(b):
    b.el('add-passkey').click()
    # SPEC "Assurance": adding a passkey from a passkey session asks for one of its passkeys first,
    # with a sentence that says why (the virtual authenticator approves at once).
    b.until(lambda: b.body('approval') == 'latchkey.passkey.add', 'the passkey approval for adding a passkey')
    text = b.wait_banner('invalid_state')
    assert 'already has a passkey' in text, text
    b.el('banner-close').click()


def test_step_up_approves_the_transfer(b):
    status, _, _ = http('POST', '/v1/step-up/challenges', body={})
    if status == 404:
        raise Skip('the server has no /v1/step-up routes yet (404)')
    b.el('approve-transfer').click()
    result = b.el('transfer-result')
    try:
        b.until(lambda: result.get_attribute('data-state') == 'approved', 'the approved transfer')
    finally:
        b.shot('06-step-up')
    # The amount through Intl in the page's language (en-GB: €200.00).
    assert '200.00' in result.text and 'Jana Novák' in result.text and 'Receipt' in result.text, result.text


def test_sessions_mark_this_device_and_end_another_with_keyboard_only(b):
    # The session from the autofill sign-in was abandoned (test_ended_session_...), so it is still live.
    b.until(lambda: int(b.el('sessions').get_attribute('data-count') or 0) >= 2, 'two sessions listed')
    items = b.d.find_elements(By.CSS_SELECTOR, '#sessions > li')
    current = [li for li in items if li.get_attribute('data-current') == 'true']
    assert len(current) == 1, [li.text for li in items]
    assert 'This device' in current[0].text, current[0].text
    others = [li for li in items if li.get_attribute('data-current') == 'false']
    count = len(items)
    ended = others[0].get_attribute('data-id')
    end = others[0].find_element(By.CSS_SELECTOR, '.s-end')
    b.tab_to(end)
    b.shot('07-sessions')
    b.keys(Keys.ENTER)
    b.until(lambda: b.el('sessions').get_attribute('data-count') == str(count - 1), 'one session fewer')
    b.until(lambda: b.focused() == b.el('sessions-title'), 'focus on the sessions heading')
    status, body = page_get(b, '/v1/sessions')
    assert status == 200 and ended not in [s['id'] for s in json.loads(body)['sessions']], body
    assert b.body('view') == 'account'


def test_last_passkey_is_kept_and_a_recovery_method_offered(b):
    """SPEC "Assurance", the last way in: the account's only passkey, with no recovery code and no
    verified address, is not revoked (409 last_passkey, before any passkey is asked for); the page says
    why and offers a recovery method first. The codes made here let the next test revoke it."""
    item = b.wait_passkeys(1)[0]
    item.find_element(By.CSS_SELECTOR, '.pk-revoke-start').click()
    item.find_element(By.CSS_SELECTOR, '.pk-confirm-yes').click()
    last = item.find_element(By.CSS_SELECTOR, '.pk-last')
    b.until(lambda: b.body('last-way-in') == 'refused' and last.is_displayed(), 'the last-way-in refusal')
    assert b.body('approval') != 'latchkey.passkey.revoke', 'no passkey was asked for a revocation the server refuses'
    assert not item.find_element(By.CSS_SELECTOR, '.pk-confirm').is_displayed()
    assert b.focused() == last, 'focus moves to the explanation'
    assert 'last way in' in last.text, last.text
    # Email recovery is on here (dev mode's mail goes to the SMTP server): the address is offered too.
    assert item.find_element(By.CSS_SELECTOR, '.pk-last-email').is_displayed()
    assert len(b.wait_passkeys(1)) == 1
    b.shot('07a-last-passkey-refused')
    # Keyboard only: Tab to "Create recovery codes", Enter; the codes need the passkey's approval.
    b.tab_to(item.find_element(By.CSS_SELECTOR, '.pk-last-codes'))
    b.keys(Keys.ENTER)
    b.until(lambda: b.body('recovery-codes') == '10', 'ten recovery codes')
    assert not last.is_displayed()
    b.d.execute_script("document.getElementById('passkeys-title').focus()")


def test_revoke_with_keyboard_only(b):
    token_before = json.loads(b.d.execute_script("return sessionStorage.getItem('latchkey.session')"))['tokens']['access_token']
    item = b.wait_passkeys(1)[0]
    revoke = item.find_element(By.CSS_SELECTOR, '.pk-revoke-start')
    b.tab_to(revoke)
    b.keys(Keys.ENTER)
    keep = item.find_element(By.CSS_SELECTOR, '.pk-confirm-no')
    b.until(lambda: b.focused() == keep, 'focus on "Keep it" (the safe choice)')
    confirm = item.find_element(By.CSS_SELECTOR, '.pk-confirm-yes')
    b.tab_to(confirm, backwards=True)
    b.shot('07-revoke-confirm')
    # SPEC "Assurance": the revocation is approved with a user-verified passkey first (the virtual
    # authenticator answers it at once); the revoke's signalAllAcceptedCredentials then drops the
    # passkey from the authenticator, so the autofill request after the sign-out finds nothing.
    b.keys(Keys.ENTER)
    b.until(lambda: b.body('approval') == 'latchkey.passkey.revoke', 'the passkey approval for the revocation')
    # This session began with that passkey, so it ended with it (SPEC "Sessions").
    text = b.wait_banner('session_ended')
    assert 'session ended' in text, text
    b.wait_view('welcome')
    b.wait_autofill_idle()
    b.user_verified(True)
    status, _, _ = http('GET', '/v1/passkeys', headers={'Authorization': 'Bearer ' + token_before})
    assert status == 401, 'the revoked passkey\'s session is refused'


def test_revoked_passkey_cannot_sign_in(b):
    if b.body('view') != 'welcome':
        b.sign_out_keeping_credential()
    if not b.d.get_credentials():
        # SPEC "Signal API": the revoke answered signalAllAcceptedCredentials, which the web app handed
        # to the browser; this Chromium applied it to the (virtual) authenticator, so the revoked passkey
        # is gone from it and there is nothing left to sign in with. (The server's own refusal,
        # credential_unknown with signalUnknownCredential, is covered over HTTP by SignalTests.)
        b.el('signin-button').click()
        text = b.wait_banner('cancelled')
        assert b.body('view') == 'welcome'
        b.shot('08-revoked-passkey-removed-by-signal')
        return
    b.el('signin-button').click()
    text = b.wait_banner('credential_unknown')
    assert 'revoked' in text, text
    assert b.body('view') == 'welcome'
    b.shot('08-revoked-passkey-refused')


# ---------------------------------------------------------------------------------------------
# Recovery and fallback sign-in: codes come from the real SMTP server (scripts/smtp.sh), which
# stores each accepted message under LATCHKEY_TEST_SMTP_DIR/<recipient>/.

MAIL_DIR = os.environ.get('LATCHKEY_TEST_SMTP_DIR', os.path.join('data', 'smtp', 'mail'))
EMAIL = f'ada-{secrets.token_hex(4)}@example.test'
USERNAME2 = f'grace-{secrets.token_hex(3)}'
RECOVERY = {}


def mail_count(address):
    folder = os.path.join(MAIL_DIR, address.lower())
    return len([n for n in os.listdir(folder) if n.endswith('.eml')]) if os.path.isdir(folder) else 0


def mailed(address, after, pattern, event=None, what='a code'):
    """The first match of `pattern` in a message to `address` after its first `after` messages (and
    naming `event` in X-Latchkey-Event, if given), with a bounded wait for the SMTP server."""
    import quopri
    import re
    folder = os.path.join(MAIL_DIR, address.lower())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        names = sorted(n for n in os.listdir(folder) if n.endswith('.eml')) if os.path.isdir(folder) else []
        for name in names[after:]:
            text = quopri.decodestring(open(os.path.join(folder, name), 'rb').read()).decode('utf-8', 'replace')
            m = re.search(pattern, text)
            if m and (event is None or f'X-Latchkey-Event: {event}' in text):
                return m.group(1)
        time.sleep(0.1)
    raise AssertionError(f'no {what} mailed to {address}')


def mailed_code(address, after):
    return mailed(address, after, r'code is: (\d+)')


def type_into(b, element_id, text):
    el = b.el(element_id)
    el.clear()
    el.send_keys(text)


def test_recovery_settings_email_and_codes(b):
    if b.body('view') == 'account':
        b.sign_out_keeping_credential()
    b.wait_view('welcome')
    b.el('signup-username').send_keys(USERNAME2)
    b.el('signup-display').send_keys('Grace Hopper', Keys.ENTER)
    b.wait_view('account')
    b.wait_passkeys(1)
    b.until(lambda: b.el('email-current').text == 'none', 'the recovery settings')
    # Keyboard only: the address, the code from the real SMTP server, Enter.
    b.tab_to(b.el('email-new'))
    before = mail_count(EMAIL)
    b.keys(EMAIL, Keys.ENTER)
    # SPEC "Assurance": the address recovery mail goes to changes only with the passkey's approval.
    b.until(lambda: b.body('approval') == 'latchkey.email.change', 'the passkey approval for the address')
    b.until(lambda: b.el('email-verify-step').is_displayed(), 'the code field')
    assert b.focused() == b.el('email-verify-code')
    b.keys(mailed_code(EMAIL, before), Keys.ENTER)
    b.until(lambda: b.el('email-current').text == EMAIL, 'the verified address')
    b.shot('09-account-recovery-settings')
    b.el('codes-create').click()
    b.until(lambda: b.body('recovery-codes') == '10', 'ten recovery codes')
    codes = [li.text for li in b.d.find_elements(By.CSS_SELECTOR, '#codes-list li')]
    assert len(codes) == 10 and all(len(c) == 14 for c in codes), codes
    RECOVERY['codes'] = codes
    RECOVERY['token'] = json.loads(b.d.execute_script("return sessionStorage.getItem('latchkey.session')"))['tokens']['access_token']
    b.shot('10-recovery-codes')


def test_pending_recovery_banner_cancel_with_keyboard(b):
    status, _, body = http('POST', '/v1/recovery/verify', {'username': USERNAME2, 'recoveryCode': RECOVERY['codes'][0]})
    assert status == 200, (status, body)
    started = json.loads(body)
    # The token works only on registration: anywhere else 403.
    status, _, _ = http('GET', '/v1/passkeys', headers={'Authorization': 'Bearer ' + started['recoveryToken']})
    assert status == 403, status
    b.load()
    b.wait_view('account')
    b.until(lambda: b.el('recovery-pending').is_displayed(), 'the pending-recovery banner')
    assert 'recovery code' in b.el('recovery-pending-text').text
    b.shot('11-pending-recovery-banner')
    b.tab_to(b.el('recovery-cancel'))
    b.keys(Keys.ENTER)
    b.until(lambda: not b.el('recovery-pending').is_displayed(), 'the banner to go')
    b.wait_banner('recovery_cancelled')
    status, _, _ = http('POST', '/v1/passkeys/registration/options', {},
                        headers={'Authorization': 'Bearer ' + started['recoveryToken']})
    assert status == 401, status
    b.el('banner-close').click()


def mailed_cancel_token(address, event, after):
    """The cancel link's token in a message to `address` after its first `after`, whose X-Latchkey-Event is `event`."""
    return mailed(address, after, r'/\?cancel=(lkcan_[A-Za-z0-9_-]+)', event=event, what=f'{event} mail with a cancel link')


def test_cancel_link_says_what_it_undoes_and_asks(b):
    # Someone uses a recovery code; the owner's "recovery started" mail carries a cancel link.
    before = mail_count(EMAIL)
    status, _, body = http('POST', '/v1/recovery/verify', {'username': USERNAME2, 'recoveryCode': RECOVERY['codes'][1]})
    assert status == 200, (status, body)
    recovery_token = json.loads(body)['recoveryToken']
    token = mailed_cancel_token(EMAIL, 'recovery.started', before)
    b.d.get(BASE + '/?cancel=' + token)
    b.until(lambda: b.body('ready') == 'true', 'the app to start')
    card = b.el('cancel-link')
    b.until(lambda: card.is_displayed(), 'the cancel-link card')
    assert card.get_attribute('data-kind') == 'recovery'
    assert 'cancels the recovery' in b.el('cancel-link-text').text, b.el('cancel-link-text').text
    b.shot('11b-cancel-link-asks')
    # Nothing is posted until the person says yes: the recovery token still works.
    status, _, _ = http('POST', '/v1/passkeys/registration/options', {}, headers={'Authorization': 'Bearer ' + recovery_token})
    assert status == 200, status
    b.tab_to(b.el('cancel-link-confirm'))
    b.keys(Keys.ENTER)
    b.wait_banner('cancel_done')
    assert b.body('cancel-link') == 'done'
    status, _, _ = http('POST', '/v1/passkeys/registration/options', {}, headers={'Authorization': 'Bearer ' + recovery_token})
    assert status == 401, status
    # The link is single use.
    status, _, _ = http('POST', '/v1/recovery/cancel', {'cancelToken': token})
    assert status == 404, status
    b.el('banner-close').click()


def lose_every_passkey(b):
    """Signs out and empties the authenticator: the person lost every passkey."""
    if b.body('view') == 'account':
        b.sign_out_keeping_credential()
    b.d.remove_all_credentials()
    b.load()
    b.wait_view('welcome')


def test_email_sign_in_offers_a_passkey(b):
    lose_every_passkey(b)
    start = b.el('email-signin-start')
    b.until(lambda: start.is_displayed(), 'the email sign-in link')
    b.tab_to(start)
    b.keys(Keys.ENTER)
    b.wait_view('email')
    b.shot('12-email-sign-in')
    before = mail_count(EMAIL)
    b.tab_to(b.el('email-address'))
    b.keys(' ' + EMAIL.replace('example.test', 'Example.TEST'), Keys.ENTER)  # normalised by the server
    b.until(lambda: b.el('email-code-step').is_displayed(), 'the code field')
    b.keys(mailed_code(EMAIL, before), Keys.ENTER)
    b.wait_view('account')
    assert b.body('signin-method') == 'email'
    assert 'email code' in b.el('account-lede').text
    b.until(lambda: b.body('upgrade') in ('offered', 'conditional', 'saved'), 'the passkey offer')
    RECOVERY['email_session'] = json.loads(b.d.execute_script("return sessionStorage.getItem('latchkey.session')"))['tokens']['access_token']
    if b.body('upgrade') != 'saved':
        b.shot('13-passkey-upgrade-offer')
        b.el('upgrade-create').click()
    b.until(lambda: b.body('upgrade') == 'saved', 'a passkey saved after the email sign-in')
    b.wait_passkeys(2)
    b.shot('14-passkey-saved-after-email')


def test_lost_passkey_recovery_by_email(b):
    lose_every_passkey(b)
    b.tab_to(b.el('lost-passkey'))
    b.keys(Keys.ENTER)
    b.wait_view('recover')
    b.shot('15-lost-your-passkey')
    before = mail_count(EMAIL)
    b.tab_to(b.el('recover-identifier'))
    b.keys(USERNAME2, Keys.ENTER)
    b.until(lambda: b.body('recovery') == 'code-sent', 'the code step')
    b.shot('16-recovery-code-sent')
    b.keys(mailed_code(EMAIL, before), Keys.ENTER)
    b.until(lambda: b.body('recovery') == 'ready', 'the recovery token')
    b.shot('17-recovery-ready')
    b.el('recover-create').click()
    b.wait_view('account')
    assert b.body('signin-method') == 'recovery'
    assert 'recovered' in b.el('account-lede').text
    b.wait_passkeys(3)
    # Completion revoked every other session: the email session's token is refused.
    status, _, _ = http('GET', '/v1/passkeys', headers={'Authorization': 'Bearer ' + RECOVERY['email_session']})
    assert status == 401, status
    b.until(lambda: len(b.d.find_elements(By.CSS_SELECTOR, '#sessions > li')) == 1, 'one session left')
    b.shot('18-recovered')


def test_wrong_address_names_the_one_that_works(b):
    """Issue 25: at http://127.0.0.1:PORT the browser refuses a ceremony for rpId localhost
    (SecurityError); the page names the address that works instead of 'its usual address'."""
    good = BASE.split('//', 1)[1]                      # localhost:PORT
    b.d.get(BASE.replace('//localhost', '//127.0.0.1', 1) + '/')
    b.until(lambda: b.body('ready') == 'true', 'the app to start at 127.0.0.1')
    b.el('signin-button').click()
    text = b.wait_banner('security')
    assert f'http://{good}/' in text and '127.0.0.1' in text, text
    b.shot('30-wrong-address')
    b.load()


ONE_PASSWORD = 'bada5566-a7aa-401f-bd96-45619a55120d'


def test_provider_icon_beside_the_name(b):
    """A known provider's passkey shows its icon (light, or dark with a dark colour scheme) beside
    its name; the virtual authenticator's unknown AAGUID shows none. A browser of its own: its
    authenticator holds only the 1Password passkey made by `soft_passkey`."""
    answer, credential_id, user_handle, pkcs8 = soft_passkey.register(BASE, f'icon-{secrets.token_hex(4)}', ONE_PASSWORD)
    icon = answer['passkey']['providerIcon']
    assert icon == {'light': f'/v1/providers/{ONE_PASSWORD}/icon?theme=light',
                    'dark': f'/v1/providers/{ONE_PASSWORD}/icon?theme=dark'}, answer['passkey']
    nb = Browser()
    try:
        nb.d.add_credential(Credential.create_resident_credential(credential_id, 'localhost', user_handle, pkcs8, 0))
        nb.load()  # the conditional request starts at once, and the authenticator answers it
        nb.wait_view('account')
        items = nb.wait_passkeys(1)
        assert items[0].find_element(By.CSS_SELECTOR, '.pk-provider').text == '1Password'
        img = items[0].find_element(By.CSS_SELECTOR, '.pk-provider-icon img')
        assert img.get_attribute('alt') == '1Password'
        # Loaded (the page's CSP lets it in, and it decodes as an image), light by default.
        nb.until(lambda: nb.d.execute_script('return arguments[0].complete && arguments[0].naturalWidth > 0', img), 'the icon to load')
        assert img.get_attribute('currentSrc').endswith(icon['light']), img.get_attribute('currentSrc')
        nb.shot('provider-icon-light')
        nb.d.execute_cdp_cmd('Emulation.setEmulatedMedia', {'features': [{'name': 'prefers-color-scheme', 'value': 'dark'}]})
        nb.until(lambda: (img.get_attribute('currentSrc') or '').endswith(icon['dark']), 'the dark icon')
        nb.until(lambda: nb.d.execute_script('return arguments[0].complete && arguments[0].naturalWidth > 0', img), 'the dark icon to load')
        nb.shot('provider-icon-dark')
    finally:
        nb.d.quit()
    # The shared browser's passkey (the virtual authenticator's AAGUID) has no icon.
    b.load()
    if b.body('view') == 'account':
        for item in b.wait_passkeys(int(b.el('passkeys').get_attribute('data-count'))):
            if item.find_element(By.CSS_SELECTOR, '.pk-provider').text == 'Passkey':
                assert not item.find_elements(By.CSS_SELECTOR, '.pk-provider-icon'), 'an unknown provider shows no icon'


TESTS = [
    test_static_files_are_served_safely,
    test_sign_up_with_keyboard_only,
    test_sign_out,
    test_cancelled_sign_in_says_so,
    test_taken_username_says_so,
    test_sign_in_with_the_button,
    test_sign_in_with_autofill,
    test_expired_access_token_is_refreshed,
    test_ended_session_asks_to_sign_in_again,
    test_rename_with_keyboard_only,
    test_adding_a_passkey_this_device_already_has_says_so,
    test_step_up_approves_the_transfer,
    test_sessions_mark_this_device_and_end_another_with_keyboard_only,
    test_last_passkey_is_kept_and_a_recovery_method_offered,
    test_revoke_with_keyboard_only,
    test_revoked_passkey_cannot_sign_in,
    test_recovery_settings_email_and_codes,
    test_pending_recovery_banner_cancel_with_keyboard,
    test_cancel_link_says_what_it_undoes_and_asks,
    test_email_sign_in_offers_a_passkey,
    test_lost_passkey_recovery_by_email,
    test_wrong_address_names_the_one_that_works,
    test_provider_icon_beside_the_name,
]


def run_suite(tests, label='', cleanup=None):
    """Runs each test in one browser, reporting every failure and going on; returns the failure count."""
    wait_for_server()
    browser = Browser()
    passed = failed = skipped = 0
    try:
        for test in tests:
            name = test.__name__
            started = time.monotonic()
            try:
                test(browser)
            except Skip as s:
                skipped += 1
                print(f'SKIP {name}: {s}', flush=True)
                continue
            except Exception as e:  # noqa: BLE001 - every failure is reported, the run goes on
                failed += 1
                print(f'FAIL {name}: {type(e).__name__}: {e}', flush=True)
                traceback.print_exc()
                try:
                    browser.shot(f'failed-{name}')
                    for entry in browser.d.get_log('browser')[-10:]:
                        print(f'    console: {entry.get("level")} {entry.get("message")}', flush=True)
                except Exception:  # noqa: BLE001
                    pass
                continue
            passed += 1
            print(f'PASS {name} ({time.monotonic() - started:.1f}s)', flush=True)
    finally:
        browser.d.quit()
        if cleanup:
            cleanup()
    print(f'screenshots: {os.path.abspath(SHOTS)}')
    print(f'{label}{passed} passed, {failed} failed, {skipped} skipped')
    return failed


def main():
    # LATCHKEY_WEB_TESTS=name,name: only those (a test that needs no earlier one's state).
    only = [n for n in os.environ.get('LATCHKEY_WEB_TESTS', '').split(',') if n]
    failed = run_suite([t for t in TESTS if not only or t.__name__ in only])
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
