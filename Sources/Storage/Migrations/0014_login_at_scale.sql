-- Issue 24: what the login path writes should not grow with the number of accounts.
--
-- 1. Every login updates its credential (counter, backup state, last use). None of those columns
--    is indexed, so the update is HOT (no index entry written, the tuple stays on its page) when
--    the page has room; at fillfactor 100 a COPY-loaded or long-lived table has none, and every
--    first login of a passkey wrote two index entries on random pages of a large index (and their
--    full-page images after each checkpoint). New pages keep 10 % free; existing rows move into
--    room on their next non-HOT update (or all at once with VACUUM FULL credentials).
ALTER TABLE credentials SET (fillfactor = 90);

-- 2. A challenge lives minutes and is deleted by the login that uses it: the table's live rows are
--    few, its dead rows many. Vacuum it after a fixed number of dead rows, not a fraction of a tiny
--    table, and without the cost delay, so it stays a few pages instead of bloating between runs.
--    The expiry index is dropped: it doubled the index writes of every options request, and the
--    only reader is ChallengeRepository.purgeExpired, now and then, over a table of live rows only.
ALTER TABLE challenges SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
                            autovacuum_vacuum_cost_delay = 0, autovacuum_vacuum_insert_scale_factor = 0,
                            autovacuum_vacuum_insert_threshold = 20000);
DROP INDEX challenges_expiry;

-- 3. Most audit lines are about their own actor (a login: actor = subject = the user): the subject
--    index holds only the lines whose subject is someone else, and AuditRepository.entries(user:)
--    asks `actor = u OR (subject = u AND subject <> actor)`, the same rows as before. One index
--    write less per login on an index as large as the log.
DROP INDEX audit_log_subject;
CREATE INDEX audit_log_subject ON audit_log(subject, id DESC) WHERE subject <> actor;
