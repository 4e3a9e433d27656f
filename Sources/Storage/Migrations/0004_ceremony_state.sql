-- Issue 9: a challenge row carries the ceremony state the protocol core encoded when the ceremony
-- began (`state`, read back only by the core), instead of a policy JSON the service interpreted.
-- Rows of the old shape cannot be finished any more; a challenge lives 5 minutes, so drop them.
DELETE FROM challenges;
ALTER TABLE challenges DROP COLUMN policy;
ALTER TABLE challenges ADD COLUMN state bytea NOT NULL;
-- The ceremonies Storage.CeremonyKind names; anything else is a bug in the caller.
ALTER TABLE challenges ADD CONSTRAINT challenges_purpose
    CHECK (purpose IN ('registration', 'authentication', 'device-key', 'step-up'));
