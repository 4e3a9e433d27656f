CREATE TABLE users (
    id            text PRIMARY KEY,                -- random, base64url; never PII
    user_handle   bytea NOT NULL UNIQUE,           -- WebAuthn user.id: 32 random bytes
    username      text NOT NULL UNIQUE,
    display_name  text NOT NULL,
    external_id   text UNIQUE,                     -- an app backend's own id (enrolment tickets)
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE credentials (
    id                 bytea PRIMARY KEY,          -- credential id
    user_id            text NOT NULL REFERENCES users(id),
    public_key         bytea NOT NULL,             -- COSE_Key as the authenticator sent it
    alg                integer NOT NULL,
    sign_count         bigint NOT NULL,
    aaguid             bytea NOT NULL,
    transports         jsonb NOT NULL DEFAULT '[]',
    backup_eligible    boolean NOT NULL,
    backed_up          boolean NOT NULL,
    attestation_format text NOT NULL,
    attestation_type   text NOT NULL,
    name               text NOT NULL,
    flagged            boolean NOT NULL DEFAULT false,   -- possible clone (sign count went back)
    created_at         timestamptz NOT NULL DEFAULT now(),
    last_used_at       timestamptz,
    revoked_at         timestamptz
);
CREATE INDEX credentials_user ON credentials(user_id);

-- Challenges are stored by SHA-256 and consumed with one DELETE … RETURNING.
CREATE TABLE challenges (
    hash        bytea PRIMARY KEY,
    purpose     text NOT NULL,                     -- registration | authentication | step-up | device-key
    user_id     text,
    rp_id       text NOT NULL,
    policy      jsonb NOT NULL DEFAULT '{}',
    expires_at  timestamptz NOT NULL
);
CREATE INDEX challenges_expiry ON challenges(expires_at);

CREATE TABLE origins (
    origin      text PRIMARY KEY,
    source      text NOT NULL,                     -- config | admin | app
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE audit_log (
    id       bigserial PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT now(),
    actor    text NOT NULL,
    action   text NOT NULL,
    subject  text,
    detail   jsonb NOT NULL DEFAULT '{}'
);
-- Append-only: updates and deletes are refused by the database itself.
CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'audit_log is append-only'; END $$;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();

CREATE TABLE refresh_families (
    id          text PRIMARY KEY,
    user_id     text NOT NULL REFERENCES users(id),
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE TABLE refresh_tokens (
    hash        bytea PRIMARY KEY,
    family_id   text NOT NULL REFERENCES refresh_families(id),
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz
);
CREATE INDEX refresh_tokens_family ON refresh_tokens(family_id);

CREATE TABLE signing_keys (
    kid          text PRIMARY KEY,
    private_pem  text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    retired_at   timestamptz
);

CREATE TABLE enrolment_tickets (
    hash        bytea PRIMARY KEY,
    user_id     text NOT NULL REFERENCES users(id),
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz
);

CREATE TABLE server_secrets (
    name   text PRIMARY KEY,
    value  bytea NOT NULL
);
