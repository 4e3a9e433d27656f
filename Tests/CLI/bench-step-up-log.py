#!/usr/bin/env python3
"""Functional check of `latchkey bench step-up --log-compare` (issue 35, the load figures): it creates its
database, starts its own servers with the transparency log's writer off and on in alternating phases,
runs device-key step-ups against each and samples receipts until GET /v1/receipts/{id} shows their
proof. Nothing here looks at how fast anything was, at the ratio's value or at the lag's (tests never
assert on time): only that both rates, the ratio and the lag lines are printed, that approvals ran
without errors, that every sampled receipt reached the log, and that the bench's database is dropped.

usage: bench-step-up-log.py <latchkey binary> <database URL on the cluster to use>"""
import subprocess, sys

import bench_check

if len(sys.argv) != 3:
    sys.exit(__doc__)
binary, url = sys.argv[1], sys.argv[2]
cmd = [binary, 'bench', 'step-up', '--log-compare', '--database-url', url,
       '--duration', '1', '--rounds', '2', '--concurrency', '2', '--log-interval', '0.2']
failures = []
run = bench_check.run(cmd, failures)
out = run.stdout
ms = r'[\d.]+ ms'
rate = r'[\d.]+/s'
expect = {
    'settings': r'^latchkey bench step-up --log-compare: .*2 rounds of log off then log on .*LATCHKEY_LOG_INTERVAL=0\.2',
    'lag method': r'^integration lag: the receipt answered next after random moments of the load',
}
for n in (1, 2):
    expect[f'round {n} off'] = rf'^round {n} log off  approvals [1-9]\d* in [\d.]+ s = {rate}  verify p50 {ms}  p99 {ms}  errors 0$'
    expect[f'round {n} on'] = (rf'^round {n} log on   approvals [1-9]\d* in [\d.]+ s = {rate}  verify p50 {ms}  p99 {ms}  errors 0  '
                               r'\(\d+ receipts left by the phase before, integrated before the load; during it \d+ checkpoints, \d+ leaves each on average\)$')
expect['rate off'] = rf'^log off: [1-9]\d* approvals in [\d.]+ s = {rate}  \(rounds [\d.]+, [\d.]+\)  errors 0$'
expect['rate on'] = rf'^log on : [1-9]\d* approvals in [\d.]+ s = {rate}  \(rounds [\d.]+, [\d.]+\)  errors 0$'
expect['ratio'] = r"^ratio on/off = [\d.]+ over all rounds, [\d.]+ the median of the rounds' \(target ≥ 0\.9; per round [\d.]+, [\d.]+\)$"
expect['lag'] = (rf'^integration lag \(verify answered → GET /v1/receipts/\{{id\}} shows its log\): [1-9]\d* receipts sampled in the on phases, '
                 rf'p50 {ms}  p99 {ms}  max {ms}; 2 × LATCHKEY_LOG_INTERVAL = 400 ms \(target p99 ≤ 400 ms\)$')
expect['every sample integrated'] = r'^not integrated within \d+ s of their phase\'s end: 0; receipt polls that failed: 0$'
bench_check.expect_lines(out, expect, failures)
bench_check.expect_dropped(url, 'latchkey_bench_stepup', failures)
# The other mode stays: --url without --log-compare is still the running-server bench.
usage = subprocess.run([binary, 'bench', 'step-up', '--log-compare', '--url', 'http://127.0.0.1:1', '--database-url', url],
                       capture_output=True, text=True, timeout=60)
if usage.returncode != 64 or 'not --url' not in usage.stderr:
    failures.append(f'--log-compare with --url: expected a usage error, got {usage.returncode} {usage.stderr[:200]!r}')
bench_check.finish('bench step-up --log-compare', failures)
