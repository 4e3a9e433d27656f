-- Issue 24: one index entry less per login.
--
-- A live session's refresh family was indexed twice: by its owner (`refresh_families_user`: the
-- account's session list, signing out everywhere, recovery) and by the passkey that began it
-- (`refresh_families_credential`: the sessions a revoked passkey ends). Every query of the second
-- kind also names the owner (AccountRepository's passkey revocation, the cancel link's `ended`), so
-- one index on (user_id, credential_id) answers both kinds, the first by its leading column.
--
-- With many accounts each of the two was an entry on a random leaf page of a large index for every
-- login: a page dirtied, and after each checkpoint its full-page image in the WAL.
DROP INDEX refresh_families_credential;
DROP INDEX refresh_families_user;
CREATE INDEX refresh_families_user ON refresh_families(user_id, credential_id) WHERE revoked_at IS NULL;
