#!/usr/bin/env python3
"""A passkey sign-up and sign-in against an installed Latchkey (the .deb on this machine, the container
image): the software passkey of the OIDC suite (Tests/OIDC/softauthn.py), the origin the server's
allowlist holds, plain HTTP to its listener.

Usage: signup.py BASE_URL RP_ID ORIGIN   (exit 0 when both ceremonies succeed)."""
import json
import os
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "OIDC"))
from softauthn import SoftPasskey  # noqa: E402


def api(base, path, body):
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=20) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def main():
    base, rp_id, origin = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]
    passkey = SoftPasskey(rp_id, origin)
    username = "vm-" + os.urandom(4).hex()
    st, options = api(base, "/v1/passkeys/registration/options", {"username": username, "displayName": "VM check"})
    if st != 200:
        sys.exit(f"FAIL sign-up options: {st} {options}")
    st, done = api(base, "/v1/passkeys/registration/verify", passkey.create(options))
    if st != 201 or not done.get("tokens", {}).get("access_token"):
        sys.exit(f"FAIL sign-up verify: {st} {done}")
    st, options = api(base, "/v1/passkeys/authentication/options", {})
    if st != 200:
        sys.exit(f"FAIL sign-in options: {st} {options}")
    st, signed = api(base, "/v1/passkeys/authentication/verify", passkey.get(options))
    if st != 200 or signed.get("user", {}).get("id") != done["user"]["id"]:
        sys.exit(f"FAIL sign-in verify: {st} {signed}")
    print(f"ok   passkey sign-up and sign-in as {username} at {base} (rpId {rp_id})")


if __name__ == "__main__":
    main()
