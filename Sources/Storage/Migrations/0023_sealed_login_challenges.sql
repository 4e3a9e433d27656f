-- Issue 34: a login that commits once. Authentication options write nothing: the ceremony state is
-- sealed into the challenge (SPEC "Rules that must hold" → Challenges), so the only row a challenge
-- leaves is its use, written by the statement that ends the ceremony.
--
-- 1. The ids of the sealed challenges verified so far, each until its expiry: the primary key is
--    the single use (an INSERT … ON CONFLICT DO NOTHING that finds the id is a second verify). Rows
--    come in expiry order, so a BRIN index (a few pages, next to no WAL per insert) serves the sweep
--    (ChallengeRepository.purgeExpired); vacuumed like `challenges` (migration 14): many short-lived rows.
CREATE TABLE used_challenges (
    id         bytea PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX used_challenges_expiry ON used_challenges USING brin (expires_at);
ALTER TABLE used_challenges SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
                                 autovacuum_vacuum_cost_delay = 0, autovacuum_vacuum_insert_scale_factor = 0,
                                 autovacuum_vacuum_insert_threshold = 20000);

-- 2. Ceremony-sealing keys a KEK rotation replaced (`latchkey keys rotate --new-key`): the previous
--    key, sealed under the new KEK, still opens challenges sealed before the instances restarted,
--    for LATCHKEY_CHALLENGE_TTL after `retired_at`.
CREATE TABLE ceremony_seal_keys (
    key_id     bytea PRIMARY KEY,                -- the id sealed challenges carry in their header
    sealed_key bytea NOT NULL,                   -- SealedSecret envelope under the KEK that replaced it
    retired_at timestamptz NOT NULL DEFAULT now()
);
