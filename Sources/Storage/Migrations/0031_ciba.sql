-- CIBA (OpenID Connect Client-Initiated Backchannel Authentication Core 1.0): a client's registration
-- for the grant, its backchannel requests from request to tokens, and the unknown-user answers a
-- client's hourly limit counts.

-- NULL: the client is not registered for CIBA; else {"mode":"poll"|"ping","endpoint":…|null,"approver":…}.
ALTER TABLE oauth_clients ADD COLUMN ciba jsonb;

CREATE TABLE ciba_requests (
    id                    text PRIMARY KEY,                  -- auth_req_id (the client also authenticates to poll)
    client_id             text NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
    user_id               text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    scope                 text NOT NULL,
    binding_message       text,
    authorization_details jsonb,
    acr_values            text,
    notification_token    text,                              -- ping mode: the Bearer the client's endpoint expects
    status                text NOT NULL DEFAULT 'pending'
                          CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'issued')),
    interval_seconds      integer NOT NULL,
    polls                 integer NOT NULL DEFAULT 0,        -- compare-and-set of a poll's write
    last_poll_at          timestamptz,
    created_at            timestamptz NOT NULL DEFAULT now(),
    expires_at            timestamptz NOT NULL,
    decided_at            timestamptz,
    grant_data            jsonb,                             -- what an approval granted
    approving_family      text,
    approving_credential  text,
    approving_device_key  text,
    family_id             text                               -- the oauth session the tokens began
);
CREATE INDEX ciba_requests_user ON ciba_requests(user_id, status, created_at);
CREATE INDEX ciba_requests_client_user ON ciba_requests(client_id, user_id, created_at);
CREATE INDEX ciba_requests_expires ON ciba_requests(expires_at);

CREATE TABLE ciba_unknown_users (
    client_id text NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
    at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ciba_unknown_users_client ON ciba_unknown_users(client_id, at);
