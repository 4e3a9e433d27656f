"""The admin console under `LATCHKEY_ADMIN_QUORUM=2`: the story both browser engines run.

Two admins, each in a browser of their own with a virtual authenticator of its own, enrol from the
links `latchkey admins add` prints. A adds a web origin: the server answers 403
`approval_required`, the console shows the change exactly and, once A agrees, opens a
`latchkey.admin` approval for it and approves it with A's passkey (1 of 2); the origin is not there
yet, and adding it again asks nothing new. B opens "Waiting for approval", sees the change exactly
(method, path, body) and A's approval with its receipt, and approves it with B's passkey, by
keyboard. A's console lists the approved change; "Make the change" sends it with
`Latchkey-Approval`, the origin is allowed, a second use of the approval is refused and the audit
line names the approval. A second change is vetoed by B and is never made.

The steps see a browser only through `Console` (below): the engine's files (test_admin_quorum.py,
Chromium over Selenium; test_admin_quorum_firefox.py, Firefox ESR over Marionette) supply its few
engine-specific methods, so both run the same steps. No Selenium here. Synchronisation is on DOM
state (data-* attributes the console sets), polled until a bound, never sleeps.
"""
import json
import os
import secrets
import socket
import subprocess
import time
import traceback
import urllib.error
import urllib.request

from serving import with_server
from page_api import page_request

WAIT = 20  # seconds: an upper bound for a condition, not a delay
WEB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'web')
DOCS_SHOTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'docs', 'screenshots')
# What the quorum lists show of each change: read in the page, so that both engines read the same.
ITEMS = """
return [...document.querySelectorAll('#' + arguments[0] + ' > li[data-id]')].map((li) => ({
  id: li.dataset.id, state: li.dataset.state, mine: li.dataset.mine, text: li.innerText,
  action: li.querySelector('pre') ? li.querySelector('pre').textContent : null,
  approvable: !!li.querySelector('.a-approve'),
  voters: [...li.querySelectorAll('.voters > li')].map((v) => v.dataset.receipt || ''),
}));
"""


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Console:
    """One admin's browser on the console. An engine supplies `goto`, `js` (a script's value),
    `click(css)`, `fill(element_id, text)`, `shown(element_id)`, `tab_to(css)` (Tab until it has
    focus), `enter()` (the Enter key to what has focus), `new_person()` (an empty authenticator, as
    if someone else sat down), `screenshot(path)` and `quit()`; the rest is the same everywhere."""

    def __init__(self, shots, prefix):
        self.shots, self.prefix = shots, prefix

    def until(self, condition, what):
        deadline = time.monotonic() + WAIT
        last = None
        while time.monotonic() < deadline:
            try:
                value = condition()
                if value:
                    return value
            except Exception as e:  # noqa: BLE001 - a list re-rendered between finding and reading
                last = e
            time.sleep(0.1)
        raise AssertionError(f'timed out waiting for {what}; {self.state()} (last error: {last})')

    def state(self):
        try:
            return self.js("const d = document.body.dataset, b = document.getElementById('banner');"
                           "return `view=${d.view} page=${d.page} loaded=${d.loaded} stepup=${d.stepup} `"
                           " + `banner=${b && !b.hidden ? JSON.stringify([b.dataset.code, b.textContent.trim()]) : 'hidden'}`")
        except Exception as e:  # noqa: BLE001 - diagnostics only
            return f'(state unavailable: {e})'

    def body(self, attr):
        return self.js("return document.body.getAttribute('data-' + arguments[0])", attr)

    def text(self, element_id):
        return self.js("return document.getElementById(arguments[0]).innerText", element_id)

    def attr(self, element_id, name):
        return self.js("return document.getElementById(arguments[0]).getAttribute(arguments[1])", element_id, name)

    def focused(self):
        return self.js("return document.activeElement ? document.activeElement.id : null")

    def items(self, list_id):
        return self.js(ITEMS, list_id)

    def item(self, list_id, approval_id):
        return next((i for i in self.items(list_id) if i['id'] == approval_id), None)

    def token(self):
        return json.loads(self.js("return sessionStorage.getItem('latchkey.admin')"))['tokens']['access_token']

    def api(self, method, path, body=None, headers=None):
        """(status, body bytes) of a request made by this console page's own latchkey.js: the admin's
        session is DPoP-bound, so its token works only with the page's proofs (200 for any success)."""
        return page_request(self.js_async, method, path, body, headers, storage_key='latchkey.admin')

    def open_page(self, page):
        self.click(f'#tab-{page}')
        self.until(lambda: self.body('page') == page and self.body('loaded') == page, f'the {page} page')

    def wait_prompt(self):
        self.until(lambda: self.body('stepup') == 'open' and self.shown('stepup'), 'the step-up prompt')

    def shot(self, name):
        os.makedirs(self.shots, exist_ok=True)
        self.screenshot(os.path.join(self.shots, f'{self.prefix}{name}.png'))


def item_css(list_id, approval_id, inner):
    return f'#{list_id} > li[data-id={json.dumps(approval_id)}] {inner}'


class QuorumStory:
    """The story's steps, in order, for one server; `open_browser()` gives a `Console` on a new
    browser of the engine's (at about:blank or the server's start page)."""

    def __init__(self, binary, database, port, open_browser, docs_screenshot=False):
        self.binary, self.database, self.port = binary, database, port
        self.base = f'http://localhost:{port}'
        self.open_browser = open_browser
        self.docs_screenshot = docs_screenshot   # one engine writes the docs' picture
        tag = secrets.token_hex(3)
        self.admin_a, self.admin_b = f'quorum-a-{tag}', f'quorum-b-{tag}'
        self.origin = f'https://quorum-{tag}.localhost'   # under rpId localhost: an origin that can work for it
        self.vetoed = f'https://vetoed-{tag}.localhost'
        self.a = self.b = None
        self.approval = self.receipt_a = None

    def environment(self):
        return dict(os.environ, DATABASE_URL=self.database, LATCHKEY_DEV='1', LATCHKEY_RP_ID='localhost',
                    LATCHKEY_LISTEN=f'127.0.0.1:{self.port}', LATCHKEY_ORIGINS=self.base,
                    LATCHKEY_ADMIN_QUORUM='2', LATCHKEY_WEB_DIR=WEB_DIR)

    # --- plumbing -------------------------------------------------------------------------
    def request(self, method, path, body=None, headers=None):
        """(status, body bytes) of one request to the server, without a browser."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers or {})
        if data is not None:
            req.add_header('Content-Type', 'application/json')
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def admin_get(self, console, path):
        status, body = console.api('GET', path)
        assert status == 200, (path, status, body)
        return json.loads(body)

    def origins_now(self, console):
        return [o['origin'] for o in self.admin_get(console, '/admin/v1/origins')['origins']]

    def cli(self, *args):
        return subprocess.run([self.binary, *args], env=self.environment(), capture_output=True, text=True, timeout=60)

    def enrol(self, console, name):
        out = self.cli('admins', 'add', name)
        assert out.returncode == 0, out.stderr
        link = out.stdout.strip().splitlines()[-1]
        assert '/admin/?ticket=' in link, out.stdout
        console.new_person()
        console.goto(link)
        console.until(lambda: console.body('ready') == 'true' and console.shown('enrol'), f'the enrolment screen of {name}')
        console.click('#enrol')
        console.until(lambda: console.body('view') == 'console' and console.body('loaded') == 'origins', f'the console of {name}')

    def ask(self, console, origin):
        """The asking admin's side: add `origin`; the console asks for approval and their passkey approves first."""
        if console.body('page') != 'origins':
            console.open_page('origins')
        console.fill('origin-input', origin)
        asked_before = console.body('asked')
        console.click('#origin-add')
        console.wait_prompt()
        assert console.attr('stepup', 'data-kind') == 'ask', console.attr('stepup', 'data-kind')
        shown = json.loads(console.text('stepup-action'))
        assert shown == {'type': 'latchkey.admin', 'method': 'POST', 'path': '/admin/v1/origins', 'body': {'origin': origin}}, shown
        console.click('#stepup-approve')
        console.until(lambda: console.body('asked') not in (None, '', asked_before) and console.shown('quorum-note'),
                      'the approval to be asked for')
        assert '1 of 2 admins approved' in console.text('quorum-note-text'), console.text('quorum-note-text')
        assert console.attr('quorum-note', 'data-state') == 'collecting'
        return console.body('asked')

    # --- the story ------------------------------------------------------------------------
    def test_two_admins_enrol(self):
        self.a = self.open_browser()
        self.enrol(self.a, self.admin_a)
        self.b = self.open_browser()
        self.enrol(self.b, self.admin_b)

    def test_a_change_asks_for_approval(self):
        a = self.a
        self.approval = self.ask(a, self.origin)
        assert self.origin not in self.origins_now(a), 'the origin was added before a second admin approved it'
        a.shot('01-asked')
        # The server's view of it: collecting, with A's own approval and its receipt.
        pending = self.admin_get(a, '/admin/v1/approvals')['approvals']
        mine = [p for p in pending if p['id'] == self.approval]
        assert len(mine) == 1 and mine[0]['state'] == 'collecting' and len(mine[0]['approvals']) == 1, pending
        self.receipt_a = mine[0]['approvals'][0]['receiptId']
        # Adding it again before it is approved asks nothing new: it says it still waits.
        a.click('#quorum-note-close')
        a.until(lambda: not a.shown('quorum-note'), 'the note dismissed')
        a.click('#origin-add')
        a.until(lambda: a.shown('quorum-note') and 'still waits' in a.text('quorum-note-text'), 'the note that it still waits')
        assert a.body('asked') == self.approval, a.body('asked')
        same = [p for p in self.admin_get(a, '/admin/v1/approvals')['approvals'] if p['action']['body'] == {'origin': self.origin}]
        assert len(same) == 1, same

    def test_another_admin_approves_it_in_the_console(self):
        b = self.b
        b.open_page('approvals')
        li = b.until(lambda: b.item('approvals', self.approval), 'the change in B’s list')
        assert li['mine'] == 'false' and li['state'] == 'collecting', li
        shown = json.loads(li['action'])
        assert shown == {'type': 'latchkey.admin', 'method': 'POST', 'path': '/admin/v1/origins', 'body': {'origin': self.origin}}, shown
        assert self.admin_a in li['text'] and self.receipt_a in li['text'] and '1 of 2 admins approved' in li['text'], li['text']
        b.shot('02-waiting')
        # By keyboard: Tab to the approve button, Enter; the prompt shows the change; Enter approves.
        b.tab_to(item_css('approvals', self.approval, '.a-approve'))
        b.enter()
        b.wait_prompt()
        assert b.attr('stepup', 'data-kind') == 'approve'
        assert json.loads(b.text('stepup-action'))['body'] == {'origin': self.origin}
        b.until(lambda: b.focused() == 'stepup-approve', 'focus on Approve')
        b.enter()
        b.until(lambda: b.body('last-vote') == self.approval and b.body('stepup') == 'closed', 'B’s approval')
        # Approved: B may still veto it until it is used, but not approve it again.
        b.until(lambda: (lambda i: i and i['state'] == 'approved' and not i['approvable'])(b.item('approvals', self.approval)),
                'the change shown approved')
        assert self.origin not in self.origins_now(b), 'an approval made the change by itself'

    def test_the_asking_admin_makes_the_change(self):
        a = self.a
        a.open_page('approvals')
        li = a.until(lambda: a.item('approved', self.approval), 'the approved change in A’s list')
        text = li['text']
        assert li['state'] == 'approved' and self.admin_a in text and self.admin_b in text and '2 of 2 admins approved' in text, text
        assert len(li['voters']) == 2 and all(li['voters']), li['voters']
        a.shot('03-approved')
        if self.docs_screenshot:
            os.makedirs(DOCS_SHOTS, exist_ok=True)
            a.screenshot(os.path.join(DOCS_SHOTS, 'console-quorum-approval.png'))
        a.click(item_css('approved', self.approval, '.a-make'))
        a.until(lambda: a.body('last-made') == 'POST /admin/v1/origins', 'the change to be made')
        assert self.origin in self.origins_now(a)
        a.open_page('origins')
        a.until(lambda: a.js("return [...document.querySelectorAll('#origins > li')].some((li) => li.dataset.origin === arguments[0])",
                             self.origin), 'the origin in the console')
        a.shot('04-made')
        # Used once: the same approval makes nothing again; the audit line's receipt is the approval.
        status, body = a.api('POST', '/admin/v1/origins', body={'origin': self.origin}, headers={'Latchkey-Approval': self.approval})
        assert status == 403 and json.loads(body)['code'] == 'approval_required', (status, body)
        entries = self.admin_get(a, '/admin/v1/audit?action=origin.added')['entries']
        assert any(e['detail'].get('receiptId') == self.approval for e in entries), entries

    def test_a_vetoed_change_is_not_made(self):
        a, b = self.a, self.b
        vetoed = self.ask(a, self.vetoed)
        b.open_page('approvals')
        b.until(lambda: b.item('approvals', vetoed), 'the second change in B’s list')
        b.click(item_css('approvals', vetoed, '.a-veto'))
        b.wait_prompt()
        assert b.attr('stepup', 'data-kind') == 'veto'
        b.click('#stepup-approve')
        b.until(lambda: b.item('approvals', vetoed) is None, 'the vetoed change gone')
        a.open_page('approvals')
        assert a.item('approved', vetoed) is None
        status, body = a.api('GET', f'/v1/approvals/{vetoed}')
        assert status == 200 and json.loads(body)['state'] == 'vetoed', (status, body)
        # Sent with the vetoed approval anyway, the change is refused and never made.
        status, body = a.api('POST', '/admin/v1/origins', body={'origin': self.vetoed}, headers={'Latchkey-Approval': vetoed})
        assert status == 403 and json.loads(body)['code'] == 'approval_required', (status, body)
        assert self.vetoed not in self.origins_now(a)

    STEPS = ['test_two_admins_enrol', 'test_a_change_asks_for_approval', 'test_another_admin_approves_it_in_the_console',
             'test_the_asking_admin_makes_the_change', 'test_a_vetoed_change_is_not_made']

    # --- running it -----------------------------------------------------------------------
    def run_steps(self, label):
        """Every step in order, each failure reported and the run going on; the failure count."""
        passed = failed = 0
        try:
            for name in self.STEPS:
                started = time.monotonic()
                try:
                    getattr(self, name)()
                except Exception as e:  # noqa: BLE001 - every failure is reported
                    failed += 1
                    print(f'FAIL {name}: {type(e).__name__}: {e}', flush=True)
                    traceback.print_exc()
                    for who, console in (('a', self.a), ('b', self.b)):
                        try:
                            if console:
                                console.shot(f'failed-{name}-{who}')
                        except Exception:  # noqa: BLE001
                            pass
                    continue
                passed += 1
                print(f'PASS {name} ({time.monotonic() - started:.1f}s)', flush=True)
        finally:
            for console in (self.a, self.b):
                if console:
                    console.quit()
            for name in (self.admin_a, self.admin_b):
                self.cli('admins', 'remove', name)
            self.cli('origins', 'remove', self.origin)
        print(f'{label}{passed} passed, {failed} failed')
        return failed

    def run(self, label, log_name):
        """The story against a server of its own; exit status 0 when every step passed."""
        return with_server(self.binary, self.environment(), self.port, label, log_name,
                           lambda: 1 if self.run_steps(f'{label}: ') else 0)
