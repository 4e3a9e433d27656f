-- Issue 21: Latchkey as an OpenID Provider (SPEC "OpenID Provider"). Every piece of state lives
-- here, so any instance finishes what another began: clients (secrets hashed), authorization
-- requests and pushed requests (ids hashed, 10 minutes / 60 s, used once), codes (hashed, 60 s,
-- single use, remembering the session their first use issued so a replay revokes it), the grant
-- behind each OAuth session (a refresh family of method 'oauth'), and the `jti`s of client assertions.
CREATE TABLE oauth_clients (
    id                          text PRIMARY KEY,
    name                        text NOT NULL,
    secret_hash                 bytea,                          -- NULL: a public client (auth method none)
    redirect_uris               jsonb NOT NULL,
    post_logout_redirect_uris   jsonb NOT NULL DEFAULT '[]',
    jwks_uri                    text,
    authorization_details_types jsonb NOT NULL DEFAULT '[]',
    id_token_alg                text NOT NULL DEFAULT 'ES256' CHECK (id_token_alg IN ('ES256', 'RS256')),
    created_at                  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE oauth_requests (
    hash       bytea PRIMARY KEY,                               -- SHA-256 of the request id / request_uri
    kind       text NOT NULL CHECK (kind IN ('authorize', 'par')),
    client_id  text NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
    params     jsonb NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX oauth_requests_expires ON oauth_requests(expires_at);

CREATE TABLE oauth_codes (
    hash        bytea PRIMARY KEY,                              -- SHA-256 of the code
    client_id   text NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
    user_id     text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    grant_data  jsonb NOT NULL,
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz,
    replayed_at timestamptz,
    family_id   text                                            -- the session the first use issued
);
CREATE INDEX oauth_codes_expires ON oauth_codes(expires_at);

ALTER TABLE refresh_families DROP CONSTRAINT refresh_families_method;
ALTER TABLE refresh_families ADD CONSTRAINT refresh_families_method
    CHECK (method IN ('passkey', 'ticket', 'email', 'recovery', 'oauth'));

CREATE TABLE oauth_grants (
    family_id  text PRIMARY KEY REFERENCES refresh_families(id) ON DELETE CASCADE,
    client_id  text NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
    grant_data jsonb NOT NULL
);
CREATE INDEX oauth_grants_client ON oauth_grants(client_id);

CREATE TABLE oauth_assertion_jtis (
    client_id  text NOT NULL,
    jti_hash   bytea NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (client_id, jti_hash)
);
