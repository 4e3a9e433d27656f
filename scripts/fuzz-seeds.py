#!/usr/bin/env python3
"""Seed corpora for the fuzz targets (Tests/Fuzz), cut from the shared vectors.

Usage: scripts/fuzz-seeds.py OUT_DIR [VECTOR_DIR...]
Writes OUT_DIR/<target>/<sha1 of the seed>, one file per seed, for every target that
`latchkey-fuzz --list` names. VECTOR_DIR defaults to ../shared/vectors (next to the clone) and
Tests/WebAuthnTests/Fixtures/vectors; missing folders are skipped. Only the standard library:
a minimal CBOR reader finds attestation objects' parts (x5c certificates, TPM structures, COSE keys).
"""
import base64
import glob
import hashlib
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def b64url(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


# --- a minimal CBOR reader (definite lengths; what attestation objects use) ----------------------
def cbor_item(b, i=0):
    """Returns (value, next index). Maps become lists of (key, value) pairs."""
    ib = b[i]
    major, info = ib >> 5, ib & 0x1F
    i += 1
    if info < 24:
        arg = info
    elif info in (24, 25, 26, 27):
        n = 1 << (info - 24)
        arg = int.from_bytes(b[i:i + n], "big")
        i += n
    else:
        raise ValueError("indefinite or reserved")
    if major == 0:
        return arg, i
    if major == 1:
        return -1 - arg, i
    if major == 2:
        return bytes(b[i:i + arg]), i + arg
    if major == 3:
        return b[i:i + arg].decode("utf-8", "replace"), i + arg
    if major == 4:
        out = []
        for _ in range(arg):
            v, i = cbor_item(b, i)
            out.append(v)
        return out, i
    if major == 5:
        out = []
        for _ in range(arg):
            k, i = cbor_item(b, i)
            v, i = cbor_item(b, i)
            out.append((k, v))
        return out, i
    if major == 6:
        return cbor_item(b, i)
    return None, i


def get(pairs, key):
    for k, v in pairs if isinstance(pairs, list) else []:
        if k == key:
            return v
    return None


def der_extension(cert, oid_bytes):
    """The extnValue OCTET STRING content of the extension with this OID, found by scanning."""
    at = cert.find(bytes([0x06, len(oid_bytes)]) + oid_bytes)
    if at < 0:
        return None
    i = at + 2 + len(oid_bytes)
    if cert[i] == 0x01:  # critical BOOLEAN
        i += 3
    if cert[i] != 0x04:
        return None
    length, i = cert[i + 1], i + 2
    if length & 0x80:
        n = length & 0x7F
        length, i = int.from_bytes(cert[i:i + n], "big"), i + n
    return cert[i:i + length]


class Seeds:
    def __init__(self, out):
        self.out = out
        self.count = {}

    def add(self, target, data):
        if isinstance(data, str):
            data = data.encode()
        if not data:
            return
        folder = os.path.join(self.out, target)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, hashlib.sha1(data).hexdigest())
        if os.path.exists(path):
            return
        with open(path, "wb") as f:
            f.write(data)
        self.count[target] = self.count.get(target, 0) + 1


def http(method, target, body=b"", headers=()):
    head = f"{method} {target} HTTP/1.1\r\nHost: localhost:8080\r\n"
    for h in headers:
        head += h + "\r\n"
    if body:
        head += "Content-Type: application/json\r\n"
    return head.encode() + b"\r\n" + (body if isinstance(body, bytes) else body.encode())


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 64
    seeds = Seeds(sys.argv[1])
    dirs = sys.argv[2:] or [os.path.join(os.path.dirname(REPO), "shared", "vectors"),
                            os.path.join(REPO, "Tests", "WebAuthnTests", "Fixtures", "vectors")]
    registrations, authentications = [], []
    for d in dirs:
        for name in ("registration.json", "mpl-registration.json"):
            p = os.path.join(d, name)
            if os.path.exists(p):
                registrations += json.load(open(p))
        for name in ("authentication.json", "mpl-authentication.json"):
            p = os.path.join(d, name)
            if os.path.exists(p):
                authentications += json.load(open(p))
    certificates = []

    for v in registrations:
        r = v["response"]
        resp = r.get("response", {})
        try:
            client = b64url(resp["clientDataJSON"])
            att = b64url(resp["attestationObject"])
        except (KeyError, ValueError):
            continue
        body = json.dumps(r).encode()
        seeds.add("registration", body)
        seeds.add("json", body)
        seeds.add("clientdata", client)
        seeds.add("json", client)
        seeds.add("canonical-json", client)
        seeds.add("cbor", att)
        seeds.add("http", http("POST", "/v1/passkeys/registration/verify", body))
        try:
            obj, _ = cbor_item(att)
        except (ValueError, IndexError):
            continue
        fmt, stmt, auth = get(obj, "fmt"), get(obj, "attStmt"), get(obj, "authData")
        if isinstance(fmt, str):
            seeds.add("att-" + fmt, hashlib.sha256(client).digest() + att)
        if isinstance(auth, bytes):
            seeds.add("authdata", auth)
            if len(auth) > 55 and auth[32] & 0x40:
                n = int.from_bytes(auth[53:55], "big")
                try:
                    _, end = cbor_item(auth, 55 + n)
                    seeds.add("cose", auth[55 + n:end])
                    seeds.add("cbor", auth[55 + n:end])
                except (ValueError, IndexError):
                    pass
        for cert in get(stmt, "x5c") or []:
            if isinstance(cert, bytes):
                certificates.append(cert)
        for key, selector in (("pubArea", 0), ("certInfo", 1)):
            part = get(stmt, key)
            if isinstance(part, bytes):
                seeds.add("tpm-structures", bytes([selector]) + part)
        sig = get(stmt, "sig")
        if isinstance(sig, bytes) and sig[:1] == b"\x30":
            seeds.add("device-key", b"\x01" + sig)
        jws = get(stmt, "response")
        if isinstance(jws, bytes):
            seeds.add("jwt", b"\x00" + jws)

    for v in authentications:
        r = v["response"]
        resp = r.get("response", {})
        try:
            seeds.add("authdata", b64url(resp["authenticatorData"]))
            seeds.add("clientdata", b64url(resp["clientDataJSON"]))
            key = b64url(v["credentialPublicKey"])
            seeds.add("cose", key)
            seeds.add("cbor", key)
        except (KeyError, ValueError):
            pass
        seeds.add("http", http("POST", "/v1/passkeys/authentication/verify", json.dumps(r)))

    for d in dirs:
        for p in glob.glob(os.path.join(d, "device-keys", "*.json")):
            data = json.load(open(p))
            for v in data if isinstance(data, list) else []:
                inp = v.get("input", {})
                chain = inp.get("attestation")
                for c in chain if isinstance(chain, list) else []:
                    if isinstance(c, str):
                        try:
                            certificates.append(b64url(c))
                        except ValueError:
                            pass
                if isinstance(inp.get("publicKey"), str):
                    seeds.add("device-key", b"\x00" + b64url(inp["publicKey"]))
        for p in glob.glob(os.path.join(d, "device-keys", "roots", "*.pem")):
            text = open(p).read()
            for block in text.split("-----BEGIN CERTIFICATE-----")[1:]:
                b64 = block.split("-----END CERTIFICATE-----")[0]
                certificates.append(base64.b64decode("".join(b64.split())))

    for cert in certificates:
        seeds.add("x509", cert)
        kd = der_extension(cert, bytes.fromhex("2b06010401d679020111"))  # 1.3.6.1.4.1.11129.2.1.17
        if kd:
            seeds.add("android-key-description", kd)
        san = der_extension(cert, bytes.fromhex("551d11"))  # subjectAlternativeName
        if san and b"\x67\x81\x05" in san:  # TCG attribute OIDs (2.23.133): a TPM AIK
            seeds.add("tpm-structures", b"\x02" + san)

    # Hand-written seeds for what the vectors do not carry.
    import struct
    for d in (0.0, 1.5, -1e21, 1e21, 5e-324, 1.7976931348623157e308, 0.1, 123456789012345680000.0, 1e-7):
        seeds.add("canonical-json", struct.pack(">d", d))
    for text in ('{"b":[1,2.5,-0,1e30,"\\u00e9\\ud83d\\ude00"],"a":{"\\u20ac":null,"\\r":true}}',
                 '{"action":"device-key.enrol","keyId":"abc","amount":12.50}', '[1e-7,100000000000000000000,"\\u001f"]'):
        seeds.add("json", text)
        seeds.add("canonical-json", text)
    seeds.add("device-key", b"\x03" + b'{"action":"payment.approve","amount":"12.50","to":"acct-1"}')
    seeds.add("device-key", b"\x02" + b"LKSTEPUP\x01\x01" + bytes(range(128)))
    seeds.add("device-key", b"\x00\x04" + bytes(64))
    seeds.add("jwt", b"\x01" + b'{"alg":"ES256","typ":"at+jwt","kid":"fuzz"}\x00{"exp":1700000100,"nbf":1699999000,"sub":"u1","aud":"x"}')
    seeds.add("jwt", b"\x01" + b'{"alg":"ES256","typ":"step-up+jwt","kid":"fuzz"}\x00{"exp":1700000100,"act":{"a":1}}')
    seeds.add("jwt", b"\x00eyJhbGciOiJFUzI1NiJ9.eyJleHAiOjF9.AAAA")
    seeds.add("cbor", bytes.fromhex("a301020326200121582000"))
    bearer = "Authorization: Bearer eyJhbGciOiJFUzI1NiIsInR5cCI6ImF0K2p3dCIsImtpZCI6Imt"
    admin = "Authorization: Bearer fuzz-admin-key-0123456789"
    for method, target, body, headers in [
        ("GET", "/healthz", "", ()), ("GET", "/readyz", "", ()), ("GET", "/metrics", "", ()),
        ("GET", "/.well-known/jwks.json", "", ("Origin: http://localhost:8080",)),
        ("GET", "/.well-known/apple-app-site-association", "", ()), ("GET", "/.well-known/assetlinks.json", "", ()),
        ("GET", "/.well-known/webauthn", "", ()), ("GET", "/", "", ()), ("GET", "/app.js?x=1&y", "", ()),
        ("GET", "/../../etc/passwd", "", ()), ("HEAD", "/healthz", "", ()),
        ("OPTIONS", "/v1/passkeys", "", ("Origin: http://localhost:8080", "Access-Control-Request-Method: POST")),
        ("POST", "/v1/passkeys/registration/options", '{"username":"alice","displayName":"Alice"}', ()),
        ("POST", "/v1/passkeys/authentication/options", '{"username":"alice"}', ("X-Forwarded-For: 10.0.0.1, 2001:db8::1",)),
        ("POST", "/v1/passkeys/authentication/options", "", ()),
        ("GET", "/v1/passkeys", "", (bearer,)), ("PATCH", "/v1/passkeys/abc", '{"name":"Laptop"}', (bearer,)),
        ("DELETE", "/v1/passkeys/%00", "", (bearer,)), ("POST", "/v1/token", "grant_type=refresh_token&refresh_token=x",
                                                          ("Content-Type: application/x-www-form-urlencoded",)),
        ("POST", "/v1/logout", '{"refresh_token":"x"}', ()), ("GET", "/v1/device-keys", "", (bearer,)),
        ("POST", "/v1/device-keys/challenges", "{}", (bearer,)), ("DELETE", "/v1/device-keys/AAAA", "", (bearer,)),
        ("POST", "/v1/device-keys", '{"keyId":"\\u0000","publicKey":"BAAA","signature":"MEUCIQ","challengeId":"x"}', (bearer,)),
        ("POST", "/v1/step-up/challenges", '{"method":"device-key","keyId":"k","action":{"a":1}}', (bearer,)),
        ("POST", "/v1/step-up/verify", '{"challengeId":"c","signature":"MEUCIQ"}', ()),
        ("POST", "/v1/step-up/consume", '{"token":"t"}', ()), ("GET", "/v1/step-up/receipts/%00", "", (admin,)),
        ("GET", "/admin/v1/origins", "", (admin,)), ("POST", "/admin/v1/origins", '{"origin":"https://a.example"}', (admin,)),
        ("DELETE", "/admin/v1/origins/https%3A%2F%2Fa.example", "", (admin,)), ("GET", "/admin/v1/apps", "", (admin,)),
        ("POST", "/admin/v1/apps", '{"platform":"ios","appId":"TEAM.com.example"}', (admin,)),
        ("DELETE", "/admin/v1/apps/1", "", (admin,)), ("GET", "/admin/v1/audit?limit=5", "", (admin,)),
        ("POST", "/admin/v1/users/u1/enrolment-tickets", "{}", (admin,)),
        ("POST", "/admin/v1/users/u1/device-key-tickets", "{}", (admin,)), ("BREW", "/v1/passkeys", "", ()),
    ]:
        seeds.add("http", http(method, target, body, headers))

    for target in sorted(seeds.count):
        print(f"{target}: {seeds.count[target]} seeds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
