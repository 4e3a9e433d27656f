#!/usr/bin/env python3
"""The vault story of Tests/Browser/test_vault.py in Firefox ESR, over Marionette
(Tests/Browser/marionette.py: Debian ships no geckodriver) with WebDriver's virtual authenticator.

Firefox's virtual authenticator (its soft token, `WebAuthn:AddVirtualAuthenticator`) evaluates PRF
with no option asked for (Firefox 153 ESR: `prf.enabled` at registration, 32 stable bytes per salt):
the suite checks that first and, where a Firefox's does not, prints a SKIP line saying so (the
browser's limit, not a failure of Latchkey). Two things differ from Chromium's authenticator and are
handled here: it refuses any allow list naming a credential it does not hold (the page's lists are
narrowed, see ALLOW_SHIM), and it gives every credential the same PRF output for a salt (noted). Marionette has no network log, so the request record is
taken in the page: a wrapper around `fetch` (the only way the app and latchkey.js send anything)
installed before the story starts, read back after each step. The story never reloads the page, so
the wrapper sees every request the app makes.

Environment: LATCHKEY_URL, LATCHKEY_DATABASE_URL, LATCHKEY_SCREENSHOTS (data/screenshots/ only: the
documentation's screenshots are Chromium's). Closes with 'N passed, N failed, N skipped'.
"""
import os
import sys

from marionette import Firefox, MarionetteError
from test_vault import BASE, SHOTS, StoryBrowser, b64u_decode, run_story, wait_for_server

RECORD_FETCH = """
if (!window.__lkSent) {
  window.__lkSent = [];
  const original = window.fetch.bind(window);
  window.fetch = (input, init = {}) => {
    const url = new URL(typeof input === 'string' ? input : input.url, location.href).href;
    const body = init.body === undefined || init.body === null ? '' : String(init.body);
    window.__lkSent.push({ method: (init.method || 'GET').toUpperCase(), url, headers: init.headers || {}, body });
    return original(input, init);
  };
}
"""

# Firefox's virtual authenticator refuses (NotAllowedError) any request whose allowCredentials names a
# credential it does not hold, where a real authenticator skips those ids; the story's lost and
# revoked passkeys stay in the server's allow lists, so here the page's allow lists are narrowed to
# the credentials the virtual authenticator holds (tracked from each create and each removal). What
# reaches the server is unchanged.
ALLOW_SHIM = """
if (!window.__lkHeld) {
  window.__lkHeld = [];
  const hex = (b) => Array.from(ArrayBuffer.isView(b) ? new Uint8Array(b.buffer, b.byteOffset, b.byteLength) : new Uint8Array(b))
    .map((x) => x.toString(16).padStart(2, '0')).join('');
  const create = navigator.credentials.create.bind(navigator.credentials);
  const get = navigator.credentials.get.bind(navigator.credentials);
  navigator.credentials.create = async (options) => {
    const c = await create(options);
    if (c) window.__lkHeld.push(hex(c.rawId));
    return c;
  };
  navigator.credentials.get = (options) => {
    const list = options && options.publicKey && options.publicKey.allowCredentials;
    if (list && list.length) {
      const held = list.filter((c) => window.__lkHeld.includes(hex(c.id)));
      options = { ...options, publicKey: { ...options.publicKey, allowCredentials: held.length ? held : list } };
    }
    return get(options);
  };
}
"""

PRF_CHECK = """
const done = arguments[arguments.length - 1];
(async () => {
  const salt = crypto.getRandomValues(new Uint8Array(32));
  const c = await navigator.credentials.create({ publicKey: {
    rp: { name: 'PRF check', id: location.hostname }, user: { id: crypto.getRandomValues(new Uint8Array(16)), name: 'prf-check', displayName: 'PRF check' },
    challenge: crypto.getRandomValues(new Uint8Array(32)), pubKeyCredParams: [{ type: 'public-key', alg: -7 }],
    authenticatorSelection: { residentKey: 'discouraged', userVerification: 'required' }, extensions: { prf: {} } } });
  const enabled = Boolean((c.getClientExtensionResults().prf || {}).enabled);
  const ask = () => navigator.credentials.get({ publicKey: { challenge: crypto.getRandomValues(new Uint8Array(32)),
    rpId: location.hostname, allowCredentials: [{ type: 'public-key', id: c.rawId }], userVerification: 'required',
    extensions: { prf: { eval: { first: salt } } } } });
  const out = async () => { const r = (await ask()).getClientExtensionResults().prf; return r && r.results && r.results.first ? new Uint8Array(r.results.first) : null; };
  const a = await out(), b = await out();
  return { enabled, first: a ? a.length : 0, stable: Boolean(a && b && a.every((x, i) => x === b[i])) };
})().then(done, (e) => done({ error: String(e) }));
"""


class FirefoxBrowser(StoryBrowser):
    name = 'Firefox'

    def __init__(self):
        self.ff = Firefox(log_path=os.path.join('data', 'browser', 'firefox-vault.log'))
        self.requests = []
        self.version = self.ff.caps.get('capabilities', {}).get('browserVersion')
        self.ff.get(BASE + '/')
        self.authenticator = self.ff.add_authenticator()

    def quit(self):
        self.ff.quit()

    def script(self, js, *args):
        return self.ff.execute(js, *args)

    def script_async(self, js, *args):
        return self.ff.execute_async(js, *args)

    def native_click(self, element_id):
        self.ff.click(f'#{element_id}')

    def native_click_css(self, css):
        self.ff.click(css)

    def type(self, element_id, text):
        self.ff.type(f'#{element_id}', text)

    def clear(self, element_id):
        self.ff.clear(f'#{element_id}')

    def start_recording(self):
        self.script(RECORD_FETCH)
        self.script(ALLOW_SHIM)

    def capture(self):
        sent = self.script('const s = window.__lkSent; if (!s) return null; window.__lkSent = []; return s;')
        if sent is None:
            raise AssertionError('the page was reloaded: the requests since its load are not recorded')
        self.requests += sent

    def credentials(self):
        return self.ff.credentials(self.authenticator)

    def remove_credential(self, credential_id_b64u):
        self.ff.command('WebAuthn:RemoveCredential', {'authenticatorId': self.authenticator, 'credentialId': credential_id_b64u})
        self.script('window.__lkHeld = (window.__lkHeld || []).filter((h) => h !== arguments[0])', b64u_decode(credential_id_b64u).hex())

    def clear_credentials(self):
        self.ff.command('WebAuthn:RemoveAllCredentials', {'authenticatorId': self.authenticator})
        self.script('if (window.__lkHeld) window.__lkHeld = []')

    def shot(self, name):
        os.makedirs(SHOTS, exist_ok=True)
        self.ff.screenshot(os.path.join(SHOTS, f'{name}.png'))

    def shot_of(self, element_id, name):
        self.script('document.getElementById(arguments[0]).scrollIntoView({block: "start"})', element_id)
        self.shot(f'firefox-{name}')

    def console(self):
        return []


def main():
    wait_for_server()
    b = FirefoxBrowser()
    try:
        print(f'firefox: {b.version}', flush=True)
        # The check runs on the help page (same origin, no passkey request of its own: the app's
        # pending autofill request would abort it), then the story starts on a fresh app page.
        b.ff.get(BASE + '/help/vault')
        b.until(lambda: b.body('ready') == 'true', 'the help page')
        check = b.script_async(PRF_CHECK)
        b.clear_credentials()  # the check's throwaway credential: the story's authenticator starts empty
        if 'error' in check:
            print(f'FAIL the PRF check in Firefox {b.version}: {check["error"]}', flush=True)
            print('vault (Firefox): 0 passed, 1 failed, 0 skipped')
            return 1
        if not check['enabled'] or check['first'] != 32 or not check['stable']:
            print(f'SKIP vault story in Firefox {b.version}: its virtual authenticator does not evaluate PRF ({check})', flush=True)
            print('vault (Firefox): 0 passed, 0 failed, 1 skipped')
            return 0
        print(f'firefox: the virtual authenticator evaluates PRF ({check})', flush=True)
        b.ff.get(BASE + '/')
        b.until(lambda: b.body('ready') == 'true', 'the app to start')
        b.start_recording()
        return 1 if run_story(b, 'Firefox') else 0
    finally:
        b.quit()


if __name__ == '__main__':
    sys.exit(main())
