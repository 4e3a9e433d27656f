-- A passkey's last use, kept where a sign-in already writes.
--
-- Synced passkeys report a signature counter of 0 on every assertion (WebAuthn L3 §6.1.1), so for
-- them a sign-in changes nothing on the credential's row but its last use. Writing that row dirtied
-- a random page of `credentials` on every sign-in (a full-page image in the WAL after each
-- checkpoint). A sign-in that starts a session now leaves the row alone when nothing else changed:
-- the session carries the credential, the authentication's time, and `asserted` (it began with an
-- assertion of that passkey, not with its registration). A passkey's last use is the later of the
-- row's `last_used_at` and its newest live asserted session's `auth_time`.
ALTER TABLE refresh_families ADD COLUMN asserted boolean NOT NULL DEFAULT false;

CREATE FUNCTION credential_last_use(credential bytea, stored timestamptz) RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT GREATEST(stored, (SELECT max(f.auth_time) FROM refresh_families f
                             WHERE f.credential_id = credential AND f.revoked_at IS NULL AND f.asserted))
$$;

-- A session leaves that set when it is revoked (the partial index `refresh_families_credential`
-- covers live sessions only), so its authentication time is folded into the row first: the last
-- use never goes back. The fold writes only when it moves the time forward.
CREATE FUNCTION latchkey_fold_last_use() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE credentials SET last_used_at = NEW.auth_time
    WHERE id = NEW.credential_id AND (last_used_at IS NULL OR last_used_at < NEW.auth_time);
    RETURN NULL;
END $$;
CREATE TRIGGER refresh_families_last_use AFTER UPDATE OF revoked_at ON refresh_families
    FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL AND NEW.asserted)
    EXECUTE FUNCTION latchkey_fold_last_use();
