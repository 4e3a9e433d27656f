"""Schemathesis hooks for scripts/openapi/schemathesis.sh: real credentials, so the run reaches
past the guards. Admin routes get the admin key; the user routes the access token of an account
this hook registers with a software passkey (softauthn.py), renewed every minute (the run may log it
out, and access tokens live five minutes). Routes open to anyone get no credentials, and so does
registration options (its new-account form; with a passkey session it would need a step-up)."""
import os

import schemathesis

import softauthn

BASE = os.environ["LATCHKEY_URL"]
ORIGIN = os.environ["LATCHKEY_ORIGIN"]
ADMIN_KEY = os.environ["LATCHKEY_ADMIN_KEY"]


@schemathesis.auth(refresh_interval=60)
class LatchkeyAuth:
    def get(self, case, context):
        # The run may have removed the origin from the allowlist (DELETE /admin/v1/origins/{origin}
        # with the admin key): put it back first, or the passkey's origin is refused.
        softauthn.post(BASE, "/admin/v1/origins", {"origin": ORIGIN}, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
        _, reply = softauthn.sign_up(BASE, "localhost", ORIGIN)
        return reply["tokens"]["access_token"]

    def set(self, case, data, context):
        access = case.operation.definition.raw.get("x-latchkey-access")
        if access == "admin":
            token = ADMIN_KEY
        elif access in ("session", "step-up-token"):
            token = data
        else:
            return
        case.headers = case.headers or {}
        case.headers["Authorization"] = f"Bearer {token}"
