#!/usr/bin/env python3
"""The admin console at `/admin/`, in real headless Chromium with a WebAuthn virtual authenticator.

Run through Tests/Browser/run.sh after test_web.py (same server; it passes LATCHKEY_BIN and
LATCHKEY_DATABASE_URL so that `latchkey admins add` can mint the enrolment link).

One story, in order, in one browser: a plain user (signed up in the user app) is refused by the
console; the first admin enrols from the link `latchkey admins add` prints; adds an Android origin
by keytool fingerprint (and sees the android:apk-key-hash: it becomes); types an Android app and
sees the preview of the association files and checks update before adding it; adds a web origin and
removes it — the passkey step-up prompt appears and the origin stays until it is approved; finds the
plain user, issues them an enrolment link and revokes their passkey; the user opens that link in a
browser of their own, registers a held passkey, and finds the link used up when opening it again;
reads the audit entry (admin, receipt); opens webhooks ("not available" while the server has no
webhooks API). Every page is saved to data/screenshots/admin-*.png (the user's, ticket-*.png).
Synchronisation is on DOM state (data-* attributes the console sets), never sleeps.
"""
import http.client
import json
import os
import secrets
import socket
import subprocess
import sys
from urllib.parse import quote, urlsplit

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.common.virtual_authenticator import VirtualAuthenticatorOptions

from test_web import BASE, SHOTS, Browser, Skip, page_request, run_suite, with_server
from test_web import http as request_json
import soft_passkey

TAG = secrets.token_hex(3)
PLAIN = f'plain-{TAG}'
ADMIN = f'root-{TAG}'
FINGERPRINT = '14:6D:E9:83:C5:73:06:50:D8:EE:B9:95:2F:34:FC:64:16:A0:83:42:E6:1D:BE:A8:8A:04:96:B2:3F:CF:44:E5'
APK_KEY_HASH = 'android:apk-key-hash:FG3pg8VzBlDY7rmVLzT8ZBagg0LmHb6oigSWsj_PROU'
PACKAGE = f'com.example.console{TAG}'
SHOP = f'https://shop-{TAG}.localhost'  # under rpId localhost: an origin that can work for it
STATE = {}  # what one test hands the next (the user's enrolment link)


def fresh_authenticator(b):
    """A new, empty authenticator: the next person at this browser."""
    try:
        b.d.remove_virtual_authenticator()
    except Exception:  # noqa: BLE001 - none yet
        pass
    va = VirtualAuthenticatorOptions()
    va.protocol = VirtualAuthenticatorOptions.Protocol.CTAP2
    va.transport = VirtualAuthenticatorOptions.Transport.INTERNAL
    va.has_resident_key = True
    va.has_user_verification = True
    va.is_user_verified = True
    va.is_user_consenting = True
    b.d.add_virtual_authenticator(va)


def load_console(b, query=''):
    b.d.get(BASE + '/admin/' + query)
    b.until(lambda: b.body('ready') == 'true', 'the console to start')


def admin_token(b):
    return json.loads(b.d.execute_script("return sessionStorage.getItem('latchkey.admin')"))['tokens']['access_token']


def admin_get(b, path):
    """Through the console page's own latchkey.js: the admin's session is DPoP-bound."""
    status, body = page_request(b.d.execute_async_script, 'GET', path, storage_key='latchkey.admin')
    assert status == 200, (path, status, body)
    return json.loads(body)


def origins_now(b):
    return [o['origin'] for o in admin_get(b, '/admin/v1/origins')['origins']]


def open_page(b, page):
    b.el(f'tab-{page}').click()
    b.until(lambda: b.body('page') == page and b.body('loaded') == page, f'the {page} page')


def wait_prompt(b):
    b.until(lambda: b.body('stepup') == 'open' and b.el('stepup').is_displayed(), 'the step-up prompt')


def approve(b, keyboard=False):
    wait_prompt(b)
    if keyboard:
        b.until(lambda: b.focused() == b.el('stepup-approve'), 'focus on Approve')
        b.keys(Keys.ENTER)
    else:
        b.el('stepup-approve').click()
    b.until(lambda: b.body('stepup') == 'closed', 'the prompt to close')


def listed(b, list_id, attr, value):
    return any(li.get_attribute(f'data-{attr}') == value for li in b.d.find_elements(By.CSS_SELECTOR, f'#{list_id} > li'))


# ---------------------------------------------------------------------------------------------

def test_console_files_are_served_safely(b):
    status, headers, body = request_json('GET', '/admin/')
    assert status == 200 and headers['Content-Type'].startswith('text/html'), status
    assert b'/admin/admin.js' in body
    csp = headers['Content-Security-Policy']
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp, csp
    for path, kind in [('/admin/admin.js', 'text/javascript'), ('/admin/admin.css', 'text/css')]:
        status, headers, _ = request_json('GET', path)
        assert status == 200 and headers['Content-Type'].startswith(kind), (path, status)
    for path in ['/admin/index.html', '/admin/../Package.swift', '/admin/%2e%2e/app.js', '/admin/app.js']:
        status, _, _ = request_json('GET', path)
        assert status == 404, (path, status)
    connection = http.client.HTTPConnection(urlsplit(BASE).netloc, timeout=10)  # urllib would follow the redirect
    connection.request('GET', '/admin')
    r = connection.getresponse()
    assert r.status == 308 and r.getheader('Location') == '/admin/', r.status
    connection.close()


def test_non_admin_is_refused(b):
    fresh_authenticator(b)
    b.load()  # the user app at /: sign up a plain account there
    b.wait_view('welcome')
    b.wait_autofill_idle()
    b.el('signup-username').send_keys(PLAIN)
    b.el('signup-display').send_keys('Plain User', Keys.ENTER)
    b.wait_view('account')
    load_console(b)
    b.until(lambda: b.body('view') == 'signin', 'the sign-in screen')
    b.shot('admin-00-sign-in')
    b.tab_to(b.el('signin'))
    b.keys(Keys.ENTER)
    b.until(lambda: b.body('view') == 'refused', 'the refusal')
    assert b.el('refused-text').text == 'This account has no access to the admin console.', b.el('refused-text').text
    assert b.el('tabs').is_displayed() is False
    b.shot('admin-01-non-admin-refused')
    # The user's own session (the app's, DPoP-bound) is refused by the admin API.
    status, body = page_request(b.d.execute_async_script, 'GET', '/admin/v1/origins')
    assert status == 403 and json.loads(body)['code'] == 'forbidden', (status, body)
    b.el('refused-signout').click()
    b.until(lambda: b.body('view') == 'signin', 'signed out')


def test_first_admin_enrols_from_the_link(b):
    binary = os.environ.get('LATCHKEY_BIN')
    database = os.environ.get('LATCHKEY_DATABASE_URL')
    if not binary or not database:
        raise Skip('LATCHKEY_BIN and LATCHKEY_DATABASE_URL are needed to run latchkey admins add')
    env = dict(os.environ, DATABASE_URL=database, LATCHKEY_DEV='1', LATCHKEY_RP_ID='localhost', LATCHKEY_ORIGINS=BASE)
    out = subprocess.run([binary, 'admins', 'add', ADMIN], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    link = out.stdout.strip().splitlines()[-1]
    assert link.startswith(BASE + '/admin/?ticket='), out.stdout
    listed_admins = subprocess.run([binary, 'admins', 'list'], env=env, capture_output=True, text=True, timeout=60).stdout
    assert ADMIN in listed_admins, listed_admins

    fresh_authenticator(b)  # the admin's own device
    b.d.get(link)
    b.until(lambda: b.body('ready') == 'true' and b.el('enrol').is_displayed(), 'the enrolment screen')
    b.shot('admin-02-enrolment-link')
    b.tab_to(b.el('enrol'))
    b.keys(Keys.ENTER)
    b.until(lambda: b.body('view') == 'console' and b.body('loaded') == 'origins', 'the console')
    assert b.body('enrolled') == 'true'
    assert 'ticket' not in b.d.current_url, 'the spent ticket is dropped from the address'
    assert ADMIN in b.el('who').text
    b.shot('admin-03-origins')
    ticket = link.split('ticket=')[1]
    status, _, _ = request_json('POST', '/v1/passkeys/registration/options', body={}, headers={'Authorization': 'Ticket ' + ticket})
    assert status == 401, f'the link is single use ({status})'


def test_android_origin_by_fingerprint(b):
    b.el('fp-input').send_keys(FINGERPRINT)
    b.until(lambda: b.el('fp-origin').text == APK_KEY_HASH, 'the apk-key-hash the fingerprint becomes')
    b.el('fp-add').click()
    approve(b)
    b.until(lambda: listed(b, 'origins', 'origin', APK_KEY_HASH), 'the Android origin listed')
    assert APK_KEY_HASH in origins_now(b)


def test_android_app_preview_updates(b):
    open_page(b, 'apps')
    b.until(lambda: b.el('preview').get_attribute('data-state') in ('ok', 'problems'), 'the current preview')
    assert PACKAGE not in b.el('pv-assetlinks').text
    b.el('android-package').send_keys(PACKAGE)
    b.el('android-fps').send_keys(FINGERPRINT)
    b.until(lambda: b.el('preview').get_attribute('data-for') == 'android:' + PACKAGE
            and b.el('preview').get_attribute('data-state') in ('ok', 'problems'), 'the preview for the typed app')
    assetlinks = b.el('pv-assetlinks').text
    assert PACKAGE in assetlinks and FINGERPRINT in assetlinks, assetlinks
    assert b.d.find_elements(By.CSS_SELECTOR, '#pv-problems > li'), 'the check result is shown'
    b.shot('admin-04-apps-preview')
    assert not any(a['id'] == 'android:' + PACKAGE for a in admin_get(b, '/admin/v1/apps')['apps']), 'a preview declares nothing'
    b.el('android-add').click()
    approve(b)
    b.until(lambda: listed(b, 'apps', 'app', 'android:' + PACKAGE), 'the app listed')
    b.until(lambda: b.el('preview').get_attribute('data-for') == '' and PACKAGE in b.el('pv-assetlinks').text,
            'the served files now name the app')


def test_remove_origin_lands_only_after_the_step_up(b):
    open_page(b, 'origins')
    b.el('origin-input').send_keys(SHOP, Keys.ENTER)
    approve(b, keyboard=True)
    b.until(lambda: listed(b, 'origins', 'origin', SHOP), 'the new origin listed')

    def remove_button():
        return b.d.find_element(By.CSS_SELECTOR, f'#origins > li[data-origin="{SHOP}"] .o-remove')

    # Cancel (Escape): nothing changes.
    remove_button().click()
    wait_prompt(b)
    assert SHOP in b.el('stepup-what').text, b.el('stepup-what').text
    action = json.loads(b.el('stepup-action').text)
    assert action == {'type': 'latchkey.admin', 'method': 'DELETE', 'path': '/admin/v1/origins/' + quote(SHOP, safe=''),
                      'body': None}, action
    b.keys(Keys.ESCAPE)
    b.until(lambda: b.body('stepup') == 'closed', 'the prompt to close')
    assert SHOP in origins_now(b), 'cancelled: the origin stays'

    # The prompt appears; until it is approved the origin is still allowed.
    b.tab_to(remove_button())
    b.keys(Keys.ENTER)
    wait_prompt(b)
    assert SHOP in origins_now(b), 'not removed before the approval'
    b.shot('admin-05-step-up-prompt')
    approve(b)
    b.until(lambda: not listed(b, 'origins', 'origin', SHOP), 'the origin gone from the list')
    assert SHOP not in origins_now(b)


def psql(statement):
    """One statement on the server's database (LATCHKEY_DATABASE_URL): what the story's other person does
    outside this browser."""
    database = os.environ.get('LATCHKEY_DATABASE_URL')
    if not database:
        raise Skip('LATCHKEY_DATABASE_URL is needed')
    subprocess.run(['psql', '-v', 'ON_ERROR_STOP=1', '-q', database, '-c', statement], check=True, capture_output=True, timeout=60)


def test_used_up_enrolment_link_says_so(b):
    """A link whose ticket is used up or expired: the console says so, in words, on the sign-in screen
    (it used to drop there silently)."""
    token = admin_token(b)
    load_console(b, '?ticket=lkt_' + secrets.token_urlsafe(24))
    b.until(lambda: b.el('enrol').is_displayed(), 'the enrolment screen')
    b.el('enrol').click()
    b.until(lambda: b.body('enrolment') == 'used-up', 'the used-up link to be said')
    text = b.wait_banner('ticket_used_up')
    assert 'used up or expired' in text and 'latchkey admins link' in text, text
    assert b.body('view') == 'signin' and 'ticket' not in b.d.current_url
    b.shot('admin-02a-enrolment-link-used-up')
    # Back into the console: the admin's session is still there.
    load_console(b)
    b.until(lambda: b.body('view') == 'console', 'the console again')
    assert admin_token(b) == token


def test_find_user_and_revoke_their_passkey(b):
    open_page(b, 'users')
    b.el('user-q').send_keys(PLAIN, Keys.ENTER)
    b.until(lambda: b.el('user-results').get_attribute('data-count') == '1', 'one user found')
    b.d.find_element(By.CSS_SELECTOR, '#user-results .u-open').click()
    b.until(lambda: b.el('user-passkeys').get_attribute('data-count') == '1', "the user's passkey")
    item = b.d.find_element(By.CSS_SELECTOR, '#user-passkeys > li')
    # Named after the device (the virtual authenticator's AAGUID names no provider), the provider tag beside it.
    assert 'Chrome on Linux' in item.text and 'passkey' in item.text.lower(), item.text
    assert b.el('user-sessions').get_attribute('data-count') == '1'
    b.shot('admin-06-user')
    # SPEC "Assurance": the account's last way in is refused (409) before the admin is asked to approve.
    item.find_element(By.CSS_SELECTOR, '.pk-revoke').click()
    text = b.wait_banner('last_passkey')
    assert 'last way in' in text, text
    assert b.body('stepup') != 'open'
    assert b.el('user-passkeys').get_attribute('data-count') == '1'
    # The way back for an account that lost every way in: a one-time enrolment link, shown to the admin.
    b.el('user-ticket').click()
    approve(b)
    b.until(lambda: b.body('account-ticket') == 'issued' and b.el('user-ticket-shown').is_displayed(), 'the enrolment link')
    link = b.el('user-ticket-link').text
    assert link.startswith(BASE + '/?ticket=lkt_'), link
    status, _, _ = request_json('POST', '/v1/passkeys/registration/options', body={},
                                headers={'Authorization': 'Ticket ' + link.split('ticket=')[1]})
    assert status == 200, f'the link opens a registration ({status})'
    STATE['user-link'] = link
    b.shot('admin-06a-user-enrolment-link')
    # The user adds a recovery code (outside this browser): now the passkey may go.
    psql(f"INSERT INTO recovery_codes (user_id, code_hash) SELECT id, decode(md5(random()::text), 'hex') FROM users WHERE username = '{PLAIN}'")
    item = b.d.find_element(By.CSS_SELECTOR, '#user-passkeys > li')
    item.find_element(By.CSS_SELECTOR, '.pk-revoke').click()
    approve(b)
    b.until(lambda: b.el('user-passkeys').get_attribute('data-count') == '0', 'the passkey revoked')
    assert b.el('user-sessions').get_attribute('data-count') == '0', 'its session ended with it'


def test_user_page_shows_the_provider_icon(b):
    """A user whose passkey's provider the server knows: its icon beside the provider tag."""
    username = f'icon-{secrets.token_hex(4)}'
    soft_passkey.register(BASE, username, 'bada5566-a7aa-401f-bd96-45619a55120d')  # 1Password
    open_page(b, 'users')
    b.el('user-q').clear()
    b.el('user-q').send_keys(username, Keys.ENTER)
    b.until(lambda: b.el('user-results').get_attribute('data-count') == '1', 'one user found')
    b.d.find_element(By.CSS_SELECTOR, '#user-results .u-open').click()
    b.until(lambda: b.el('user-passkeys').get_attribute('data-count') == '1', "the user's passkey")
    img = b.d.find_element(By.CSS_SELECTOR, '#user-passkeys > li .provider-icon img')
    assert img.get_attribute('alt') == '1Password', img.get_attribute('alt')
    b.until(lambda: b.d.execute_script('return arguments[0].complete && arguments[0].naturalWidth > 0', img), 'the icon to load')
    assert '/v1/providers/bada5566-a7aa-401f-bd96-45619a55120d/icon?theme=' in img.get_attribute('currentSrc')


def test_user_comes_back_through_the_enrolment_link(_):
    """The user's side of the way back (the /?ticket= page): the link the admin handed over, opened in
    the user's own browser with an empty authenticator (their new device), offers a passkey, registers
    it held and signs them in; the same link opened again says it is used up, in words.

    The suite's server runs in dev mode, where the hold lasts LATCHKEY_RECOVERY_DELAY = 0 seconds (no
    hold at all); so the user opens the link at a second server on the same database with a one-hour
    delay, as a production deployment holds for a day."""
    link = STATE.get('user-link')
    assert link, 'the admin issued the enrolment link (test_find_user_and_revoke_their_passkey)'
    binary, database = os.environ.get('LATCHKEY_BIN'), os.environ.get('LATCHKEY_DATABASE_URL')
    if not binary or not database:
        raise Skip('LATCHKEY_BIN and LATCHKEY_DATABASE_URL are needed to start the server with a hold')
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    held_base = f'http://localhost:{port}'
    env = dict(os.environ, DATABASE_URL=database, LATCHKEY_DEV='1', LATCHKEY_RP_ID='localhost', LATCHKEY_LISTEN=f'127.0.0.1:{port}',
               LATCHKEY_ORIGINS=held_base, LATCHKEY_RECOVERY_DELAY='3600',
               LATCHKEY_WEB_DIR=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'web'))

    def enrol():
        user = Browser()  # its own driver and virtual authenticator
        try:
            user.d.get(held_base + '/?ticket=' + link.split('ticket=')[1])
            user.until(lambda: user.body('ready') == 'true' and user.body('ticket-link') == 'offered'
                       and user.el('ticket-link').is_displayed(), 'the enrolment offer')
            assert user.body('view') == 'welcome', 'nobody is signed in yet'
            user.shot('ticket-01-offered')
            user.el('ticket-link-create').click()
            user.until(lambda: user.body('ticket-link') == 'done' and user.body('view') == 'account', 'the new passkey and its session')
            assert not user.el('ticket-link').is_displayed()
            assert 'ticket' not in user.d.current_url, 'the spent ticket is dropped from the address'
            assert user.el('account-title').text == 'Welcome, Plain User', user.el('account-title').text
            user.wait_passkeys(1)
            # Held: it signs in, and approves nothing until its hold ends (SPEC "Assurance").
            user.until(lambda: user.body('held-passkeys') == '1', 'the new passkey listed as held')
            assert user.el('held-passkeys').is_displayed()
            user.shot('ticket-02-held-passkey')
        finally:
            user.d.quit()
        return 0

    assert with_server(binary, env, port, 'the server with a hold', 'server-held.log', enrol) == 0, 'the server with a hold did not start'
    # Opened again (the link forwarded, or the mail read twice) on another device: used up, said so.
    again = Browser()
    try:
        again.d.get(link)
        again.until(lambda: again.body('ready') == 'true' and again.body('ticket-link') == 'offered', 'the enrolment offer')
        again.el('ticket-link-create').click()
        text = again.wait_banner('ticket_used_up')
        assert text == 'This enrolment link is used up or expired. Ask for a new one.', text
        assert again.body('ticket-link') == 'used-up' and not again.el('ticket-link').is_displayed()
        assert again.body('view') == 'welcome' and 'ticket' not in again.d.current_url
        again.shot('ticket-03-used-up')
    finally:
        again.d.quit()


def test_audit_entry_names_the_admin_and_the_receipt(b):
    open_page(b, 'audit')
    b.el('audit-user').send_keys(PLAIN)
    b.el('audit-action').send_keys('passkey.revoked', Keys.ENTER)
    b.until(lambda: b.el('audit-rows').get_attribute('data-count') == '1', 'the revocation in the audit log')
    row = b.d.find_element(By.CSS_SELECTOR, '#audit-rows > tr')
    assert ADMIN in row.text and 'receipt' in row.text and 'passkey.revoked' in row.text, row.text
    b.shot('admin-07-audit')


def test_webhooks_page(b):
    open_page(b, 'webhooks')
    state = b.el('page-webhooks').get_attribute('data-state')
    status, _ = page_request(b.d.execute_async_script, 'GET', '/admin/v1/webhooks', storage_key='latchkey.admin')
    if status == 404:
        assert state == 'unavailable' and b.el('webhooks-unavailable').is_displayed()
    else:
        assert state == 'available', state
    b.shot('admin-08-webhooks')


def test_openid_clients_page(b):
    """SPEC "OpenID Provider": registering a client is a weakening change — it lands only after the
    admin's passkey step-up for exactly that request; the secret is shown once."""
    open_page(b, 'clients')
    name = 'Console shop ' + ADMIN
    b.el('client-name').send_keys(name)
    b.el('client-redirects').send_keys('https://console-shop.example/cb')
    b.el('client-add').click()
    wait_prompt(b)
    action = json.loads(b.el('stepup-action').text)
    assert action['type'] == 'latchkey.admin' and action['method'] == 'POST' and action['path'] == '/admin/v1/clients', action
    assert action['body']['redirectUris'] == ['https://console-shop.example/cb'], action
    approve(b)
    b.until(lambda: 'client_secret (shown once): lks_' in b.el('client-secret').text, 'the secret shown once')
    b.until(lambda: name in b.el('clients').text, 'the client listed')
    b.shot('admin-09-clients')
    item = [li for li in b.d.find_elements(By.CSS_SELECTOR, '#clients > li') if name in li.text][0]
    item.find_element(By.CSS_SELECTOR, '.btn-remove').click()
    approve(b)
    b.until(lambda: name not in b.el('clients').text, 'the client removed')


def test_every_console_page_in_every_language(b):
    """Issue 22: each page of the console at phone and desktop widths in each language
    (data/screenshots/i18n/<lang>-<width>-admin-<page>.png); a long fingerprint on the apps page
    wraps in its card (no sideways scrolling); dates through Intl in the page's language."""
    shots = os.path.join(SHOTS, 'i18n')
    os.makedirs(shots, exist_ok=True)
    # Two fingerprints typed on the apps page: the preview and the list carry the longest unbroken text.
    fps = ['AB:' * 31 + 'CD', '12:' * 31 + '34']
    try:
        for lang in ['en', 'de', 'pl', 'zh-Hans']:
            for width, size in {'phone': (390, 844), 'desktop': (1280, 900)}.items():
                b.d.set_window_size(*size)
                b.d.execute_script("localStorage.setItem('latchkey.language', arguments[0])", lang)
                load_console(b)
                b.until(lambda: b.d.execute_script('return document.documentElement.lang') == lang, f'the console in {lang}')
                b.until(lambda: b.body('view') == 'console', 'the console')
                for page in ['origins', 'apps', 'users', 'audit', 'webhooks']:
                    open_page(b, page)
                    if page == 'apps':
                        b.el('android-fps').clear()
                        b.el('android-fps').send_keys('\n'.join(fps))
                        b.until(lambda: b.el('preview').get_attribute('data-state') in ('ok', 'problems', 'invalid'), 'the preview')
                    wide = b.d.execute_script('return document.documentElement.scrollWidth - document.documentElement.clientWidth')
                    assert wide <= 1, f'{lang} {width} {page}: {wide}px wider than the window'
                    b.d.save_screenshot(os.path.join(shots, f'{lang}-{width}-admin-{page}.png'))
    finally:
        b.d.set_window_size(1280, 1100)
        b.d.execute_script("localStorage.removeItem('latchkey.language')")


TESTS = [
    test_console_files_are_served_safely,
    test_non_admin_is_refused,
    test_first_admin_enrols_from_the_link,
    test_used_up_enrolment_link_says_so,
    test_android_origin_by_fingerprint,
    test_android_app_preview_updates,
    test_remove_origin_lands_only_after_the_step_up,
    test_find_user_and_revoke_their_passkey,
    test_user_page_shows_the_provider_icon,
    test_user_comes_back_through_the_enrolment_link,
    test_audit_entry_names_the_admin_and_the_receipt,
    test_webhooks_page,
    test_openid_clients_page,
    test_every_console_page_in_every_language,
]


def cleanup():
    """Takes this run's declarations back out of the shared browser database (best effort)."""
    binary, database = os.environ.get('LATCHKEY_BIN'), os.environ.get('LATCHKEY_DATABASE_URL')
    if not binary or not database:
        return
    env = dict(os.environ, DATABASE_URL=database, LATCHKEY_DEV='1', LATCHKEY_RP_ID='localhost')
    for args in (['apps', 'remove', 'android:' + PACKAGE], ['origins', 'remove', APK_KEY_HASH], ['admins', 'remove', ADMIN]):
        subprocess.run([binary, *args], env=env, capture_output=True, timeout=60)


def main():
    # LATCHKEY_ADMIN_TESTS=name,name: only those (with the ones they build on, e.g. the first admin's enrolment).
    only = [n for n in os.environ.get('LATCHKEY_ADMIN_TESTS', '').split(',') if n]
    failed = run_suite([t for t in TESTS if not only or t.__name__ in only], label='admin console: ', cleanup=cleanup)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
