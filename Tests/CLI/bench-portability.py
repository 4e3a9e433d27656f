#!/usr/bin/env python3
"""Functional check of `latchkey bench portability`: it seeds N accounts, exports them through
`latchkey accounts export`, imports the file into a second fresh database through `latchkey
accounts import`, and prints accounts/s each way, each command's peak RSS and the outcomes (every
account `created`). Nothing here looks at how fast anything was or how much memory it took (tests
never assert on either): only that each figure is printed, and that the databases are dropped.

usage: bench-portability.py <latchkey binary> <database URL on the cluster to use>"""
import sys

import bench_check

if len(sys.argv) != 3:
    sys.exit(__doc__)
binary, url = sys.argv[1], sys.argv[2]
failures = []
run = bench_check.run([binary, 'bench', 'portability', '--accounts', '300', '--database-url', url], failures)
bench_check.expect_lines(run.stdout, {
    'seeded with COPY': r'^seeded 300 accounts, 300 passkeys, 600 audit lines with COPY',
    'export rate and memory': r'^export  300 accounts in [\d.]+ s  \d+ accounts/s  file [\d.]+ MB  peak RSS \d+ MB$',
    'import rate, memory and outcomes': r'^import  300 accounts in [\d.]+ s  \d+ accounts/s  peak RSS \d+ MB  '
                                        r'outcomes: 300 created, 0 skipped, 0 conflict, 0 refused$',
}, failures)
if 'latchkey accounts: 300 account(s): 300 created' not in run.stderr:
    failures.append("missing: the import's summary on standard error")
for database in ['latchkey_bench_port_src', 'latchkey_bench_port_dst']:
    bench_check.expect_dropped(url, database, failures)
bench_check.finish('bench-portability', failures)
