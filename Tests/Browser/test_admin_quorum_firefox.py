#!/usr/bin/env python3
"""The admin console under `LATCHKEY_ADMIN_QUORUM=2` in Firefox ESR: the quorum story's second engine.

Starts its own `latchkey serve` (dev mode, rpId localhost, LATCHKEY_ADMIN_QUORUM=2) and runs the
story of Tests/Browser/quorum_story.py (the same steps test_admin_quorum.py runs in Chromium) in two
Firefox ESR instances at once, each with its own profile, Marionette port and WebAuthn virtual
authenticator (Tests/Browser/marionette.py): admins A and B enrol; A's change is answered
`approval_required` and A opens and approves its approval; B sees the exact change and approves it
with a passkey, by keyboard; A makes the change, the origin is allowed and a second use of the
approval is refused; a change B vetoes is never made.
Environment: LATCHKEY_BIN, LATCHKEY_DATABASE_URL (run.sh passes both). Screenshots:
data/screenshots/firefox-admin-quorum-*.png; Firefox's logs data/browser/firefox-quorum-*.log.
No Selenium: Debian's python3 runs it. Synchronisation on DOM state, never sleeps (but the bounded
wait for the server and for Firefox to answer).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from marionette import ENTER, TAB, Firefox  # noqa: E402
from quorum_story import Console, QuorumStory, free_port  # noqa: E402

BINARY = os.environ.get('LATCHKEY_BIN')
DATABASE = os.environ.get('LATCHKEY_DATABASE_URL')
SHOTS = os.environ.get('LATCHKEY_SCREENSHOTS', os.path.join('data', 'screenshots'))


class FirefoxConsole(Console):
    opened = 0

    def __init__(self):
        super().__init__(SHOTS, 'firefox-admin-quorum-')
        FirefoxConsole.opened += 1
        os.makedirs(os.path.join('data', 'browser'), exist_ok=True)
        # A profile and a Marionette port of its own (marionette.Firefox picks both afresh).
        self.ff = Firefox(width=1280, height=1100,
                          log_path=os.path.join('data', 'browser', f'firefox-quorum-{FirefoxConsole.opened}.log'))
        self.authenticator = None
        if FirefoxConsole.opened == 1:
            print('firefox:', self.ff.caps.get('capabilities', {}).get('browserVersion'), flush=True)

    def goto(self, url):
        self.ff.get(url)

    def js(self, script, *args):
        return self.ff.execute(script, *args)

    def js_async(self, script, *args):
        return self.ff.execute_async(script, *args)

    def click(self, css):
        self.ff.click(css)

    def fill(self, element_id, text):
        self.ff.clear(f'#{element_id}')
        self.ff.type(f'#{element_id}', text)

    def shown(self, element_id):
        return self.ff.displayed(f'#{element_id}')

    def tab_to(self, css, limit=80):
        """Presses Tab until the element has focus: proves it is reachable by keyboard."""
        for _ in range(limit):
            if self.js('return document.activeElement === document.querySelector(arguments[0])', css):
                return
            self.ff.press(TAB)
        raise AssertionError(f'{css} not reachable with Tab')

    def enter(self):
        self.ff.press(ENTER)

    def new_person(self):
        if self.authenticator:
            self.ff.command('WebAuthn:RemoveVirtualAuthenticator', {'authenticatorId': self.authenticator})
        self.authenticator = self.ff.add_authenticator()

    def screenshot(self, path):
        self.ff.screenshot(path)

    def quit(self):
        self.ff.quit()


def main():
    if not BINARY or not DATABASE:
        print('SKIP admin quorum (Firefox): LATCHKEY_BIN and LATCHKEY_DATABASE_URL are needed')
        return 0
    story = QuorumStory(BINARY, DATABASE, free_port(), FirefoxConsole)
    return story.run('admin quorum (Firefox)', 'admin-quorum-firefox.log')


if __name__ == '__main__':
    sys.exit(main())
