import Foundation
import JSON
import PostgreSQL

public struct DeviceKeyRecord: Sendable {
    public let id: String
    public let userId: String
    public let deviceId: String
    public let platform: String
    public let name: String
    public let publicKey: [UInt8]
    public let attested: Bool
    public let createdAt: Date
    public let lastUsedAt: Date?
    public let revokedAt: Date?
}

public struct StepUpReceiptRecord: Sendable {
    public let id: String
    public let userId: String
    public let method: String
    public let keyId: String
    public let publicKey: [UInt8]
    public let challenge: [UInt8]
    public let signedData: [UInt8]
    public let signature: [UInt8]
    public let action: String
    public let actionHash: [UInt8]
    public let keyBinding: String
    public let clientDataJSON: [UInt8]?
    public let authenticatorData: [UInt8]?
    public let tokenJTI: String
    public let tokenExpiresAt: Date
    public let createdAt: Date
    public let consumedAt: Date?

    public init(id: String, userId: String, method: String, keyId: String, publicKey: [UInt8], challenge: [UInt8],
                signedData: [UInt8], signature: [UInt8], action: String, actionHash: [UInt8], keyBinding: String,
                clientDataJSON: [UInt8]? = nil, authenticatorData: [UInt8]? = nil, tokenJTI: String, tokenExpiresAt: Date, createdAt: Date = Date(), consumedAt: Date? = nil) {
        self.id = id; self.userId = userId; self.method = method; self.keyId = keyId; self.publicKey = publicKey
        self.challenge = challenge; self.signedData = signedData; self.signature = signature; self.action = action
        self.actionHash = actionHash; self.keyBinding = keyBinding; self.tokenJTI = tokenJTI
        self.clientDataJSON = clientDataJSON; self.authenticatorData = authenticatorData
        self.tokenExpiresAt = tokenExpiresAt; self.createdAt = createdAt; self.consumedAt = consumedAt
    }
}


public enum ConsumeOutcome: Sendable { case consumed(receiptId: String, action: String), alreadyUsed, unknown }

/// Device keys and step-up (issue 5). Values are always bind parameters.
extension Store {
    static let deviceKeyColumns = "id, user_id, device_id, platform, name, public_key, attested, created_at, last_used_at, revoked_at"

    static func deviceKey(_ r: Row) throws -> DeviceKeyRecord {
        DeviceKeyRecord(id: try r.string("id"), userId: try r.string("user_id"), deviceId: try r.string("device_id"),
                        platform: try r.string("platform"), name: try r.string("name"), publicKey: try r.bytes("public_key"),
                        attested: try r.bool("attested"), createdAt: try r.date("created_at"),
                        lastUsedAt: try r.optionalDate("last_used_at"), revokedAt: try r.optionalDate("revoked_at"))
    }

    /// Stores a device key; a live key for the same (user, device) is revoked and points at the
    /// new one, in the same transaction (re-enrolment after a biometry change).
    public func enrolDeviceKey(id: String, userId: String, deviceId: String, platform: String, name: String, publicKey: [UInt8],
                               attested: Bool, attestation: String?) throws -> (DeviceKeyRecord, replaced: String?) {
        try pool.withConnection { c in
            try c.transaction { t in
                let old = try t.query("""
                    UPDATE device_keys SET revoked_at = now(), replaced_by = \(id)
                    WHERE user_id = \(userId) AND device_id = \(deviceId) AND revoked_at IS NULL RETURNING id
                    """).first.map { try $0.string("id") }
                let row = try t.query("""
                    INSERT INTO device_keys (id, user_id, device_id, platform, name, public_key, attested, attestation)
                    VALUES (\(id), \(userId), \(deviceId), \(platform), \(name), \(publicKey), \(attested), \(attestation.map { PostgresValue.text($0) } ?? .null)::jsonb)
                    RETURNING \(unsafeRaw: Store.deviceKeyColumns)
                    """)[0]
                let detail = JSONValue.object([("keyId", .string(id)), ("deviceId", .string(deviceId)), ("platform", .string(platform)),
                                               ("replaced", old.map { .string($0) } ?? .null), ("attested", .bool(attested))]).text
                try Store.audit(t, actor: userId, action: "device_key.enrolled", subject: userId, detail: detail)
                return (try Store.deviceKey(row), old)
            }
        }
    }

    public func deviceKeys(userId: String) throws -> [DeviceKeyRecord] {
        try pool.withConnection { c in
            try c.query("SELECT \(unsafeRaw: Store.deviceKeyColumns) FROM device_keys WHERE user_id = \(userId) AND revoked_at IS NULL ORDER BY created_at")
                .map(Store.deviceKey)
        }
    }

    /// A key by id, revoked or not (so the caller can say `key_revoked`).
    public func deviceKey(id: String) throws -> DeviceKeyRecord? {
        try pool.withConnection { c in
            try c.query("SELECT \(unsafeRaw: Store.deviceKeyColumns) FROM device_keys WHERE id = \(id)").first.map(Store.deviceKey)
        }
    }

    public func revokeDeviceKey(userId: String, id: String) throws -> Bool {
        try pool.withConnection { c in
            try c.transaction { t in
                let n = try t.execute("UPDATE device_keys SET revoked_at = now() WHERE id = \(id) AND user_id = \(userId) AND revoked_at IS NULL")
                if n > 0 {
                    let detail = JSONValue.object([("keyId", .string(id))]).text
                    try Store.audit(t, actor: userId, action: "device_key.revoked", subject: userId, detail: detail)
                }
                return n > 0
            }
        }
    }

    /// Stores an approval; for a device key, only while the key is still live (a revocation that
    /// lands between the key lookup and this insert still wins). Returns false when it was not.
    public func insertStepUpReceipt(_ r: StepUpReceiptRecord, deviceKeyId: String?) throws -> Bool {
        try pool.withConnection { c in
            try c.transaction { t in
                if let deviceKeyId {
                    let live = try t.query("UPDATE device_keys SET last_used_at = now() WHERE id = \(deviceKeyId) AND revoked_at IS NULL RETURNING id")
                    guard !live.isEmpty else { return false }
                }
                _ = try t.execute("""
                    INSERT INTO step_up_receipts (id, user_id, method, key_id, public_key, challenge, signed_data, signature, action,
                                                  action_hash, key_binding, client_data_json, authenticator_data, token_jti, token_expires_at)
                    VALUES (\(r.id), \(r.userId), \(r.method), \(r.keyId), \(r.publicKey), \(r.challenge), \(r.signedData), \(r.signature),
                            \(r.action), \(r.actionHash), \(r.keyBinding), \(r.clientDataJSON), \(r.authenticatorData), \(r.tokenJTI),
                            \(r.tokenExpiresAt))
                    """)
                let detail = JSONValue.object([("receiptId", .string(r.id)), ("method", .string(r.method)), ("keyId", .string(r.keyId))]).text
                try Store.audit(t, actor: r.userId, action: "step_up.approved", subject: r.userId, detail: detail)
                return true
            }
        }
    }

    public func stepUpReceipt(id: String) throws -> StepUpReceiptRecord? {
        try pool.withConnection { c in
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
    public func consumeStepUpToken(jti: String, userId: String, actionHash: [UInt8]) throws -> ConsumeOutcome {
        try pool.withConnection { c in
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

    /// A passkey used for step-up: its counter moves forward only, and its last use is recorded.
    public func recordPasskeyStepUp(credentialId: [UInt8], signCount: Int64) throws {
        try pool.withConnection { c in
            _ = try c.execute("UPDATE credentials SET sign_count = GREATEST(sign_count, \(signCount)), last_used_at = now() WHERE id = \(credentialId)")
        }
    }
}
