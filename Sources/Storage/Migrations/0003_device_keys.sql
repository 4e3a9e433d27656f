CREATE TABLE device_keys (
    id            text PRIMARY KEY,                -- random, base64url
    user_id       text NOT NULL REFERENCES users(id),
    device_id     text NOT NULL,                   -- the app's own id for the device
    platform      text NOT NULL CHECK (platform IN ('ios', 'android')),
    name          text NOT NULL,
    public_key    bytea NOT NULL,                  -- SubjectPublicKeyInfo DER, P-256
    attested      boolean NOT NULL DEFAULT false,
    attestation   jsonb,                           -- what the attestation check found
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz,
    replaced_by   text
);
-- One live key per (user, device): re-enrolment revokes the old one in the same transaction.
CREATE UNIQUE INDEX device_keys_live ON device_keys(user_id, device_id) WHERE revoked_at IS NULL;
CREATE INDEX device_keys_user ON device_keys(user_id);

-- Every step-up approval, with what is needed to re-verify it offline.
CREATE TABLE step_up_receipts (
    id                  text PRIMARY KEY,
    user_id             text NOT NULL REFERENCES users(id),
    method              text NOT NULL CHECK (method IN ('device-key', 'passkey')),
    key_id              text NOT NULL,             -- device key id, or passkey credential id (base64url)
    public_key          bytea NOT NULL,            -- SPKI DER of the key that signed
    challenge           bytea NOT NULL,            -- the exact step-up challenge bytes
    signed_data         bytea NOT NULL,            -- the exact bytes the signature covers
    signature           bytea NOT NULL,            -- DER ECDSA
    action              text NOT NULL,             -- RFC 8785 canonical JSON, byte-exact
    action_hash         bytea NOT NULL,
    key_binding         text NOT NULL,             -- what the challenge's key hash covers (base64url)
    client_data_json    bytea,                     -- passkey method: the assertion's clientDataJSON
    authenticator_data  bytea,                     -- passkey method: the assertion's authenticatorData
    token_jti           text NOT NULL UNIQUE,
    token_expires_at    timestamptz NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    consumed_at         timestamptz
);
CREATE INDEX step_up_receipts_user ON step_up_receipts(user_id);
