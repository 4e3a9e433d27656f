#!/usr/bin/env python3
"""The docs' `$ADMIN_KEY` examples can run against `scripts/run.sh`.

`bash scripts/run.sh --admin-key` prints the development admin key the dev server of scripts/run.sh
uses (made once, kept in data/dev-admin-key): the same key each time, at least 32 characters (the
configuration's rule for admin keys), and no example value; every page with an `sh run` example that
needs `$ADMIN_KEY` says where that key comes from. With LATCHKEY_BIN (a built binary) and
DATABASE_URL (a cluster it may make a scratch database latchkey_devkey on), it also starts the
server `scripts/run.sh` starts, with LATCHKEY_DEV=true (any of the server's boolean spellings is dev
mode) and no LATCHKEY_ADMIN_KEY, and checks that server takes that key for its admin API and refuses
another. Seconds; exit 1 with a line per problem.
"""
import glob
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def key():
    out = subprocess.run(['bash', os.path.join(REPO, 'scripts', 'run.sh'), '--admin-key'], capture_output=True, text=True,
                         timeout=30, cwd=REPO)
    return out.returncode, out.stdout.strip()


def admin_status(base, key):
    request = urllib.request.Request(base + '/admin/v1/origins', headers={'Authorization': 'Bearer ' + key})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def served_key_problems(key):
    """Starts scripts/run.sh's server (LATCHKEY_BIN instead of its release build) and asks its admin
    API with `key`: [] when it takes it and refuses a different one."""
    binary, url = os.environ.get('LATCHKEY_BIN'), os.environ.get('DATABASE_URL')
    if not binary or not url:
        print('dev admin key: not served (LATCHKEY_BIN and DATABASE_URL are needed to start scripts/run.sh)')
        return []
    cluster = url.rsplit('/', 1)[0]
    subprocess.run(['psql', '-q', '-v', 'ON_ERROR_STOP=1', cluster + '/postgres', '-c', 'DROP DATABASE IF EXISTS latchkey_devkey WITH (FORCE)',
                    '-c', 'CREATE DATABASE latchkey_devkey'], check=True, capture_output=True, timeout=30)
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    base = f'http://127.0.0.1:{port}'
    env = {k: v for k, v in os.environ.items() if k not in ('LATCHKEY_ADMIN_KEY', 'LATCHKEY_SMTP_URL')}
    with tempfile.TemporaryDirectory() as work:
        env.update(DATABASE_URL=cluster + '/latchkey_devkey', LATCHKEY_BIN=binary, LATCHKEY_DEV='true', LATCHKEY_RP_ID='localhost',
                   LATCHKEY_LISTEN=f'127.0.0.1:{port}', LATCHKEY_MAIL_DIR=os.path.join(work, 'mail'))
        with open(os.path.join(work, 'serve.log'), 'w+') as log:
            server = subprocess.Popen(['bash', os.path.join(REPO, 'scripts', 'run.sh')], env=env, cwd=REPO, stdout=log, stderr=log,
                                      start_new_session=True)
            try:
                for _ in range(150):  # an upper bound, not a delay: ready (its migrations run) in seconds
                    if server.poll() is not None:
                        break
                    try:
                        with urllib.request.urlopen(base + '/readyz', timeout=2):
                            break
                    except OSError:
                        time.sleep(0.2)
                if server.poll() is not None:
                    log.seek(0)
                    return [f'scripts/run.sh exited ({server.returncode}) before serving:\n{log.read()[-2000:]}']
                problems = []
                taken, refused = admin_status(base, key), admin_status(base, key[::-1] + 'x')
                if taken != 200:
                    problems.append(f"scripts/run.sh's server (LATCHKEY_DEV=true) refuses the key --admin-key prints: {taken}")
                if refused != 401:
                    problems.append(f"scripts/run.sh's server answers {refused} to an admin key that is not its own")
                log.seek(0)
                if 'export ADMIN_KEY=' + key not in log.read():
                    problems.append('scripts/run.sh did not print the development admin key it set')
                return problems
            finally:
                os.killpg(server.pid, signal.SIGTERM)
                server.wait(timeout=30)
                subprocess.run(['psql', '-q', cluster + '/postgres', '-c', 'DROP DATABASE IF EXISTS latchkey_devkey WITH (FORCE)'],
                               capture_output=True, timeout=30)


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
    if not problems:
        problems += served_key_problems(k1)
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
