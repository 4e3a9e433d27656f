#!/usr/bin/env python3
"""Feeds every shared device-key vector (Tests/DeviceKeysTests/Fixtures/device-keys: android.json and
appattest.json) to the real `latchkey inspect device-key` binary with the flags the vector implies, and
checks the exit status agrees with `expect` (0 = ok, 1 = fail; `expectIfStrict` is also accepted), and for
Android also with --require-verified-boot against `expectIfVerifiedBootRequired`. Then: a revoked serial
through --status-list, bad usage (exit 64), and corrupted input (exit 1 with an error code, never a crash).

usage: inspect-device-keys.py <latchkey binary> [--only android|appattest]
Prints one line per case and 'N passed, N failed'; exits non-zero on any failure."""
import base64, json, os, random, subprocess, sys, tempfile

args = sys.argv[1:]
only = None
if '--only' in args:
    i = args.index('--only')
    only = args[i + 1]
    del args[i:i + 2]
    if only not in ('android', 'appattest'):
        sys.exit('--only takes android or appattest')
if len(args) != 1:
    sys.exit(__doc__)
binary = args[0]
here = os.path.dirname(os.path.abspath(__file__))
fixtures = os.path.join(here, '..', 'DeviceKeysTests', 'Fixtures', 'device-keys')
passed = failed = 0


def result(ok, label, why=''):
    global passed, failed
    if ok:
        passed += 1
        print(f'PASS {label}')
    else:
        failed += 1
        print(f'FAIL {label}: {why}')


def run(flags, body):
    r = subprocess.run([binary, 'inspect', 'device-key'] + flags, input=body, capture_output=True, timeout=60)
    report = None
    if r.returncode in (0, 1):
        try:
            report = json.loads(r.stdout)
        except ValueError:
            pass
    return r, report


def flags_for(v, platform):
    f = ['--at', v['at']]
    if platform == 'android' or 'challenge' in v:
        f += ['--challenge', v['challenge']]
    if 'clientDataHash' in v:
        f += ['--client-data-hash', v['clientDataHash']]
    for a in v.get('apps', []):
        f += ['--app', a]
    if v.get('development'):
        f.append('--app-attest-development')
    return f


def check(v, flags, expected, label):
    r, report = run(flags, json.dumps(v['input']).encode())
    if r.returncode not in (0, 1) or report is None:
        result(False, label, f'exit {r.returncode}: {r.stderr.decode()[:300]}')
        return None
    outcome = 'ok' if r.returncode == 0 else 'fail'
    if report.get('attested') != (r.returncode == 0):
        result(False, label, f'exit {r.returncode} but "attested": {report.get("attested")}')
        return report
    err = report.get('error') or {}
    alternatives = {expected, v.get('expectIfStrict')} - {None}
    result(outcome in alternatives, label, f"got {outcome} ({err.get('code')}: {err.get('reason')}), expected {expected}")
    return report


platforms = [('android', 'android.json'), ('appattest', 'appattest.json')]
ok_android = None
for platform, file in platforms:
    if only and only != platform:
        continue
    for v in json.load(open(os.path.join(fixtures, file))):
        flags = flags_for(v, platform)
        report = check(v, flags, v['expect'], f"{platform} {v['name']}")
        if platform == 'android':
            check(v, flags + ['--require-verified-boot'], v.get('expectIfVerifiedBootRequired', v['expect']),
                  f"{platform} {v['name']} --require-verified-boot")
            if v['expect'] == 'ok' and report and report.get('attested') and ok_android is None:
                ok_android = (v, report)

if only in (None, 'appattest'):
    # --client-data-hash is the bytes the app passed, of any length (Apple's API takes any Data; a published
    # sample uses 24 bytes): a value that is not 32 bytes is verified, not refused as bad usage (64). The real
    # object's nonce binds its own 32-byte value, so another one fails at step 4 and nowhere earlier.
    v = json.load(open(os.path.join(fixtures, 'appattest.json')))[0]
    flags = flags_for(v, 'appattest')
    at = flags.index('--client-data-hash') + 1
    raw = base64.urlsafe_b64decode(flags[at] + '=' * (-len(flags[at]) % 4))
    for length in (24, 1, 33, 64):
        other = (raw * 2)[:length]
        changed = flags[:at] + [base64.urlsafe_b64encode(other).decode().rstrip('=')] + flags[at + 1:]
        r, rep = run(changed, json.dumps(v['input']).encode())
        last = (rep or {}).get('checks', [{}])[-1]
        result(r.returncode == 1 and last.get('check') == 'appattest.step4.nonce' and not last.get('ok'),
               f'appattest --client-data-hash of {length} bytes is taken as given (fails only at step 4)',
               f"exit {r.returncode}: {r.stderr.decode()[:200]} {last}")
    r, _ = run(flags[:at] + ['***'] + flags[at + 1:], json.dumps(v['input']).encode())
    result(r.returncode == 64, 'appattest --client-data-hash not base64url → 64', f'exit {r.returncode}')

if only in (None, 'android') and ok_android:
    v, report = ok_android
    base = flags_for(v, 'android')
    body = json.dumps(v['input']).encode()
    with tempfile.TemporaryDirectory() as tmp:
        # A revoked (or suspended) serial anywhere in the chain refuses it.
        for index, cert in enumerate(report['decoded']['chain']):
            path = os.path.join(tmp, f'status-{index}.json')
            with open(path, 'w') as f:
                json.dump({'entries': {cert['serial']: {'status': 'SUSPENDED' if index % 2 else 'REVOKED', 'reason': 'KEY_COMPROMISE'}}}, f)
            r, rep = run(base + ['--status-list', path], body)
            result(r.returncode == 1 and rep and rep['error']['code'] == 'attestation_invalid',
                   f"status list revokes certificate {index} of {v['name']}", f'exit {r.returncode}')
        # The shared status-list fixture names none of these serials.
        fixture = json.load(open(os.path.join(fixtures, 'gak-revocation-status-fixture.json')))
        path = os.path.join(tmp, 'fixture.json')
        with open(path, 'w') as f:
            json.dump(fixture['statusList'], f)
        r, _ = run(base + ['--status-list', path], body)
        result(r.returncode == 0, f"fixture status list leaves {v['name']} attested", f'exit {r.returncode}')
        # The software attestation roots as the only anchors: nothing real verifies.
        soft = os.path.join(fixtures, 'roots', 'android-software-attestation-root-ec-UNTRUSTED.pem')
        r, _ = run(base + ['--trust-anchor', soft], body)
        result(r.returncode == 1, 'software attestation root as the only trust anchor', f'exit {r.returncode}')
        # Bad usage: exit 64, before reading anything.
        bad = os.path.join(tmp, 'bad.json')
        with open(bad, 'w') as f:
            f.write('{"entries": []}')
        without_challenge = [a for a in base if a not in ('--challenge', v['challenge'])]
        usage_cases = [
            ('no --challenge', without_challenge),
            ('Android with only --client-data-hash', without_challenge + ['--client-data-hash', 'A' * 43]),
            ('--app without fingerprint', base + ['--app', 'android:com.example']),
            ('--app with a short fingerprint', base + ['--app', 'android:com.example:AB:CD']),
            ('--app of another platform', base + ['--app', 'windows:x']), ('--app ios without team', base + ['--app', 'ios:nodot']),
            ('--at not ISO', base + ['--at', 'yesterday']), ('--challenge not base64url', base + ['--challenge', '***']),
            ('--trust-anchor missing file', base + ['--trust-anchor', '/nonexistent']),
            ('--status-list malformed', base + ['--status-list', bad]),
            ('unknown flag', base + ['--no-such-flag']), ('extra argument', base + ['extra']),
        ]
        for label, flags in usage_cases:
            r, _ = run(flags, body)
            result(r.returncode == 64, f'bad usage ({label}) → 64', f'exit {r.returncode}')
        r = subprocess.run([binary, 'inspect', 'device-key', '--help'], capture_output=True, timeout=60)
        result(r.returncode == 0 and b'device-key' in r.stdout, '--help → 0', f'exit {r.returncode}')
    # Bad bytes anywhere: exit 1 with an error code in the JSON report, never a crash or a hang.
    rng = random.Random(0xDE71CE)
    cases = [b'', b'{', b'[]', b'null', b'[' * 100000, b'{"a":' * 5000, body[:len(body) // 2], body + b'x',
             b'\xff\xfe' * 100, b'A' * 3_000_000,
             json.dumps(dict(v['input'], platform='windows')).encode(),
             json.dumps(dict(v['input'], attestation=[])).encode(),
             json.dumps(dict(v['input'], attestation='x')).encode(),
             json.dumps(dict(v['input'], attestation=[1, 2])).encode(),
             json.dumps(dict(v['input'], publicKey='AAAA')).encode(),
             json.dumps({k: x for k, x in v['input'].items() if k != 'publicKey'}).encode()]
    for cut in (1, 10, 100, 400):
        mutated = json.loads(body)
        mutated['attestation'][0] = mutated['attestation'][0][:-cut]
        cases.append(json.dumps(mutated).encode())
    for _ in range(60):
        mutated = json.loads(body)
        i = rng.randrange(len(mutated['attestation']))
        cert = bytearray(mutated['attestation'][i].encode())
        for _ in range(rng.randint(1, 6)):
            cert[rng.randrange(len(cert))] = ord(rng.choice('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'))
        mutated['attestation'][i] = cert.decode()
        if mutated != json.loads(body):
            cases.append(json.dumps(mutated).encode())
    bad_input_failures = 0
    for case in cases:
        r, rep = run(base, case)
        ok = r.returncode == 1 and rep is not None and bool((rep.get('error') or {}).get('code'))
        if not ok:
            bad_input_failures += 1
            result(False, f'malformed input ({len(case)} bytes)', f'exit {r.returncode} {r.stderr[:200]!r}')
    result(bad_input_failures == 0, f'{len(cases)} malformed inputs → exit 1 with an error code')

print(f'inspect-device-keys: {passed} passed, {failed} failed')
sys.exit(1 if failed else 0)
