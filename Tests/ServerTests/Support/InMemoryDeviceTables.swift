import Crypto
import Foundation
import JSON
@testable import LatchkeyServer
import Storage
import Synchronization

/// The rows device keys and step-ups share (challenges, passkeys, device keys, tickets, receipts,
/// and the audit lines and outbox events written with them), in memory, on a clock the test moves
/// (`now` plays the database's `now()`). Each store operation takes the lock once, so it is one
/// statement: it writes all of its change or nothing, and of concurrent callers one wins. The
/// rules are those of the SQL in `ChallengeRepository`, `DeviceKeyRepository`,
/// `AccountRepository.recording` and `StepUpRedemption.approverIsLive`; the stores over these
/// tables are `InMemoryStepUpStore` and `InMemoryDeviceKeyStore`.
final class InMemoryDeviceTables: Sendable {
    struct Challenge {
        let kind: CeremonyKind
        let userId: String?
        let rpId: String
        let state: [UInt8]
        let expiresAt: Date
    }

    struct Passkey {
        var record: CredentialRecord
        let user: UserRecord
        var revokedAt: Date?
    }

    struct DeviceKey {
        let key: NewDeviceKey
        let createdAt: Date
        var lastUsedAt: Date?
        var revokedAt: Date?
        var replacedBy: String?
        var appAttestCounter: Int64?

        var record: DeviceKeyRecord {
            DeviceKeyRecord(id: key.id, userId: key.userId, deviceId: key.deviceId, platform: key.platform, name: key.name,
                            publicKey: key.publicKey, attested: key.attested, attestationFormat: key.attestationFormat,
                            securityLevel: key.securityLevel, app: key.app, appAttestCounter: appAttestCounter,
                            createdAt: createdAt, lastUsedAt: lastUsedAt, revokedAt: revokedAt)
        }
    }

    struct Ticket {
        let userId: String
        let purpose: String
        let expiresAt: Date
        var usedAt: Date?
    }

    struct Receipt {
        let record: StepUpReceiptRecord
        let createdAt: Date
        var consumedAt: Date?

        var stored: StepUpReceiptRecord {
            let r = record
            return StepUpReceiptRecord(id: r.id, userId: r.userId, method: r.method, keyId: r.keyId, publicKey: r.publicKey,
                                       challenge: r.challenge, signedData: r.signedData, signature: r.signature, action: r.action,
                                       actionHash: r.actionHash, keyBinding: r.keyBinding, clientDataJSON: r.clientDataJSON,
                                       authenticatorData: r.authenticatorData, tokenJTI: r.tokenJTI, tokenExpiresAt: r.tokenExpiresAt,
                                       createdAt: createdAt, consumedAt: consumedAt, document: r.document, commitment: r.commitment)
        }
    }

    struct Rows {
        var challenges: [[UInt8]: Challenge] = [:]
        var passkeys: [[UInt8]: Passkey] = [:]
        /// In insertion order (`created_at`, ties by insertion).
        var deviceKeys: [DeviceKey] = []
        var tickets: [[UInt8]: Ticket] = [:]
        var receipts: [Receipt] = []
        /// The ids of the quorum approvals that are break glass (the `approvals` rows a passkey
        /// step-up challenge's read looks at).
        var breakGlassApprovals: Set<String> = []
        var audit: [AuditRecord] = []
        var events: [OutboxEvent] = []
    }

    let rows = Mutex(Rows())
    /// The database's `now()`.
    let now: @Sendable () -> Date

    init(now: @escaping @Sendable () -> Date) { self.now = now }

    /// Runs `body` as one statement: a thrown error leaves the rows as they were.
    func statement<T: Sendable>(_ body: (inout Rows, Date) throws(StorageError) -> T) throws(StorageError) -> T {
        let at = now()
        return try rows.allOrNothing { (rows: inout Rows) throws(StorageError) -> T in try body(&rows, at) }
    }

    // MARK: What a test sets up and reads back

    func addPasskey(_ record: CredentialRecord, user: UserRecord) {
        rows.withLock { $0.passkeys[record.id] = Passkey(record: record, user: user) }
    }

    func revokePasskey(id: [UInt8]) {
        let at = now()
        rows.withLock { $0.passkeys[id]?.revokedAt = at }
    }

    func passkeyRow(id: [UInt8]) -> Passkey? { rows.withLock { $0.passkeys[id] } }

    /// A device-key ticket (`AdminRepository`'s), by the hash of its secret.
    func addTicket(hash: [UInt8], userId: String, purpose: String = "device-key", ttlSeconds: Double) {
        let at = now()
        rows.withLock { $0.tickets[hash] = Ticket(userId: userId, purpose: purpose, expiresAt: at.addingTimeInterval(ttlSeconds)) }
    }

    var audit: [AuditRecord] { rows.withLock { $0.audit } }
    var events: [OutboxEvent] { rows.withLock { $0.events } }
    var challengeCount: Int { rows.withLock { $0.challenges.count } }
    func receiptRow(id: String) -> Receipt? { rows.withLock { $0.receipts.first { $0.record.id == id } } }

    // MARK: The SQL's rules

    /// `INSERT INTO challenges … expires_at = now() + ttl` (hash is the primary key).
    func insertChallenge(hash: [UInt8], kind: CeremonyKind, userId: String, rpId: String, state: [UInt8], ttlSeconds: Int) throws(StorageError) {
        try statement { (rows: inout Rows, at: Date) throws(StorageError) in
            guard rows.challenges[hash] == nil else { throw .conflict(.other("challenges_pkey")) }
            rows.challenges[hash] = Challenge(kind: kind, userId: userId, rpId: rpId, state: state, expiresAt: at.addingTimeInterval(Double(ttlSeconds)))
        }
    }

    /// `DELETE FROM challenges WHERE hash AND purpose AND user_id RETURNING …, expires_at <= now()`.
    func consumeChallenge(hash: [UInt8], kind: CeremonyKind, userId: String) throws(StorageError) -> StoredChallenge? {
        try statement { (rows: inout Rows, at: Date) throws(StorageError) -> StoredChallenge? in
            guard let c = rows.challenges[hash], c.kind == kind, c.userId == userId else { return nil }
            rows.challenges[hash] = nil
            return StoredChallenge(kind: c.kind, userId: c.userId, rpId: c.rpId, state: c.state, expired: c.expiresAt <= at)
        }
    }

    /// `StepUpRedemption.approverIsLive`: the receipt's device key or passkey is the user's and not revoked.
    static func approverIsLive(_ r: StepUpReceiptRecord, in rows: Rows) -> Bool {
        switch r.method {
        case .deviceKey:
            return rows.deviceKeys.contains { $0.key.id == r.keyId && $0.key.userId == r.userId && $0.revokedAt == nil }
        case .passkey:
            guard let id = Base64URL.decode(r.keyId), let p = rows.passkeys[id] else { return false }
            return p.record.userId == r.userId && p.revokedAt == nil
        }
    }

    /// `UPDATE step_up_receipts SET consumed_at = now() WHERE token_jti AND user_id AND action_hash
    /// AND consumed_at IS NULL AND approverIsLive RETURNING …`: the index of the receipt redeemed.
    static func redeem(jti: String, userId: String, actionHash: [UInt8], in rows: inout Rows, at: Date) -> Int? {
        guard let i = rows.receipts.firstIndex(where: { $0.record.tokenJTI == jti }) else { return nil }
        let r = rows.receipts[i]
        guard r.record.userId == userId, r.record.actionHash == actionHash, r.consumedAt == nil, approverIsLive(r.record, in: rows) else {
            return nil
        }
        rows.receipts[i].consumedAt = at
        return i
    }

    /// `AccountRepository.recording(use)`: the compare-and-set on the passkey's counter (no revocation
    /// check: the statement's other rows decide that). False when no row was updated.
    static func record(_ use: CredentialUse, in rows: inout Rows, at: Date) -> Bool {
        guard var p = rows.passkeys[use.credentialId] else { return false }
        let stored = p.record.signCount
        let advances = use.signCount > stored || (use.signCount == 0 && stored == 0)
        if use.onRegression == .reject, !advances { return false }
        p.record.signCount = max(stored, use.signCount)
        p.record.backedUp = use.backedUp
        if let eligible = use.backupEligible { p.record.backupEligible = eligible }
        p.record.flagged = p.record.flagged || use.cloneWarning || !advances
        p.record.lastUsedAt = at
        rows.passkeys[use.credentialId] = p
        return true
    }

    /// `AuditTemplate.rows`: the actor (or the subject), the action, the detail with `members` over it.
    static func audit(_ template: AuditTemplate, subject: String, members: [(key: String, value: JSONValue)]) -> AuditRecord {
        AuditRecord(actor: template.actor ?? subject, action: template.action, subject: subject,
                    detail: merged(template.detail, members))
    }

    /// `EventTemplate.rows`: about `account`, its id from the template's seed and the row's `key`,
    /// `userId` then the template's data then `members`.
    static func event(_ template: EventTemplate, account: String, key: String, members: [(key: String, value: JSONValue)]) -> OutboxEvent {
        let digest = Digest.sha256(Array("\(template.seed)/\(key)".utf8))
        let data = merged(merged(.object([("userId", .string(account))]), template.data.objectValue ?? []), members)
        return OutboxEvent(id: template.idPrefix + Base64URL.encode(Array(digest.prefix(16))), type: template.type, accountId: account,
                           data: data, maxAgeSeconds: template.maxAgeSeconds, createdAt: template.createdAt)
    }

    /// `DeviceKeyRepository.rows`: the members SPEC "Events" gives `device_key.*`.
    static func event(_ template: EventTemplate, for key: DeviceKey) -> OutboxEvent {
        event(template, account: key.key.userId, key: key.key.id, members: [
            ("keyId", .string(key.key.id)), ("deviceId", .string(key.key.deviceId)), ("platform", .string(key.key.platform.rawValue)),
            ("attested", .bool(key.key.attested)),
        ])
    }

    /// jsonb `||`: the right side's members win.
    static func merged(_ left: JSONValue, _ right: [(key: String, value: JSONValue)]) -> JSONValue {
        var members = left.objectValue ?? []
        for (key, value) in right {
            if let i = members.firstIndex(where: { $0.key == key }) { members[i].value = value } else { members.append((key, value)) }
        }
        return .object(members)
    }
}
