-- Issue 13: token signing keys are sealed at rest (AES-256-GCM under the key-encryption key from
-- LATCHKEY_KEY_ENCRYPTION_KEY). `sealed_key` is the versioned envelope the server writes
-- (version, KEK id, nonce, ciphertext, tag; the kid is bound as associated data). `private_pem`
-- remains only for rows from before, until the first start with a KEK seals them and clears it:
-- every row holds exactly one of the two.
ALTER TABLE signing_keys ADD COLUMN sealed_key bytea;
ALTER TABLE signing_keys ALTER COLUMN private_pem DROP NOT NULL;
ALTER TABLE signing_keys ADD CONSTRAINT signing_keys_sealed_or_legacy
    CHECK ((sealed_key IS NULL) <> (private_pem IS NULL));
