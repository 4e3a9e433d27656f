-- Issue 32: the OpenID Provider under the house's rules (SPEC "OpenID Provider").
--
-- 1. A grant lives and dies with what approved it ("Grants live and die with what approved them"):
--    every code and every grant remembers the approving session (a refresh family) and the approving
--    passkey (base64url credential id, as step_up_receipts.key_id) or device key. A *security*
--    revocation of any of them revokes, by the triggers below and so in the revoking transaction,
--    every 'oauth' family they approved; the NOTIFY trigger of migration 5 then tells every instance.
--    A logout ends its session alone: `ended_by = 'logout'` marks it, and the cascade skips it.
ALTER TABLE oauth_codes
    ADD COLUMN approving_family     text,
    ADD COLUMN approving_credential text,
    ADD COLUMN approving_device_key text;
ALTER TABLE oauth_grants
    ADD COLUMN approving_family     text,
    ADD COLUMN approving_credential text,
    ADD COLUMN approving_device_key text;
CREATE INDEX oauth_grants_approving_family ON oauth_grants(approving_family) WHERE approving_family IS NOT NULL;
CREATE INDEX oauth_grants_approving_credential ON oauth_grants(approving_credential) WHERE approving_credential IS NOT NULL;
CREATE INDEX oauth_grants_approving_device_key ON oauth_grants(approving_device_key) WHERE approving_device_key IS NOT NULL;

ALTER TABLE refresh_families
    ADD COLUMN ended_by text CONSTRAINT refresh_families_ended_by CHECK (ended_by IN ('logout')),
    -- The OP session of the /authorize page's cookie (SPEC "Who may approve"): a passkey session
    -- that is never a bearer token; GET /v1/sessions lists it with "browser": true.
    ADD COLUMN browser boolean NOT NULL DEFAULT false;

CREATE FUNCTION latchkey_revoke_oauth_grants(approver_kind text, approver text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE refresh_families SET revoked_at = now()
    WHERE revoked_at IS NULL AND id IN (
        SELECT family_id FROM oauth_grants
        WHERE (approver_kind = 'family' AND approving_family = approver)
           OR (approver_kind = 'credential' AND approving_credential = approver)
           OR (approver_kind = 'device_key' AND approving_device_key = approver));
END $$;

CREATE FUNCTION latchkey_session_revoked_grants() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM latchkey_revoke_oauth_grants('family', NEW.id); RETURN NULL; END $$;
CREATE TRIGGER refresh_families_grants AFTER UPDATE OF revoked_at ON refresh_families
    FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL AND NEW.ended_by IS NULL)
    EXECUTE FUNCTION latchkey_session_revoked_grants();

-- The credential id as step-up receipts and grants spell it: base64url without padding.
CREATE FUNCTION latchkey_base64url(b bytea) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT translate(rtrim(replace(encode(b, 'base64'), E'\n', ''), '='), '+/', '-_')
$$;
CREATE FUNCTION latchkey_from_base64url(t text) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
    SELECT decode(translate(t, '-_', '+/') || repeat('=', (4 - length(t) % 4) % 4), 'base64')
$$;
CREATE FUNCTION latchkey_credential_revoked_grants() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM latchkey_revoke_oauth_grants('credential', latchkey_base64url(NEW.id)); RETURN NULL; END $$;
CREATE TRIGGER credentials_grants AFTER UPDATE OF revoked_at ON credentials
    FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
    EXECUTE FUNCTION latchkey_credential_revoked_grants();

CREATE FUNCTION latchkey_device_key_revoked_grants() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM latchkey_revoke_oauth_grants('device_key', NEW.id); RETURN NULL; END $$;
CREATE TRIGGER device_keys_grants AFTER UPDATE OF revoked_at ON device_keys
    FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
    EXECUTE FUNCTION latchkey_device_key_revoked_grants();

-- 2. The OP browser session's cookie is the browser family's one refresh token (hashed; it lives
--    LATCHKEY_OP_SESSION_TTL): never rotated, never accepted at /v1/token or /oauth2/token
--    (SessionRepository.rotate skips browser families), never a bearer token.

-- 3. Remembered consents (SPEC "Consents"): what the account approved for a client, for prompt=none.
CREATE TABLE oauth_consents (
    user_id    text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    client_id  text NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
    scopes     jsonb NOT NULL,
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, client_id)
);

-- 4. A client uses only the method it was registered with (SPEC "Client authentication"). A client
--    with a jwks_uri authenticates with private_key_jwt only: the secret it was once given stops working.
ALTER TABLE oauth_clients ADD COLUMN auth_method text
    CONSTRAINT oauth_clients_auth_method CHECK (auth_method IN ('client_secret_basic', 'client_secret_post', 'private_key_jwt', 'none'));
UPDATE oauth_clients SET auth_method = CASE WHEN secret_hash IS NULL AND jwks_uri IS NULL THEN 'none'
                                            WHEN jwks_uri IS NOT NULL THEN 'private_key_jwt'
                                            ELSE 'client_secret_basic' END;
UPDATE oauth_clients SET secret_hash = NULL WHERE auth_method = 'private_key_jwt';
ALTER TABLE oauth_clients ALTER COLUMN auth_method SET NOT NULL;

-- 5. `--pkce optional` (SPEC "Authorization"): a confidential client may go without PKCE, and then
--    sends a nonce; every other client keeps S256.
ALTER TABLE oauth_clients ADD COLUMN pkce_required boolean NOT NULL DEFAULT true;

-- 6. The OpenID EAP `phrh` (SPEC "Which authentication the tokens describe"): a passkey whose
--    registration attestation was verified to a trust anchor and whose metadata or attestation
--    format proves a hardware key. Decided once, at registration; passkeys from before are `phr`.
ALTER TABLE credentials ADD COLUMN hardware_bound boolean NOT NULL DEFAULT false;

-- 7. Pending authorization requests are bounded (SPEC "Limits"): per client address per minute and
--    per client in all. An identical request gets the same (deterministic) id, so the row is reused.
ALTER TABLE oauth_requests ADD COLUMN client_address text;
CREATE INDEX oauth_requests_address ON oauth_requests(client_address, created_at) WHERE client_address IS NOT NULL;
CREATE INDEX oauth_requests_pending ON oauth_requests(client_id) WHERE used_at IS NULL;

-- 8. Clients are cached by every instance (they are looked up by every OAuth request, CORS and
--    discovery); a change anywhere reaches the others on the config change feed of migration 2.
CREATE TRIGGER oauth_clients_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON oauth_clients
    FOR EACH STATEMENT EXECUTE FUNCTION latchkey_config_changed();
