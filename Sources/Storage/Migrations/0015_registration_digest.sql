-- Issue 23: a registration whose COMMIT happened but whose answer was lost (a failover, a
-- synchronous-replication wait cancelled) is retried by the client with the same response. The
-- challenge is used up by then; this digest (SHA-256 of the registration's clientDataJSON, which
-- holds that challenge) lets the retry be recognised and answered 409 credential_exists naming
-- the stored passkey, instead of challenge_invalid. NULL for passkeys registered before.
ALTER TABLE credentials ADD COLUMN registration_digest bytea;
