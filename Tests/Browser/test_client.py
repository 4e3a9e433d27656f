#!/usr/bin/env python3
"""The client module and the pages' languages in headless Chromium (issue 22), after test_web.py.

- /latchkey.js is served with its version (no-cache + ETag + CORS; the versioned URL immutable),
  /webauthn.js is gone;
- the module's own story (Tests/Browser/module_story.js: sign-up, rename, step-up and its single
  use, a typed `conflict`, revoke with its step-up ending the session) on a page without the app;
- a German browser (navigator.languages / Accept-Language de-DE) gets the pages in German, and its
  account's mail in German — read from the real SMTP server the suite starts; the switcher changes
  the language (Polish) and keeps it;
- every page of the web app at phone and desktop widths in each language, as screenshots
  (data/screenshots/i18n/<lang>-<width>-<page>.png); the console's pages come from test_admin.py.

Prints one line per test and closes with 'N passed, N failed, N skipped'.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import test_web as w  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

LANGS = ['en', 'de', 'pl', 'zh-Hans']
WIDTHS = {'phone': (390, 844), 'desktop': (1280, 900)}
SHOTS = os.path.join(w.SHOTS, 'i18n')
VERSION = '1.0.0'


def test_module_is_served_with_its_version(b):
    status, headers, body = w.http('GET', '/latchkey.js')
    assert status == 200 and headers['Content-Type'].startswith('text/javascript'), (status, headers['Content-Type'])
    assert headers['Cache-Control'] == 'no-cache' and headers['ETag'], headers
    assert headers['Access-Control-Allow-Origin'] == '*' and headers['Latchkey-Client-Version'] == VERSION, headers
    assert f"export const VERSION = '{VERSION}';".encode() in body
    status, _, _ = w.http('GET', '/latchkey.js', headers={'If-None-Match': headers['ETag']})
    assert status == 304, status
    status, pinned, same = w.http('GET', f'/latchkey/{VERSION}/latchkey.js')
    assert status == 200 and same == body and 'immutable' in pinned['Cache-Control'], (status, pinned['Cache-Control'])
    for path in ['/latchkey.d.ts', '/admin/latchkey.js', f'/latchkey/{VERSION}/latchkey.d.ts', '/i18n.js', '/i18n/de.json',
                 '/admin/i18n/zh-Hans.json']:
        status, _, _ = w.http('GET', path)
        assert status == 200, (path, status)
    for path in ['/webauthn.js', '/admin/webauthn.js', '/latchkey/0.0.1/latchkey.js', '/i18n/fr.json', '/i18n/../app.js']:
        status, _, _ = w.http('GET', path)
        assert status == 404, (path, status)


def test_module_story(b):
    # A page of the server without the app (no autofill request of its own), as another site's page would be.
    b.d.get(w.BASE + '/latchkey.d.ts')
    script = open(os.path.join(os.path.dirname(__file__), 'module_story.js')).read()
    r = b.d.execute_async_script(script, f'mod-{w.secrets.token_hex(3)}')
    assert 'error' not in r, r
    assert r['version'] == VERSION and r['passkeys'] == 1 and r['renamed'] == 'Firefox key', r
    assert r['consumed'] and r['second'] == 'conflict', r
    assert r['taken'] == ['LatchkeyError', 'conflict', 409], r
    assert r['lastPasskey'] == 'last_passkey' and r['codes'] == 10, r
    assert r['sessions'] == 1 and r['sessionEnded'] is True and r['after'] is None, r


def german_story(b):
    b.load()
    b.wait_view('welcome')
    assert b.d.execute_script('return document.documentElement.lang') == 'de'
    assert b.d.title == 'Latchkey — mit einem Passkey anmelden', b.d.title
    assert 'Mit Passkey anmelden' in b.el('signin-button').text, b.el('signin-button').text
    assert Select(b.el('language')).first_selected_option.text == 'Deutsch'
    username = f'de-{w.secrets.token_hex(3)}'
    w.type_into(b, 'signup-username', username)
    b.el('signup-button').click()
    b.wait_view('account')
    assert b.el('account-title').text == f'Willkommen, {username}', b.el('account-title').text
    items = b.wait_passkeys(1)
    assert 'Erstellt gerade eben' in items[0].text, items[0].text
    # The address: set from this German page, the verification mail is German (the real SMTP server).
    email = f'{username}@example.test'
    before = w.mail_count(email)
    w.type_into(b, 'email-new', email)
    b.el('email-set').click()
    b.until(lambda: b.el('email-verify-step').is_displayed(), 'the code step')
    code = w.mailed(email, before, r'Ihr Bestätigungscode lautet: (\d+)', event='email.verify', what='a German code')
    w.type_into(b, 'email-verify-code', code)
    b.el('email-verify').click()
    b.until(lambda: b.body('email-verified') == 'yes', 'the verified address')
    # Signed out, someone asks for a recovery code: the account's stored language decides (German).
    status, _, _ = w.http('POST', '/v1/recovery/challenges', {'username': username})
    assert status == 202, status
    w.mailed(email, before + 1, r'Ihr Wiederherstellungscode lautet: (\d+)', event='recovery.code', what='a German recovery code')
    return username


def test_german_browser_gets_german_pages_and_mail(_):
    b = w.Browser(lang='de-DE')
    try:
        german_story(b)
        # The switcher: Polish from now on, in this browser.
        Select(b.el('language')).select_by_value('pl')
        b.until(lambda: b.d.execute_script('return document.documentElement.lang') == 'pl', 'the Polish page')
        b.until(lambda: b.body('ready') == 'true', 'the app to start again')
        assert b.el('passkeys-title').text == 'Twoje klucze dostępu', b.el('passkeys-title').text
    finally:
        b.d.quit()


def shoot(b, lang, width, page):
    os.makedirs(SHOTS, exist_ok=True)
    b.d.save_screenshot(os.path.join(SHOTS, f'{lang}-{width}-{page}.png'))


def set_language(b, lang):
    b.d.execute_script("localStorage.setItem('latchkey.language', arguments[0])", lang)
    b.load()
    b.until(lambda: b.d.execute_script('return document.documentElement.lang') == lang, f'the page in {lang}')


def no_horizontal_overflow(b, what):
    wide = b.d.execute_script('return document.documentElement.scrollWidth - document.documentElement.clientWidth')
    assert wide <= 1, f'{what}: {wide}px wider than the window'


# The last-passkey refusal's box (`arguments[0]`, .pk-last) and each child shown in it (its text and
# buttons): the child's box, the rectangle of its text, and every place a word of it is broken across
# two lines other than at a hyphen or a soft hyphen (U+00AD) or between ideographs.
LAST_PASSKEY_LAYOUT = r"""
  const rect = (r) => [r.left, r.top, r.right, r.bottom];
  const box = arguments[0];
  // Chinese (and Japanese, Korean) text breaks between any two characters: no word to cut there.
  const ideographic = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\u3000-\u303f\uff00-\uffef]/u;
  const children = [...box.children].filter((c) => c.getClientRects().length);
  return { box: rect(box.getBoundingClientRect()), children: children.map((c) => {
    const all = document.createRange();
    all.selectNodeContents(c);
    const broken = [];
    const walker = document.createTreeWalker(c, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const word of node.data.matchAll(/\S+/g)) {
        let top = null;
        for (let i = word.index; i < word.index + word[0].length; i++) {
          const one = document.createRange();
          one.setStart(node, i);
          one.setEnd(node, i + 1);
          // A character that starts a line can also report an empty rectangle at the end of the
          // line before: its last rectangle with a width is where it is drawn.
          const r = [...one.getClientRects()].filter((x) => x.width > 0).pop();
          if (!r) continue;
          const between = node.data[i - 1] + node.data[i];
          if (top !== null && r.top > top + 1 && !'-\u00ad'.includes(node.data[i - 1]) && !ideographic.test(between)) {
            broken.push(node.data.slice(word.index, i) + ' / ' + node.data.slice(i, word.index + word[0].length));
          }
          top = r.top;
        }
      }
    }
    return { name: c.className || c.tagName, text: c.textContent.trim(), box: rect(c.getBoundingClientRect()),
             words: rect(all.getBoundingClientRect()), broken };
  }) };"""


def check_last_passkey_layout(layout, where):
    """Every child of the refusal (text and buttons), and its text, lies inside the refusal's box; no
    word is cut where there is no hyphen ("Wiederherstellung / scodes")."""
    children = layout['children']
    assert len(children) >= 4, f'{where}: {len(children)} children shown'
    for c in children:
        w.assert_inside(c['box'], layout['box'], f'{where}: {c["name"]} runs out of the box {layout["box"]}: {c}')
        w.assert_inside(c['words'], layout['box'], f'{where}: the text of {c["name"]} runs out of the box {layout["box"]}: {c}')
        assert not c['broken'], f'{where}: {c["name"]} cuts a word: {c["broken"]}'


def test_every_page_in_every_language(_):
    # Signed out (an authenticator without passkeys: the autofill request just waits).
    b = w.Browser()
    try:
        for lang in LANGS:
            for width, size in WIDTHS.items():
                b.d.set_window_size(*size)
                set_language(b, lang)
                b.wait_view('welcome')
                shoot(b, lang, width, 'welcome')
                no_horizontal_overflow(b, f'{lang} {width} welcome')
                b.el('lost-passkey').click()
                b.wait_view('recover')
                shoot(b, lang, width, 'recover')
                b.el('recover-back').click()
                b.wait_view('welcome')
                b.el('email-signin-start').click()
                b.wait_view('email')
                shoot(b, lang, width, 'email-sign-in')
                b.el('email-back').click()
        # Signed in: the account page.
        b.d.set_window_size(*WIDTHS['desktop'])
        set_language(b, 'en')
        w.type_into(b, 'signup-username', f'shots-{w.secrets.token_hex(3)}')
        w.type_into(b, 'signup-display', 'Grace Hopper with a rather long display name')
        b.el('signup-button').click()
        b.wait_view('account')
        for lang in LANGS:
            for width, size in WIDTHS.items():
                b.d.set_window_size(*size)
                set_language(b, lang)
                b.wait_view('account')
                b.wait_passkeys(1)
                # The header: name and "Sign out" on one line, centred, no box around them.
                bar = b.el('session')
                assert bar.value_of_css_property('border-top-width') in ('0px', ''), bar.value_of_css_property('border-top-width')
                out = b.el('signout')
                assert abs(out.rect['y'] + out.rect['height'] / 2 - (bar.rect['y'] + bar.rect['height'] / 2)) <= 2
                no_horizontal_overflow(b, f'{lang} {width} account')
                shoot(b, lang, width, 'account')
                # The last-passkey refusal (SPEC "Assurance": the last way in), in words and with the
                # ways to add a recovery method first, fitting the width.
                item = b.d.find_element(By.CSS_SELECTOR, '#passkeys > li')
                item.find_element(By.CSS_SELECTOR, '.pk-revoke-start').click()
                item.find_element(By.CSS_SELECTOR, '.pk-confirm-yes').click()
                last = item.find_element(By.CSS_SELECTOR, '.pk-last')
                b.until(lambda: last.is_displayed(), f'{lang} {width}: the last-passkey refusal')
                no_horizontal_overflow(b, f'{lang} {width} last passkey')
                check_last_passkey_layout(b.d.execute_script(LAST_PASSKEY_LAYOUT, last), f'{lang} {width} last passkey')
                b.d.execute_script('arguments[0].scrollIntoView({block: "center"})', last)
                shoot(b, lang, width, 'last-passkey')
                if width == 'phone':
                    # Kept with the docs (docs/web-app.md shows them).
                    docs = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'docs', 'screenshots')
                    b.d.save_screenshot(os.path.join(docs, f'last-passkey-{lang}-phone.png'))
                item.find_element(By.CSS_SELECTOR, '.pk-last-close').click()
    finally:
        b.d.quit()
    count = len([n for n in os.listdir(SHOTS) if n.endswith('.png')])
    assert count >= len(LANGS) * len(WIDTHS) * 4, count


TESTS = [
    test_module_is_served_with_its_version,
    test_module_story,
    test_german_browser_gets_german_pages_and_mail,
    test_every_page_in_every_language,
]

if __name__ == '__main__':
    sys.exit(1 if w.run_suite(TESTS, label='client and languages: ') else 0)
