-- Issue 10 point 6: a session (refresh-token family) is bound to how it began, keeps the time of
-- that authentication (a refresh never moves it), and its revocation reaches every instance at once.
ALTER TABLE refresh_families
    ADD COLUMN method        text,
    ADD COLUMN credential_id bytea,                -- the passkey that began it (method 'passkey')
    ADD COLUMN auth_time     timestamptz,          -- the authentication that began it
    ADD COLUMN last_used_at  timestamptz;          -- start, then every refresh
-- Sessions from before this migration all began with a passkey ceremony; which one is unknown.
UPDATE refresh_families SET method = 'passkey', auth_time = created_at, last_used_at = created_at;
ALTER TABLE refresh_families
    ALTER COLUMN method SET NOT NULL,
    ALTER COLUMN auth_time SET NOT NULL,
    ALTER COLUMN last_used_at SET NOT NULL,
    ALTER COLUMN last_used_at SET DEFAULT now(),
    ADD CONSTRAINT refresh_families_method CHECK (method IN ('passkey', 'ticket', 'email', 'recovery'));

-- Revoking a passkey revokes the live sessions it began (AccountRepository.revoke).
CREATE INDEX refresh_families_credential ON refresh_families(credential_id) WHERE revoked_at IS NULL;
-- GET /v1/sessions: the user's live sessions.
CREATE INDEX refresh_families_user ON refresh_families(user_id) WHERE revoked_at IS NULL;
-- The revocation poll: `WHERE revoked_at > $since` (SessionRepository.revoked(since:)).
CREATE INDEX refresh_families_revoked ON refresh_families(revoked_at) WHERE revoked_at IS NOT NULL;

-- Every revocation notifies every instance on channel `latchkey_sessions` (delivered at commit),
-- payload = the session id, so their RevokedSessions sets refuse its access tokens at once.
CREATE FUNCTION latchkey_session_revoked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_notify('latchkey_sessions', NEW.id); RETURN NULL; END $$;
CREATE TRIGGER refresh_families_revoked AFTER UPDATE OF revoked_at ON refresh_families
    FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
    EXECUTE FUNCTION latchkey_session_revoked();
