#!/usr/bin/env python3
"""Functional check of `latchkey bench login --accounts N` (issue 24): it seeds N accounts with COPY,
starts its own servers, measures the small and the seeded database in one run and prints every figure
it promises. Nothing here looks at how fast anything was (tests never assert on time): only that each
figure is printed, that logins succeeded without errors, and that the databases it made are dropped.

Then once more through the cluster's Unix socket (`postgresql://user@/db?host=/socket/dir&port=P`).

usage: bench-login-accounts.py <latchkey binary> <database URL on the cluster to use>"""
import re, subprocess, sys

import bench_check

if len(sys.argv) != 3:
    sys.exit(__doc__)
binary, url = sys.argv[1], sys.argv[2]
cmd = [binary, 'bench', 'login', '--accounts', '100', '--database-url', url,
       '--duration', '1', '--rounds', '1', '--concurrency', '4']
failures = []
run = bench_check.run(cmd, failures)
out = run.stdout
expect = {
    'seeded with COPY': r'^seeded 100 accounts, 100 passkeys, 200 audit lines with COPY',
    'phase on the small database': r'^round 1 empty +logins [1-9]\d* ',
    'phase on the seeded database': r'^round 1 100 +logins [1-9]\d* ',
    'p50, p95 and p99': r'p50 [\d.]+ ms  p95 [\d.]+ ms  p99 [\d.]+ ms',
    'no errors': r'^round 1 100 .* errors 0 ',
    'server CPU per login': r'server CPU \d+ µs/login',
    'PostgreSQL CPU per login': r'PostgreSQL CPU \d+ µs/login',
    'WAL bytes and full-page images per login': r'WAL \d+ B/login \(FPI [\d.]+\)',
    'commits per login': r'commits [\d.]+/login',
    'server memory': r'RSS \d+ MB',
    'medians': r'^median 100 ',
    'ratio': r'^ratio=[\d.]+ ',
    'database size': r'^database size: empty [\d.]+ MB, 100 [\d.]+ MB',
    'key cache note': r'^credential key cache: ',
    'buffer pool prewarmed': r'^prewarmed latchkey_bench_accounts_100: [\d.]+ MB read into shared_buffers \([\d.]+ MB\)$',
}
bench_check.expect_lines(out, expect, failures)
# Again on the same databases with --reuse: what the first run's logins wrote is removed (sessions,
# challenges, audit lines; the audit log's append-only trigger is back on afterwards), nothing is
# seeded anew, and --checkpoint-once checkpoints before the first phase only.
again = bench_check.run(cmd[:-6] + ['--duration', '1', '--rounds', '2', '--concurrency', '4', '--reuse', '--checkpoint-once'],
                        failures, '--reuse: ')
bench_check.expect_lines(again.stdout, {
    'small database reused and reset': r"^reusing latchkey_bench_accounts_64 \(64 seeded accounts; earlier runs' sessions, challenges and audit lines removed\)",
    'seeded database reused and reset': r"^reusing latchkey_bench_accounts_100 \(100 seeded accounts; earlier runs' sessions, challenges and audit lines removed\)",
    'one checkpoint': r'one CHECKPOINT before the first round$',
    'second round without errors': r'^round 2 100 .* errors 0 ',
    'ratio round by round': r'^round by round [\d.]+, [\d.]+: median [\d.]+$',
    'ratio by AB/BA pair': r'^AB/BA pairs [\d.]+: median [\d.]+ \(a steady drift cancels within a pair\)$',
}, failures, '--reuse: ')
# Rounds alternate which database goes first, so drift within a round favours neither side.
order = re.findall(r'^round (\d) (empty|100) ', again.stdout, re.M)
if order != [('1', 'empty'), ('1', '100'), ('2', '100'), ('2', 'empty')]:
    failures.append(f'--reuse: phases ran in the order {order}, expected empty, 100, then 100, empty')
if re.search(r'^seeded ', again.stdout, re.M):
    failures.append('--reuse: seeded again instead of reusing')
base = url.rsplit('/', 1)[0]
# Through the cluster's Unix socket, given the libpq way as `?host=/directory` (the URL's authority
# empty, its query holding slashes): the bench reaches every database it makes with the URL's own
# parameters, so the run works and no TCP address is involved.
def show(setting):
    return subprocess.run(['psql', '-qAt', url, '-c', f'SHOW {setting}'], capture_output=True, text=True).stdout.strip()
sockets, port = show('unix_socket_directories').split(',')[0].strip(), show('port')
user = re.match(r'postgres(?:ql)?://([^@:/]+)', url)
if not sockets or not port or not user:
    failures.append(f'socket: cannot find the socket directory ({sockets!r}), port ({port!r}) or user of {url}')
else:
    socket_url = f'postgresql://{user.group(1)}@/{url.rsplit("/", 1)[1].split("?")[0]}?host={sockets}&port={port}'
    print(f'through the socket: {socket_url}')
    via = bench_check.run([binary, 'bench', 'login', '--accounts', '8', '--database-url', socket_url, '--duration', '1',
                           '--rounds', '1', '--concurrency', '2'], failures, 'socket: ')
    bench_check.expect_lines(via.stdout, {
        'seeded through the socket': r'^seeded 8 accounts, 8 passkeys, 16 audit lines with COPY',
        'logins through the socket without errors': r'^round 1 empty +logins [1-9]\d* .* errors 0 ',
    }, failures, 'socket: ')
    made = subprocess.run(['psql', '-qAt', socket_url, '-c', "SELECT count(*) FROM pg_database WHERE datname = 'latchkey_bench_accounts_8'"],
                          capture_output=True, text=True).stdout.strip()
    if made != '1':
        failures.append(f'socket: latchkey_bench_accounts_8 was not made on the cluster ({made!r})')
audit = subprocess.run(['psql', '-qAt', f'{base}/latchkey_bench_accounts_100', '-c',
                        "SELECT tgenabled FROM pg_trigger WHERE tgname = 'audit_log_no_update'"], capture_output=True, text=True)
if audit.stdout.strip() != 'O':
    failures.append(f'--reuse: audit_log_no_update is not enabled after the reset ({audit.stdout.strip()!r})')
# The bench's databases go again (they are scratch: a later run recreates them).
for name in ('latchkey_bench_accounts_64', 'latchkey_bench_accounts_100', 'latchkey_bench_accounts_8'):
    subprocess.run(['psql', '-q', f'{base}/postgres', '-c', f'DROP DATABASE IF EXISTS {name} WITH (FORCE)'], check=False)
bench_check.finish('bench login --accounts', failures)
