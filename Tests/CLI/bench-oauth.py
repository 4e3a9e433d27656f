#!/usr/bin/env python3
"""Functional check of `latchkey bench oauth` (issue 32, point 9): it creates its database, signs users
up with software passkeys, registers a confidential client, starts its own servers behind its counting
relay and runs the whole OpenID code flow (PAR, authorize, the page's request view, passkey sign-in,
approve with the OP cookie, code exchange, userinfo, refresh) beside a passkey login. Nothing here looks
at how fast anything was or how many statements a step took (tests never assert on time, and the counts
are what later changes will move): only that every figure is printed, that flows and logins completed
without errors, and that the bench's database is dropped.

usage: bench-oauth.py <latchkey binary> <database URL on the cluster to use>"""
import re, sys

import bench_check

if len(sys.argv) != 3:
    sys.exit(__doc__)
binary, url = sys.argv[1], sys.argv[2]
cmd = [binary, 'bench', 'oauth', '--database-url', url, '--duration', '1', '--count', '3', '--concurrency', '2', '--accounts', '2']
failures = []
run = bench_check.run(cmd, failures)
out = run.stdout
ms = r'[\d.]+ ms'
count = r'[\d.]+ \([\d.]+\)'
expect = {
    'the relay': r'^counting on the wire: ',
    'pg_stat_statements stated': r'^pg_stat_statements: (not loaded|loaded)',
    'setup': r'^setup: 2 users with software passkeys .*client lkc_',
    'baseline logins without errors': rf'^login \(baseline\) logins [1-9]\d* in [\d.]+ s = [\d.]+/s  p50 {ms}  p99 {ms}  errors 0  server CPU \d+ µs/login$',
    'flows without errors': rf'^oauth +flows [1-9]\d* in [\d.]+ s = [\d.]+/s  p50 {ms}  p99 {ms}  errors 0  server CPU \d+ µs/flow$',
    'xact_commit per login and per flow': r'^xact_commit per login [\d.]+, per flow [\d.]+ ',
    'ratio': r'^ratio=[\d.]+ \(flows/s / logins/s',
    'flow / login ratios': r'^flow / login: p50 x[\d.]+  round trips x[\d.]+  statements x[\d.]+  commits x[\d.]+  xact_commit x[\d.]+  WAL x[\d.]+  server CPU x[\d.]+$',
}
for what in ('login', 'flow '):
    expect[f'per {what.strip()} sums'] = rf'^per {what} \(sum of the step medians.*\): round trips {count}  statements {count}  commits {count}  WAL \d+ B$'
for kind in ('login', 'oauth'):
    expect[f'{kind} under load'] = rf'^under load {kind} .*round trips [\d.]+  statements [\d.]+  commits [\d.]+  connections opened \d+$'
steps = {'login': ['options', 'verify'],
         'oauth': ['par', 'authorize', 'request', 'sign-in', 'approve', 'token', 'userinfo', 'refresh']}
for kind, names in steps.items():
    for name in names:
        expect[f'{kind} {name} latency'] = rf'^step {kind} {re.escape(name)} +p50 {ms}  p99 {ms}$'
        # Sign-in options write nothing and, discoverable, read nothing: 0 round trips is their figure.
        trips = r'[0-9][\d.]*' if (kind, name) == ('login', 'options') else r'[1-9][\d.]*'
        expect[f'{kind} {name} database work'] = (rf'^db {kind} {re.escape(name)} +round trips {trips} \([\d.]+\)  of which after the answer {count}  '
                                                  rf'statements {count}  commits {count}  WAL \d+ B  by tag')
# The FAPI 2.0 flow (a --profile fapi2 client: private_key_jwt, DPoP with the server's nonce), beside the plain one.
expect['fapi2 setup'] = r'^setup: fapi2 client lkc_'
expect['fapi2 flows without errors'] = rf'^fapi2 +flows [1-9]\d* in [\d.]+ s = [\d.]+/s  p50 {ms}  p99 {ms}  errors 0  server CPU \d+ µs/flow$'
expect['per fapi2 flow sums'] = rf'^per fapi2 flow \(sum of the step medians.*\): round trips {count}  statements {count}  commits {count}  WAL \d+ B$'
expect['fapi2 under load'] = r'^under load fapi2 .*connections opened \d+$'
expect['fapi2 xact_commit'] = r'^xact_commit per fapi2 flow [\d.]+ '
expect['fapi2 / oauth ratios'] = r'^fapi2 / oauth: p50 x[\d.]+  round trips x[\d.]+  statements x[\d.]+  commits x[\d.]+  xact_commit x[\d.]+  WAL x[\d.]+  server CPU x[\d.]+$'
for name in steps['oauth']:
    expect[f'fapi2 {name} latency'] = rf'^step fapi2 {re.escape(name)} +p50 {ms}  p99 {ms}$'
    expect[f'fapi2 {name} database work'] = rf'^db fapi2 {re.escape(name)} +round trips [1-9][\d.]* \([\d.]+\)  of which after the answer {count}  '
bench_check.expect_lines(out, expect, failures)
if re.search(r'first failure', run.stderr):
    failures.append('a flow or login failed (see "first failure" above)')
bench_check.expect_dropped(url, 'latchkey_bench_oauth', failures)
bench_check.finish('bench oauth', failures)
