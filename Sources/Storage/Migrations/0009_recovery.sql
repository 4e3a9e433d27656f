-- Issue 11: verified email, one-time codes, per-account limits, recovery codes, recoveries and mail.
-- (Numbered 9 before 0010 landed; the migrator applies any missing version, so a database already at 10 gets it too.)

-- One address per account, stored normalised (trimmed, domain lower-cased). A verified address
-- belongs to one account only.
CREATE TABLE account_emails (
    user_id     text PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    email       text NOT NULL,
    verified_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX account_emails_email ON account_emails(email);

-- Mailed one-time codes (email verification, email sign-in, recovery). `code_hash` is an HMAC of
-- the id and the code under a deployment secret (never the code); a challenge for an address or
-- username nobody has gets a random hash and no mail, so it answers like any other.
CREATE TABLE otp_challenges (
    id           text PRIMARY KEY,
    purpose      text NOT NULL CHECK (purpose IN ('email-verify', 'email-sign-in', 'recovery')),
    user_id      text REFERENCES users(id) ON DELETE CASCADE,
    email        text,                         -- email-verify: the address being verified
    code_hash    bytea NOT NULL,
    attempts     integer NOT NULL DEFAULT 0,   -- submissions counted (atomically) before comparing
    max_attempts integer NOT NULL,
    expires_at   timestamptz NOT NULL,
    used_at      timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX otp_challenges_expires ON otp_challenges(expires_at);

-- Per-account limits that hold across instances: one fixed window per key (SHA-256 of the limit's
-- name and the submitted username or address, whether or not anyone has it), bumped atomically.
CREATE TABLE account_limits (
    key          bytea PRIMARY KEY,
    window_start timestamptz NOT NULL,
    count        integer NOT NULL
);

-- Recovery codes: HMACs under a deployment secret, each single use; a new set replaces the old.
CREATE TABLE recovery_codes (
    user_id    text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    code_hash  bytea NOT NULL,
    used_at    timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, code_hash)
);

-- A recovery: its token (hashed) only enrols a passkey, not before `not_before`, until `expires_at`.
CREATE TABLE recoveries (
    id          text PRIMARY KEY,
    user_id     text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    method      text NOT NULL CHECK (method IN ('email', 'recovery-code')),
    token_hash  bytea NOT NULL UNIQUE,
    not_before  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    status      text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'completed', 'cancelled')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);
CREATE INDEX recoveries_user ON recoveries(user_id) WHERE status = 'pending';

-- Mail waiting to go out: one outbox delivery (channel 'mail', target = id) per message, written in
-- the transaction that makes the message. The message (RFC 5322) is cleared once sent.
CREATE TABLE mail_messages (
    id         text PRIMARY KEY,
    recipient  text NOT NULL,
    message    bytea,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz
);
