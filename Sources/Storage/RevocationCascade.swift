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
}
