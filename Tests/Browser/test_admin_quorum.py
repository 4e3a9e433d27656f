#!/usr/bin/env python3
"""The admin console under `LATCHKEY_ADMIN_QUORUM=2`, in headless Chromium: two admins, one change.

Starts its own `latchkey serve` (dev mode, rpId localhost, LATCHKEY_ADMIN_QUORUM=2) and two
browsers, each with its own virtual authenticator: admin A and admin B enrol from the links
`latchkey admins add` prints. A adds a web origin: the server answers 403 `approval_required`, the
console shows the change exactly and, once A agrees, opens a `latchkey.admin` approval for it and
approves it with A's passkey (1 of 2); the origin is not there yet. B opens "Waiting for approval",
sees the change exactly (method, path, body) and A's approval with its receipt, and approves it with
B's passkey, by keyboard. A's console lists the approved change; "Make the change" sends it with
`Latchkey-Approval`, the origin is allowed, the approval is used (a second use is refused) and
the audit line names the approval. A second change is vetoed by B and can no longer be made.
Environment: LATCHKEY_BIN, LATCHKEY_DATABASE_URL (run.sh passes both). Screenshots:
data/screenshots/admin-quorum-*.png and docs/screenshots/console-quorum-approval.png.
Synchronisation on DOM state, never sleeps (but the bounded wait for the server to answer).
"""
import json
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
PORT = free_port()
BASE_URL = f'http://localhost:{PORT}'
# test_web reads LATCHKEY_URL when imported: its browsers start on this test's own server.
os.environ['LATCHKEY_URL'] = BASE_URL

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

from test_admin import admin_get, fresh_authenticator, open_page, wait_prompt  # noqa: E402
from test_web import Browser, run_suite, with_server  # noqa: E402
from test_web import http as request_json  # noqa: E402

TAG = secrets.token_hex(3)
ADMIN_A, ADMIN_B = f'quorum-a-{TAG}', f'quorum-b-{TAG}'
ORIGIN = f'https://quorum-{TAG}.localhost'   # under rpId localhost: an origin that can work for it
VETOED = f'https://vetoed-{TAG}.localhost'
DOCS_SHOTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'docs', 'screenshots')
state = {}


def environment():
    return dict(os.environ, DATABASE_URL=DATABASE, LATCHKEY_DEV='1', LATCHKEY_RP_ID='localhost',
                LATCHKEY_LISTEN=f'127.0.0.1:{PORT}', LATCHKEY_ORIGINS=BASE_URL, LATCHKEY_ADMIN_QUORUM='2',
                LATCHKEY_WEB_DIR=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'web'))


def enrol(b, name):
    out = subprocess.run([BINARY, 'admins', 'add', name], env=environment(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    link = out.stdout.strip().splitlines()[-1]
    assert '/admin/?ticket=' in link, out.stdout
    fresh_authenticator(b)
    b.d.set_window_size(1280, 1100)
    b.d.get(link)
    b.until(lambda: b.body('ready') == 'true' and b.el('enrol').is_displayed(), f'the enrolment screen of {name}')
    b.el('enrol').click()
    b.until(lambda: b.body('view') == 'console' and b.body('loaded') == 'origins', f'the console of {name}')


def origins_now(b):
    return [o['origin'] for o in admin_get(b, '/admin/v1/origins')['origins']]


def items(b, list_id):
    return b.d.find_elements(By.CSS_SELECTOR, f'#{list_id} > li[data-id]')


def ask(b, origin):
    """Admin A's side: add `origin`; the console asks for approval and A's passkey approves first."""
    if b.body('page') != 'origins':
        open_page(b, 'origins')
    b.el('origin-input').clear()
    b.el('origin-input').send_keys(origin)
    asked_before = b.body('asked')
    b.el('origin-add').click()
    wait_prompt(b)
    assert b.el('stepup').get_attribute('data-kind') == 'ask', b.el('stepup').get_attribute('data-kind')
    shown = json.loads(b.el('stepup-action').text)
    assert shown == {'type': 'latchkey.admin', 'method': 'POST', 'path': '/admin/v1/origins', 'body': {'origin': origin}}, shown
    b.el('stepup-approve').click()
    b.until(lambda: b.body('asked') not in (None, '', asked_before) and b.el('quorum-note').is_displayed(), 'the approval to be asked for')
    assert '1 of 2 admins approved' in b.el('quorum-note-text').text, b.el('quorum-note-text').text
    assert b.el('quorum-note').get_attribute('data-state') == 'collecting'
    return b.body('asked')


# ---------------------------------------------------------------------------------------------

def test_two_admins_enrol(b):
    enrol(b, ADMIN_A)
    state['b'] = Browser()
    enrol(state['b'], ADMIN_B)


def test_a_change_asks_for_approval(b):
    approval_id = ask(b, ORIGIN)
    state['id'] = approval_id
    assert ORIGIN not in origins_now(b), 'the origin was added before a second admin approved it'
    b.shot('admin-quorum-01-asked')
    # The server's view of it: collecting, with A's own approval and its receipt.
    pending = admin_get(b, '/admin/v1/approvals')['approvals']
    mine = [a for a in pending if a['id'] == approval_id]
    assert len(mine) == 1 and mine[0]['state'] == 'collecting' and len(mine[0]['approvals']) == 1, pending
    state['receipt_a'] = mine[0]['approvals'][0]['receiptId']
    # Adding it again before it is approved asks nothing new: it says it still waits.
    b.el('quorum-note-close').click()
    b.el('origin-add').click()
    b.until(lambda: b.el('quorum-note').is_displayed(), 'the note that it still waits')
    assert 'still waits' in b.el('quorum-note-text').text and b.body('asked') == approval_id, b.el('quorum-note-text').text
    assert len([a for a in admin_get(b, '/admin/v1/approvals')['approvals'] if a['action']['body'] == {'origin': ORIGIN}]) == 1


def test_another_admin_approves_it_in_the_console(b):
    other = state['b']
    open_page(other, 'approvals')
    other.until(lambda: any(li.get_attribute('data-id') == state['id'] for li in items(other, 'approvals')), 'the change in B’s list')
    li = next(li for li in items(other, 'approvals') if li.get_attribute('data-id') == state['id'])
    assert li.get_attribute('data-mine') == 'false' and li.get_attribute('data-state') == 'collecting'
    shown = json.loads(li.find_element(By.CSS_SELECTOR, 'pre').text)
    assert shown == {'type': 'latchkey.admin', 'method': 'POST', 'path': '/admin/v1/origins', 'body': {'origin': ORIGIN}}, shown
    text = li.text
    assert ADMIN_A in text and state['receipt_a'] in text and '1 of 2 admins approved' in text, text
    other.shot('admin-quorum-02-waiting')
    # By keyboard: Tab to the approve button, Enter; the prompt shows the change; Enter approves.
    button = li.find_element(By.CSS_SELECTOR, '.a-approve')
    other.tab_to(button, limit=80)
    other.keys(Keys.ENTER)
    wait_prompt(other)
    assert other.el('stepup').get_attribute('data-kind') == 'approve'
    assert json.loads(other.el('stepup-action').text)['body'] == {'origin': ORIGIN}
    other.until(lambda: other.focused() == other.el('stepup-approve'), 'focus on Approve')
    other.keys(Keys.ENTER)
    other.until(lambda: other.body('last-vote') == state['id'] and other.body('stepup') == 'closed', 'B’s approval')
    # Approved: B may still veto it until it is used, but not approve it again.
    other.until(lambda: any(li.get_attribute('data-id') == state['id'] and li.get_attribute('data-state') == 'approved'
                            and not li.find_elements(By.CSS_SELECTOR, '.a-approve') for li in items(other, 'approvals')),
                'the change shown approved')
    assert ORIGIN not in origins_now(other), 'an approval made the change by itself'


def test_the_asking_admin_makes_the_change(b):
    open_page(b, 'approvals')
    b.until(lambda: any(li.get_attribute('data-id') == state['id'] for li in items(b, 'approved')), 'the approved change in A’s list')
    li = next(li for li in items(b, 'approved') if li.get_attribute('data-id') == state['id'])
    text = li.text
    assert li.get_attribute('data-state') == 'approved' and ADMIN_A in text and ADMIN_B in text and '2 of 2 admins approved' in text, text
    voters = li.find_elements(By.CSS_SELECTOR, '.voters > li')
    assert len(voters) == 2 and all(v.get_attribute('data-receipt') for v in voters), [v.text for v in voters]
    b.shot('admin-quorum-03-approved')
    os.makedirs(DOCS_SHOTS, exist_ok=True)
    b.d.save_screenshot(os.path.join(DOCS_SHOTS, 'console-quorum-approval.png'))
    li.find_element(By.CSS_SELECTOR, '.a-make').click()
    b.until(lambda: b.body('last-made') == 'POST /admin/v1/origins', 'the change to be made')
    assert ORIGIN in origins_now(b)
    open_page(b, 'origins')
    b.until(lambda: any(li.get_attribute('data-origin') == ORIGIN for li in b.d.find_elements(By.CSS_SELECTOR, '#origins > li')),
            'the origin in the console')
    b.shot('admin-quorum-04-made')
    # Used once: the same approval makes nothing again; the audit line's receipt is the approval.
    status, _, body = request_json('POST', '/admin/v1/origins', body={'origin': ORIGIN},
                                   headers={'Authorization': 'Bearer ' + json.loads(b.d.execute_script(
                                       "return sessionStorage.getItem('latchkey.admin')"))['tokens']['access_token'],
                                            'Latchkey-Approval': state['id']})
    assert status == 403 and json.loads(body)['code'] == 'approval_required', (status, body)
    entries = admin_get(b, '/admin/v1/audit?action=origin.added')['entries']
    assert any(e['detail'].get('receiptId') == state['id'] for e in entries), entries


def test_a_vetoed_change_is_not_made(b):
    vetoed = ask(b, VETOED)
    other = state['b']
    open_page(other, 'approvals')
    other.until(lambda: any(li.get_attribute('data-id') == vetoed for li in items(other, 'approvals')), 'the second change in B’s list')
    li = next(li for li in items(other, 'approvals') if li.get_attribute('data-id') == vetoed)
    li.find_element(By.CSS_SELECTOR, '.a-veto').click()
    wait_prompt(other)
    assert other.el('stepup').get_attribute('data-kind') == 'veto'
    other.el('stepup-approve').click()
    other.until(lambda: not any(li.get_attribute('data-id') == vetoed for li in items(other, 'approvals')), 'the vetoed change gone')
    open_page(b, 'approvals')
    assert not any(li.get_attribute('data-id') == vetoed for li in items(b, 'approved'))
    assert VETOED not in origins_now(b)


TESTS = [
    test_two_admins_enrol,
    test_a_change_asks_for_approval,
    test_another_admin_approves_it_in_the_console,
    test_the_asking_admin_makes_the_change,
    test_a_vetoed_change_is_not_made,
]


def main():
    if not BINARY or not DATABASE:
        print('SKIP admin quorum: LATCHKEY_BIN and LATCHKEY_DATABASE_URL are needed')
        return 0

    def cleanup():
        if 'b' in state:
            state['b'].d.quit()
        for name in (ADMIN_A, ADMIN_B):
            subprocess.run([BINARY, 'admins', 'remove', name], env=environment(), capture_output=True, timeout=60)
        subprocess.run([BINARY, 'origins', 'remove', ORIGIN], env=environment(), capture_output=True, timeout=60)

    return with_server(BINARY, environment(), PORT, 'admin quorum', 'admin-quorum.log',
                       lambda: 1 if run_suite(TESTS, label='admin quorum: ', cleanup=cleanup) else 0)


if __name__ == '__main__':
    sys.exit(main())
