#!/usr/bin/env python3
"""Functional check of `latchkey bench login --url` against a running server: it enrols passkeys
through the API, then runs `--rounds` rounds of the login load, its pgbench baseline and the DPoP-on
load in turn, and prints each round and the medians. Nothing here looks at how fast anything was or
at a ratio's value (tests never assert on time): only that every line is printed, with no errors.
The server is this binary's `serve` on a database of its own, dropped after.

usage: bench-login-url.py <latchkey binary> <database URL on the cluster to use>"""
import os
import socket
import subprocess
import sys
import time
import urllib.request

import bench_check

if len(sys.argv) != 3:
    sys.exit(__doc__)
binary, url = sys.argv[1], sys.argv[2]
base = url.rsplit('/', 1)[0]
database = 'latchkey_bench_login_url'
subprocess.run(['psql', '-q', f'{base}/postgres', '-c', f'DROP DATABASE IF EXISTS {database}', '-c', f'CREATE DATABASE {database}'], check=True)
with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
env = dict(os.environ, DATABASE_URL=f'{base}/{database}', LATCHKEY_DEV='1', LATCHKEY_LISTEN=f'127.0.0.1:{port}',
           LATCHKEY_ORIGINS=f'http://localhost:{port}', LATCHKEY_RATE_LIMIT='0',
           LATCHKEY_KEY_ENCRYPTION_KEY=os.environ.get('LATCHKEY_KEY_ENCRYPTION_KEY', 'bGF0Y2hrZXktYmVuY2gta2VrLTMyLWJ5dGVzLS0tLS0='))
server = subprocess.Popen([binary, 'serve'], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
failures = []
try:
    for _ in range(600):
        try:
            urllib.request.urlopen(f'http://127.0.0.1:{port}/readyz', timeout=2)
            break
        except Exception:
            time.sleep(0.2)
    cmd = [binary, 'bench', 'login', '--url', f'http://127.0.0.1:{port}', '--origin', f'http://localhost:{port}',
           '--concurrency', '2', '--duration', '1', '--rounds', '2', '--database-url', f'{base}/{database}', '--pid', str(server.pid)]
    out = bench_check.run(cmd, failures).stdout
    ms = r'[\d.]+ ms'
    expect = {'enrolled': r'^enrolled 64 passkeys$', 'peak RSS': r'^server peak RSS \d+ MB'}
    for n in (1, 2):
        expect[f'round {n} logins'] = rf'^round {n} logins [1-9]\d*  \d+/s  p50 {ms}  p95 {ms}  p99 {ms}  errors 0$'
        expect[f'round {n} CPU'] = rf'^round {n} CPU per login: this load generator \d+ µs, server \d+ µs$'
        expect[f'round {n} baseline'] = rf'^round {n} pgbench baseline \(same SQL per login\) \d+/s  ratio=[\d.]+  '
        expect[f'round {n} DPoP'] = rf'^round {n} DPoP on: logins [1-9]\d*  \d+/s  p50 {ms}  p99 {ms}  errors 0$'
    expect['medians'] = r'^median of 2 rounds: logins \d+/s, pgbench baseline \d+/s, DPoP on \d+/s$'
    expect['floor'] = r'^pgbench commit floor \(one-row INSERT \+ COMMIT, synchronous_commit=\w+\) \d+/s$'
    expect['ratios'] = r"^login rate / pgbench baseline [\d.]+ \(median of the rounds' ratios\), login rate / commit floor [\d.]+$"
    expect['DPoP ratio'] = r"^DPoP on / off: [\d.]+ \(target 0\.85\) \(median of the rounds' ratios\)$"
    bench_check.expect_lines(out, expect, failures)
finally:
    server.terminate()
    server.wait(timeout=30)
    subprocess.run(['psql', '-q', f'{base}/postgres', '-c', f'DROP DATABASE IF EXISTS {database}'])
bench_check.finish('bench login --url', failures)
