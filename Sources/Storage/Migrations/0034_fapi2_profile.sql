-- A client registered `--profile fapi2` (SPEC "FAPI 2.0 Security Profile"): PAR, PKCE S256,
-- private_key_jwt (ES256/PS256, `aud` the issuer), DPoP with server nonces, and refresh tokens that do
-- not rotate. NULL: no profile.
ALTER TABLE oauth_clients ADD COLUMN profile text CHECK (profile IN ('fapi2'));
