-- A first-party session bound to a DPoP key (SPEC "Sender-constrained tokens"): the RFC 7638
-- thumbprint of the key whose proof came with the passkey verify, `POST /v1/email/verify` or the
-- first `/v1/token` refresh that carried one. Its access tokens carry it as `cnf.jkt`, and its
-- refresh tokens work only with a proof by that key. NULL: a Bearer session.
ALTER TABLE refresh_families ADD COLUMN dpop_jkt text CONSTRAINT refresh_families_dpop_jkt CHECK (octet_length(dpop_jkt) = 43);
