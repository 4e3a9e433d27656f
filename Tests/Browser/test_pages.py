#!/usr/bin/env python3
"""What people read on the pages, at phone width (390 px) in en, de, pl and zh-Hans, in headless Chromium.

Run through Tests/Browser/run.sh (same server as test_web.py; it passes LATCHKEY_BIN and
LATCHKEY_DATABASE_URL for `latchkey admins add` and for the fixtures below). Each test fails on one
defect people saw:

- recovery codes that run into each other: every code's text lies inside its own box, no two boxes
  meet, and two codes side by side leave room for the next one's number (3 em); the page is
  screenshot into docs/screenshots/recovery-codes-<lang>-phone.png;
- good news in an error's red: "The recovery was cancelled." is not styled like an error banner;
- a held passkey refused with "Your recovery is still in its waiting period" when there is no
  recovery: the refusal of a held passkey says that the passkey is on hold;
- a server `detail` (English, for developers) inside a de/pl/zh page: every banner text is one of
  the page catalog's sentences, and no problem's `detail` the page received appears in it;
- the association checker's English `message` and `fix` in the console's apps preview: an
  allowlisted Android origin with no app makes the preview report a problem, and none of the
  problems' English texts the preview answered appears on the apps page in any language;
- the console's tab strip cut off: every tab lies inside the window and its strip, and is the
  element at its own centre (nothing covers it);
- `undefined` in the audit log and only its newest 100 rows: no cell says undefined, a step-up's
  row names its receipt, and "Older entries" pages to the first row of a longer log;
- the primary button's text below 4.5:1 against its background (and its hover background), in light
  and dark mode, from the computed styles.

Fixture data comes through the real database where the story cannot make it quickly: a passkey put
on hold (`credentials.approves_from`, as a recovery's new passkey is) and 120 audit lines for paging.
"""
import base64
import json
import os
import re
import subprocess
import sys

from selenium.webdriver.common.by import By

import test_web as w
from test_admin import approve, fresh_authenticator, load_console, open_page

LANGS = ['en', 'de', 'pl', 'zh-Hans']
PHONE = (390, 844)
TAG = w.secrets.token_hex(3)
USER = f'pages-{TAG}'
ADMIN = f'pages-root-{TAG}'
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
DOCS_SHOTS = os.path.join(REPO, 'docs', 'screenshots')
CATALOGS = {lang: json.load(open(os.path.join(REPO, 'web', 'i18n', f'{lang}.json'), encoding='utf-8'))
            for lang in LANGS if lang != 'en'}
STATE = {}
# An Android signing key no app declares: allowlisted by fingerprint, it has no app in assetlinks.json.
ORPHAN_KEY = w.secrets.token_bytes(32)
ORPHAN_FINGERPRINT = ':'.join(f'{x:02X}' for x in ORPHAN_KEY)
ORPHAN_ORIGIN = 'android:apk-key-hash:' + base64.urlsafe_b64encode(ORPHAN_KEY).decode().rstrip('=')
I18N_SHOTS = os.path.join(w.SHOTS, 'i18n')


def psql(sql, *args):
    """Runs `sql` on the browser database; :'a1', :'a2', … are `args`, quoted by psql."""
    database = os.environ.get('LATCHKEY_DATABASE_URL')
    if not database:
        raise w.Skip('LATCHKEY_DATABASE_URL is needed for the fixtures')
    cmd = ['psql', '-v', 'ON_ERROR_STOP=1', '-qtA', database]
    for i, a in enumerate(args, 1):
        cmd += ['-v', f'a{i}={a}']
    out = subprocess.run(cmd, input=sql + ';\n', capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def set_language(b, lang, page='/'):
    b.d.execute_script("localStorage.setItem('latchkey.language', arguments[0])", lang)
    b.d.get(w.BASE + page)
    b.until(lambda: b.body('ready') == 'true', 'the page to start')
    b.until(lambda: b.d.execute_script('return document.documentElement.lang') == lang, f'the page in {lang}')


def record_problems(b):
    """Wraps the page's fetch: every problem+json body it receives is kept in window.__problems."""
    b.d.execute_script("""
      if (window.__problems) return;
      window.__problems = [];
      const original = window.fetch;
      window.fetch = async (...args) => {
        const r = await original(...args);
        if ((r.headers.get('Content-Type') || '').startsWith('application/problem+json')) {
          r.clone().json().then((p) => window.__problems.push(p)).catch(() => {});
        }
        return r;
      };""")


def catalog_sentence(lang, text):
    """True when `text` is a sentence of the page's catalog (placeholders may hold anything)."""
    if lang == 'en':
        return True
    for value in CATALOGS[lang].values():
        pattern = '^' + re.sub(r'\\\{\w+\\\}', '.+', re.escape(value)) + '$'
        if re.match(pattern, text, re.S):
            return True
    return False


def assert_no_server_detail(b, lang, where):
    """The banner shows the catalog's words for the refusal, never the server's English detail."""
    text = b.el('banner-text').text.strip()
    details = [p.get('detail') for p in b.d.execute_script('return window.__problems || []') if p.get('detail')]
    assert details, f'{where}: the page received no problem to show'
    for detail in details:
        assert detail not in text, f'{lang} {where}: the server detail {detail!r} is shown: {text!r}'
    assert catalog_sentence(lang, text), f'{lang} {where}: {text!r} is not a sentence of the {lang} catalog'


def banner_colours(b):
    """The banner's background and its icon's, beside the theme's error colours."""
    return b.d.execute_script("""
      const probe = document.createElement('div');
      document.body.append(probe);
      const colour = (v) => { probe.style.color = `var(${v})`; return getComputedStyle(probe).color; };
      const out = { danger: colour('--danger'), dangerSoft: colour('--danger-soft') };
      probe.remove();
      const banner = document.getElementById('banner');
      out.background = getComputedStyle(banner).backgroundColor;
      out.icon = getComputedStyle(banner, '::before').backgroundColor;
      out.kind = banner.dataset.kind;
      return out;""")


# ---------------------------------------------------------------------------------------------
# The user app

def test_sign_up(b):
    os.makedirs(I18N_SHOTS, exist_ok=True)
    b.d.set_window_size(*PHONE)
    set_language(b, 'en')
    b.wait_view('welcome')
    b.wait_autofill_idle()
    w.type_into(b, 'signup-username', USER)
    w.type_into(b, 'signup-display', 'Zofia Wiśniewska-Grzybowska')
    b.el('signup-button').click()
    b.wait_view('account')
    b.wait_passkeys(1)


CODES_LAYOUT = """
  const items = [...document.querySelectorAll('#codes-list > li')];
  const list = document.getElementById('codes-list').getBoundingClientRect();
  const em = parseFloat(getComputedStyle(document.getElementById('codes-list')).fontSize);
  return { em, width: document.documentElement.clientWidth, list: [list.left, list.right], items: items.map((li) => {
    const box = li.getBoundingClientRect();
    const range = document.createRange();
    range.selectNodeContents(li);
    const text = range.getBoundingClientRect();
    return { code: li.textContent, box: [box.left, box.top, box.right, box.bottom],
             text: [text.left, text.top, text.right, text.bottom] };
  }) };"""


def check_codes_layout(layout, where):
    em, items = layout['em'], layout['items']
    assert len(items) == 10, f'{where}: {len(items)} codes'
    meets = lambda a, b: a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]  # noqa: E731
    for it in items:
        w.assert_inside(it['text'], it['box'], f'{where}: {it["code"]} runs out of its box {it}')
        w.assert_inside(it['box'], [0, it['box'][1], layout['width'], it['box'][3]], f'{where}: {it["code"]} is outside the window {it}', slack=0)
    for i, a in enumerate(items):
        for c in items[i + 1:]:
            assert not meets(a['box'], c['box']), f'{where}: {a["code"]} and {c["code"]} overlap'
            # Side by side (the same line): the next code's number needs room between them.
            same_line = a['text'][1] < c['text'][3] and c['text'][1] < a['text'][3]
            if same_line:
                left, right = sorted([a['text'], c['text']])
                gap = right[0] - left[2]
                assert gap >= 3 * em, f'{where}: {a["code"]} and {c["code"]} are {gap:.0f}px apart ({gap / em:.1f} em)'


def test_recovery_codes_do_not_overlap_on_a_phone(b):
    os.makedirs(DOCS_SHOTS, exist_ok=True)
    b.d.set_window_size(*PHONE)
    for lang in LANGS:
        set_language(b, lang)
        b.wait_view('account')
        b.el('codes-create').click()
        b.until(lambda: b.el('codes-shown').is_displayed() and b.body('recovery-codes') == '10'
                and b.el('codes-list').text, f'{lang}: ten recovery codes')
        STATE['codes'] = [li.text for li in b.d.find_elements(By.CSS_SELECTOR, '#codes-list > li')]
        check_codes_layout(b.d.execute_script(CODES_LAYOUT), f'{lang} phone')
        b.d.execute_script("document.getElementById('codes-shown').scrollIntoView({block: 'center'})")
        b.d.save_screenshot(os.path.join(DOCS_SHOTS, f'recovery-codes-{lang}-phone.png'))
    # And at desktop width, where there is room for codes side by side.
    b.d.set_window_size(1280, 900)
    check_codes_layout(b.d.execute_script(CODES_LAYOUT), 'en desktop')
    b.d.set_window_size(*PHONE)


def test_good_news_is_not_an_error(b):
    codes = STATE.get('codes') or []
    assert len(codes) >= len(LANGS), 'the recovery codes test ran first'
    for lang, code in zip(LANGS, codes):
        status, _, body = w.http('POST', '/v1/recovery/verify', {'username': USER, 'recoveryCode': code})
        assert status == 200, (status, body)
        set_language(b, lang)
        b.wait_view('account')
        b.until(lambda: b.el('recovery-pending').is_displayed(), f'{lang}: the pending-recovery banner')
        b.el('recovery-cancel').click()
        b.wait_banner('recovery_cancelled')
        c = banner_colours(b)
        assert c['background'] not in (c['danger'], c['dangerSoft']), f'{lang}: good news on the error background {c}'
        assert c['icon'] not in (c['danger'], c['dangerSoft']), f'{lang}: good news with the error icon {c}'
        if lang == 'en':
            assert b.el('banner-text').text == 'The recovery was cancelled. Its code no longer works.', b.el('banner-text').text
        b.d.execute_script("document.getElementById('banner').scrollIntoView({block: 'start'})")
        b.d.save_screenshot(os.path.join(I18N_SHOTS, f'{lang}-phone-recovery-cancelled.png'))
        b.el('banner-close').click()


def test_held_passkey_refusal_says_it_is_held(b):
    uid = psql("SELECT id FROM users WHERE username = :'a1'", USER)
    assert uid, 'the user exists'
    # As a recovery's new passkey is: it signs in, and approves nothing for a day.
    psql("UPDATE credentials SET approves_from = now() + interval '1 day' WHERE user_id = :'a1'", uid)
    try:
        for lang in LANGS:
            set_language(b, lang)
            b.wait_view('account')
            b.until(lambda: b.body('held-passkeys') == '1', f'{lang}: the held passkey listed')
            b.until(lambda: b.body('pending-recovery') in ('yes', 'no'), f'{lang}: the recovery settings')
            assert b.body('pending-recovery') == 'no', 'no recovery is pending'
            record_problems(b)
            b.el('codes-create').click()
            b.wait_banner('recovery_pending')
            text = b.el('banner-text').text
            held = 'This passkey was added recently and is on hold, so it cannot approve changes yet. Use another passkey, or try again when its hold ends (shown in your passkey list).'
            waiting = 'Your recovery is still in its waiting period. Come back when it ends.'
            assert text == (held if lang == 'en' else CATALOGS[lang][held]), f'{lang}: {text!r}'
            assert text != (waiting if lang == 'en' else CATALOGS[lang][waiting]), f'{lang}: {text!r}'
            assert_no_server_detail(b, lang, 'held passkey refusal')
            b.el('banner-close').click()
    finally:
        psql("UPDATE credentials SET approves_from = NULL WHERE user_id = :'a1'", uid)


def test_refusals_are_in_the_page_language(b):
    # A taken username at sign-up: 409 conflict, with an English detail. The authenticator verifies
    # nobody meanwhile, so the welcome page's autofill request cannot sign the account back in.
    b.user_verified(False)
    try:
        for lang in LANGS:
            if b.body('view') == 'account':
                b.el('signout').click()
            set_language(b, lang)
            b.wait_view('welcome')
            b.wait_autofill_idle()
            record_problems(b)
            w.type_into(b, 'signup-username', USER)
            b.el('signup-button').click()
            b.wait_banner('conflict')
            assert_no_server_detail(b, lang, 'taken username')
            b.el('banner-close').click()
    finally:
        b.user_verified(True)


CONTRAST = """
  const parse = (c) => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = ([r, g, b]) => { const f = (v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const ratio = (a, b) => { const [x, y] = [lum(parse(a)), lum(parse(b))].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const probe = document.createElement('div');
  document.body.append(probe);
  probe.style.color = 'var(--brand-strong)';
  const hover = getComputedStyle(probe).color;
  probe.remove();
  const buttons = [...document.querySelectorAll('.btn-primary')];
  return buttons.map((b) => { const s = getComputedStyle(b);
    return { id: b.id, color: s.color, background: s.backgroundColor, hover, normal: ratio(s.color, s.backgroundColor), hovered: ratio(s.color, hover) }; });"""


def test_primary_button_contrast_in_light_and_dark(b):
    try:
        for scheme in ['light', 'dark']:
            b.d.execute_cdp_cmd('Emulation.setEmulatedMedia', {'features': [{'name': 'prefers-color-scheme', 'value': scheme}]})
            for page in ['/', '/admin/']:
                b.d.get(w.BASE + page)
                b.until(lambda: b.body('ready') == 'true', 'the page to start')
                found = b.d.execute_script(CONTRAST)
                assert found, f'{page}: no primary button'
                for f in found:
                    assert f['normal'] >= 4.5, f'{scheme} {page} #{f["id"]}: {f["normal"]:.2f}:1 ({f["color"]} on {f["background"]})'
                    assert f['hovered'] >= 4.5, f'{scheme} {page} #{f["id"]} hovered: {f["hovered"]:.2f}:1 ({f["color"]} on {f["hover"]})'
    finally:
        b.d.execute_cdp_cmd('Emulation.setEmulatedMedia', {'features': []})


# ---------------------------------------------------------------------------------------------
# The console

def test_admin_enrols(b):
    binary, database = os.environ.get('LATCHKEY_BIN'), os.environ.get('LATCHKEY_DATABASE_URL')
    if not binary or not database:
        raise w.Skip('LATCHKEY_BIN and LATCHKEY_DATABASE_URL are needed to run latchkey admins add')
    env = dict(os.environ, DATABASE_URL=database, LATCHKEY_DEV='1', LATCHKEY_RP_ID='localhost', LATCHKEY_ORIGINS=w.BASE)
    out = subprocess.run([binary, 'admins', 'add', ADMIN], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    link = out.stdout.strip().splitlines()[-1]
    b.d.set_window_size(1280, 900)
    b.d.execute_script("localStorage.removeItem('latchkey.language')")
    fresh_authenticator(b)
    b.d.get(link)
    b.until(lambda: b.body('ready') == 'true' and b.el('enrol').is_displayed(), 'the enrolment screen')
    b.el('enrol').click()
    b.until(lambda: b.body('view') == 'console' and b.body('loaded') == 'origins', 'the console')
    STATE['admin'] = True


def test_console_tabs_are_all_in_view_on_a_phone(b):
    assert STATE.get('admin'), 'the admin enrolled'
    b.d.set_window_size(*PHONE)
    for lang in LANGS:
        set_language(b, lang, '/admin/')
        b.until(lambda: b.body('view') == 'console', 'the console')
        tabs = b.d.execute_script("""
          const strip = document.getElementById('tabs').getBoundingClientRect();
          const width = document.documentElement.clientWidth;
          return [...document.querySelectorAll('#tabs .tab')].map((t) => {
            const r = t.getBoundingClientRect();
            const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
            return { id: t.id, text: t.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom, width,
                     inStrip: r.left >= strip.left - .5 && r.right <= strip.right + .5 && r.top >= strip.top - .5 && r.bottom <= strip.bottom + .5,
                     onTop: !!hit && (hit === t || t.contains(hit)) };
          });""")
        assert len(tabs) >= 5, tabs
        for tab in tabs:
            assert tab['left'] >= 0 and tab['right'] <= tab['width'] + .5, f'{lang}: tab {tab["text"]!r} is clipped by the window {tab}'
            assert tab['inStrip'] and tab['onTop'], f'{lang}: tab {tab["text"]!r} is cut off or covered {tab}'
        b.d.save_screenshot(os.path.join(I18N_SHOTS, f'{lang}-phone-admin-tabs.png'))
        # Each tab opens its page from where it is.
        open_page(b, 'clients')
        open_page(b, 'origins')


def test_console_refusals_are_in_the_page_language(b):
    assert STATE.get('admin'), 'the admin enrolled'
    for lang in LANGS:
        set_language(b, lang, '/admin/')
        b.until(lambda: b.body('view') == 'console', 'the console')
        open_page(b, 'audit')
        record_problems(b)
        # A filter longer than the API takes: 400 invalid_request, with an English detail.
        b.el('audit-action').clear()
        b.el('audit-action').send_keys('x' * 200)
        b.el('audit-apply').click()
        b.until(lambda: b.el('banner').is_displayed(), f'{lang}: the refusal')
        assert_no_server_detail(b, lang, 'audit filter refusal')
        b.el('audit-action').clear()
        b.el('banner-close').click() if b.d.find_elements(By.ID, 'banner-close') else None


def latchkey_cli(*args):
    binary, database = os.environ.get('LATCHKEY_BIN'), os.environ.get('LATCHKEY_DATABASE_URL')
    if not binary or not database:
        raise w.Skip('LATCHKEY_BIN and LATCHKEY_DATABASE_URL are needed to run latchkey')
    env = dict(os.environ, DATABASE_URL=database, LATCHKEY_DEV='1', LATCHKEY_RP_ID='localhost', LATCHKEY_ORIGINS=w.BASE)
    out = subprocess.run([binary, *args], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, (args, out.stdout, out.stderr)
    return out.stdout


def test_console_checker_problems_are_in_the_page_language(b):
    assert STATE.get('admin'), 'the admin enrolled'
    latchkey_cli('origins', 'add', '--android-fingerprint', ORPHAN_FINGERPRINT)
    STATE['orphan'] = True
    for lang in LANGS:
        set_language(b, lang, '/admin/')
        b.until(lambda: b.body('view') == 'console', 'the console')
        # What the preview answers the page: the English texts that must not reach it.
        status, body = w.page_request(b.d.execute_async_script, 'POST', '/admin/v1/wellknown/preview', {}, storage_key='latchkey.admin')
        assert status == 200, (status, body)
        problems = json.loads(body)['problems']
        assert any(p['code'] == 'origin_without_app' and p['file'] == 'assetlinks.json' for p in problems), problems
        open_page(b, 'apps')
        b.until(lambda: b.el('preview').get_attribute('data-state') == 'problems'
                and b.d.find_elements(By.CSS_SELECTOR, '#pv-problems > li[data-code="origin_without_app"]'),
                f'{lang}: the preview reports the Android origin without an app')
        shown = b.el('pv-problems').text
        for p in problems:
            for field in ('message', 'fix'):
                assert p[field] not in shown, f'{lang}: the checker\'s English {field} {p[field]!r} is shown: {shown!r}'
        items = b.d.find_elements(By.CSS_SELECTOR, '#pv-problems > li')
        assert len(items) == len(problems), (len(items), problems)
        for li in items:
            text = li.text.strip()
            assert text and 'undefined' not in text, f'{lang}: {text!r}'
            fix = li.find_element(By.CSS_SELECTOR, '.fix').text.strip()
            sentence = li.get_attribute('textContent')[:-len(li.find_element(By.CSS_SELECTOR, '.fix').get_attribute('textContent'))].strip()
            assert catalog_sentence(lang, sentence), f'{lang}: {sentence!r} is not a sentence of the {lang} catalog'
            assert catalog_sentence(lang, fix), f'{lang}: {fix!r} is not a sentence of the {lang} catalog'
        b.d.execute_script("document.getElementById('pv-problems').scrollIntoView({block: 'center'})")
        b.d.save_screenshot(os.path.join(I18N_SHOTS, f'{lang}-phone-admin-apps-problems.png'))
    latchkey_cli('origins', 'remove', ORPHAN_ORIGIN)
    STATE.pop('orphan')


def filtered_rows(b, action, what):
    """The audit table's cell texts, once every row shown is a line of `action` (the filter's answer, not the page's first load)."""
    read = """return [...document.querySelectorAll('#audit-rows > tr')].map((tr) =>
                ({ action: tr.dataset.action, cells: [...tr.cells].map((td) => td.innerText) }));"""
    b.until(lambda: (lambda rows: rows and all(r['action'] == action for r in rows))(b.d.execute_script(read)), what)
    return [r['cells'] for r in b.d.execute_script(read)]


def test_audit_log_rows_and_paging(b):
    assert STATE.get('admin'), 'the admin enrolled'
    action = f'test.paging.{TAG}'
    psql("INSERT INTO audit_log (actor, action, subject, detail) "
         "SELECT 'pages-test', :'a1', 'row-' || n, jsonb_build_object('n', n) FROM generate_series(1, 120) AS n", action)
    for lang in LANGS:
        set_language(b, lang, '/admin/')
        b.until(lambda: b.body('view') == 'console', 'the console')
        open_page(b, 'audit')
        # A step-up's line: its receipt and method, never "undefined".
        b.el('audit-action').clear()
        b.el('audit-action').send_keys('step_up.approved')
        b.el('audit-apply').click()
        rows = filtered_rows(b, 'step_up.approved', f'{lang}: step-up lines')
        cells = [c for r in rows for c in r]
        assert not [c for c in cells if 'undefined' in c], f'{lang}: undefined in {[c for c in cells if "undefined" in c][:3]}'
        approvals = [r[4] for r in rows]
        assert all(a.strip() for a in approvals), f'{lang}: a step-up line without its approval {approvals[:3]}'
        if lang == 'en':
            assert all(a.startswith('receipt ') and 'by passkey' in a for a in approvals), approvals[:3]
        b.d.execute_script("document.getElementById('audit-rows').scrollIntoView({block: 'start'})")
        b.d.save_screenshot(os.path.join(I18N_SHOTS, f'{lang}-phone-admin-audit-step-ups.png'))
    # Paging: the newest 100, then the 20 before them, then the end.
    b.el('audit-action').clear()
    b.el('audit-action').send_keys(action)
    b.el('audit-apply').click()
    rows = filtered_rows(b, action, 'the newest lines')
    assert len(rows) == 100, len(rows)
    more = b.el('audit-more')
    assert more.is_displayed(), 'a way to older lines'
    more.click()
    b.until(lambda: b.el('audit-rows').get_attribute('data-count') == '120', 'all 120 lines')
    subjects = [r[3] for r in filtered_rows(b, action, 'all 120 lines')]
    assert subjects == [f'row-{n}' for n in range(120, 0, -1)], subjects[:5] + subjects[-5:]
    assert not b.el('audit-more').is_displayed(), 'no older lines left'
    b.d.set_window_size(1280, 1100)
    b.d.execute_script("localStorage.removeItem('latchkey.language')")


TESTS = [
    test_sign_up,
    test_recovery_codes_do_not_overlap_on_a_phone,
    test_good_news_is_not_an_error,
    test_held_passkey_refusal_says_it_is_held,
    test_refusals_are_in_the_page_language,
    test_primary_button_contrast_in_light_and_dark,
    test_admin_enrols,
    test_console_tabs_are_all_in_view_on_a_phone,
    test_console_refusals_are_in_the_page_language,
    test_console_checker_problems_are_in_the_page_language,
    test_audit_log_rows_and_paging,
]


def cleanup():
    binary, database = os.environ.get('LATCHKEY_BIN'), os.environ.get('LATCHKEY_DATABASE_URL')
    if binary and database:
        env = dict(os.environ, DATABASE_URL=database, LATCHKEY_DEV='1', LATCHKEY_RP_ID='localhost')
        subprocess.run([binary, 'admins', 'remove', ADMIN], env=env, capture_output=True, timeout=60)
        if STATE.get('orphan'):
            subprocess.run([binary, 'origins', 'remove', ORPHAN_ORIGIN], env=env, capture_output=True, timeout=60)


if __name__ == '__main__':
    sys.exit(1 if w.run_suite(TESTS, label='pages at phone width: ', cleanup=cleanup) else 0)
