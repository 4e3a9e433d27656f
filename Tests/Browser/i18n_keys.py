"""The message keys of the web app and the console: every text node and translatable attribute of
web/index.html, web/admin/index.html, web/authorize.html and web/help/vault.html, and every t('…') / N_('…') literal in
web/app.js, web/vault-panel.js, web/admin/admin.js and web/authorize.js. Keys are the English text (whitespace collapsed), as web/i18n.js looks them up.
`python3 Tests/Browser/i18n_keys.py` prints them as JSON; `--check` fails when a catalog in
web/i18n/ lacks one (or has a placeholder the English key does not)."""
import html.parser
import json
import os
import re
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
ATTRS = ('aria-label', 'placeholder', 'title', 'alt')
SKIP_TAGS = {'script', 'style', 'svg', 'path', 'code', 'pre'}


class Texts(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.keys, self.stack = [], []

    def handle_starttag(self, tag, attrs):
        if tag not in ('input', 'meta', 'link', 'br', 'img'):
            self.stack.append(tag)
        a = dict(attrs)
        if 'data-i18n-skip' in a:
            return
        for name in ATTRS:
            if a.get(name):
                self.keys.append(norm(a[name]))

    def handle_endtag(self, tag):
        while self.stack and self.stack.pop() != tag:
            pass

    def handle_data(self, data):
        if any(t in SKIP_TAGS for t in self.stack):
            return
        text = norm(data)
        if text and re.search(r'[A-Za-z]', text):
            self.keys.append(text)


def norm(s):
    return re.sub(r'\s+', ' ', s).strip()


JS_T = re.compile(r"""\b(?:t|N_)\(\s*(['"])((?:\\.|(?!\1).)*)\1""")


def js_keys(path):
    src = open(path, encoding='utf-8').read()
    return [m.group(2).encode().decode('unicode_escape').encode('latin-1').decode('utf-8') if '\\' in m.group(2) else m.group(2)
            for m in JS_T.finditer(src)]


def all_keys():
    keys = []
    for page in ('web/index.html', 'web/admin/index.html', 'web/authorize.html', 'web/help/vault.html'):
        p = Texts()
        p.feed(open(os.path.join(REPO, page), encoding='utf-8').read())
        keys += p.keys
    for js in ('web/app.js', 'web/vault-panel.js', 'web/admin/admin.js', 'web/authorize.js', 'web/i18n.js'):
        keys += js_keys(os.path.join(REPO, js))
    seen, out = set(), []
    for k in keys:
        if k not in seen:
            seen.add(k)
            out.append(k)
    return out


def check():
    keys = all_keys()
    problems = []
    langs = sorted(f[:-5] for f in os.listdir(os.path.join(REPO, 'web', 'i18n')) if f.endswith('.json'))
    for lang in langs:
        cat = json.load(open(os.path.join(REPO, 'web', 'i18n', f'{lang}.json'), encoding='utf-8'))
        for k in keys:
            if k not in cat or not str(cat[k]).strip():
                problems.append(f'{lang}: missing {k!r}')
            elif set(re.findall(r'\{\w+\}', k)) != set(re.findall(r'\{\w+\}', cat[k])):
                problems.append(f'{lang}: placeholders differ for {k!r}: {cat[k]!r}')
    print(f'i18n: {len(keys)} keys, catalogs {", ".join(langs)}')
    for p in problems:
        print(p)
    return not problems and set(langs) >= {'en', 'de', 'pl', 'zh-Hans'}


if __name__ == '__main__':
    if '--check' in sys.argv:
        sys.exit(0 if check() else 1)
    print(json.dumps(all_keys(), ensure_ascii=False, indent=1))
