#!/usr/bin/env python3
"""Feeds every shared vector to the real `latchkey inspect` binary, with the flags its
configuration implies, and checks the exit status agrees with `expect` (or `expectIfStrict`).
ML-DSA vectors may fail with algorithm_unsupported (OpenSSL 3.0 has no ML-DSA).
Prints 'N passed, N failed' and exits non-zero on any disagreement."""
import json, os, subprocess, sys, tempfile

binary = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
vectors = os.path.join(here, '..', 'WebAuthnTests', 'Fixtures', 'vectors')
# Same list as VectorTests.knownDisagreements, with the same reason.
KNOWN = {'sw-safetynet-revoked-intermediate': 'needs an online CRL check; same certificates as py-safetynet-2021, which must pass'}
passed = failed = known = 0
with tempfile.TemporaryDirectory() as tmp:
    for name in ['registration.json', 'mpl-registration.json', 'authentication.json', 'mpl-authentication.json']:
        ceremony = 'authentication' if 'authentication' in name else 'registration'
        for v in json.load(open(os.path.join(vectors, name))):
            args = [binary, 'inspect', ceremony, '--rp-id', v['rpId'], '--challenge', v['expectedChallenge']]
            origins = v['expectedOrigin'] if isinstance(v['expectedOrigin'], list) else [v['expectedOrigin']]
            for o in origins:
                args += ['--origin', o]
            if v.get('requireUserVerification'):
                args.append('--require-user-verification')
            if 'verifyAt' in v:
                args += ['--at', v['verifyAt']]
            for i, pem in enumerate(v.get('trustAnchors', [])):
                path = os.path.join(tmp, f"{v['id']}-{i}.pem")
                with open(path, 'w') as f:
                    f.write(pem)
                args += ['--trust-anchor', path]
            for a in v.get('supportedAlgs', []):
                args += ['--alg', str(a)]
            if v.get('allowCrossOrigin'):
                args.append('--allow-cross-origin')
            if 'expectedTopOrigin' in v:
                args += ['--top-origin', v['expectedTopOrigin']]
            if 'expectedAppId' in v:
                args += ['--app-id', v['expectedAppId']]
            if 'credentialPublicKey' in v:
                args += ['--public-key', v['credentialPublicKey'], '--sign-count', str(v['credentialCurrentSignCount'])]
            r = subprocess.run(args, input=json.dumps(v['response']).encode(), capture_output=True, timeout=60)
            if r.returncode not in (0, 1):
                ok = False
                why = f'exit {r.returncode}: {r.stderr.decode()[:200]}'
            else:
                report = json.loads(r.stdout)
                outcome = 'ok' if r.returncode == 0 else 'fail'
                code = report.get('error', {}).get('code')
                if v.get('alg') in (-48, -49, -50):
                    ok = outcome == 'ok' or code == 'algorithm_unsupported'
                else:
                    ok = outcome in (v['expect'], v.get('expectIfStrict'))
                why = f"got {outcome} ({code}: {report.get('error', {}).get('reason')}), expected {v['expect']}"
            if not ok and v['id'] in KNOWN:
                known += 1
                print(f"KNOWN {v['id']}: {why} ({KNOWN[v['id']]})")
            elif ok:
                passed += 1
            else:
                failed += 1
                print(f"FAIL {v['id']}: {why}")
# Bad bytes anywhere: truncated, flipped, oversized and deeply nested inputs must give exit 1 with
# an error code in the JSON report, never a crash (exit >= 2 or a signal) or a hang.
import random
rng = random.Random(0x1A7C4E11)
reg = json.load(open(os.path.join(vectors, 'registration.json')))[0]
base = json.dumps(reg['response']).encode()
cases = [b'', b'{', b'[' * 100000, b'{"a":' * 5000, base[:len(base) // 2], base + b'x', b'\xff\xfe' * 100, b'A' * 5_000_000]
for _ in range(60):
    b = bytearray(base)
    for _ in range(rng.randint(1, 8)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    cases.append(bytes(b))
resp = reg['response']['response']
for field in ('attestationObject', 'clientDataJSON'):
    for cut in (1, 10, 40):
        mutated = json.loads(json.dumps(reg['response']))
        mutated['response'][field] = resp[field][:-cut]
        cases.append(json.dumps(mutated).encode())
for body in cases:
    r = subprocess.run([binary, 'inspect', 'registration', '--rp-id', reg['rpId'], '--origin', reg['expectedOrigin'],
                        '--challenge', reg['expectedChallenge']], input=body, capture_output=True, timeout=60)
    ok = r.returncode in (0, 1)
    if ok and r.returncode == 1:
        try:
            ok = bool(json.loads(r.stdout).get('error', {}).get('code'))
        except ValueError:
            ok = False
    if ok:
        passed += 1
    else:
        failed += 1
        print(f'FAIL malformed input ({len(body)} bytes): exit {r.returncode} {r.stderr[:200]!r}')

print(f'known disagreements: {known}')
print(f'inspect-vectors: {passed} passed, {failed} failed')
sys.exit(1 if failed else 0)
