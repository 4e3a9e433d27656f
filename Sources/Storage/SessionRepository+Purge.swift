import PostgreSQL

extension SessionRepository {
    /// How long an ended session is kept: revoked, or its last refresh token (an OP browser
    /// session's cookie) expired. The audit log keeps its history after that.
    public static let endedRetentionSeconds = 30 * 86_400

    /// Deletes up to `limit` sessions that ended more than `retention` seconds ago, with their
    /// refresh tokens (their grants go with them, ON DELETE CASCADE), and returns how many went.
    /// Without it every sign-in left two rows behind for good. A passkey's last use is read from
    /// its unrevoked sessions (migration 0024), so an expired one's authentication time is folded
    /// into the passkey's row first, as revoking it would. Sessions another transaction holds are
    /// skipped until the next pass.
    public func purgeEnded(olderThan retention: Int = SessionRepository.endedRetentionSeconds, limit: Int = 1000) throws(StorageError) -> Int {
        let cutoff: SQL = "now() - make_interval(secs => \(Int64(retention)))"
        return Int(try pool.run { c in
            try c.query("""
                WITH dead AS (
                    SELECT f.id, f.credential_id, f.auth_time, f.asserted AND f.revoked_at IS NULL AS unfolded
                    FROM refresh_families f
                    WHERE f.revoked_at < \(fragment: cutoff)
                       OR (f.revoked_at IS NULL AND f.last_used_at < \(fragment: cutoff)
                           AND NOT EXISTS (SELECT 1 FROM refresh_tokens t WHERE t.family_id = f.id AND t.expires_at > \(fragment: cutoff)))
                    LIMIT \(Int64(limit)) FOR UPDATE OF f SKIP LOCKED),
                folded AS (
                    UPDATE credentials c SET last_used_at = d.at
                    FROM (SELECT credential_id, max(auth_time) AS at FROM dead WHERE unfolded GROUP BY credential_id) d
                    WHERE c.id = d.credential_id AND (c.last_used_at IS NULL OR c.last_used_at < d.at) RETURNING 1),
                tokens AS (DELETE FROM refresh_tokens WHERE family_id IN (SELECT id FROM dead) RETURNING 1),
                gone AS (DELETE FROM refresh_families WHERE id IN (SELECT id FROM dead) RETURNING 1)
                SELECT count(*)::int8 AS n FROM gone
                """)[0].int64("n")
        })
    }
}
