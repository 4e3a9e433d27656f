-- Issue 10: the trust chain. Device keys are enrolled only behind a gate (a user-verified passkey
-- step-up for the enrolment action, or a device-key ticket an app backend obtained), and record what
-- their attestation proved, so a step-up token can say `hwk` only for a key proven to be in hardware.
ALTER TABLE enrolment_tickets ADD COLUMN purpose text NOT NULL DEFAULT 'passkey'
    CHECK (purpose IN ('passkey', 'device-key'));
ALTER TABLE device_keys
    ADD COLUMN attestation_format text NOT NULL DEFAULT 'none'
        CHECK (attestation_format IN ('none', 'android-key', 'apple-appattest')),
    ADD COLUMN security_level text NOT NULL DEFAULT 'unknown'
        CHECK (security_level IN ('strongbox', 'tee', 'secure-enclave', 'software', 'unknown')),
    ADD COLUMN app text,                     -- the declared app the attestation names (package or TEAMID.bundle.id)
    ADD COLUMN app_attest_key_id bytea,      -- App Attest: SHA-256 of the public key
    ADD COLUMN app_attest_counter bigint;    -- App Attest: the last assertion counter (compare-and-set)
