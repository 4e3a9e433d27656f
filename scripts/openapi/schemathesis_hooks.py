"""Schemathesis hooks for scripts/openapi/schemathesis.sh: real credentials, so the run reaches
past the guards. Admin routes get the admin key; the user routes the access token of an account
this hook registers with a software passkey (softauthn.py), renewed every 20 s (the run logs it out,
revokes its passkey and with it its session, and access tokens live five minutes). Routes open to
anyone get no credentials, and so does registration options (its new-account form; with a passkey session it would need a step-up).

The user changes that need a step-up (SPEC "Assurance") get one: the hook asks for a passkey
step-up for exactly the action the generated request names (the credential id in its path, the
deviceId or email in its body, the vault's wraps) and sends it as `Latchkey-Step-Up`, so those handlers are fuzzed too."""
import os

import schemathesis

import softauthn

BASE = os.environ["LATCHKEY_URL"]
ORIGIN = os.environ["LATCHKEY_ORIGIN"]
ADMIN_KEY = os.environ["LATCHKEY_ADMIN_KEY"]


def action(case):
    """The step-up action this request's change needs, or None."""
    key = (case.method.upper(), case.operation.path)
    body = case.body if isinstance(case.body, dict) else {}
    if key == ("POST", "/v1/recovery-codes"):
        return {"type": "latchkey.recovery-codes.create"}
    if key == ("DELETE", "/v1/passkeys/{id}"):
        raw = (case.path_parameters or {}).get("id")
        return {"type": "latchkey.passkey.revoke", "credentialId": raw} if isinstance(raw, str) else None
    if key == ("POST", "/v1/device-keys") and isinstance(body.get("deviceId"), str):
        return {"type": "latchkey.device-key.enrol", "deviceId": body["deviceId"]}
    if key == ("PUT", "/v1/account/email") and isinstance(body.get("email"), str):
        return {"type": "latchkey.email.change", "email": body["email"]}
    if key == ("PUT", "/v1/vault/wrapped/{credentialId}"):
        raw = (case.path_parameters or {}).get("credentialId")
        return {"type": "latchkey.vault.wrap", "credentialId": raw} if isinstance(raw, str) else None
    if key == ("PUT", "/v1/vault/recovery"):
        return {"type": "latchkey.vault.recovery"}
    return None


def step_up(passkey, token, wanted):
    bearer = {"Authorization": f"Bearer {token}"}
    challenge = softauthn.post(BASE, "/v1/step-up/challenges", {"method": "passkey", "action": wanted}, headers=bearer)
    credential = passkey.assertion(challenge["publicKey"])
    verified = softauthn.post(BASE, "/v1/step-up/verify", {"challengeId": challenge["challengeId"], "credential": credential}, headers=bearer)
    return verified["access_token"]


@schemathesis.auth(refresh_interval=20)
class LatchkeyAuth:
    def get(self, case, context):
        # The run may have removed the origin from the allowlist (DELETE /admin/v1/origins/{origin}
        # with the admin key): put it back first, or the passkey's origin is refused.
        softauthn.post(BASE, "/admin/v1/origins", {"origin": ORIGIN}, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
        passkey, reply = softauthn.sign_up(BASE, "localhost", ORIGIN)
        return {"token": reply["tokens"]["access_token"], "passkey": passkey}

    def set(self, case, data, context):
        access = case.operation.definition.raw.get("x-latchkey-access")
        if access == "admin":
            token = ADMIN_KEY
        elif access in ("session", "step-up-token"):
            token = data["token"]
        else:
            return
        case.headers = case.headers or {}
        case.headers["Authorization"] = f"Bearer {token}"
        wanted = action(case) if access == "session" else None
        if wanted is not None:
            try:
                case.headers["Latchkey-Step-Up"] = step_up(data["passkey"], data["token"], wanted)
            except Exception:  # a session the run logged out, a revoked passkey: the request goes without
                pass
