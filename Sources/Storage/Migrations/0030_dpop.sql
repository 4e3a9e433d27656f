-- DPoP proofs seen (RFC 9449 §11.1): a proof's `jti` under its key is kept for 120 s (the whole span
-- in which its `iat` is acceptable), recorded in the request's one write, so a replay is refused on
-- every instance. `key` is SHA-256(jkt ‖ "." ‖ jti): one length whatever the client sent.
CREATE TABLE dpop_proofs (
    key        bytea PRIMARY KEY CONSTRAINT dpop_proofs_key CHECK (octet_length(key) = 32),
    expires_at timestamptz NOT NULL
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02);
CREATE INDEX dpop_proofs_expiry ON dpop_proofs(expires_at);

-- A client registered `--dpop required` (`dpop_bound_access_tokens`, RFC 9449 §5.2): its token
-- requests without a DPoP proof are refused (`invalid_dpop_proof`).
ALTER TABLE oauth_clients ADD COLUMN dpop_bound_access_tokens boolean NOT NULL DEFAULT false;
