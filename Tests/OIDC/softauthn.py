"""A tiny software passkey (P-256, attestation "none") so the OIDC tests can sign in against a real
Latchkey server without a browser: registration and assertion responses in WebAuthn's JSON shapes."""
import base64
import hashlib
import json
import os

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b'=').decode()


def unb64u(s):
    return base64.urlsafe_b64decode(s + '=' * (-len(s) % 4))


def cbor(v):
    """Canonical-enough CBOR for the few shapes an attestation object needs."""
    def head(major, n):
        if n < 24:
            return bytes([major << 5 | n])
        if n < 256:
            return bytes([major << 5 | 24, n])
        if n < 65536:
            return bytes([major << 5 | 25]) + n.to_bytes(2, 'big')
        return bytes([major << 5 | 26]) + n.to_bytes(4, 'big')
    if isinstance(v, bool):
        raise TypeError('bool')
    if isinstance(v, int):
        return head(0, v) if v >= 0 else head(1, -1 - v)
    if isinstance(v, bytes):
        return head(2, len(v)) + v
    if isinstance(v, str):
        b = v.encode()
        return head(3, len(b)) + b
    if isinstance(v, dict):
        out = head(5, len(v))
        for k, x in v.items():
            out += cbor(k) + cbor(x)
        return out
    raise TypeError(type(v))


class SoftPasskey:
    def __init__(self, rp_id, origin):
        self.rp_id = rp_id
        self.origin = origin
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.cred_id = os.urandom(16)
        self.count = 0
        self.user_handle = None

    def _client_data(self, typ, challenge):
        return json.dumps({'type': typ, 'challenge': challenge, 'origin': self.origin, 'crossOrigin': False}).encode()

    def create(self, options):
        self.user_handle = options['user']['id']
        nums = self.key.public_key().public_numbers()
        cose = cbor({1: 2, 3: -7, -1: 1, -2: nums.x.to_bytes(32, 'big'), -3: nums.y.to_bytes(32, 'big')})
        auth = (hashlib.sha256(self.rp_id.encode()).digest() + bytes([0x45]) + (0).to_bytes(4, 'big')
                + bytes(16) + len(self.cred_id).to_bytes(2, 'big') + self.cred_id + cose)
        att = cbor({'fmt': 'none', 'attStmt': {}, 'authData': auth})
        cd = self._client_data('webauthn.create', options['challenge'])
        return {'id': b64u(self.cred_id), 'rawId': b64u(self.cred_id), 'type': 'public-key',
                'response': {'clientDataJSON': b64u(cd), 'attestationObject': b64u(att), 'transports': ['internal']},
                'clientExtensionResults': {}, 'authenticatorAttachment': 'platform'}

    def get(self, options):
        self.count += 1
        auth = hashlib.sha256(self.rp_id.encode()).digest() + bytes([0x05]) + self.count.to_bytes(4, 'big')
        cd = self._client_data('webauthn.get', options['challenge'])
        sig = self.key.sign(auth + hashlib.sha256(cd).digest(), ec.ECDSA(hashes.SHA256()))
        return {'id': b64u(self.cred_id), 'rawId': b64u(self.cred_id), 'type': 'public-key',
                'response': {'clientDataJSON': b64u(cd), 'authenticatorData': b64u(auth), 'signature': b64u(sig),
                             'userHandle': self.user_handle},
                'clientExtensionResults': {}, 'authenticatorAttachment': 'platform'}
