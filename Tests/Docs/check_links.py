#!/usr/bin/env python3
"""What the docs point to is in the repository.

- Every relative link and image in a tracked Markdown file (`[text](path)`, `[text](path#anchor)`,
  `![alt](path)`, `<img src="path">`, reference definitions `[id]: path`) names a file or folder
  that is in the repository, and an `#anchor` into a Markdown file names one of its headings.
- No tracked file names `SPEC.md`: that contract is not in the repository, and its users' contract
  is docs/api.md and the OpenAPI document (`/openapi.json`).
- What users read (README.md files, ARCHITECTURE.md, docs/, web/, clients/ and the OpenAPI
  document) cites no "SPEC" at all: a section of a file they do not have is no reference.

Links inside fenced code blocks and inline code are examples, not references, and are skipped.
usage: check_links.py   (exit 1 and one line per problem when something is wrong)
"""
import os
import re
import subprocess
import sys
from urllib.parse import unquote

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SELF = os.path.relpath(os.path.abspath(__file__), REPO)

INLINE = re.compile(r'!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
REFERENCE = re.compile(r'^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$')
IMG = re.compile(r'<img\b[^>]*\bsrc="([^"]+)"', re.I)
FENCE = re.compile(r'^\s{0,3}(```|~~~)')
CODE_SPAN = re.compile(r'(`+)(?:(?!\1).)+?\1')
READ_BY_USERS = re.compile(r'(^|/)README\.md$|^ARCHITECTURE\.md$|^SECURITY\.md$|^docs/|^web/|^clients/|^Sources/LatchkeyServer/OpenAPI/openapi\.json$')


def tracked():
    out = subprocess.run(['git', '-C', REPO, 'ls-files', '-z', '--cached', '--others', '--exclude-standard'],
                         capture_output=True, check=True).stdout.decode()
    return sorted(p for p in out.split('\0') if p and os.path.exists(os.path.join(REPO, p)))


def slug(heading):
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to '-'."""
    text = re.sub(r'<[^>]+>', '', heading)
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', text)
    text = text.replace('`', '').strip().lower()
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


def anchors(path, cache={}):  # noqa: B006 - a per-run cache
    if path not in cache:
        seen, found, fenced = {}, set(), False
        for line in open(path, encoding='utf-8'):
            if FENCE.match(line):
                fenced = not fenced
                continue
            m = None if fenced else re.match(r'^#{1,6}\s+(.*?)\s*#*\s*$', line)
            if m:
                s = slug(m.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                found.add(s if n == 0 else f'{s}-{n}')
        for m in re.finditer(r'<a\s+(?:name|id)="([^"]+)"', open(path, encoding='utf-8').read()):
            found.add(m.group(1))
        cache[path] = found
    return cache[path]


def links(path):
    """(line number, target) of every link outside code."""
    fenced = False
    for n, line in enumerate(open(path, encoding='utf-8'), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        prose = CODE_SPAN.sub('', line)
        for pattern in (INLINE, IMG):
            for m in pattern.finditer(prose):
                yield n, m.group(1)
        m = REFERENCE.match(prose)
        if m:
            yield n, m.group(1)


def check_link(md, n, target, files):
    if re.match(r'^[a-z][a-z0-9+.-]*:', target, re.I) or target.startswith('//'):
        return None  # http:, https:, mailto:, …: not a file of this repository
    path, _, anchor = target.partition('#')
    path = unquote(path.split('?')[0])
    here = os.path.dirname(os.path.join(REPO, md))
    full = os.path.normpath(os.path.join(here, path)) if path else os.path.join(REPO, md)
    rel = os.path.relpath(full, REPO)
    if rel.startswith('..'):
        return f'{md}:{n}: {target} points outside the repository'
    if not (rel in files or any(f.startswith(rel.rstrip('/') + '/') for f in files)):
        return f'{md}:{n}: {target} is not in the repository'
    if anchor and full.endswith('.md') and os.path.isfile(full) and anchor not in anchors(full):
        return f'{md}:{n}: {target}: {rel} has no heading #{anchor}'
    return None


def main():
    files = tracked()
    fileset = set(files)
    problems = []
    for md in (f for f in files if f.endswith('.md')):
        for n, target in links(os.path.join(REPO, md)):
            p = check_link(md, n, target, fileset)
            if p:
                problems.append(p)
    for f in files:
        if f == SELF or f.endswith(('.png', '.jpg', '.der', '.pem', '.bin', '.cbor')):
            continue
        try:
            text = open(os.path.join(REPO, f), encoding='utf-8').read()
        except (UnicodeDecodeError, IsADirectoryError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if 'SPEC.md' in line:
                problems.append(f'{f}:{n}: names SPEC.md, which is not in the repository')
            elif READ_BY_USERS.search(f) and re.search(r'\bSPEC\b', line):
                problems.append(f'{f}:{n}: cites "SPEC", which is not in the repository')
    for p in problems:
        print(p)
    print(f'doc links: {len(problems)} problem(s)')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
