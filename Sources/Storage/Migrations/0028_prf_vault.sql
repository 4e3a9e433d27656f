-- A vault the server cannot read (PRF): the passkey's PRF support, and what the vault stores —
-- ciphertext and a public salt only. The browser derives each passkey's key-wrapping key from the
-- PRF output and wraps the account's data key under it; Latchkey keeps the wrapped keys and never
-- sees the PRF output, the data key or the vault's recovery key.

-- The registration's client extension results said `prf.enabled` (the authenticator can evaluate PRF).
ALTER TABLE credentials ADD COLUMN prf_enabled boolean NOT NULL DEFAULT false;

-- One vault per account: the PRF salt the browser chose (32 bytes, public, set once) and the data
-- key wrapped under the vault's own recovery key (12-byte IV ‖ 32-byte ciphertext ‖ 16-byte tag).
CREATE TABLE vaults (
    user_id              text PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    prf_salt             bytea NOT NULL CONSTRAINT vaults_prf_salt CHECK (octet_length(prf_salt) = 32),
    recovery_wrapped_key bytea CONSTRAINT vaults_recovery_wrapped_key CHECK (octet_length(recovery_wrapped_key) = 60),
    created_at           timestamptz NOT NULL DEFAULT now()
);

-- The data key wrapped for one live passkey of the account (same layout, AES-256-GCM).
CREATE TABLE vault_wrapped_keys (
    credential_id bytea PRIMARY KEY REFERENCES credentials(id) ON DELETE CASCADE,
    user_id       text NOT NULL REFERENCES vaults(user_id) ON DELETE CASCADE,
    wrapped_key   bytea NOT NULL CONSTRAINT vault_wrapped_keys_wrapped_key CHECK (octet_length(wrapped_key) = 60),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX vault_wrapped_keys_user ON vault_wrapped_keys(user_id);

-- A revoked passkey's wrapped key dies with it, in the revoking statement, whoever revokes it (its
-- owner, an admin, a held passkey's cancel link, a recovery under LATCHKEY_RECOVERY_REVOKES=all).
CREATE FUNCTION latchkey_credential_revoked_vault_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN DELETE FROM vault_wrapped_keys WHERE credential_id = NEW.id; RETURN NULL; END $$;
CREATE TRIGGER credentials_vault_keys AFTER UPDATE OF revoked_at ON credentials
    FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
    EXECUTE FUNCTION latchkey_credential_revoked_vault_key();
