import Foundation
import JSON
import PostgreSQL

/// A mail to send, written with the change that makes it (migration 9): the message row and its
/// outbox event (channel `mail`, target = `id`) go in the same transaction.
public struct MailToSend: Sendable {
    public let id: String
    public let recipient: String
    /// The whole RFC 5322 message.
    public let message: [UInt8]
    /// The outbox event that carries it (no address, no code in its data).
    public let event: OutboxEvent

    public init(id: String, recipient: String, message: [UInt8], event: OutboxEvent) {
        self.id = id
        self.recipient = recipient
        self.message = message
        self.event = event
    }
}

/// A one-time-code challenge to store.
public struct NewCodeChallenge: Sendable {
    public enum Purpose: String, Sendable { case emailVerify = "email-verify", emailSignIn = "email-sign-in", recovery }
    public let id: String
    public let purpose: Purpose
    /// nil: nobody has the submitted address or username (no mail; the code can never match).
    public let userId: String?
    public let email: String?
    public let codeHash: [UInt8]
    public let maxAttempts: Int
    public let ttlSeconds: Int

    public init(id: String, purpose: Purpose, userId: String?, email: String?, codeHash: [UInt8], maxAttempts: Int, ttlSeconds: Int) {
        self.id = id
        self.purpose = purpose
        self.userId = userId
        self.email = email
        self.codeHash = codeHash
        self.maxAttempts = maxAttempts
        self.ttlSeconds = ttlSeconds
    }
}

/// A challenge one submission may compare against (its attempt already counted).
public struct CodeAttempt: Sendable {
    public let id: String
    public let purpose: NewCodeChallenge.Purpose
    public let userId: String?
    public let email: String?
    public let codeHash: [UInt8]
}

/// How a recovery was started (column `recoveries.method`).
public enum RecoveryMethod: String, Sendable, CaseIterable {
    /// A code mailed to the account's verified address.
    case email
    /// One of the account's recovery codes.
    case recoveryCode = "recovery-code"
}

/// A stored recovery.
public struct RecoveryRecord: Sendable, Equatable {
    public enum Status: String, Sendable, CaseIterable { case pending, completed, cancelled }
    public let id: String
    public let userId: String
    public let method: RecoveryMethod
    public let notBefore: Date
    public let expiresAt: Date
    public let status: Status
}

/// A recovery to start (its token hashed).
public struct NewRecovery: Sendable {
    public let id: String
    public let userId: String
    public let method: RecoveryMethod
    public let tokenHash: [UInt8]
    public let delaySeconds: Int
    public let ttlSeconds: Int

    public init(id: String, userId: String, method: RecoveryMethod, tokenHash: [UInt8], delaySeconds: Int, ttlSeconds: Int) {
        self.id = id
        self.userId = userId
        self.method = method
        self.tokenHash = tokenHash
        self.delaySeconds = delaySeconds
        self.ttlSeconds = ttlSeconds
    }
}

/// What completing a recovery revokes, inside the registration's transaction
/// (`AccountRepository.register(…, completing:)`).
public struct RecoveryCompletion: Sendable {
    public let recoveryId: String
    /// `LATCHKEY_RECOVERY_REVOKES=all`: the account's passkeys from before too.
    public let revokePasskeys: Bool
    public let audit: AuditRecord
    /// Events for what was revoked: (session ids, device keys, passkey ids).
    public let events: @Sendable (_ sessions: [String], _ deviceKeys: [DeviceKeyRecord], _ passkeys: [[UInt8]]) -> [OutboxEvent]
    /// Audit lines and events for the account's other pending recoveries, cancelled by this one: (id, method) each.
    public let cancelled: @Sendable (_ recoveries: [(id: String, method: RecoveryMethod)]) -> (audit: [AuditRecord], events: [OutboxEvent])

    public init(recoveryId: String, revokePasskeys: Bool, audit: AuditRecord,
                events: @escaping @Sendable ([String], [DeviceKeyRecord], [[UInt8]]) -> [OutboxEvent],
                cancelled: @escaping @Sendable ([(id: String, method: RecoveryMethod)]) -> (audit: [AuditRecord], events: [OutboxEvent])
                    = { _ in ([], []) }) {
        self.recoveryId = recoveryId
        self.revokePasskeys = revokePasskeys
        self.audit = audit
        self.events = events
        self.cancelled = cancelled
    }
}

/// What a completed recovery revoked (the caller refuses those sessions in memory at once).
public struct RecoveryRevocations: Sendable, Equatable {
    public let sessions: [String]
    public let deviceKeys: [String]
    public let passkeys: [[UInt8]]
}

/// Verified addresses, one-time codes, per-account limits, recovery codes, recoveries and mail
/// (migration 9). Storage decides no policy: limits, lifetimes and hashes come from the caller.
public final class RecoveryRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    public static let mailChannel = OutboxChannel.mail

    // MARK: Limits

    /// Counts one use of `key` in its window (a fixed window of `windowSeconds` from its first use)
    /// atomically — every instance bumps the same row — and returns the count including this one and
    /// the seconds left in the window.
    public func bump(key: [UInt8], windowSeconds: Int, by delta: Int = 1) throws(StorageError) -> (count: Int, retryAfter: Int) {
        try pool.run { c in
            let r = try c.query("""
                INSERT INTO account_limits (key, window_start, count) VALUES (\(key), now(), \(delta))
                ON CONFLICT (key) DO UPDATE SET
                  count = CASE WHEN account_limits.window_start + make_interval(secs => \(windowSeconds)) <= now()
                               THEN \(delta) ELSE account_limits.count + \(delta) END,
                  window_start = CASE WHEN account_limits.window_start + make_interval(secs => \(windowSeconds)) <= now()
                               THEN now() ELSE account_limits.window_start END
                RETURNING count, GREATEST(1, CEIL(EXTRACT(EPOCH FROM window_start + make_interval(secs => \(windowSeconds)) - now())))::int AS retry
                """)[0]
            return (try r.int("count"), try r.int("retry"))
        }
    }

    /// Takes back one use counted by `bump` (a right recovery code is no wrong one).
    public func unbump(key: [UInt8]) throws(StorageError) {
        try pool.run { c in try c.execute("UPDATE account_limits SET count = GREATEST(0, count - 1) WHERE key = \(key)") }
    }

    // MARK: Addresses

    /// The account whose verified address is `email` (normalised).
    public func user(email: String) throws(StorageError) -> String? {
        try pool.run { c in try c.query("SELECT user_id FROM account_emails WHERE email = \(email)").first.map { try $0.string("user_id") } }
    }

    public func email(userId: String) throws(StorageError) -> String? {
        try pool.run { c in try c.query("SELECT email FROM account_emails WHERE user_id = \(userId)").first.map { try $0.string("email") } }
    }

    /// Stores `email` as the account's verified address (replacing any), with the audit line and
    /// events; `.conflict` when another account has verified it. `replacing(previous)`: the mail
    /// that tells the address being replaced (another one than `email`), written in the same
    /// transaction, which also uses up the sign-in and recovery codes mailed to that address.
    public func setVerifiedEmail(userId: String, email: String, audit: AuditRecord, events: [OutboxEvent],
                                 replacing: (_ previous: String) -> [MailToSend] = { _ in [] }) throws(StorageError) {
        try pool.runTransaction { t in
            let taken = try t.query("SELECT 1 AS one FROM account_emails WHERE email = \(email) AND user_id <> \(userId)")
            guard taken.isEmpty else { throw StorageError.conflict(.other("account_emails_email")) }
            if let previous = try t.query("SELECT email FROM account_emails WHERE user_id = \(userId) FOR UPDATE").first,
               case let old = try previous.string("email"), old != email {
                try RecoveryRepository.write(replacing(old), on: t)
                // Codes already mailed to the old address (sign-in, recovery) stop working with it.
                try t.execute("""
                    UPDATE otp_challenges SET used_at = now()
                    WHERE user_id = \(userId) AND purpose IN ('email-sign-in', 'recovery') AND used_at IS NULL
                    """)
            }
            try t.execute("""
                INSERT INTO account_emails (user_id, email, verified_at) VALUES (\(userId), \(email), now())
                ON CONFLICT (user_id) DO UPDATE SET email = EXCLUDED.email, verified_at = now()
                """)
            try AuditRepository.write([audit], on: t)
            try OutboxRepository.write(events, on: t)
        }
    }

    // MARK: One-time codes

    /// Stores a challenge and, in the same transaction, the mail that carries its code (when there
    /// is one), with audit lines and events.
    /// With `redeeming` (the step-up an address change needs, SPEC "Assurance"), only together with its redemption.
    public func insert(_ challenge: NewCodeChallenge, mail: [MailToSend], audit: [AuditRecord] = [],
                       events: [OutboxEvent] = [], redeeming: StepUpRedemption? = nil) throws(StorageError) -> Date {
        try pool.runTransaction { t in
            try StepUpRedemption.redeem(redeeming, on: t)
            let r = try t.query("""
                INSERT INTO otp_challenges (id, purpose, user_id, email, code_hash, max_attempts, expires_at)
                VALUES (\(challenge.id), \(challenge.purpose.rawValue), \(challenge.userId), \(challenge.email), \(challenge.codeHash),
                        \(challenge.maxAttempts), now() + make_interval(secs => \(challenge.ttlSeconds)))
                RETURNING expires_at
                """)
            try RecoveryRepository.write(mail, on: t)
            try AuditRepository.write(audit, on: t)
            try OutboxRepository.write(events, on: t)
            // Expired challenges go now and then (cheap: indexed).
            try t.execute("DELETE FROM otp_challenges WHERE expires_at < now() - interval '1 day'")
            return try r[0].date("expires_at")
        }
    }

    /// Counts one attempt on a live challenge of `purpose` (not used, not expired, attempts left)
    /// and returns what to compare against; nil when there is no such live challenge. The count is
    /// one statement, so concurrent guesses never exceed the attempts.
    public func attempt(id: String, purpose: NewCodeChallenge.Purpose) throws(StorageError) -> CodeAttempt? {
        try pool.run { c in
            try c.query("""
                UPDATE otp_challenges SET attempts = attempts + 1
                WHERE id = \(id) AND purpose = \(purpose.rawValue) AND used_at IS NULL AND expires_at > now() AND attempts < max_attempts
                RETURNING id, purpose, user_id, email, code_hash
                """).first.map { r in
                CodeAttempt(id: try r.string("id"), purpose: purpose, userId: try r.optionalString("user_id"),
                            email: try r.optionalString("email"), codeHash: try r.bytes("code_hash"))
            }
        }
    }

    /// Uses a challenge up (a right code); false when a concurrent submission used it first.
    public func use(id: String) throws(StorageError) -> Bool {
        try pool.run { c in try c.execute("UPDATE otp_challenges SET used_at = now() WHERE id = \(id) AND used_at IS NULL") > 0 }
    }

    // MARK: Recovery codes

    /// Replaces the account's recovery codes with `hashes`, with the audit line, redeeming the
    /// step-up that approved it (a used one rolls the change back: `.conflict(.stepUpUsed)`).
    public func replaceRecoveryCodes(userId: String, hashes: [[UInt8]], audit: AuditRecord,
                                     redeeming: StepUpRedemption) throws(StorageError) {
        try pool.runTransaction { t in
            try StepUpRedemption.redeem(redeeming, on: t)
            try t.execute("DELETE FROM recovery_codes WHERE user_id = \(userId)")
            for h in hashes { try t.execute("INSERT INTO recovery_codes (user_id, code_hash) VALUES (\(userId), \(h))") }
            try AuditRepository.write([audit], on: t)
        }
    }

    /// Uses one of the account's recovery codes; false when it is not one, or was used.
    public func useRecoveryCode(userId: String, hash: [UInt8]) throws(StorageError) -> Bool {
        try pool.run { c in
            try c.execute("""
                UPDATE recovery_codes SET used_at = now() WHERE user_id = \(userId) AND code_hash = \(hash) AND used_at IS NULL
                """) > 0
        }
    }

    public func unusedRecoveryCodes(userId: String) throws(StorageError) -> Int {
        try pool.run { c in
            try c.query("SELECT count(*)::int AS n FROM recovery_codes WHERE user_id = \(userId) AND used_at IS NULL")[0].int("n")
        }
    }

    // MARK: Recoveries

    /// Starts a recovery, with its mail ("recovery started"), audit line and events.
    /// `cancelTokenHash`: the mailed cancel link's token (SPEC "Assurance"), valid as long as the recovery.
    public func start(_ r: NewRecovery, mail: [MailToSend], audit: AuditRecord, events: [OutboxEvent],
                      cancelTokenHash: [UInt8]? = nil) throws(StorageError) -> RecoveryRecord {
        try pool.runTransaction { t in
            let row = try t.query("""
                INSERT INTO recoveries (id, user_id, method, token_hash, not_before, expires_at)
                VALUES (\(r.id), \(r.userId), \(r.method.rawValue), \(r.tokenHash), now() + make_interval(secs => \(r.delaySeconds)),
                        now() + make_interval(secs => \(r.delaySeconds + r.ttlSeconds)))
                RETURNING \(unsafeRaw: RecoveryRepository.columns)
                """)[0]
            if let cancelTokenHash {
                try t.execute("""
                    INSERT INTO cancel_tokens (hash, user_id, recovery_id, expires_at)
                    SELECT \(cancelTokenHash), user_id, id, expires_at FROM recoveries WHERE id = \(r.id)
                    """)
            }
            try RecoveryRepository.write(mail, on: t)
            try AuditRepository.write([audit], on: t)
            try OutboxRepository.write(events, on: t)
            return try RecoveryRepository.recovery(row)
        }
    }

    /// The recovery a token belongs to, whatever its state, with the database's clock.
    public func recovery(tokenHash: [UInt8]) throws(StorageError) -> (RecoveryRecord, now: Date)? {
        try pool.run { c in
            try c.query("SELECT \(unsafeRaw: RecoveryRepository.columns), now() AS db_now FROM recoveries WHERE token_hash = \(tokenHash)")
                .first.map { (try RecoveryRepository.recovery($0), try $0.date("db_now")) }
        }
    }

    /// Cancels a pending recovery of `userId`; nil when it has none with that id (any state: the
    /// caller tells 404 from a finished one by `recovery(id:)`).
    public func cancel(id: String, userId: String, audit: AuditRecord, events: [OutboxEvent]) throws(StorageError) -> Bool {
        try pool.runTransaction { t in
            let rows = try t.query("""
                UPDATE recoveries SET status = 'cancelled', finished_at = now()
                WHERE id = \(id) AND user_id = \(userId) AND status = 'pending' RETURNING id
                """)
            guard !rows.isEmpty else { return false }
            try AuditRepository.write([audit], on: t)
            try OutboxRepository.write(events, on: t)
            return true
        }
    }

    public func recovery(id: String) throws(StorageError) -> RecoveryRecord? {
        try pool.run { c in
            try c.query("SELECT \(unsafeRaw: RecoveryRepository.columns) FROM recoveries WHERE id = \(id)").first.map(RecoveryRepository.recovery)
        }
    }

    /// The account's pending recoveries (the banner).
    public func pending(userId: String) throws(StorageError) -> [RecoveryRecord] {
        try pool.run { c in
            try c.query("""
                SELECT \(unsafeRaw: RecoveryRepository.columns) FROM recoveries
                WHERE user_id = \(userId) AND status = 'pending' AND expires_at > now() ORDER BY created_at DESC
                """).map(RecoveryRepository.recovery)
        }
    }

    /// Completes a recovery inside the registration's transaction: only a pending one whose delay
    /// has passed and whose time has not run out (else `.notFound`, and the transaction rolls back);
    /// then every session of the account, every device key and (`revokePasskeys`) every passkey but
    /// `keeping` are revoked, with the audit line and events.
    static func complete(_ completion: RecoveryCompletion, userId: String, keeping credentialId: [UInt8],
                         on t: PostgresConnection) throws -> RecoveryRevocations {
        let done = try t.query("""
            UPDATE recoveries SET status = 'completed', finished_at = now()
            WHERE id = \(completion.recoveryId) AND user_id = \(userId) AND status = 'pending' AND not_before <= now() AND expires_at > now()
            RETURNING id
            """)
        guard !done.isEmpty else { throw StorageError.notFound }
        // The account's other pending recoveries end here too: each is a bearer credential that could
        // register a passkey later and undo this recovery (revoking the sessions it just began).
        let others = try t.query("""
            UPDATE recoveries SET status = 'cancelled', finished_at = now()
            WHERE user_id = \(userId) AND status = 'pending' AND id <> \(completion.recoveryId)
            RETURNING id, method
            """).map { (id: try $0.string("id"), method: try $0.value("method", as: RecoveryMethod.self)) }
        let sessions = try t.query("""
            UPDATE refresh_families SET revoked_at = now() WHERE user_id = \(userId) AND revoked_at IS NULL RETURNING id
            """).map { try $0.string("id") }
        let keys = try t.query("""
            UPDATE device_keys SET revoked_at = now() WHERE user_id = \(userId) AND revoked_at IS NULL
            RETURNING \(unsafeRaw: DeviceKeyRepository.columns)
            """).map(DeviceKeyRepository.deviceKey)
        var passkeys: [[UInt8]] = []
        if completion.revokePasskeys {
            passkeys = try t.query("""
                UPDATE credentials SET revoked_at = now() WHERE user_id = \(userId) AND revoked_at IS NULL AND id <> \(credentialId)
                RETURNING id
                """).map { try $0.bytes("id") }
        }
        let ended = completion.cancelled(others)
        try AuditRepository.write([completion.audit] + ended.audit, on: t)
        try OutboxRepository.write(completion.events(sessions, keys, passkeys) + ended.events, on: t)
        return RecoveryRevocations(sessions: sessions, deviceKeys: keys.map(\.id), passkeys: passkeys)
    }

    static let columns = "id, user_id, method, not_before, expires_at, status"

    static func recovery(_ r: Row) throws -> RecoveryRecord {
        RecoveryRecord(id: try r.string("id"), userId: try r.string("user_id"), method: try r.value("method"),
                       notBefore: try r.date("not_before"), expiresAt: try r.date("expires_at"), status: try r.value("status"))
    }

    /// An audit line on its own (a refused code: nothing else changes).
    public func appendAudit(_ record: AuditRecord) throws(StorageError) {
        try pool.run { c in try AuditRepository.write([record], on: c) }
    }

    // MARK: Mail

    /// Writes mail rows and their outbox events on `t` (the caller's transaction).
    static func write(_ mail: [MailToSend], on t: PostgresConnection) throws {
        for m in mail {
            try t.execute("INSERT INTO mail_messages (id, recipient, message) VALUES (\(m.id), \(m.recipient), \(m.message))")
        }
        try OutboxRepository.write(mail.map(\.event), on: t)
    }

    /// A queued mail (nil once sent, or unknown).
    public func mail(id: String) throws(StorageError) -> (recipient: String, message: [UInt8])? {
        try pool.run { c in
            try c.query("SELECT recipient, message FROM mail_messages WHERE id = \(id) AND sent_at IS NULL AND message IS NOT NULL")
                .first.map { (try $0.string("recipient"), try $0.bytes("message")) }
        }
    }

    /// A mail went out: its text (which may hold a code) is cleared.
    public func sent(id: String) throws(StorageError) {
        try pool.run { c in try c.execute("UPDATE mail_messages SET sent_at = now(), message = NULL WHERE id = \(id)") }
    }
}

// MARK: Cancel links (SPEC "Assurance": the owner can undo it without a session)

/// A cancel link for a held passkey, written with its registration.
public struct NewCancelToken: Sendable {
    public let hash: [UInt8]
    public let userId: String
    public let credentialId: [UInt8]
    public let expiresAt: Date

    public init(hash: [UInt8], userId: String, credentialId: [UInt8], expiresAt: Date) {
        self.hash = hash
        self.userId = userId
        self.credentialId = credentialId
        self.expiresAt = expiresAt
    }
}

/// What a used cancel link undid.
public enum CancelTarget: Sendable {
    case recovery(userId: String, recoveryId: String, method: RecoveryMethod)
    /// The held passkey, revoked, and the sessions it began, ended.
    case passkey(userId: String, credential: CredentialRecord, endedSessions: [String])
}

extension RecoveryRepository {
    static func insert(_ token: NewCancelToken, on t: PostgresConnection) throws {
        try t.execute("""
            INSERT INTO cancel_tokens (hash, user_id, credential_id, expires_at)
            VALUES (\(token.hash), \(token.userId), \(token.credentialId), \(token.expiresAt))
            """)
    }

    /// Uses a cancel link's token and undoes what it names, in one transaction: a recovery still
    /// pending is cancelled; a passkey still held is revoked with every session it began. nil (and
    /// nothing written) when the token is unknown, used or expired, or what it names is already over
    /// (the recovery finished, the hold ended, the passkey gone). `record` gives the audit lines and
    /// events for what was undone.
    public func useCancelToken(hash: [UInt8],
                               record: (CancelTarget) -> (audit: [AuditRecord], events: [OutboxEvent])) throws(StorageError) -> CancelTarget? {
        do {
            return try pool.runTransaction { t -> CancelTarget? in
                guard let token = try t.query("""
                    UPDATE cancel_tokens SET used_at = now()
                    WHERE hash = \(hash) AND used_at IS NULL AND expires_at > now()
                    RETURNING user_id, recovery_id, credential_id
                    """).first else { return nil }
                let userId = try token.string("user_id")
                let target: CancelTarget
                if let recoveryId = try token.optionalString("recovery_id") {
                    guard let row = try t.query("""
                        UPDATE recoveries SET status = 'cancelled', finished_at = now()
                        WHERE id = \(recoveryId) AND user_id = \(userId) AND status = 'pending' AND expires_at > now()
                        RETURNING method
                        """).first else { throw StorageError.notFound }
                    target = .recovery(userId: userId, recoveryId: recoveryId, method: try row.value("method"))
                } else if let credentialId = try token.optionalBytes("credential_id") {
                    guard let revoked = try t.query("""
                        UPDATE credentials SET revoked_at = now()
                        WHERE id = \(credentialId) AND user_id = \(userId) AND revoked_at IS NULL AND approves_from > now()
                        RETURNING \(unsafeRaw: AccountRepository.credentialColumns)
                        """).first.map(AccountRepository.credential) else { throw StorageError.notFound }
                    let ended = try t.query("""
                        UPDATE refresh_families SET revoked_at = now()
                        WHERE credential_id = \(credentialId) AND user_id = \(userId) AND revoked_at IS NULL RETURNING id
                        """).map { try $0.string("id") }
                    target = .passkey(userId: userId, credential: revoked, endedSessions: ended)
                } else {
                    throw StorageError.notFound
                }
                let (audit, events) = record(target)
                try AuditRepository.write(audit, on: t)
                try OutboxRepository.write(events, on: t)
                return target
            }
        } catch .notFound {
            return nil
        }
    }
}
