import PostgreSQL

/// What dies with a revoked row, declared once: the one sanctioned crossing between features'
/// tables (ARCHITECTURE.md "Revocation cascades"). Each cascade is either a trigger on the revoked
/// row (migration 0020: a refresh family, a passkey or a device key revoked → every `oauth` grant it
/// approved, in the revoking transaction; migration 0028: a passkey revoked → the vault's data key
/// wrapped for it, in the revoking statement) or a clause built here that every statement revoking that
/// kind of row includes, because its rows feed that statement's events and answer.
public enum RevocationCascade {
    /// A passkey revoked → the sessions it began (their refresh families), as a CTE named `ended`
    /// returning `(id, user_id)`, from a CTE `revoked` of revoked credential rows `(id, user_id)`.
    /// Every statement that revokes a passkey — its owner or an admin, and the cancel link of a held
    /// one — ends its sessions with this clause (a recovery's completion ends every session of the
    /// account instead). The families' own trigger then revokes the grants they approved.
    static func sessionsOfPasskeys(from revoked: String) -> (name: String, sql: SQL) {
        ("ended", """
            UPDATE refresh_families f SET revoked_at = now() FROM \(unsafeRaw: revoked) r
            WHERE f.credential_id = r.id AND f.user_id = r.user_id AND f.revoked_at IS NULL
            RETURNING f.id, f.user_id
            """)
    }

    /// The key class of the lock below (ASCII "LKSS"), in the two-key space of advisory locks, apart
    /// from the single-key locks of the migrator, the apps and the transparency log.
    public static let accountSessionsLock: Int32 = 0x4C4B_5353

    /// The account's sessions lock on the account `user` names (an SQL expression of its id):
    /// `pg_advisory_xact_lock[_shared]` in the class above, strict (a null id takes no lock).
    private static func sessionsLock(shared: Bool, user: SQL) -> SQL {
        "pg_advisory_xact_lock\(unsafeRaw: shared ? "_shared" : "")(\(unsafeRaw: String(accountSessionsLock)), hashtext(\(fragment: user)))"
    }

    /// A login holds its account's sessions lock shared from its read to its commit: this column
    /// of the read takes it (strict: no account found, no lock).
    static func startingSession(userColumn: String) -> SQL {
        "\(fragment: sessionsLock(shared: true, user: "\(unsafeRaw: userColumn)"))::text AS sessions_lock"
    }

    /// `startingSession` as a statement of its own, before a passkey is added to an existing account.
    static func joiningAccount(userId: String) -> SQL {
        "SELECT \(fragment: sessionsLock(shared: true, user: "\(userId)::text"))"
    }

    /// A statement that ends an account's sessions by what began them — its passkey revoked, a
    /// recovery completed, every session ended — is preceded in its transaction (one pipeline) by
    /// this one, which takes the account's sessions lock exclusively. A login in flight holds it
    /// shared until its commit, so the ending statement's snapshot, taken after, sees that login's
    /// session and ends it; a login whose read waited behind it finds the passkey revoked in its
    /// own statement. Without it, a login whose statement ran beside the revocation committed a
    /// session that no revocation had seen. Advisory and transaction-scoped: no row is locked, so
    /// a login writes nothing to the passkey's page for it, and a transaction pooler may hand the
    /// connection on after the commit.
    static func endingSessions(userId: String) -> SQL {
        "SELECT \(fragment: sessionsLock(shared: false, user: "\(userId)::text"))"
    }

    /// `endingSessions` for the account `owner` names (a query of one `user_id` column, no row: no lock).
    static func endingSessions(ownerOf owner: SQL) -> SQL {
        "SELECT \(fragment: sessionsLock(shared: false, user: "o.user_id")) FROM (\(fragment: owner)) o"
    }
}
