-- SPEC "Assurance": the owner hears of a recovery or a held passkey and can undo it without a
-- session, from the link in the mail: `POST /v1/recovery/cancel {"cancelToken"}`. Each token
-- (stored as its SHA-256) names exactly one recovery or one held passkey, is single use, and works
-- while that recovery or that hold lasts.
CREATE TABLE cancel_tokens (
    hash          bytea PRIMARY KEY,
    user_id       text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    recovery_id   text REFERENCES recoveries(id) ON DELETE CASCADE,
    credential_id bytea,
    expires_at    timestamptz NOT NULL,
    used_at       timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CHECK ((recovery_id IS NULL) <> (credential_id IS NULL))
);
CREATE INDEX cancel_tokens_expires ON cancel_tokens(expires_at);
