"""A small Marionette client: drives Debian's firefox-esr without geckodriver (Debian ships none).

Marionette is Firefox's own remote protocol (what geckodriver translates WebDriver into): a TCP
socket carrying `<length>:<json>` packets; a command is `[0, id, name, params]`, its answer
`[1, id, error, result]`. The command names are WebDriver's (`WebDriver:Navigate`, …) plus
WebAuthn's virtual-authenticator extension (`WebAuthn:AddVirtualAuthenticator`, …, in Firefox
since 118), so the same authenticator model as Chromium's runs here.
"""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

ELEMENT_KEY = 'element-6066-11e4-a52e-4f735466cecf'
# WebDriver's key codes (the ones the tests press).
TAB, ENTER = '\ue004', '\ue007'


class MarionetteError(Exception):
    def __init__(self, error):
        super().__init__(f"{error.get('error')}: {error.get('message')}")
        self.error = error.get('error')


class Firefox:
    def __init__(self, binary='firefox-esr', width=1280, height=900, lang='en-US', log_path=None):
        self.profile = tempfile.mkdtemp(prefix='latchkey-ff-')
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            self.port = s.getsockname()[1]
        prefs = {
            'marionette.port': self.port,
            'intl.accept_languages': lang,
            'intl.locale.requested': lang,
            'browser.shell.checkDefaultBrowser': False,
            'browser.startup.homepage_override.mstone': 'ignore',
            'browser.startup.page': 0,
            'datareporting.policy.dataSubmissionEnabled': False,
            'toolkit.telemetry.reportingpolicy.firstRun': False,
            'app.update.disabledForTesting': True,
            # The virtual authenticators live in Firefox's soft-token manager; no real USB keys.
            'security.webauth.webauthn_enable_softtoken': True,
            'security.webauth.webauthn_enable_usbtoken': False,
        }
        with open(os.path.join(self.profile, 'user.js'), 'w') as f:
            for k, v in prefs.items():
                f.write(f'user_pref({json.dumps(k)}, {json.dumps(v)});\n')
        log = open(log_path, 'ab') if log_path else subprocess.DEVNULL
        env = dict(os.environ, MOZ_HEADLESS='1', MOZ_HEADLESS_WIDTH=str(width), MOZ_HEADLESS_HEIGHT=str(height))
        self.proc = subprocess.Popen([binary, '--marionette', '--no-remote', '--profile', self.profile,
                                      '--width', str(width), '--height', str(height), 'about:blank'],
                                     stdout=log, stderr=log, env=env)
        self.sock = None
        deadline = time.monotonic() + 60
        while True:
            try:
                self.sock = socket.create_connection(('127.0.0.1', self.port), timeout=120)
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f'firefox did not open Marionette on port {self.port}')
                time.sleep(0.2)
        self.buffer = b''
        self.next_id = 0
        self._read()  # the hello: {"applicationType":"gecko","marionetteProtocol":3}
        self.caps = self.command('WebDriver:NewSession', {'capabilities': {'alwaysMatch': {'acceptInsecureCerts': True}}})
        self.command('WebDriver:SetTimeouts', {'script': 60000, 'pageLoad': 60000, 'implicit': 0})

    # --- the wire ----------------------------------------------------------------------------
    def _read(self):
        while b':' not in self.buffer:
            self._recv()
        length, _, rest = self.buffer.partition(b':')
        n = int(length)
        while len(rest) < n:
            self.buffer = length + b':' + rest
            self._recv()
            length, _, rest = self.buffer.partition(b':')
        self.buffer = rest[n:]
        return json.loads(rest[:n])

    def _recv(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise RuntimeError('Marionette closed the connection')
        self.buffer += chunk

    def command(self, name, params=None):
        self.next_id += 1
        data = json.dumps([0, self.next_id, name, params or {}]).encode()
        self.sock.sendall(str(len(data)).encode() + b':' + data)
        while True:
            msg = self._read()
            if msg[0] == 1 and msg[1] == self.next_id:
                break
        if msg[2]:
            raise MarionetteError(msg[2])
        result = msg[3]
        return result.get('value', result) if isinstance(result, dict) and set(result) <= {'value'} else result

    # --- WebDriver, the parts the tests use --------------------------------------------------
    def get(self, url):
        self.command('WebDriver:Navigate', {'url': url})

    def execute(self, script, *args):
        return self.command('WebDriver:ExecuteScript', {'script': script, 'args': list(args)})

    def execute_async(self, script, *args):
        """`script` gets `resolve` as its last argument (arguments[arguments.length - 1])."""
        return self.command('WebDriver:ExecuteAsyncScript', {'script': script, 'args': list(args)})

    def find(self, css):
        return self.command('WebDriver:FindElement', {'using': 'css selector', 'value': css})[ELEMENT_KEY]

    def click(self, css):
        self.command('WebDriver:ElementClick', {'id': self.find(css)})

    def type(self, css, text):
        self.command('WebDriver:ElementSendKeys', {'id': self.find(css), 'text': text})

    def clear(self, css):
        self.command('WebDriver:ElementClear', {'id': self.find(css)})

    def displayed(self, css):
        return self.command('WebDriver:IsElementDisplayed', {'id': self.find(css)})

    def press(self, *keys):
        """Key presses sent to whatever has focus, as a keyboard would (WebDriver key actions);
        a key is a character or a WebDriver key code such as TAB."""
        steps = [step for key in keys for step in ({'type': 'keyDown', 'value': key}, {'type': 'keyUp', 'value': key})]
        self.command('WebDriver:PerformActions', {'actions': [{'type': 'key', 'id': 'keyboard', 'actions': steps}]})
        self.command('WebDriver:ReleaseActions')

    def screenshot(self, path):
        import base64
        data = self.command('WebDriver:TakeScreenshot', {'full': False})
        with open(path, 'wb') as f:
            f.write(base64.b64decode(data))

    # --- WebAuthn's virtual authenticator ----------------------------------------------------
    def add_authenticator(self, **options):
        params = {'protocol': 'ctap2', 'transport': 'internal', 'hasResidentKey': True, 'hasUserVerification': True,
                  'isUserConsenting': True, 'isUserVerified': True, **options}
        return self.command('WebAuthn:AddVirtualAuthenticator', params)

    def credentials(self, authenticator):
        return self.command('WebAuthn:GetCredentials', {'authenticatorId': authenticator})

    def set_user_verified(self, authenticator, verified):
        self.command('WebAuthn:SetUserVerified', {'authenticatorId': authenticator, 'isUserVerified': verified})

    def quit(self):
        try:
            self.command('Marionette:Quit', {'flags': ['eForceQuit']})
        except Exception:
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
