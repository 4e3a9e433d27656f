#!/usr/bin/env python3
"""The admin console under `LATCHKEY_ADMIN_QUORUM=2`, in headless Chromium: two admins, one change.

Starts its own `latchkey serve` (dev mode, rpId localhost, LATCHKEY_ADMIN_QUORUM=2) and runs the
story of Tests/Browser/quorum_story.py in two Chromium browsers (Selenium), each with its own
virtual authenticator: A asks for a change and approves it first, B sees it exactly and approves it
with a passkey by keyboard, A makes it with `Latchkey-Approval`, a second use is refused, and a
change B vetoes is never made. Tests/Browser/test_admin_quorum_firefox.py runs the same story in
Firefox ESR.
Environment: LATCHKEY_BIN, LATCHKEY_DATABASE_URL (run.sh passes both). Screenshots:
data/screenshots/admin-quorum-*.png and docs/screenshots/console-quorum-approval.png.
Synchronisation on DOM state, never sleeps (but the bounded wait for the server to answer).
"""
import os
import sys

from quorum_story import Console, QuorumStory, free_port

BINARY = os.environ.get('LATCHKEY_BIN')
DATABASE = os.environ.get('LATCHKEY_DATABASE_URL')
PORT = free_port()
# test_web reads LATCHKEY_URL when imported: its browsers start on this test's own server.
os.environ['LATCHKEY_URL'] = f'http://localhost:{PORT}'

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

from test_admin import fresh_authenticator  # noqa: E402
from test_web import SHOTS, Browser  # noqa: E402


class ChromiumConsole(Console):
    def __init__(self):
        super().__init__(SHOTS, 'admin-quorum-')
        self.browser = Browser()

    def goto(self, url):
        self.browser.d.get(url)

    def js(self, script, *args):
        return self.browser.d.execute_script(script, *args)

    def js_async(self, script, *args):
        return self.browser.d.execute_async_script(script, *args)

    def click(self, css):
        self.browser.d.find_element(By.CSS_SELECTOR, css).click()

    def fill(self, element_id, text):
        field = self.browser.el(element_id)
        field.clear()
        field.send_keys(text)

    def shown(self, element_id):
        return self.browser.el(element_id).is_displayed()

    def tab_to(self, css):
        self.browser.tab_to(self.browser.d.find_element(By.CSS_SELECTOR, css), limit=80)

    def enter(self):
        self.browser.keys(Keys.ENTER)

    def new_person(self):
        fresh_authenticator(self.browser)
        self.browser.d.set_window_size(1280, 1100)

    def screenshot(self, path):
        self.browser.d.save_screenshot(path)

    def quit(self):
        self.browser.d.quit()


def main():
    if not BINARY or not DATABASE:
        print('SKIP admin quorum: LATCHKEY_BIN and LATCHKEY_DATABASE_URL are needed')
        return 0
    story = QuorumStory(BINARY, DATABASE, PORT, ChromiumConsole, docs_screenshot=True)
    return story.run('admin quorum', 'admin-quorum.log')


if __name__ == '__main__':
    sys.exit(main())
