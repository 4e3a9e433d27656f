-- Issue 19: the number (`no`) of the last FIDO MDS3 BLOB an instance accepted, per BLOB signing
-- root (SHA-256 of the trust anchor's DER), so that no instance goes back to an older list after a
-- restart or on another host (SPEC "Authenticator metadata": no rollback). Only ever raised:
-- MetadataStateRepository.accept writes GREATEST(stored, offered) in one statement.
-- (Version 12 is another branch's.)
CREATE TABLE metadata_state (
    root_sha256 bytea PRIMARY KEY CHECK (length(root_sha256) = 32),
    blob_number bigint NOT NULL CHECK (blob_number >= 0),
    accepted_at timestamptz NOT NULL DEFAULT now()
);
