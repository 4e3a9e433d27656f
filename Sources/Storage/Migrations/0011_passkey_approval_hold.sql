-- A passkey added from an email sign-in session (or from a session that such a passkey began)
-- signs in at once but approves step-ups only from `approves_from` (= registration time +
-- LATCHKEY_RECOVERY_DELAY): a mailbox alone must not reach the trust chain faster than recovery
-- does (SPEC "Recovery": slower and stricter than the usual way). NULL: no hold.
ALTER TABLE credentials ADD COLUMN approves_from timestamptz;
