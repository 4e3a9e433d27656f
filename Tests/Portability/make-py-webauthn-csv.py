#!/usr/bin/env python3
"""Writes py-webauthn.csv: passkeys registered through py_webauthn (PyPI `webauthn` 3.0.1), in the
CSV import format (`username,userHandle,credentialId,publicKey,signCount,alg`).

The registrations are py_webauthn's own test payloads as /work/shared/vectors/registration.json
carries them (ids `py-…`); each is verified here by `webauthn.verify_registration_response`, and
the row holds what that verification returned: the credential id, the COSE public key and the
counter. One row gives the key as SPKI (with `alg`), converted here with `cryptography`.

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install webauthn==3.0.1
    /tmp/venv/bin/python Tests/Portability/make-py-webauthn-csv.py /path/to/vectors/registration.json > Tests/Portability/py-webauthn.csv
"""
import csv, hashlib, io, json, sys
from base64 import urlsafe_b64decode, urlsafe_b64encode

import webauthn
from webauthn.helpers import decode_credential_public_key
from webauthn.helpers.decode_credential_public_key import DecodedEC2PublicKey, DecodedOKPPublicKey
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives import serialization


def b64u(b: bytes) -> str:
    return urlsafe_b64encode(b).rstrip(b"=").decode()


def unb64u(s: str) -> bytes:
    return urlsafe_b64decode(s + "=" * (-len(s) % 4))


def spki(cose: bytes) -> bytes:
    key = decode_credential_public_key(cose)
    if isinstance(key, DecodedEC2PublicKey):
        curve = {1: ec.SECP256R1(), 2: ec.SECP384R1(), 3: ec.SECP521R1()}[int(key.crv)]
        public = ec.EllipticCurvePublicNumbers(int.from_bytes(key.x, "big"), int.from_bytes(key.y, "big"), curve).public_key()
    elif isinstance(key, DecodedOKPPublicKey):
        public = ed25519.Ed25519PublicKey.from_public_bytes(key.x)
    else:
        raise ValueError("no SPKI conversion for this key type")
    return public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def registered(vector: dict):
    origin = vector["expectedOrigin"]
    verified = webauthn.verify_registration_response(
        credential=vector["response"],
        expected_challenge=unb64u(vector["expectedChallenge"]),
        expected_rp_id=vector["rpId"],
        expected_origin=origin,
        require_user_verification=bool(vector.get("requireUserVerification", False)),
    )
    alg = decode_credential_public_key(verified.credential_public_key).alg
    return verified, int(alg)


def main() -> None:
    vectors = {v["id"]: v for v in json.load(open(sys.argv[1]))}
    # (username, vector id, key form): alice has two passkeys (two rows, one account).
    plan = [
        ("py-alice", "py-none-es256-localhost", "cose"),
        ("py-alice", "py-packed-yubikey-eddsa", "cose"),
        ("Smith, Carol", "py-fidou2f-yubikey-firefox", "spki"),
    ]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(["username", "userHandle", "credentialId", "publicKey", "signCount", "alg"])
    for username, vid, form in plan:
        verified, alg = registered(vectors[vid])
        handle = hashlib.sha256(("py-webauthn user " + username).encode()).digest()[:16]
        key = verified.credential_public_key if form == "cose" else spki(verified.credential_public_key)
        writer.writerow([username, b64u(handle), b64u(verified.credential_id), b64u(key), verified.sign_count,
                         alg if form == "spki" else ""])
        print(f"{vid}: verified by py_webauthn {webauthn.__version__}, alg {alg}, {form}", file=sys.stderr)
    sys.stdout.write(out.getvalue())


main()
