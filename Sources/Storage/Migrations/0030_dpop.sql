-- DPoP proofs seen (RFC 9449 §11.1): a proof's `jti` under its key is kept for 120 s (the whole span
-- in which its `iat` is acceptable), recorded in the request's one write, so a replay is refused on
-- every instance. `key` is SHA-256(jkt ‖ "." ‖ jti): one length whatever the client sent.
CREATE TABLE dpop_proofs (
    key        bytea PRIMARY KEY CONSTRAINT dpop_proofs_key CHECK (octet_length(key) = 32),
    expires_at timestamptz NOT NULL
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02);
CREATE INDEX dpop_proofs_expiry ON dpop_proofs(expires_at);
