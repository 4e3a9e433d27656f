import Foundation
import PostgreSQL

/// An account's vault as stored (migration 28): the PRF salt, the data key wrapped for each live
/// passkey, and the data key wrapped under the vault's recovery key. Ciphertext and a public salt
/// only: Latchkey never holds what opens them.
public struct VaultRecord: Sendable, Equatable {
    public let prfSalt: [UInt8]
    public let wrapped: [WrappedVaultKey]
    public let recoveryWrappedKey: [UInt8]?

    public init(prfSalt: [UInt8], wrapped: [WrappedVaultKey], recoveryWrappedKey: [UInt8]?) {
        self.prfSalt = prfSalt
        self.wrapped = wrapped
        self.recoveryWrappedKey = recoveryWrappedKey
    }
}

/// The data key wrapped for one passkey (12-byte IV ‖ AES-256-GCM ciphertext ‖ 16-byte tag).
public struct WrappedVaultKey: Sendable, Equatable {
    public let credentialId: [UInt8]
    public let wrappedKey: [UInt8]

    public init(credentialId: [UInt8], wrappedKey: [UInt8]) {
        self.credentialId = credentialId
        self.wrappedKey = wrappedKey
    }
}

/// `GET /v1/vault`'s one read: the vault (nil: none) with the caller's session as it stands (nil:
/// revoked since its token was issued), and the hold of the passkey that began it.
public struct VaultRead: Sendable {
    public let vault: VaultRecord?
    public let session: SessionRecord?
    public let passkeyApprovesFrom: Date?

    public init(vault: VaultRecord?, session: SessionRecord?, passkeyApprovesFrom: Date?) {
        self.vault = vault
        self.session = session
        self.passkeyApprovesFrom = passkeyApprovesFrom
    }
}

/// What a vault change wrote: nothing to change (no vault, or not the caller's live passkey: the
/// step-up stays unspent), the step-up could not be redeemed (nothing written), or written.
public enum VaultChange: Sendable, Equatable {
    case absent
    case stepUpUsed
    case written
}

/// The vault (migration 28). Every change is one statement with its audit line and, where the
/// change is gated, the step-up it redeems.
public final class VaultRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    /// The vault of `userId` with the wrapped keys of its live passkeys (oldest wrap first), and
    /// the caller's session `sessionId` as it stands — one query.
    public func read(userId: String, sessionId: String) throws(StorageError) -> VaultRead {
        try pool.run { c in
            let r = try c.query("""
                SELECT v.prf_salt, v.recovery_wrapped_key, (v.user_id IS NOT NULL) AS has_vault,
                       (SELECT string_agg(encode(w.credential_id, 'hex'), ',' ORDER BY w.updated_at, w.credential_id)
                        FROM vault_wrapped_keys w JOIN credentials k ON k.id = w.credential_id AND k.revoked_at IS NULL
                        WHERE w.user_id = q.uid) AS wrapped_ids,
                       (SELECT string_agg(encode(w.wrapped_key, 'hex'), ',' ORDER BY w.updated_at, w.credential_id)
                        FROM vault_wrapped_keys w JOIN credentials k ON k.id = w.credential_id AND k.revoked_at IS NULL
                        WHERE w.user_id = q.uid) AS wrapped_keys,
                       s.*
                FROM (SELECT \(userId)::text AS uid) q
                     LEFT JOIN vaults v ON v.user_id = q.uid
                     LEFT JOIN LATERAL (\(fragment: SessionRepository.standing(id: sessionId, userId: userId))) s ON true
                """)[0]
            var vault: VaultRecord? = nil
            if try r.bool("has_vault") {
                let ids = try r.hexList("wrapped_ids"), keys = try r.hexList("wrapped_keys")
                guard ids.count == keys.count else { throw StorageError.undecodable(column: "wrapped_keys") }
                vault = VaultRecord(prfSalt: try r.bytes("prf_salt"),
                                    wrapped: zip(ids, keys).map { WrappedVaultKey(credentialId: $0, wrappedKey: $1) },
                                    recoveryWrappedKey: try r.optionalBytes("recovery_wrapped_key"))
            }
            let live = !(try r.isNull("id"))
            return VaultRead(vault: vault, session: live ? try SessionRepository.record(r) : nil,
                             passkeyApprovesFrom: live ? try r.optionalDate("approves_from") : nil)
        }
    }

    /// Creates the vault of `userId` with `prfSalt`, with the audit line; false when it has one
    /// already (nothing written).
    public func create(userId: String, prfSalt: [UInt8], audit: AuditRecord) throws(StorageError) -> Bool {
        let statement = SQL.with([("put", """
            INSERT INTO vaults (user_id, prf_salt) VALUES (\(userId), \(prfSalt))
            ON CONFLICT (user_id) DO NOTHING
            RETURNING user_id
            """)] + AuditRepository.cte([audit], onlyIf: "put"),
            "SELECT EXISTS (SELECT 1 FROM put) AS created")
        return try pool.run { c in try c.query(statement)[0].bool("created") }
    }

    /// Stores `wrappedKey` for `credentialId` (replacing its earlier wrap), with the audit line and
    /// the redeemed step-up, only while the vault exists and the credential is a live passkey of
    /// `userId` (its row locked, so a revocation either comes first and this finds nothing, or
    /// comes after and its trigger deletes this wrap with it).
    public func wrap(userId: String, credentialId: [UInt8], wrappedKey: [UInt8], audit: AuditRecord,
                     redeeming: StepUpRedemption) throws(StorageError) -> VaultChange {
        let statement = SQL.with([("target", """
            SELECT v.user_id FROM vaults v JOIN credentials c ON c.id = \(credentialId) AND c.user_id = v.user_id AND c.revoked_at IS NULL
            WHERE v.user_id = \(userId)
            FOR SHARE OF c
            """)] + StepUpRedemption.cte(redeeming, onlyIf: "target") + [("put", """
            INSERT INTO vault_wrapped_keys (credential_id, user_id, wrapped_key)
            SELECT \(credentialId), user_id, \(wrappedKey) FROM target WHERE EXISTS (SELECT 1 FROM redeemed)
            ON CONFLICT (credential_id) DO UPDATE SET wrapped_key = EXCLUDED.wrapped_key, updated_at = now()
            RETURNING credential_id
            """)] + AuditRepository.cte([audit], onlyIf: "put"),
            "SELECT EXISTS (SELECT 1 FROM target) AS present, EXISTS (SELECT 1 FROM put) AS put")
        return try pool.run { c in try Self.change(try c.query(statement)[0]) }
    }

    /// Sets the data key wrapped under the vault's recovery key (replacing the earlier one), with
    /// the audit line and the redeemed step-up, only while the vault exists.
    public func setRecovery(userId: String, wrappedKey: [UInt8], audit: AuditRecord,
                            redeeming: StepUpRedemption) throws(StorageError) -> VaultChange {
        let statement = SQL.with([("target", "SELECT user_id FROM vaults WHERE user_id = \(userId) FOR UPDATE")]
            + StepUpRedemption.cte(redeeming, onlyIf: "target") + [("put", """
            UPDATE vaults SET recovery_wrapped_key = \(wrappedKey)
            WHERE user_id IN (SELECT user_id FROM target) AND EXISTS (SELECT 1 FROM redeemed)
            RETURNING user_id
            """)] + AuditRepository.cte([audit], onlyIf: "put"),
            "SELECT EXISTS (SELECT 1 FROM target) AS present, EXISTS (SELECT 1 FROM put) AS put")
        return try pool.run { c in try Self.change(try c.query(statement)[0]) }
    }

    static func change(_ r: Row) throws -> VaultChange {
        guard try r.bool("present") else { return .absent }
        return try r.bool("put") ? .written : .stepUpUsed
    }
}
