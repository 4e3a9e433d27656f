import Foundation
import JSON
import PostgreSQL

/// The platform a device key was enrolled from (column `device_keys.platform`).
public enum DevicePlatform: String, Sendable, CaseIterable {
    case ios
    case android
}

/// What a device key's attestation proved (column `device_keys.attestation_format`).
public enum DeviceKeyAttestationFormat: String, Sendable, CaseIterable {
    case none
    case androidKey = "android-key"
    case appleAppAttest = "apple-appattest"
}

/// Where a device key lives, as its attestation says (column `device_keys.security_level`).
public enum DeviceKeySecurityLevel: String, Sendable, CaseIterable {
    case strongBox = "strongbox"
    case tee
    case secureEnclave = "secure-enclave"
    case software
    case unknown
}

/// A device key to store, verified by the DeviceKeys module before it gets here.
public struct NewDeviceKey: Sendable, Equatable {
    public let id: String
    public let userId: String
    /// The app's own id for the device.
    public let deviceId: String
    public let platform: DevicePlatform
    public let name: String
    /// SubjectPublicKeyInfo DER, P-256.
    public let publicKey: [UInt8]
    public let attested: Bool
    /// What the attestation check found, if there was one.
    public let attestation: JSONValue?
    public let attestationFormat: DeviceKeyAttestationFormat
    public let securityLevel: DeviceKeySecurityLevel
    public let app: String?
    /// App Attest keys: the key id (SHA-256 of the public key) and the attestation's counter.
    public let appAttestKeyId: [UInt8]?
    public let appAttestCounter: Int64?
    /// The session (refresh family) that enrolled the key: its device-key session (SPEC "CIBA
    /// approval"); nil when no session did (an import).
    public var enrolledSession: String? = nil

    public init(id: String, userId: String, deviceId: String, platform: DevicePlatform, name: String, publicKey: [UInt8],
                attested: Bool, attestation: JSONValue?, attestationFormat: DeviceKeyAttestationFormat = .none,
                securityLevel: DeviceKeySecurityLevel = .unknown,
                app: String? = nil, appAttestKeyId: [UInt8]? = nil, appAttestCounter: Int64? = nil) {
        self.attestationFormat = attestationFormat
        self.securityLevel = securityLevel
        self.app = app
        self.appAttestKeyId = appAttestKeyId
        self.appAttestCounter = appAttestCounter
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

/// What lets an enrolment through (SPEC "Trust chain": gated enrolment), used up in the enrolment's
/// own transaction so a refused enrolment burns nothing and a gate is never used twice.
public enum EnrolmentGate: Sendable, Equatable {
    /// A step-up token (by `jti`) of this user, for exactly this action hash, not consumed yet.
    case stepUp(jti: String, actionHash: [UInt8])
    /// A device-key ticket (by hash) issued for this user, unused and unexpired.
    case ticket(hash: [UInt8])
}

/// What an enrolment's statement did.
public enum EnrolmentWritten: Sendable {
    /// The challenge was used by a concurrent enrolment: nothing written.
    case challengeUsed
    /// The gate was not (or no longer) valid: only the challenge used up.
    case gateRefused
    case enrolled(DeviceKeyRecord, replaced: String?)
}

/// What an approval's statement did.
public enum ApprovalWritten: Sendable, Equatable {
    /// The challenge was used by a concurrent verify: nothing written.
    case challengeUsed
    /// A device key no longer live or its App Attest counter reused (only the challenge used up).
    case refused
    case stored
}

/// Device keys and step-up receipts.
public final class DeviceKeyRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    /// Stores a device key, in one statement: a live key for the same (user, device) is revoked and
    /// points at the new one (re-enrolment after a biometry change), with `audit` — its subject the
    /// user, its `detail` completed with `replaced` (the revoked key's id, or null) — the `enrolled`
    /// events, and `replacedEvent` for the revoked key (`keyId`, `deviceId`, `platform`, `attested`).
    /// Returns nil, writing nothing, when the gate is not (or no longer) valid.
    public func enrol(_ key: NewDeviceKey, gate: EnrolmentGate, audit: AuditTemplate, enrolled: [OutboxEvent] = [],
                      replacedEvent: EventTemplate? = nil) throws(StorageError) -> (DeviceKeyRecord, replaced: String?)? {
        switch try enrol(key, usingChallenge: nil, gate: gate, audit: audit, enrolled: enrolled, replacedEvent: replacedEvent) {
        case .enrolled(let record, let replaced): return (record, replaced)
        case .challengeUsed, .gateRefused: return nil
        }
    }

    /// `enrol`, with `usingChallenge` (the enrolment challenge's hash) used up in the same statement
    /// whatever the gate says (`ChallengeRepository.use`), and the rest written only with that use:
    /// `.challengeUsed`, nothing written, when a concurrent enrolment used it first.
    public func enrol(_ key: NewDeviceKey, usingChallenge challenge: [UInt8]?, gate: EnrolmentGate, audit: AuditTemplate,
                      enrolled: [OutboxEvent], replacedEvent: EventTemplate?) throws(StorageError) -> EnrolmentWritten {
        let used: SQL? = challenge == nil ? nil : "EXISTS (SELECT 1 FROM used)"
        let opened: SQL
        switch gate {
        case .stepUp(let jti, let actionHash):
            opened = StepUpRedemption.use(jti: jti, userId: key.userId, actionHash: actionHash, onlyIf: used)
        case .ticket(let hash):
            opened = """
                UPDATE enrolment_tickets SET used_at = now()
                WHERE hash = \(hash) AND user_id = \(key.userId) AND purpose = 'device-key' AND used_at IS NULL AND expires_at > now()
                  AND \(fragment: used ?? "TRUE")
                RETURNING user_id
                """
        }
        let attestation = key.attestation.map { PostgresValue.text($0.text) } ?? .null
        let use: [(name: String, sql: SQL)] = challenge.map { hash in
            [("used", ChallengeRepository.use(hash: hash, kind: .deviceKeyEnrolment, userId: key.userId))]
        } ?? []
        let statement = SQL.with(use + [
            ("gate", opened),
            ("old", """
                UPDATE device_keys SET revoked_at = now(), replaced_by = \(key.id)
                WHERE user_id = \(key.userId) AND device_id = \(key.deviceId) AND revoked_at IS NULL AND EXISTS (SELECT 1 FROM gate)
                RETURNING \(unsafeRaw: DeviceKeyRepository.columns)
                """),
            // Reads `old` to its end first: the old key is no longer live when the new one's row meets
            // the unique index of live keys per device (device_keys_live).
            ("ins", """
                INSERT INTO device_keys (id, user_id, device_id, platform, name, public_key, attested, attestation,
                                         attestation_format, security_level, app, app_attest_key_id, app_attest_counter, enrolled_session)
                SELECT \(key.id), \(key.userId), \(key.deviceId), \(key.platform.rawValue), \(key.name), \(key.publicKey), \(key.attested),
                       \(attestation)::jsonb, \(key.attestationFormat.rawValue), \(key.securityLevel.rawValue), \(key.app),
                       \(key.appAttestKeyId), \(key.appAttestCounter)::bigint, \(key.enrolledSession)::text
                FROM (SELECT count(*) FROM old) AS replaced WHERE EXISTS (SELECT 1 FROM gate)
                RETURNING \(unsafeRaw: DeviceKeyRepository.columns)
                """),
        ]
            + AuditRepository.cte([audit.rows(from: "ins", subject: "ins.user_id", members: [("replaced", "(SELECT id FROM old)")])])
            + OutboxRepository.ctes([.events(enrolled)] + (replacedEvent.map { [DeviceKeyRepository.rows($0, from: "old")] } ?? []),
                                    onlyIf: "ins"),
            """
            SELECT \(fragment: used ?? "true") AS fresh, ins.*, (SELECT id FROM old) AS replaced
            FROM (VALUES (1)) AS one (x) LEFT JOIN ins ON true
            """)
        return try pool.run { c in
            // After the account's sessions lock, shared (RevocationCascade): a recovery's completion
            // beside it, which revokes every device key, either sees this key or has first revoked the
            // key or passkey whose step-up opened the gate.
            let r = try c.pipeline([RevocationCascade.joiningAccount(userId: key.userId), statement])[1][0]
            guard try r.bool("fresh") else { return .challengeUsed }
            guard try !r.isNull("id") else { return .gateRefused }
            return .enrolled(try DeviceKeyRepository.deviceKey(r), replaced: try r.optionalString("replaced"))
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

    /// False when the user has no such live key (no audit line, no events then). Otherwise the key
    /// is revoked with `audit` and `revokedEvent` (`keyId`, `deviceId`, `platform`, `attested`) in
    /// one statement; with `redeeming` (an admin's approval), only together with that step-up's redemption.
    public func revoke(userId: String, id: String, audit: AuditRecord, redeeming: StepUpRedemption? = nil,
                       revokedEvent: EventTemplate? = nil) throws(StorageError) -> Bool {
        let statement = SQL.with([("rev", """
            UPDATE device_keys SET revoked_at = now() WHERE id = \(id) AND user_id = \(userId) AND revoked_at IS NULL
            RETURNING \(unsafeRaw: DeviceKeyRepository.columns)
            """)]
            + AuditRepository.cte([audit], onlyIf: "rev")
            + OutboxRepository.ctes(revokedEvent.map { [DeviceKeyRepository.rows($0, from: "rev")] } ?? []),
            "SELECT id FROM rev")
        guard let redeeming else { return try pool.run { c in !(try c.query(statement)).isEmpty } }
        do {
            return try pool.runTransaction { t in
                // Redeemed first: the approving key is judged live as it was before this change.
                try StepUpRedemption.redeem(redeeming, on: t)
                guard !(try t.query(statement)).isEmpty else { throw StorageError.notFound }  // rolls the redemption back
                return true
            }
        } catch .notFound { return false }
    }

    /// `template` once per device key row of `from` (`columns`), with the members SPEC "Events"
    /// gives `device_key.*`: `keyId`, `deviceId`, `platform`, `attested`.
    static func rows(_ template: EventTemplate, from: String) -> EventRows {
        template.rows(from: "\(unsafeRaw: from)", account: "\(unsafeRaw: from).user_id", key: "\(unsafeRaw: from).id", members: [
            ("keyId", "\(unsafeRaw: from).id"), ("deviceId", "\(unsafeRaw: from).device_id"), ("platform", "\(unsafeRaw: from).platform"),
            ("attested", "\(unsafeRaw: from).attested"),
        ])
    }

    /// Stores an approval (its receipt) with `audit` and `events`, in one statement.
    /// With `liveDeviceKeyId`, only while that key is live (a revocation landing between the key
    /// lookup and this statement still wins) — false otherwise, nothing written. With
    /// `appAttestCounter` (an App Attest key's assertion), the key's counter is compared and stored
    /// there too: only a counter above the stored one is accepted, so two assertions with one counter
    /// can never both pass (false for the loser, as for a revoked key). With `credentialUse`, the
    /// passkey's use is recorded there as a compare-and-set on its counter
    /// (`AccountRepository.recording`): `.notFound` when the credential does not exist,
    /// `.conflict(.signCountRegression)` when the counter is refused under `.reject` — nothing
    /// written either way, so of two step-ups carrying one counter only the first gets a receipt.
    public func insertReceipt(_ r: StepUpReceiptRecord, liveDeviceKeyId: String?, appAttestCounter: Int64? = nil,
                              credentialUse: CredentialUse?, audit: [AuditRecord], events: [OutboxEvent] = []) throws(StorageError) -> Bool {
        try insertReceipt(r, usingChallenge: nil, liveDeviceKeyId: liveDeviceKeyId, appAttestCounter: appAttestCounter,
                          credentialUse: credentialUse, audit: audit, events: events) == .stored
    }

    /// `insertReceipt`, with `usingChallenge` (a step-up verify's: its hash and user) used up in the
    /// same statement (`ChallengeRepository.use`) and everything else written only with that use:
    /// `.challengeUsed`, nothing written, when a concurrent verify used it first.
    public func insertReceipt(_ r: StepUpReceiptRecord, usingChallenge challenge: [UInt8]?, liveDeviceKeyId: String?,
                              appAttestCounter: Int64?, credentialUse: CredentialUse?, audit: [AuditRecord],
                              events: [OutboxEvent]) throws(StorageError) -> ApprovalWritten {
        var ctes: [(name: String, sql: SQL)] = []
        var checks: [SQL] = []
        if let challenge {
            ctes.append(("used", ChallengeRepository.use(hash: challenge, kind: .stepUp, userId: r.userId)))
            checks.append("EXISTS (SELECT 1 FROM used)")
        }
        if let liveDeviceKeyId {
            ctes.append(("dk", """
                UPDATE device_keys SET last_used_at = now(), app_attest_counter = COALESCE(\(appAttestCounter)::bigint, app_attest_counter)
                WHERE id = \(liveDeviceKeyId) AND revoked_at IS NULL
                  AND (\(appAttestCounter)::bigint IS NULL OR app_attest_counter IS NULL OR app_attest_counter < \(appAttestCounter)::bigint)
                  AND \(fragment: challenge == nil ? "TRUE" : "EXISTS (SELECT 1 FROM used)")
                RETURNING id
                """))
            checks.append("EXISTS (SELECT 1 FROM dk)")
        }
        if let credentialUse {
            // The compare-and-set on the passkey's counter: refused → no row, no receipt.
            ctes.append(("cred", AccountRepository.recording(credentialUse, onlyIf: liveDeviceKeyId != nil ? "dk" : challenge == nil ? nil : "used")))
            checks.append("EXISTS (SELECT 1 FROM cred)")
        }
        let condition: SQL = checks.isEmpty ? "" : "\nWHERE \(fragment: SQL.joined(checks, separator: " AND "))"
        ctes.append(("rcpt", """
            INSERT INTO step_up_receipts (id, user_id, method, key_id, public_key, challenge, signed_data, signature, action,
                                          action_hash, key_binding, client_data_json, authenticator_data, token_jti, token_expires_at,
                                          document, commitment)
            SELECT \(r.id), \(r.userId), \(r.method.rawValue), \(r.keyId), \(r.publicKey), \(r.challenge), \(r.signedData), \(r.signature),
                   \(r.action), \(r.actionHash), \(r.keyBinding), \(r.clientDataJSON)::bytea, \(r.authenticatorData)::bytea, \(r.tokenJTI),
                   \(r.tokenExpiresAt), \(r.document)::bytea, \(r.commitment)::bytea\(fragment: condition)
            RETURNING id
            """))
        let fresh: SQL = challenge == nil ? "true AS fresh" : "EXISTS (SELECT 1 FROM used) AS fresh"
        let final: SQL = credentialUse.map { AccountRepository.recordedOrWhy($0, also: "EXISTS (SELECT 1 FROM rcpt) AS stored, \(fragment: fresh)") }
            ?? "SELECT EXISTS (SELECT 1 FROM rcpt) AS stored, \(fragment: fresh)"
        let statement = SQL.with(ctes + AuditRepository.cte(audit, onlyIf: "rcpt") + OutboxRepository.ctes(events, onlyIf: "rcpt"), final)
        return try pool.run { c in
            let row = try c.query(statement)[0]
            guard try row.bool("fresh") else { return .challengeUsed }
            if try row.bool("stored") { return .stored }
            // Not stored: a device key no longer live (or its App Attest counter reused), else the passkey's refusal.
            if liveDeviceKeyId != nil { return .refused }
            if credentialUse != nil { _ = try AccountRepository.recorded(row) }
            return .refused
        }
    }

    public func receipt(id: String) throws(StorageError) -> StepUpReceiptRecord? {
        try pool.run { c in
            try c.query("""
                SELECT id, user_id, method, key_id, public_key, challenge, signed_data, signature, action, action_hash, key_binding,
                       client_data_json, authenticator_data, token_jti, token_expires_at, created_at, consumed_at, document, commitment
                FROM step_up_receipts WHERE id = \(id)
                """).first.map { r in
                StepUpReceiptRecord(
                    id: try r.string("id"), userId: try r.string("user_id"), method: try r.value("method"), keyId: try r.string("key_id"),
                    publicKey: try r.bytes("public_key"), challenge: try r.bytes("challenge"), signedData: try r.bytes("signed_data"),
                    signature: try r.bytes("signature"), action: try r.string("action"), actionHash: try r.bytes("action_hash"),
                    keyBinding: try r.string("key_binding"), clientDataJSON: try r.optionalBytes("client_data_json"),
                    authenticatorData: try r.optionalBytes("authenticator_data"), tokenJTI: try r.string("token_jti"),
                    tokenExpiresAt: try r.date("token_expires_at"), createdAt: try r.date("created_at"),
                    consumedAt: try r.optionalDate("consumed_at"), document: try r.optionalBytes("document"),
                    commitment: try r.optionalBytes("commitment"))
            }
        }
    }

    /// Redeems a step-up token once: the first caller for its jti wins; later ones see alreadyUsed.
    public func consumeStepUpToken(jti: String, userId: String, actionHash: [UInt8]) throws(StorageError) -> ConsumeOutcome {
        try pool.run { c in
            let used = try c.query(StepUpRedemption.use(jti: jti, userId: userId, actionHash: actionHash, returning: "id, action"))
            if let r = used.first { return .consumed(receiptId: try r.string("id"), action: try r.string("action")) }
            // Why not (a refusal only): used, or another action's, is alreadyUsed; an unused receipt
            // whose key was revoked is as good as unknown.
            let found = try c.query("""
                SELECT consumed_at IS NOT NULL AS used, \(unsafeRaw: StepUpRedemption.approverIsLive) AS live
                FROM step_up_receipts WHERE token_jti = \(jti) AND user_id = \(userId)
                """)
            guard let row = found.first else { return .unknown }
            return try row.bool("used") || row.bool("live") ? .alreadyUsed : .unknown
        }
    }

    static let columns = """
        id, user_id, device_id, platform, name, public_key, attested, attestation_format, security_level, app, \
        app_attest_counter, created_at, last_used_at, revoked_at
        """

    static func deviceKey(_ r: Row) throws -> DeviceKeyRecord {
        DeviceKeyRecord(id: try r.string("id"), userId: try r.string("user_id"), deviceId: try r.string("device_id"),
                        platform: try r.value("platform"), name: try r.string("name"), publicKey: try r.bytes("public_key"),
                        attested: try r.bool("attested"), attestationFormat: try r.value("attestation_format"),
                        securityLevel: try r.value("security_level"), app: try r.optionalString("app"),
                        appAttestCounter: try r.optionalInt64("app_attest_counter"), createdAt: try r.date("created_at"),
                        lastUsedAt: try r.optionalDate("last_used_at"), revokedAt: try r.optionalDate("revoked_at"))
    }
}
