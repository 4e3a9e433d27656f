"""A passkey made outside the browser, for a provider the virtual authenticator cannot pose as.

Chromium's virtual authenticator has a fixed AAGUID that no provider list knows. To show a known
provider's icon, `register` makes a new account over HTTP with a "none" attestation carrying the
AAGUID asked for and a P-256 key made here (standard library only: the curve arithmetic below),
and returns what `selenium`'s `Credential.create_resident_credential` needs to put that key into a
virtual authenticator, so the browser then signs in with it for real.
"""
import base64
import hashlib
import json
import secrets
import urllib.request

# NIST P-256 (SEC 2, section 2.4.2).
P = 0xffffffff00000001000000000000000000000000ffffffffffffffffffffffff
N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551
A = P - 3
G = (0x6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296,
     0x4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5)


def _add(p, q):
    if p is None:
        return q
    if q is None:
        return p
    if p[0] == q[0] and (p[1] + q[1]) % P == 0:
        return None
    if p == q:
        m = (3 * p[0] * p[0] + A) * pow(2 * p[1], -1, P) % P
    else:
        m = (q[1] - p[1]) * pow(q[0] - p[0], -1, P) % P
    x = (m * m - p[0] - q[0]) % P
    return x, (m * (p[0] - x) - p[1]) % P


def _multiply(k, point):
    result = None
    while k:
        if k & 1:
            result = _add(result, point)
        point = _add(point, point)
        k >>= 1
    return result


def _cbor(value):
    def head(major, n):
        if n < 24:
            return bytes([major << 5 | n])
        for extra, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
            if n < 1 << (8 * size):
                return bytes([major << 5 | extra]) + n.to_bytes(size, 'big')
        raise ValueError(n)
    if isinstance(value, bool):
        return b'\xf5' if value else b'\xf4'
    if isinstance(value, int):
        return head(0, value) if value >= 0 else head(1, -1 - value)
    if isinstance(value, bytes):
        return head(2, len(value)) + value
    if isinstance(value, str):
        raw = value.encode()
        return head(3, len(raw)) + raw
    if isinstance(value, dict):
        return head(5, len(value)) + b''.join(_cbor(k) + _cbor(v) for k, v in value.items())
    raise TypeError(type(value))


def b64url(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b'=').decode()


def unb64url(text):
    return base64.urlsafe_b64decode(text + '=' * (-len(text) % 4))


def _post(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method='POST',
                                 headers={'Content-Type': 'application/json'})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b'{}')


def register(base, username, aaguid):
    """Signs up `username` with a passkey whose AAGUID is `aaguid` (text); returns (the verify
    answer, credential id, user handle, PKCS#8 private key) for the virtual authenticator."""
    status, options = _post(base, '/v1/passkeys/registration/options', {'username': username, 'displayName': username})
    assert status == 200, (status, options)
    d = secrets.randbelow(N - 1) + 1
    x, y = _multiply(d, G)
    cose = _cbor({1: 2, 3: -7, -1: 1, -2: x.to_bytes(32, 'big'), -3: y.to_bytes(32, 'big')})
    credential_id = secrets.token_bytes(16)
    rp_id = options['rp']['id']
    # UP | UV | AT, sign count 0, then the attested credential data.
    auth_data = (hashlib.sha256(rp_id.encode()).digest() + bytes([0x45]) + bytes(4) + bytes.fromhex(aaguid.replace('-', ''))
                 + len(credential_id).to_bytes(2, 'big') + credential_id + cose)
    client_data = json.dumps({'type': 'webauthn.create', 'challenge': options['challenge'], 'origin': base,
                              'crossOrigin': False}).encode()
    attestation = _cbor({'fmt': 'none', 'attStmt': {}, 'authData': auth_data})
    status, answer = _post(base, '/v1/passkeys/registration/verify', {
        'id': b64url(credential_id), 'rawId': b64url(credential_id), 'type': 'public-key',
        'response': {'clientDataJSON': b64url(client_data), 'attestationObject': b64url(attestation), 'transports': ['internal']},
        'clientExtensionResults': {}, 'authenticatorAttachment': 'platform'})
    assert status == 201, (status, answer)
    # RFC 5915 ECPrivateKey (with its public key) inside RFC 5208 PrivateKeyInfo (id-ecPublicKey, prime256v1).
    pkcs8 = (bytes.fromhex('308187020100301306072a8648ce3d020106082a8648ce3d030107046d306b0201010420') + d.to_bytes(32, 'big')
             + bytes.fromhex('a14403420004') + x.to_bytes(32, 'big') + y.to_bytes(32, 'big'))
    return answer, credential_id, unb64url(options['user']['id']), pkcs8
