#!/usr/bin/env python3
"""The docs' `$ADMIN_KEY` examples can run against `scripts/run.sh`.

`bash scripts/run.sh --admin-key` prints the development admin key the dev server of scripts/run.sh
uses (made once, kept in data/dev-admin-key): the same key each time, at least 32 characters (the
configuration's rule for admin keys), and no example value; every page with an `sh run` example that
needs `$ADMIN_KEY` says where that key comes from. Seconds; exit 1 with a line per problem.
"""
import glob
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def key():
    out = subprocess.run(['bash', os.path.join(REPO, 'scripts', 'run.sh'), '--admin-key'], capture_output=True, text=True,
                         timeout=30, cwd=REPO)
    return out.returncode, out.stdout.strip()


def main():
    problems = []
    try:
        (rc1, k1), (rc2, k2) = key(), key()
    except subprocess.TimeoutExpired:
        print('scripts/run.sh --admin-key did not print a key (it went on to start a server?)')
        return 1
    if rc1 or rc2 or not k1:
        problems.append(f'scripts/run.sh --admin-key failed ({rc1}, {rc2})')
    elif k1 != k2:
        problems.append('scripts/run.sh --admin-key printed a different key the second time')
    elif len(k1) < 32 or not re.fullmatch(r'[A-Za-z0-9_-]+', k1) or 'change' in k1:
        problems.append(f'the development admin key is not a long random one: {len(k1)} characters')
    for md in sorted(glob.glob(os.path.join(REPO, 'README.md')) + glob.glob(os.path.join(REPO, 'docs', '**', '*.md'), recursive=True)):
        text = open(md, encoding='utf-8').read()
        runs = re.findall(r'```sh run\n(.*?)```', text, re.S)
        if any('$ADMIN_KEY' in block for block in runs) and 'scripts/run.sh --admin-key' not in text:
            problems.append(f'{os.path.relpath(md, REPO)}: runs $ADMIN_KEY examples without saying where the key comes from '
                            '(bash scripts/run.sh --admin-key)')
    for p in problems:
        print(p)
    print(f'dev admin key: {len(problems)} problem(s)')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
