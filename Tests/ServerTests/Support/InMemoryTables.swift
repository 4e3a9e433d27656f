import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage
import Synchronization

/// The rows the in-memory stores share (`InMemoryRecoveryStore`, `InMemorySessionStore`), kept
/// under one lock so each store call is atomic, as its one statement or transaction is in
/// PostgreSQL. `now` plays the database's `now()` (ARCHITECTURE.md rule 3: expiries the store
/// alone decides); a test gives it the clock its `Runtime` reads and steps both together.
/// Like PostgreSQL, a change that fails part-way writes nothing: every mutation works on a copy of
/// the tables and stores it only when the whole call succeeded.
final class InMemoryTables: Sendable {
    struct Challenge {
        var id: String
        var purpose: NewCodeChallenge.Purpose
        var userId: String?
        var email: String?
        var codeHash: [UInt8]
        var attempts = 0
        var maxAttempts: Int
        var expiresAt: Date
        var usedAt: Date?
    }

    struct Limit {
        var windowStart: Date
        var count: Int
    }

    struct RecoveryCode {
        var userId: String
        var hash: [UInt8]
        var usedAt: Date?
    }

    struct Recovery {
        var record: RecoveryRecord
        var tokenHash: [UInt8]
        var createdAt: Date
    }

    struct CancelToken {
        var hash: [UInt8]
        var userId: String
        var recoveryId: String?
        var credentialId: [UInt8]?
        var expiresAt: Date
        var usedAt: Date?
    }

    struct Family {
        var id: String
        var userId: String
        var method: SessionMethod
        var credentialId: [UInt8]?
        var authTime: Date
        var createdAt: Date
        var lastUsedAt: Date
        var browser: Bool
        var revokedAt: Date?
        var endedBy: String?
        /// The DPoP key the session is bound to (migration 32).
        var dpopJKT: String? = nil
    }

    struct RefreshToken {
        var hash: [UInt8]
        var familyId: String
        var expiresAt: Date
        var usedAt: Date?
    }

    struct Receipt {
        var redemption: StepUpRedemption
        var consumed = false
        /// The passkey whose assertion made it (nil: a device key this table does not hold): the
        /// receipt approves only while that passkey is live (`StepUpRedemption.approverIsLive`).
        var approver: [UInt8]? = nil
    }

    /// An event as written: its type, the account it is about, and its key (a session's or recovery's id).
    struct WrittenEvent: Equatable {
        var type: EventType
        var accountId: String
        var key: String?
    }

    struct Tables {
        var users: [String: UserRecord] = [:]
        /// user id → verified address (unique across accounts: `account_emails_email`).
        var emails: [String: String] = [:]
        var credentials: [CredentialRecord] = []
        var revokedCredentials: Set<[UInt8]> = []
        var tickets: [(ticket: EnrolmentTicket, expiresAt: Date, used: Bool)] = []
        var limits: [[UInt8]: Limit] = [:]
        var challenges: [String: Challenge] = [:]
        var recoveryCodes: [RecoveryCode] = []
        var recoveries: [String: Recovery] = [:]
        var cancelTokens: [CancelToken] = []
        var families: [String: Family] = [:]
        var refreshTokens: [[UInt8]: RefreshToken] = [:]
        var receipts: [String: Receipt] = [:]
        var audit: [AuditRecord] = []
        var events: [WrittenEvent] = []
        var mail: [MailToSend] = []
        /// Sealed challenges' ids recorded used by a sign-in (`used_challenges`), with their expiry.
        var usedChallenges: [[UInt8]: Date] = [:]
        /// DPoP proofs seen (`dpop_proofs`): replay key → expiry.
        var dpopProofs: [[UInt8]: Date] = [:]
        /// The language each account last used (SPEC "Mail"), as a sign-in's memo writes it.
        var languages: [String: String] = [:]
        /// A registered passkey's `registration_digest` (SHA-256 of its clientDataJSON), by credential id.
        var registrationDigests: [[UInt8]: [UInt8]] = [:]
    }

    private let tables = Mutex(Tables())
    let now: @Sendable () -> Date

    init(now: @escaping @Sendable () -> Date) { self.now = now }

    /// Reads the tables.
    func read<T>(_ body: (Tables) throws(StorageError) -> T) throws(StorageError) -> T {
        let copy = tables.withLock { $0 }
        return try body(copy)
    }

    /// One atomic change: `body` edits a copy, which replaces the tables only if it returns.
    func change<T: Sendable>(_ body: (inout Tables, Date) throws(StorageError) -> T) throws(StorageError) -> T {
        let now = self.now()
        return try tables.allOrNothing { (t: inout Tables) throws(StorageError) -> T in try body(&t, now) }
    }

    // MARK: What a test sets up or looks at

    var snapshot: Tables { tables.withLock { $0 } }

    func addUser(_ username: String, email: String? = nil) -> UserRecord {
        let user = UserRecord(id: "usr_" + username, userHandle: Array(username.utf8), username: username, displayName: username)
        tables.withLock { t in
            t.users[user.id] = user
            if let email { t.emails[user.id] = email }
        }
        return user
    }

    /// A step-up receipt a change may redeem once (`StepUpRedemption.redeem`).
    func addReceipt(_ redemption: StepUpRedemption, approver: [UInt8]? = nil) {
        tables.withLock { $0.receipts[redemption.jti] = Receipt(redemption: redemption, approver: approver) }
    }

    /// A passkey of `userId`, held until `approvesFrom` when that is in the future.
    func addCredential(id: [UInt8], userId: String, approvesFrom: Date?) {
        let record = CredentialRecord(id: id, userId: userId, publicKey: [], alg: -7, signCount: 0, aaguid: Array(repeating: 0, count: 16),
                                      transports: [], backupEligible: false, backedUp: false, attestationFormat: "none",
                                      attestationType: "none", name: "passkey", flagged: false, createdAt: now(), lastUsedAt: nil,
                                      approvesFrom: approvesFrom, hardwareBound: false)
        tables.withLock { $0.credentials.append(record) }
    }

    /// A cancel link for a held passkey, as its registration writes it.
    func addCancelToken(hash: [UInt8], userId: String, credentialId: [UInt8], expiresAt: Date) {
        tables.withLock {
            $0.cancelTokens.append(CancelToken(hash: hash, userId: userId, recoveryId: nil, credentialId: credentialId, expiresAt: expiresAt))
        }
    }

    func addTicket(_ ticket: EnrolmentTicket, expiresAt: Date) {
        tables.withLock { $0.tickets.append((ticket, expiresAt, false)) }
    }

    // MARK: Shared pieces of the stores' changes

    /// The step-up's receipt consumed; a missing, used, or another user's or action's one rolls
    /// the change back (`AdminRepository`'s `StepUpRedemption.redeem`).
    static func redeem(_ redemption: StepUpRedemption?, in t: inout Tables) throws(StorageError) {
        guard let r = redemption else { return }
        guard redeemable(r, in: t) else { throw StorageError.conflict(.stepUpUsed) }
        t.receipts[r.jti]?.consumed = true
    }

    /// `StepUpRedemption.redeemable`: the receipt unused, the user's, for this action, its approver
    /// live (`approverIsLive`: a passkey of the receipt's user, not revoked — one that is unknown or
    /// another account's approves nothing).
    static func redeemable(_ r: StepUpRedemption, in t: Tables) -> Bool {
        guard let receipt = t.receipts[r.jti], !receipt.consumed, receipt.redemption == r else { return false }
        return receipt.approver.map { approver in
            t.credentials.contains { $0.id == approver && $0.userId == r.userId } && !t.revokedCredentials.contains(approver)
        } ?? true
    }

    /// `SessionRepository.ctes`: the family and its first refresh token.
    /// A proof recorded as `DPoPProofRepository.recording` does: false when it is still kept.
    static func record(_ proof: DPoPBinding?, in t: inout Tables, now: Date) -> Bool {
        guard let proof else { return true }
        if let kept = t.dpopProofs[proof.replay.bytes], kept > now { return false }
        t.dpopProofs[proof.replay.bytes] = now.addingTimeInterval(120)
        return true
    }

    static func start(_ session: NewSession, in t: inout Tables, now: Date) throws(StorageError) {
        guard t.families[session.familyId] == nil else { throw StorageError.conflict(.other("refresh_families_pkey")) }
        guard t.refreshTokens[session.refreshHash] == nil else { throw StorageError.conflict(.other("refresh_tokens_pkey")) }
        t.families[session.familyId] = Family(id: session.familyId, userId: session.userId, method: session.method,
                                                             credentialId: session.credentialId, authTime: session.authTime,
                                                             createdAt: now, lastUsedAt: now, browser: session.browser,
                                                             dpopJKT: session.dpop?.jkt)
        t.refreshTokens[session.refreshHash] = RefreshToken(hash: session.refreshHash, familyId: session.familyId,
                                                                           expiresAt: now.addingTimeInterval(Double(session.ttlSeconds)))
    }

    /// `template` once per affected row, as `AuditTemplate.rows` writes it.
    static func audit(_ template: AuditTemplate, subject: String, detail extra: [(String, JSONValue)], in t: inout Tables) {
        var detail = template.detail.objectMembers ?? []
        detail += extra.map { (key: $0.0, value: $0.1) }
        t.audit.append(AuditRecord(actor: template.actor ?? subject, action: template.action, subject: subject,
                                   detail: .object(detail)))
    }

    static func events(_ events: [OutboxEvent], in t: inout Tables) {
        t.events += events.map { WrittenEvent(type: $0.type, accountId: $0.accountId, key: nil) }
    }
}

extension JSONValue {
    /// An object's members (nil for anything else).
    var objectMembers: [(key: String, value: JSONValue)]? {
        if case .object(let members) = self { return members }
        return nil
    }
}
