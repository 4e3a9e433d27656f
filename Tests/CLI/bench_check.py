"""What the functional checks of `latchkey bench …` (Tests/CLI/bench-*.py) share: run a bench and
echo what it printed, look for the lines it must print, check that it dropped its database, and
report. They look at what is printed, never at how fast anything was."""
import re
import subprocess
import sys


def run(cmd, failures, label=''):
    """Runs `cmd`, echoes its output, records a non-zero exit; returns the finished process."""
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    print(done.stdout, end='')
    if done.stderr:
        print(done.stderr, end='', file=sys.stderr)
    if done.returncode != 0:
        failures.append(f'{label}exit status {done.returncode}')
    return done


def expect_lines(out, expect, failures, label=''):
    """Records each `label: pattern` of `expect` that matches no line of `out`."""
    for name, pattern in expect.items():
        if not re.search(pattern, out, re.M):
            failures.append(f'{label}missing: {name} ({pattern})')


def expect_dropped(url, database, failures):
    """Records a failure when `database` still exists on the cluster of `url`."""
    base = url.rsplit('/', 1)[0]
    left = subprocess.run(['psql', '-qAt', f'{base}/postgres', '-c', f"SELECT count(*) FROM pg_database WHERE datname = '{database}'"],
                          capture_output=True, text=True)
    if left.stdout.strip() != '0':
        failures.append(f'the bench left its database behind ({left.stdout.strip()!r} {left.stderr.strip()!r})')


def finish(name, failures):
    for f in failures:
        print('FAIL', f)
    print(f'{name}: ' + ('ok' if not failures else f'{len(failures)} failed'))
    sys.exit(1 if failures else 0)
