"""A software passkey for the Schemathesis run: registers an account on a dev-mode Latchkey over
HTTP (none attestation, ES256, UP+UV) and signs in, so the authenticated routes are exercised with a
real session. Only what the run needs: a minimal CBOR encoder, a P-256 key (cryptography)."""
import base64
import hashlib
import json
import os
import secrets
import struct
import urllib.request

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def cbor(value) -> bytes:
    """Canonical CBOR for ints, bytes, text and maps (all this needs)."""
    def head(major, n):
        if n < 24:
            return bytes([major << 5 | n])
        for info, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
            if n < 1 << (8 * struct.calcsize(fmt)):
                return bytes([major << 5 | info]) + struct.pack(fmt, n)
        raise ValueError(n)
    if isinstance(value, bool):
        return bytes([0xF5 if value else 0xF4])
    if isinstance(value, int):
        return head(0, value) if value >= 0 else head(1, -1 - value)
    if isinstance(value, bytes):
        return head(2, len(value)) + value
    if isinstance(value, str):
        raw = value.encode()
        return head(3, len(raw)) + raw
    if isinstance(value, dict):
        items = sorted(((cbor(k), cbor(v)) for k, v in value.items()), key=lambda kv: (len(kv[0]), kv[0]))
        return head(5, len(items)) + b"".join(k + v for k, v in items)
    raise TypeError(type(value))


class Passkey:
    def __init__(self, rp_id: str, origin: str):
        self.rp_id, self.origin = rp_id, origin
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.credential_id = secrets.token_bytes(16)
        self.user_handle = None
        self.count = 0

    def cose_key(self) -> bytes:
        n = self.key.public_key().public_numbers()
        return cbor({1: 2, 3: -7, -1: 1, -2: n.x.to_bytes(32, "big"), -3: n.y.to_bytes(32, "big")})

    def client_data(self, kind: str, challenge: str) -> bytes:
        return json.dumps({"type": kind, "challenge": challenge, "origin": self.origin, "crossOrigin": False}).encode()

    def registration(self, options: dict) -> dict:
        self.user_handle = unb64url(options["user"]["id"])
        client_data = self.client_data("webauthn.create", options["challenge"])
        auth_data = (hashlib.sha256(self.rp_id.encode()).digest() + bytes([0x45]) + struct.pack(">I", 0) + bytes(16)
                     + struct.pack(">H", len(self.credential_id)) + self.credential_id + self.cose_key())
        attestation = cbor({"fmt": "none", "attStmt": {}, "authData": auth_data})
        cid = b64url(self.credential_id)
        return {"id": cid, "rawId": cid, "type": "public-key", "clientExtensionResults": {},
                "response": {"clientDataJSON": b64url(client_data), "attestationObject": b64url(attestation),
                             "transports": ["internal"]}}

    def assertion(self, options: dict) -> dict:
        self.count += 1
        client_data = self.client_data("webauthn.get", options["challenge"])
        auth_data = hashlib.sha256(self.rp_id.encode()).digest() + bytes([0x05]) + struct.pack(">I", self.count)
        signature = self.key.sign(auth_data + hashlib.sha256(client_data).digest(), ec.ECDSA(hashes.SHA256()))
        cid = b64url(self.credential_id)
        return {"id": cid, "rawId": cid, "type": "public-key", "clientExtensionResults": {},
                "response": {"clientDataJSON": b64url(client_data), "authenticatorData": b64url(auth_data),
                             "signature": b64url(signature), "userHandle": b64url(self.user_handle)}}


def post(base: str, path: str, body: dict, headers=None) -> dict:
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.loads(reply.read())


def sign_up(base: str, rp_id: str, origin: str) -> tuple:
    """A new account with one passkey: (passkey, the registration's reply with its tokens)."""
    passkey = Passkey(rp_id, origin)
    name = "fuzz-" + secrets.token_hex(6)
    options = post(base, "/v1/passkeys/registration/options", {"username": name, "displayName": name})
    return passkey, post(base, "/v1/passkeys/registration/verify", passkey.registration(options))


if __name__ == "__main__":
    base = os.environ["LATCHKEY_URL"]
    _, reply = sign_up(base, "localhost", base.replace("127.0.0.1", "localhost"))
    print(reply["tokens"]["access_token"])
