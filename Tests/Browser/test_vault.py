#!/usr/bin/env python3
"""The vault the server cannot read (docs/vault.md), in headless Chromium with a virtual
authenticator that evaluates PRF (CDP `WebAuthn.addVirtualAuthenticator`, `hasPrf: true`).

One story, in order, in one browser: sign up and make recovery codes; create the vault (its
recovery key shown once beside the codes) and encrypt a note; add a second passkey (the data key
is wrapped for it); revoke the first (its wrap goes with it) and read the note with the second;
lose every passkey, recover the account with a recovery code, and read the note with the vault
recovery key (which wraps the data key for the new passkey); then open it with that new passkey.

The last test reads every table of the server's database (psql, LATCHKEY_DATABASE_URL) and every
request the browser sent during the story (Chromium's performance log: CDP Network events, whatever
the page did) and shows that none of the PRF outputs, the key-wrapping keys, the data key or the
vault recovery key reached the server, in any of the usual encodings, nor the note (its text or its
ciphertext, which stays in the browser's localStorage), while the salt and the wrapped keys (the
controls) are found there.

The test's own probes of the authenticator (to learn the PRF outputs it must look for) run in the
page with navigator.credentials.get and a local challenge: they send nothing to the server.

Screenshots: docs/screenshots/vault-*.png. Prints one line per test and closes with
'N passed, N failed, N skipped'; exit 1 on any failure.
"""
import base64
import json
import os
import secrets
import subprocess
import sys
import time
import traceback

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from test_web import BASE, Skip, wait_for_server

WAIT = 30  # seconds: an upper bound for a condition, not a delay
DOCS_SHOTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'docs', 'screenshots')
SHOTS = os.environ.get('LATCHKEY_SCREENSHOTS', os.path.join('data', 'screenshots'))
USERNAME = f'vera-{secrets.token_hex(3)}'
NOTE = 'Safe deposit box 1138 — the key is taped under the piano.'

# What the story learns, for the last test: secrets the server must never see, and controls it must.
SECRETS = {}   # name → bytes
CONTROLS = {}  # name → bytes (the salt, the wrapped keys)
STATE = {}


def b64u_decode(s):
    return base64.urlsafe_b64decode(s + '=' * (-len(s) % 4))


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b'=').decode()


def base32_decode(code):
    text = code.replace(' ', '').replace('-', '').upper()
    return base64.b32decode(text + '=' * (-len(text) % 8))


def make_driver():
    options = Options()
    options.binary_location = os.environ.get('CHROMIUM', '/usr/bin/chromium')
    for arg in ['--headless=new', '--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu',
                '--window-size=1280,1100', '--force-device-scale-factor=1', '--lang=en-GB',
                '--no-first-run', '--disable-extensions', '--password-store=basic']:
        options.add_argument(arg)
    # performance: ChromeDriver's record of CDP Network events, with each request's body.
    options.set_capability('goog:loggingPrefs', {'browser': 'ALL', 'performance': 'ALL'})
    options.add_experimental_option('perfLoggingPrefs', {'enableNetwork': True, 'enablePage': False})
    options.add_experimental_option('prefs', {'intl.accept_languages': 'en-GB'})
    service = Service(os.environ.get('CHROMEDRIVER', '/usr/bin/chromedriver'))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(30)
    return driver


PROBE_PRF = """
    const [credentialId, salt, wrappedKey] = arguments, done = arguments[arguments.length - 1];
    (async () => {
      const { base64url, vaultCrypto } = await import('/latchkey.js');
      const bytes = (s) => new Uint8Array(base64url.decode(s));
      const c = await navigator.credentials.get({ publicKey: {
        challenge: crypto.getRandomValues(new Uint8Array(32)), rpId: location.hostname,
        allowCredentials: [{ type: 'public-key', id: bytes(credentialId) }], userVerification: 'required',
        extensions: { prf: { eval: { first: bytes(salt) } } } } });
      const prf = new Uint8Array(c.getClientExtensionResults().prf.results.first);
      const handle = new Uint8Array(c.response.userHandle);
      const kwk = await vaultCrypto.keyWrappingKey(prf, handle, bytes(credentialId));
      const dataKey = await vaultCrypto.unwrapForPasskey(wrappedKey, prf, handle, bytes(credentialId));
      return { prf: base64url.encode(prf), kwk: base64url.encode(kwk), dataKey: base64url.encode(dataKey) };
    })().then(done, (e) => done({ error: String(e) }));
"""


class StoryBrowser:
    """What the story needs from a browser; Chromium's is below, Firefox's in test_vault_firefox.py."""
    docs_shots = False

    # --- subclasses: script(js, *args), script_async(js, *args), native_click(id), type(id, text),
    # clear(id), shot(name), capture(), remove_credential(id), clear_credentials()

    def until(self, condition, what, seconds=WAIT):
        deadline = time.monotonic() + seconds
        while True:
            try:
                value = condition()
                if value:
                    return value
            except Exception:  # noqa: BLE001 - a re-rendered element between finding and reading it
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f'timed out waiting for {what}; {self.state()}')
            time.sleep(0.1)  # a poll interval (as WebDriverWait's), not a synchronisation

    def body(self, attr):
        return self.script('return document.body.getAttribute(arguments[0])', f'data-{attr}')

    def text(self, element_id):
        return self.script('return document.getElementById(arguments[0]).innerText', element_id)

    def value(self, element_id):
        return self.script('return document.getElementById(arguments[0]).value', element_id)

    def displayed(self, element_id):
        return self.script("""const el = document.getElementById(arguments[0]);
            return Boolean(el && el.getClientRects().length && !el.closest('[hidden]'))""", element_id)

    def usable(self, element_id):
        return self.displayed(element_id) and self.script('return !document.getElementById(arguments[0]).disabled', element_id)

    def click(self, element_id):
        self.until(lambda: self.usable(element_id), f'#{element_id} to be usable')
        self.script('document.getElementById(arguments[0]).scrollIntoView({block: "center"})', element_id)
        self.native_click(element_id)

    def state(self):
        try:
            return self.script("""const b = document.body.dataset, banner = document.getElementById('banner');
                return `view=${b.view} vault=${b.vault} conditional=${b.conditional} banner=${banner.hidden ? 'hidden' : JSON.stringify(banner.innerText)} code=${banner.dataset.code}`""")
        except Exception as e:  # noqa: BLE001 - diagnostics only
            return f'(state unavailable: {e})'

    def wait_view(self, name):
        self.until(lambda: self.body('view') == name, f'view {name}')

    def wait_vault(self, state):
        self.until(lambda: self.body('vault') == state, f'the vault panel {state}')

    def wait_passkeys(self, count):
        self.until(lambda: self.script("return document.getElementById('passkeys').dataset.count") == str(count), f'{count} passkeys listed')

    def passkey_ids(self):
        return self.script("return [...document.querySelectorAll('#passkeys > li')].map((li) => li.dataset.id)")

    def list_texts(self, css):
        return self.script('return [...document.querySelectorAll(arguments[0])].map((e) => e.innerText)', css)

    def revoke(self, credential_id):
        """The passkey's Revoke, then the confirmation's Revoke (its buttons have no ids)."""
        for part in ('.pk-revoke-start', '.pk-confirm-yes'):
            css = f'#passkeys > li[data-id="{credential_id}"] {part}'
            self.until(lambda: self.script('const e = document.querySelector(arguments[0]); return Boolean(e && e.getClientRects().length)', css), css)
            self.script('document.querySelector(arguments[0]).scrollIntoView({block: "center"})', css)
            self.native_click_css(css)

    def probe_prf(self, credential_id, salt):
        """The PRF output of one credential on the vault's salt, with user verification as the app asks
        it, and the data key its wrap opens to: in the page, with a local challenge (nothing is sent)."""
        wrapped = psql_rows(f"SELECT encode(w.wrapped_key, 'hex') FROM vault_wrapped_keys w WHERE w.credential_id = '\\x{b64u_decode(credential_id).hex()}'")
        assert len(wrapped) == 1, f'one wrap for {credential_id}: {wrapped}'
        result = self.script_async(PROBE_PRF, credential_id, salt, b64u(bytes.fromhex(wrapped[0])))
        assert 'error' not in result, result
        return {k: b64u_decode(v) for k, v in result.items()}


class Browser(StoryBrowser):
    """Chromium, with a CDP virtual authenticator that evaluates PRF and a CDP Network record."""
    name = 'Chromium'
    docs_shots = True

    def __init__(self):
        self.d = make_driver()
        self.requests = []  # every request the browser sent: {method, url, headers, body}
        self.d.get(BASE + '/')
        self.d.execute_cdp_cmd('WebAuthn.enable', {'enableUI': False})
        self.authenticator = self.d.execute_cdp_cmd('WebAuthn.addVirtualAuthenticator', {'options': {
            'protocol': 'ctap2', 'ctap2Version': 'ctap2_1', 'transport': 'internal',
            'hasResidentKey': True, 'hasUserVerification': True, 'isUserVerified': True,
            'automaticPresenceSimulation': True, 'hasPrf': True}})['authenticatorId']

    def quit(self):
        self.d.quit()

    def script(self, js, *args):
        return self.d.execute_script(js, *args)

    def script_async(self, js, *args):
        return self.d.execute_async_script(js, *args)

    def native_click(self, element_id):
        self.d.find_element(By.ID, element_id).click()

    def native_click_css(self, css):
        self.d.find_element(By.CSS_SELECTOR, css).click()

    def type(self, element_id, text):
        self.d.find_element(By.ID, element_id).send_keys(text)

    def clear(self, element_id):
        self.d.find_element(By.ID, element_id).clear()

    def capture(self):
        """Drains ChromeDriver's performance log into self.requests (call often: it is a buffer)."""
        for entry in self.d.get_log('performance'):
            message = json.loads(entry['message'])['message']
            if message.get('method') != 'Network.requestWillBeSent':
                continue
            r = message['params']['request']
            body = r.get('postData')
            if body is None and r.get('postDataEntries'):
                body = ''.join(base64.b64decode(e.get('bytes', '')).decode('utf-8', 'replace') for e in r['postDataEntries'])
            if body is None and r.get('hasPostData'):
                raise AssertionError(f"a request body the log did not carry: {r['method']} {r['url']}")
            self.requests.append({'method': r['method'], 'url': r['url'], 'headers': r.get('headers', {}), 'body': body or ''})

    def remove_credential(self, credential_id_b64u):
        std = base64.b64encode(b64u_decode(credential_id_b64u)).decode()
        self.d.execute_cdp_cmd('WebAuthn.removeCredential', {'authenticatorId': self.authenticator, 'credentialId': std})

    def clear_credentials(self):
        self.d.execute_cdp_cmd('WebAuthn.clearCredentials', {'authenticatorId': self.authenticator})

    def shot(self, name):
        os.makedirs(SHOTS, exist_ok=True)
        self.d.save_screenshot(os.path.join(SHOTS, f'{name}.png'))

    def shot_of(self, element_id, name):
        """The card `element_id` only, into docs/screenshots (what docs/vault.md shows)."""
        el = self.d.find_element(By.ID, element_id)
        self.d.execute_script('arguments[0].scrollIntoView({block: "start"})', el)
        os.makedirs(DOCS_SHOTS, exist_ok=True)
        el.screenshot(os.path.join(DOCS_SHOTS, f'{name}.png'))
        self.shot(name)

    def console(self):
        return [f"{e.get('level')} {e.get('message')}" for e in self.d.get_log('browser')[-10:]]


def database():
    url = os.environ.get('LATCHKEY_DATABASE_URL')
    if not url:
        raise Skip('LATCHKEY_DATABASE_URL is needed (the story reads the server\'s tables)')
    return url


def psql_rows(query):
    out = subprocess.run(['psql', '-v', 'ON_ERROR_STOP=1', '-q', '-At', database(), '-c', query],
                         check=True, capture_output=True, text=True, timeout=60).stdout
    return [line for line in out.split('\n') if line]


# ---------------------------------------------------------------------------------------------
# The story

def test_sign_up_and_make_recovery_codes(b):
    database()
    b.until(lambda: b.body('ready') == 'true', 'the app to start')
    b.wait_view('welcome')
    b.type('signup-username', USERNAME)
    b.click('signup-button')
    b.wait_view('account')
    b.wait_passkeys(1)
    STATE['first'] = b.passkey_ids()[0]
    b.wait_vault('none')
    b.click('codes-create')
    b.until(lambda: b.body('recovery-codes') == '10', 'ten recovery codes')
    STATE['codes'] = b.list_texts('#codes-list li')
    # Registration asked for PRF, and this authenticator said yes.
    assert psql_rows(f"SELECT count(*) FROM credentials c JOIN users u ON u.id = c.user_id WHERE u.username = '{USERNAME}' AND c.prf_enabled") == ['1']
    b.capture()


def test_create_the_vault_and_encrypt_a_note(b):
    b.click('vault-create')
    b.wait_vault('open')
    b.until(lambda: b.body('vault-key') == 'shown', 'the vault recovery key')
    code = ' '.join(b.list_texts('#vault-key-code span'))
    flat = code.replace(' ', '')
    assert len(flat) == 52 and all(c in 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567' for c in flat), code
    assert b.displayed('codes-shown'), 'the key is shown beside the recovery codes'
    SECRETS['vault recovery key'] = base32_decode(flat)
    STATE['code'] = code
    assert len(SECRETS['vault recovery key']) == 32
    b.shot_of('recovery-settings', 'vault-recovery-key')
    b.type('vault-note', NOTE)
    b.click('vault-save')
    b.until(lambda: b.body('vault-note') == 'saved', 'the note to be saved')
    stored = b.script("return Object.entries(localStorage).filter(([k]) => k.startsWith('latchkey.vault.note.'))")
    assert len(stored) == 1 and NOTE not in stored[0][1], stored
    SECRETS['note ciphertext'] = b64u_decode(json.loads(stored[0][1])['sealed'])
    b.shot_of('vault', 'vault-note-saved')
    salt = psql_rows(f"SELECT encode(v.prf_salt, 'hex') FROM vaults v JOIN users u ON u.id = v.user_id WHERE u.username = '{USERNAME}'")
    assert len(salt) == 1, salt
    CONTROLS['salt'] = bytes.fromhex(salt[0])
    STATE['salt'] = b64u(CONTROLS['salt'])
    p = b.probe_prf(STATE['first'], STATE['salt'])
    SECRETS['PRF output (first passkey)'], SECRETS['KWK (first passkey)'], SECRETS['data key'] = p['prf'], p['kwk'], p['dataKey']
    b.capture()


# The second passkey lives on another device. One virtual authenticator plays both, so while the
# new passkey is made the first is taken out of it (else it refuses: the first is in the options'
# excludeCredentials): the page's next navigator.credentials.create waits for the test once.
GATE_CREATE = """
const real = navigator.credentials.create.bind(navigator.credentials);
navigator.credentials.create = (options) => new Promise((resolve, reject) => {
  window.__lkCreateWaiting = true;
  window.__lkCreateGo = () => {
    window.__lkCreateWaiting = false;
    navigator.credentials.create = real;
    real(options).then(resolve, reject);
  };
});
"""


def test_add_a_second_passkey_wraps_the_data_key_for_it(b):
    b.script(GATE_CREATE)
    b.click('add-passkey')
    b.until(lambda: b.script('return window.__lkCreateWaiting === true'), 'the new passkey\'s prompt')
    b.remove_credential(STATE['first'])
    STATE['first removed'] = True
    b.script('window.__lkCreateGo()')
    b.wait_passkeys(2)
    b.until(lambda: b.body('vault-wrapped') == '2', 'the data key wrapped for the new passkey')
    STATE['second'] = next(i for i in b.passkey_ids() if i != STATE['first'])
    p = b.probe_prf(STATE['second'], STATE['salt'])
    assert p['dataKey'] == SECRETS['data key'], 'the second wrap holds the same data key'
    SECRETS['PRF output (second passkey)'], SECRETS['KWK (second passkey)'] = p['prf'], p['kwk']
    if p['prf'] == SECRETS['PRF output (first passkey)']:
        # Firefox's virtual authenticator gives every credential the same PRF output for a salt; the
        # wraps still differ (the key-wrapping key covers the user handle and credential id).
        print(f'    note: {b.name}\'s authenticator gave both passkeys the same PRF output', flush=True)
        assert p['kwk'] != SECRETS['KWK (first passkey)']
    b.capture()


def test_revoke_the_first_and_read_the_note_with_the_second(b):
    # The device that held the first passkey is gone; the person revokes it (approving with the second).
    if not STATE.get('first removed'):
        b.remove_credential(STATE['first'])
    b.revoke(STATE['first'])
    # This session began with the first passkey, so revoking it ends the session (docs/api.md); the
    # page's autofill may sign in again with the second (Chromium's authenticator answers it at
    # once), else the person presses "Sign in with a passkey".
    b.until(lambda: b.body('view') == 'welcome' or b.body('signin-method') == 'autofill', 'the session to end')
    try:
        b.until(lambda: b.body('view') == 'account', 'autofill to sign in', seconds=5)
    except AssertionError:
        b.click('signin-button')
    b.wait_view('account')
    b.wait_passkeys(1)
    # The revoked passkey's wrap went in the same statement.
    ids = psql_rows(f"SELECT encode(w.credential_id, 'hex') FROM vault_wrapped_keys w JOIN users u ON u.id = w.user_id WHERE u.username = '{USERNAME}'")
    assert [b64u(bytes.fromhex(i)) for i in ids] == [STATE['second']], ids
    b.wait_vault('locked')
    b.click('vault-unlock')
    b.wait_vault('open')
    b.until(lambda: b.body('vault-note') == 'read', 'the note decrypted')
    assert b.value('vault-note') == NOTE
    b.shot_of('vault', 'vault-read-with-second-passkey')
    b.capture()


def test_lose_every_passkey_and_recover_with_a_code(b):
    b.clear_credentials()
    b.click('signout')
    b.wait_view('welcome')
    b.click('lost-passkey')
    b.wait_view('recover')
    b.type('recover-username', USERNAME)
    b.type('recover-recovery-code', STATE['codes'][0])
    b.click('recover-codes-submit')
    b.until(lambda: b.body('recovery') == 'ready' or b.body('view') == 'account', 'the recovery token')
    if b.body('view') != 'account':
        b.click('recover-create')
    b.wait_view('account')
    assert b.body('signin-method') == 'recovery'
    b.wait_passkeys(2)  # the second (lost with the device, still registered) and the new one
    STATE['third'] = next(i for i in b.passkey_ids() if i != STATE['second'])
    b.capture()


def test_read_the_note_with_the_vault_recovery_key(b):
    b.wait_vault('locked')
    b.until(lambda: b.displayed('vault-recover-form'), 'the vault recovery key asked for')
    b.shot_of('vault', 'vault-recovery-key-asked')
    # A mistyped key is refused in words, and nothing is sent for it.
    wrong = STATE['code'][:-2] + ('A' if STATE['code'][-2] != 'A' else 'B') + STATE['code'][-1]
    b.type('vault-recovery-code', wrong)
    b.click('vault-recover')
    b.until(lambda: b.script("return document.getElementById('banner').dataset.code") in ('vault_locked', 'vault_code_invalid'), 'the wrong key refused')
    b.clear('vault-recovery-code')
    b.type('vault-recovery-code', STATE['code'].lower())
    b.click('vault-recover')
    b.wait_vault('open')
    b.until(lambda: b.body('vault-note') == 'read', 'the note decrypted')
    assert b.value('vault-note') == NOTE
    assert b.body('vault-rewrapped') == 'yes'
    b.shot_of('vault', 'vault-read-after-recovery')
    p = b.probe_prf(STATE['third'], STATE['salt'])
    assert p['dataKey'] == SECRETS['data key'], 'the new passkey\'s wrap holds the same data key'
    SECRETS['PRF output (new passkey)'], SECRETS['KWK (new passkey)'] = p['prf'], p['kwk']
    b.capture()


def test_the_new_passkey_opens_the_vault(b):
    b.click('vault-lock')
    b.wait_vault('locked')
    b.click('vault-unlock')
    b.wait_vault('open')
    b.until(lambda: b.body('vault-note') == 'read', 'the note decrypted')
    assert b.value('vault-note') == NOTE
    b.capture()


def encodings(secret):
    """The ways a key could be written: base64url and base64 (padded or not), hex, base32."""
    std = base64.b64encode(secret).decode()
    forms = {b64u(secret), std, std.rstrip('='), secret.hex(), secret.hex().upper(),
             base64.b32encode(secret).decode().rstrip('='), base64.b32encode(secret).decode().rstrip('=').lower()}
    return forms


def test_no_secret_reached_the_server(b):
    """Every table and every request body: none of the secrets in any encoding; the controls found."""
    if 'data key' not in SECRETS or 'PRF output (new passkey)' not in SECRETS:
        raise AssertionError('the story did not get far enough to know its secrets: see the failures above')
    b.capture()
    # Every table of every schema but PostgreSQL's own, each row as JSON (bytea as \x hex).
    tables = psql_rows("SELECT format('%I.%I', table_schema, table_name) FROM information_schema.tables "
                       "WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')")
    dump, rows = [], 0
    for t in tables:
        out = psql_rows(f'SELECT to_jsonb(t)::text FROM {t} t')
        rows += len(out)
        dump += out
    db = '\n'.join(dump)
    sent = '\n'.join(json.dumps(r) + '\n' + r['body'] for r in b.requests)
    bodies = [r for r in b.requests if r['body']]
    print(f'    read {len(tables)} tables ({rows} rows) and {len(b.requests)} requests ({len(bodies)} with a body)', flush=True)
    # The controls: the story's vault writes went through this record and into these tables.
    wraps = [r for r in b.requests if r['method'] == 'PUT' and '/v1/vault/wrapped/' in r['url']]
    assert any(r['method'] == 'PUT' and r['url'].endswith('/v1/vault') for r in b.requests), 'PUT /v1/vault recorded'
    assert any(r['method'] == 'PUT' and r['url'].endswith('/v1/vault/recovery') for r in b.requests), 'PUT /v1/vault/recovery recorded'
    assert len(wraps) >= 3, f'three wraps recorded: {len(wraps)}'
    for r in wraps + [x for x in b.requests if x['url'].endswith('/v1/vault/recovery') and x['body']]:
        CONTROLS[f"wrappedKey of {r['url'].rsplit('/', 1)[-1]}"] = b64u_decode(json.loads(r['body'])['wrappedKey'])
    assert b64u(CONTROLS['salt']) in sent, 'the salt is in a request body'
    for name, value in CONTROLS.items():
        assert value.hex() in db or name.startswith('wrappedKey of ' + STATE['first']), f'{name} stored in a table'
    assert CONTROLS['salt'].hex() in db
    assert any(b64u(v) in sent for k, v in CONTROLS.items() if k.startswith('wrappedKey')), 'a wrapped key in a body'
    # Ceremony responses went to the server (sign-in, step-ups): the record is of the real traffic.
    assert any('/v1/step-up/' in r['url'] and r['body'] for r in b.requests), 'step-up answers recorded'
    leaks = []
    lower_db, lower_sent = db.lower(), sent.lower()
    for name, value in SECRETS.items():
        for form in encodings(value):
            if form in db:
                leaks.append(f'{name} in a table ({form[:12]}…)')
            if form in sent:
                leaks.append(f'{name} in a request ({form[:12]}…)')
        if value.hex() in lower_db or value.hex() in lower_sent:
            leaks.append(f'{name} as hex, any case')
    for text in (NOTE, NOTE.split(' — ')[0]):
        if text in db or text in sent or json.dumps(text)[1:-1] in sent:
            leaks.append(f'the note\'s text ({text[:12]}…)')
    assert not leaks, leaks
    print(f'    none of {len(SECRETS)} secrets ({", ".join(SECRETS)}) in any table or request', flush=True)


TESTS = [
    test_sign_up_and_make_recovery_codes,
    test_create_the_vault_and_encrypt_a_note,
    test_add_a_second_passkey_wraps_the_data_key_for_it,
    test_revoke_the_first_and_read_the_note_with_the_second,
    test_lose_every_passkey_and_recover_with_a_code,
    test_read_the_note_with_the_vault_recovery_key,
    test_the_new_passkey_opens_the_vault,
    test_no_secret_reached_the_server,
]


def run_story(b, label, tests=None, title='vault'):
    """Runs `tests` (the story) in `b`, reporting every failure and going on; returns the failure count."""
    passed = failed = skipped = 0
    for test in tests or TESTS:
        started = time.monotonic()
        try:
            test(b)
        except Skip as s:
            skipped += 1
            print(f'SKIP {test.__name__}: {s}', flush=True)
            continue
        except Exception as e:  # noqa: BLE001 - every failure is reported, the run goes on
            failed += 1
            print(f'FAIL {test.__name__}: {type(e).__name__}: {e}', flush=True)
            traceback.print_exc()
            try:
                b.shot(f"failed-{title.replace(' ', '-')}-{label}-{test.__name__}")
                for line in b.console():
                    print(f'    console: {line}', flush=True)
            except Exception:  # noqa: BLE001
                pass
            continue
        passed += 1
        print(f'PASS {test.__name__} ({time.monotonic() - started:.1f}s)', flush=True)
    print(f'{title} ({label}): {passed} passed, {failed} failed, {skipped} skipped')
    return failed + skipped


def main():
    wait_for_server()
    b = Browser()
    try:
        return 1 if run_story(b, 'Chromium') else 0
    finally:
        b.quit()


if __name__ == '__main__':
    sys.exit(main())
