#!/usr/bin/env python3
"""The admin console on its own listener (`LATCHKEY_ADMIN_LISTEN`), in headless Chromium (issue 33).

Starts its own `latchkey serve` (dev mode, rpId localhost) with an admin listener on a second free
port, then: the console loaded from the admin listener is whole — its stylesheet applied (the app's
`--brand` colour, which only /admin/app.css defines) and no request of the page answered 4xx/5xx;
the first admin enrols from the link `latchkey admins add` prints, which points at the admin
listener; a change the server can refuse from the request alone (a 5-character Team ID, an origin
that can never work for rpId localhost) is refused with 400 before any passkey prompt; the
fingerprint field takes the keytool line `SHA256: AB:CD:…`.
Environment: LATCHKEY_BIN, LATCHKEY_DATABASE_URL (run.sh passes both). Screenshots:
data/screenshots/admin-listener-*.png. Synchronisation on DOM state, never sleeps (but the bounded
wait for the server to answer).
"""
import os
import secrets
import socket
import subprocess
import sys


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


BINARY = os.environ.get('LATCHKEY_BIN')
DATABASE = os.environ.get('LATCHKEY_DATABASE_URL')
PUBLIC_PORT, ADMIN_PORT = free_port(), free_port()
ADMIN_BASE = f'http://localhost:{ADMIN_PORT}'
# test_web reads LATCHKEY_URL when imported: its browser starts on this server's public listener.
os.environ['LATCHKEY_URL'] = f'http://localhost:{PUBLIC_PORT}'


from test_admin import fresh_authenticator  # noqa: E402
from test_web import run_suite, with_server  # noqa: E402

TAG = secrets.token_hex(3)
ADMIN = f'listener-{TAG}'
FINGERPRINT_LINE = 'SHA256: 14:6D:E9:83:C5:73:06:50:D8:EE:B9:95:2F:34:FC:64:16:A0:83:42:E6:1D:BE:A8:8A:04:96:B2:3F:CF:44:E5'
APK_KEY_HASH = 'android:apk-key-hash:FG3pg8VzBlDY7rmVLzT8ZBagg0LmHb6oigSWsj_PROU'


def environment():
    return dict(os.environ, DATABASE_URL=DATABASE, LATCHKEY_DEV='1', LATCHKEY_RP_ID='localhost',
                LATCHKEY_LISTEN=f'127.0.0.1:{PUBLIC_PORT}', LATCHKEY_ADMIN_LISTEN=f'127.0.0.1:{ADMIN_PORT}',
                LATCHKEY_WEB_DIR=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'web'))


def resources(b):
    """Every request of the page: (url, HTTP status), the page itself first (Resource Timing)."""
    return b.d.execute_script(
        "return performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))"
        ".map(e => [e.name, e.responseStatus])")


def test_console_whole_on_the_admin_listener(b):
    fresh_authenticator(b)
    b.d.get(ADMIN_BASE + '/admin/')
    b.until(lambda: b.body('ready') == 'true', 'the console to start on the admin listener')
    brand = b.d.execute_script("return getComputedStyle(document.documentElement).getPropertyValue('--brand').trim()")
    assert brand, 'the app stylesheet (/admin/app.css) is not applied'
    loaded = resources(b)
    assert any(url.endswith('/admin/app.css') for url, _ in loaded), loaded
    failed = [(url, status) for url, status in loaded if not status or status >= 400]
    assert not failed, f'requests that failed on the admin listener: {failed}'
    b.shot('admin-listener-00-sign-in')


def test_first_admin_enrols_on_the_admin_listener(b):
    out = subprocess.run([BINARY, 'admins', 'add', ADMIN], env=environment(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    link = out.stdout.strip().splitlines()[-1]
    assert link.startswith(ADMIN_BASE + '/admin/?ticket='), out.stdout
    # The enrolment screen on the admin listener, in each language at phone width (docs/screenshots).
    shots = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'docs', 'screenshots')
    b.d.set_window_size(390, 844)
    for lang in ['en', 'de', 'pl', 'zh-Hans']:
        b.d.get(link)
        b.d.execute_script("localStorage.setItem('latchkey.language', arguments[0])", lang)
        b.d.get(link)
        b.until(lambda: b.body('ready') == 'true' and b.el('enrol').is_displayed()
                and b.d.execute_script('return document.documentElement.lang') == lang, f'the enrolment screen in {lang}')
        b.d.save_screenshot(os.path.join(shots, f'admin-enrolment-{lang}-phone.png'))
    b.d.execute_script("localStorage.setItem('latchkey.language', 'en')")
    b.d.set_window_size(1280, 1100)
    b.d.get(link)
    b.until(lambda: b.body('ready') == 'true' and b.el('enrol').is_displayed(), 'the enrolment screen')
    b.shot('admin-listener-01-enrolment')
    b.el('enrol').click()
    b.until(lambda: b.body('view') == 'console' and b.body('loaded') == 'origins', 'the console after enrolment')
    assert b.body('enrolled') == 'true'
    b.shot('admin-listener-02-console')
    for width, size in {'phone': (390, 844), 'desktop': (1280, 900)}.items():
        b.d.set_window_size(*size)
        b.shot(f'admin-listener-03-console-{width}')
    b.d.set_window_size(1280, 1100)


def watch_prompts(b):
    b.d.execute_script("""
      window.__prompted = false;
      new MutationObserver(() => { if (document.body.dataset.stepup === 'open') window.__prompted = true; })
        .observe(document.body, { attributes: true, attributeFilter: ['data-stepup'] });""")


def refused_without_a_prompt(b, what, shot=None):
    b.until(lambda: b.el('banner').is_displayed() and b.el('banner').get_attribute('data-code') == 'invalid_request',
            f'the refusal of {what}')
    assert not b.d.execute_script('return window.__prompted'), f'{what}: the passkey was asked for a change refused anyway'
    if shot:
        b.shot(shot)
    b.el('banner-close').click()


def test_checks_before_the_passkey_prompt(b):
    watch_prompts(b)
    b.el('origin-input').send_keys('https://shop.example')  # rpId localhost can list no related origin
    b.el('origin-add').click()
    refused_without_a_prompt(b, 'an origin that can never work for rpId localhost')
    b.el('origin-input').clear()
    b.el('fp-input').send_keys(FINGERPRINT_LINE)
    b.until(lambda: b.el('fp-origin').text == APK_KEY_HASH, 'the keytool line read as a fingerprint')
    b.el('tab-apps').click()
    b.until(lambda: b.body('page') == 'apps' and b.body('loaded') == 'apps', 'the apps page')
    watch_prompts(b)
    b.el('ios-team').send_keys('ABCDE')
    b.el('ios-bundle').send_keys('com.example.short')
    b.el('ios-add').click()
    refused_without_a_prompt(b, 'a 5-character Team ID', shot='admin-listener-04-refused-before-step-up')


TESTS = [
    test_console_whole_on_the_admin_listener,
    test_first_admin_enrols_on_the_admin_listener,
    test_checks_before_the_passkey_prompt,
]


def main():
    if not BINARY or not DATABASE:
        print('SKIP admin listener: LATCHKEY_BIN and LATCHKEY_DATABASE_URL are needed')
        return 0

    def cleanup():
        subprocess.run([BINARY, 'admins', 'remove', ADMIN], env=environment(), capture_output=True, timeout=60)

    return with_server(BINARY, environment(), PUBLIC_PORT, 'admin listener', 'admin-listener.log',
                       lambda: 1 if run_suite(TESTS, label='admin listener: ', cleanup=cleanup) else 0)


if __name__ == '__main__':
    sys.exit(main())
