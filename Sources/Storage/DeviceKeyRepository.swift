import Foundation
import JSON
import PostgreSQL

/// A device key to store (issue 5), verified by the DeviceKeys module before it gets here.
public struct NewDeviceKey: Sendable, Equatable {
    public let id: String
    public let userId: String
    /// The app's own id for the device.
    public let deviceId: String
    public let platform: String
    public let name: String
    /// SubjectPublicKeyInfo DER, P-256.
    public let publicKey: [UInt8]
    public let attested: Bool
    /// What the attestation check found, if there was one.
    public let attestation: JSONValue?

    public init(id: String, userId: String, deviceId: String, platform: String, name: String, publicKey: [UInt8],
                attested: Bool, attestation: JSONValue?) {
        self.id = id
        self.userId = userId
        self.deviceId = deviceId
        self.platform = platform
        self.name = name
        self.publicKey = publicKey
        self.attested = attested
        self.attestation = attestation
    }
}

/// Device keys and step-up receipts.
public final class DeviceKeyRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    /// Stores a device key; a live key for the same (user, device) is revoked and points at the
    /// new one, in the same transaction (re-enrolment after a biometry change), with the audit
    /// line `audit(replacedKeyId)`.
    public func enrol(_ key: NewDeviceKey, audit: (String?) -> AuditRecord) throws(StorageError) -> (DeviceKeyRecord, replaced: String?) {
        try pool.runTransaction { t in
            let old = try t.query("""
                UPDATE device_keys SET revoked_at = now(), replaced_by = \(key.id)
                WHERE user_id = \(key.userId) AND device_id = \(key.deviceId) AND revoked_at IS NULL RETURNING id
                """).first.map { try $0.string("id") }
            let attestation = key.attestation.map { PostgresValue.text($0.text) } ?? .null
            let row = try t.query("""
                INSERT INTO device_keys (id, user_id, device_id, platform, name, public_key, attested, attestation)
                VALUES (\(key.id), \(key.userId), \(key.deviceId), \(key.platform), \(key.name), \(key.publicKey), \(key.attested),
                        \(attestation)::jsonb)
                RETURNING \(unsafeRaw: DeviceKeyRepository.columns)
                """)[0]
            try AuditRepository.write([audit(old)], on: t)
            return (try DeviceKeyRepository.deviceKey(row), old)
        }
    }

    /// The user's live keys, oldest first.
    public func list(userId: String) throws(StorageError) -> [DeviceKeyRecord] {
        try pool.run { c in
            try c.query("""
                SELECT \(unsafeRaw: DeviceKeyRepository.columns) FROM device_keys
                WHERE user_id = \(userId) AND revoked_at IS NULL ORDER BY created_at
                """).map(DeviceKeyRepository.deviceKey)
        }
    }

    /// A key by id, revoked or not (so the caller can say `key_revoked`).
    public func key(id: String) throws(StorageError) -> DeviceKeyRecord? {
        try pool.run { c in
            try c.query("SELECT \(unsafeRaw: DeviceKeyRepository.columns) FROM device_keys WHERE id = \(id)").first.map(DeviceKeyRepository.deviceKey)
        }
    }

    /// False when the user has no such live key (no audit line then).
    public func revoke(userId: String, id: String, audit: AuditRecord) throws(StorageError) -> Bool {
        try pool.runTransaction { t in
            let n = try t.execute("UPDATE device_keys SET revoked_at = now() WHERE id = \(id) AND user_id = \(userId) AND revoked_at IS NULL")
            if n > 0 { try AuditRepository.write([audit], on: t) }
            return n > 0
        }
    }

    /// Stores an approval with `audit`, in one transaction. With `liveDeviceKeyId`, only while that
    /// key is live (a revocation landing between the key lookup and this insert still wins) —
    /// false otherwise, nothing written. With `credentialUse`, the passkey's use is recorded in the
    /// same transaction as a compare-and-set on its counter (`AccountRepository.recording`):
    /// `.notFound` when the credential does not exist, `.conflict(.signCountRegression)` when the
    /// counter is refused under `.reject` — nothing written either way.
    public func insertReceipt(_ r: StepUpReceiptRecord, liveDeviceKeyId: String?, credentialUse: CredentialUse?,
                              audit: [AuditRecord]) throws(StorageError) -> Bool {
        try pool.runTransaction { t in
            if let liveDeviceKeyId {
                let live = try t.query("UPDATE device_keys SET last_used_at = now() WHERE id = \(liveDeviceKeyId) AND revoked_at IS NULL RETURNING id")
                guard !live.isEmpty else { return false }
            }
            if let credentialUse {
                // The compare-and-set on the passkey's counter: refused → nothing written (rollback).
                _ = try AccountRepository.recorded(try t.query(SQL.with([("cred", AccountRepository.recording(credentialUse))],
                                                                       AccountRepository.recordedOrWhy(credentialUse)))[0])
            }
            try t.execute("""
                INSERT INTO step_up_receipts (id, user_id, method, key_id, public_key, challenge, signed_data, signature, action,
                                              action_hash, key_binding, client_data_json, authenticator_data, token_jti, token_expires_at)
                VALUES (\(r.id), \(r.userId), \(r.method), \(r.keyId), \(r.publicKey), \(r.challenge), \(r.signedData), \(r.signature),
                        \(r.action), \(r.actionHash), \(r.keyBinding), \(r.clientDataJSON), \(r.authenticatorData), \(r.tokenJTI),
                        \(r.tokenExpiresAt))
                """)
            try AuditRepository.write(audit, on: t)
            return true
        }
    }

    public func receipt(id: String) throws(StorageError) -> StepUpReceiptRecord? {
        try pool.run { c in
            try c.query("""
                SELECT id, user_id, method, key_id, public_key, challenge, signed_data, signature, action, action_hash, key_binding,
                       client_data_json, authenticator_data, token_jti, token_expires_at, created_at, consumed_at
                FROM step_up_receipts WHERE id = \(id)
                """).first.map { r in
                StepUpReceiptRecord(
                    id: try r.string("id"), userId: try r.string("user_id"), method: try r.string("method"), keyId: try r.string("key_id"),
                    publicKey: try r.bytes("public_key"), challenge: try r.bytes("challenge"), signedData: try r.bytes("signed_data"),
                    signature: try r.bytes("signature"), action: try r.string("action"), actionHash: try r.bytes("action_hash"),
                    keyBinding: try r.string("key_binding"), clientDataJSON: try r.optionalBytes("client_data_json"),
                    authenticatorData: try r.optionalBytes("authenticator_data"), tokenJTI: try r.string("token_jti"),
                    tokenExpiresAt: try r.date("token_expires_at"), createdAt: try r.date("created_at"),
                    consumedAt: try r.optionalDate("consumed_at"))
            }
        }
    }

    /// Redeems a step-up token once: the first caller for its jti wins; later ones see alreadyUsed.
    public func consumeStepUpToken(jti: String, userId: String, actionHash: [UInt8]) throws(StorageError) -> ConsumeOutcome {
        try pool.run { c in
            let used = try c.query("""
                UPDATE step_up_receipts SET consumed_at = now()
                WHERE token_jti = \(jti) AND user_id = \(userId) AND action_hash = \(actionHash) AND consumed_at IS NULL
                RETURNING id, action
                """)
            if let r = used.first { return .consumed(receiptId: try r.string("id"), action: try r.string("action")) }
            let exists = try c.query("SELECT 1 AS one FROM step_up_receipts WHERE token_jti = \(jti) AND user_id = \(userId)")
            return exists.isEmpty ? .unknown : .alreadyUsed
        }
    }

    static let columns = "id, user_id, device_id, platform, name, public_key, attested, created_at, last_used_at, revoked_at"

    static func deviceKey(_ r: Row) throws -> DeviceKeyRecord {
        DeviceKeyRecord(id: try r.string("id"), userId: try r.string("user_id"), deviceId: try r.string("device_id"),
                        platform: try r.string("platform"), name: try r.string("name"), publicKey: try r.bytes("public_key"),
                        attested: try r.bool("attested"), createdAt: try r.date("created_at"),
                        lastUsedAt: try r.optionalDate("last_used_at"), revokedAt: try r.optionalDate("revoked_at"))
    }
}
