#!/usr/bin/env python3
"""The web app's vault creation refused at each passkey prompt, in headless Chromium with the PRF
virtual authenticator of test_vault.py: the refusal is the authenticator's own (CDP
`WebAuthn.setUserVerified` false, so the `userVerification: "required"` prompt fails with
NotAllowedError, as when the person cancels). Chromium's virtual authenticator does not verify the
user again after that (and a passkey taken out and put back loses its PRF), so that refusal runs last,
in a browser and an account of its own; the step-up prompt's refusal, which must be followed by a
working passkey, is the same NotAllowedError returned by a wrapper of navigator.credentials.get in
place of that one prompt.

Refused at the first prompt (the PRF one), nothing is stored: no vault row. Refused at the second
(the wrap's step-up), the salt is stored without a key; the panel offers Create again, and creating
finishes that vault with the same salt (`PUT /v1/vault` answers once per account). Then the vault is
whole: its wrap, its recovery key, locked after a reload.

Prints one line per test and closes with 'N passed, N failed, N skipped'; exit 1 on any failure.
"""
import secrets
import sys

from test_vault import Browser, psql_rows, run_story
from test_web import wait_for_server

USERNAME = f'cancel-{secrets.token_hex(3)}'
STATE = {}

# The page's next step-up prompt (a navigator.credentials.get without the PRF extension) is refused
# with the DOMException a browser gives when the person cancels; every other prompt is the real one.
REFUSE_STEP_UP = """
const real = navigator.credentials.get.bind(navigator.credentials);
navigator.credentials.get = (options) => {
  if (options && options.publicKey && options.publicKey.extensions && options.publicKey.extensions.prf) return real(options);
  navigator.credentials.get = real;
  window.__lkRefused = true;
  return Promise.reject(new DOMException('The operation either timed out or was not allowed.', 'NotAllowedError'));
};
"""


def vault_rows():
    """[(salt hex, number of wraps, recovery wrap set)] of this account's vault: [] without one."""
    rows = psql_rows(f"""SELECT encode(v.prf_salt, 'hex') || ' ' || (SELECT count(*) FROM vault_wrapped_keys w WHERE w.user_id = v.user_id)
                         || ' ' || (v.recovery_wrapped_key IS NOT NULL) FROM vaults v JOIN users u ON u.id = v.user_id
                         WHERE u.username = '{USERNAME}'""")
    return [tuple(r.split(' ')) for r in rows]


def user_verified(b, yes):
    b.d.execute_cdp_cmd('WebAuthn.setUserVerified', {'authenticatorId': b.authenticator, 'isUserVerified': yes})


def refused(b):
    """The creation ended in the app's error banner, with Create offered again."""
    b.until(lambda: b.script("return !document.getElementById('banner').hidden"), 'the error banner')
    b.wait_vault('none')
    b.until(lambda: b.usable('vault-create'), 'Create to be usable again')


def sign_up(b, username):
    b.until(lambda: b.body('ready') == 'true', 'the app to start')
    b.wait_view('welcome')
    b.type('signup-username', username)
    b.click('signup-button')
    b.wait_view('account')
    b.wait_passkeys(1)
    b.wait_vault('none')


def test_sign_up(b):
    sign_up(b, USERNAME)


def test_refused_at_the_step_up_leaves_a_vault_that_create_finishes(b):
    b.script(REFUSE_STEP_UP)
    b.click('vault-create')
    refused(b)
    assert b.script('return window.__lkRefused === true'), 'the step-up prompt was the one refused'

    rows = vault_rows()
    assert len(rows) == 1 and rows[0][1:] == ('0', 'false'), f'a salt and no key: {rows}'
    STATE['salt'] = rows[0][0]
    # What the panel shows for it after a reload too: Create, not a vault nothing opens.
    b.d.refresh()
    b.until(lambda: b.body('ready') == 'true', 'the app to start')
    b.wait_vault('none')
    b.click('vault-create')
    b.wait_vault('open')
    b.until(lambda: b.body('vault-key') == 'shown', 'the vault recovery key')
    assert vault_rows() == [(STATE['salt'], '1', 'true')], vault_rows()


def test_the_finished_vault_is_locked_after_a_reload(b):
    b.d.refresh()
    b.until(lambda: b.body('ready') == 'true', 'the app to start')
    b.wait_vault('locked')


def test_refused_at_the_first_prompt_stores_nothing(_):
    global USERNAME
    USERNAME = f'cancel-{secrets.token_hex(3)}'
    b = Browser()
    try:
        sign_up(b, USERNAME)
        user_verified(b, False)
        b.click('vault-create')
        refused(b)
        assert vault_rows() == [], vault_rows()
        # Reloaded: still nothing to open, Create offered.
        b.d.refresh()
        b.until(lambda: b.body('ready') == 'true', 'the app to start')
        b.wait_vault('none')
    finally:
        b.quit()


TESTS = [test_sign_up, test_refused_at_the_step_up_leaves_a_vault_that_create_finishes, test_the_finished_vault_is_locked_after_a_reload,
         test_refused_at_the_first_prompt_stores_nothing]


def main():
    import os
    tests = TESTS
    if os.environ.get('ONLY'):
        tests = [t for t in TESTS if t.__name__ in os.environ['ONLY'].split(',')]
    wait_for_server()
    b = Browser()
    try:
        return 1 if run_story(b, 'Chromium', tests, 'vault cancel') else 0
    finally:
        b.quit()


if __name__ == '__main__':
    sys.exit(main())
