import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage
import Crypto

/// `RecoveryStore` in memory, keeping the rules `RecoveryRepository`'s SQL keeps: fixed-window
/// limits, a challenge's attempts counted before the compare and only while it is unused, unexpired
/// and has attempts left, single use, recovery codes used once, a recovery's delay and lifetime on
/// the store's clock, a cancel link used once and only while what it names can still be undone,
/// step-up receipts redeemed once, and each change written whole or not at all.
struct InMemoryRecoveryStore: RecoveryStore {
    let tables: InMemoryTables

    /// `RecoveryRepository.countUse`: a fixed window from its first use.
    func bump(key: [UInt8], windowSeconds: Int, by delta: Int) throws(StorageError) -> (count: Int, retryAfter: Int) {
        try tables.change { (t, now) throws(StorageError) in
            let window = Double(windowSeconds)
            var limit = InMemoryTables.Limit(windowStart: now, count: delta)
            if let l = t.limits[key], l.windowStart.addingTimeInterval(window) > now {
                limit = InMemoryTables.Limit(windowStart: l.windowStart, count: l.count + delta)
            }
            t.limits[key] = limit
            let left = limit.windowStart.addingTimeInterval(window).timeIntervalSince(now)
            return (limit.count, max(1, Int(left.rounded(.up))))
        }
    }

    func email(userId: String) throws(StorageError) -> String? {
        try tables.read { t throws(StorageError) in t.emails[userId] }
    }

    func recipient(_ lookup: CodeRecipientLookup) throws(StorageError) -> CodeRecipient {
        try tables.read { t throws(StorageError) in
            let userId: String? = switch lookup {
            case .username(let name): t.users.values.first { $0.username == name }?.id
            case .email(let address): t.emails.first { $0.value == address }?.key
            }
            // The in-memory users keep no mail language (English).
            return CodeRecipient(userId: userId, email: userId.flatMap { t.emails[$0] }, language: nil)
        }
    }

    /// `RecoveryRepository.startChallenge`: the identifier's limit counted always; past it nothing
    /// else. The account's counted only when a mail may go; past it the challenge is stored with the
    /// unmatchable hash and no mail. Expired challenges swept.
    func startChallenge(_ s: CodeChallengeStart) throws(StorageError) -> CodeChallengeStarted {
        try tables.change { (t, now) throws(StorageError) in
            func bump(_ limit: CodeStartLimit) -> (count: Int, retry: Int) {
                let window = Double(limit.windowSeconds)
                var counted = InMemoryTables.Limit(windowStart: now, count: 1)
                if let l = t.limits[limit.key], l.windowStart.addingTimeInterval(window) > now {
                    counted = InMemoryTables.Limit(windowStart: l.windowStart, count: l.count + 1)
                }
                t.limits[limit.key] = counted
                return (counted.count, max(1, Int(counted.windowStart.addingTimeInterval(window).timeIntervalSince(now).rounded(.up))))
            }
            let identifier = bump(s.identifierLimit)
            t.challenges = t.challenges.filter { $0.value.expiresAt >= now.addingTimeInterval(-86400) }
            guard identifier.count <= s.identifierLimit.max else { return .limited(retryAfter: identifier.retry) }
            let mails = s.sends && bump(s.accountLimit).count <= s.accountLimit.max
            let c = s.challenge
            guard t.challenges[c.id] == nil else { throw StorageError.conflict(.other("otp_challenges_pkey")) }
            let expires = now.addingTimeInterval(Double(c.ttlSeconds))
            t.challenges[c.id] = InMemoryTables.Challenge(id: c.id, purpose: c.purpose, userId: c.userId, email: nil,
                                                          codeHash: mails ? c.codeHash : s.unmatchableHash,
                                                          maxAttempts: c.maxAttempts, expiresAt: expires)
            t.audit.append(s.audit)
            if mails {
                t.mail.append(s.mail)
                InMemoryTables.events([s.mail.event], in: &t)
            }
            return .started(expiresAt: expires)
        }
    }

    func accountState(userId: String) throws(StorageError) -> RecoveryAccountState {
        let now = tables.now()
        return try tables.read { t throws(StorageError) in
            let pending = t.recoveries.values
                .filter { $0.record.userId == userId && $0.record.status == .pending && $0.record.expiresAt > now }
                .sorted { $0.createdAt > $1.createdAt }.map(\.record)
            return RecoveryAccountState(email: t.emails[userId],
                                        recoveryCodesLeft: t.recoveryCodes.filter { $0.userId == userId && $0.usedAt == nil }.count,
                                        pending: pending)
        }
    }

    func addressChange(userId: String) throws(StorageError) -> AddressChangeAccount {
        try tables.read { t throws(StorageError) in
            AddressChangeAccount(hasPasskeys: t.credentials.contains { $0.userId == userId && !t.revokedCredentials.contains($0.id) },
                                 language: t.languages[userId])
        }
    }

    /// `RecoveryRepository.insert`: the limit counted first (past it nothing else, the step-up
    /// unspent), then the step-up redeemed, the challenge, its mail and the language memo.
    func insert(_ challenge: NewCodeChallenge, mail: [MailToSend], audit: [AuditRecord], events: [OutboxEvent],
                redeeming: StepUpRedemption?, language: String?, limit: CodeStartLimit?) throws(StorageError) -> CodeChallengeStarted {
        if let limit {
            let counted = try bump(key: limit.key, windowSeconds: limit.windowSeconds, by: 1)
            guard counted.count <= limit.max else { return .limited(retryAfter: counted.retryAfter) }
        }
        return try tables.change { (t, now) throws(StorageError) in
            try InMemoryTables.redeem(redeeming, in: &t)
            guard t.challenges[challenge.id] == nil else { throw StorageError.conflict(.other("otp_challenges_pkey")) }
            let expires = now.addingTimeInterval(Double(challenge.ttlSeconds))
            t.challenges[challenge.id] = InMemoryTables.Challenge(id: challenge.id, purpose: challenge.purpose, userId: challenge.userId,
                                                                  email: challenge.email, codeHash: challenge.codeHash,
                                                                  maxAttempts: challenge.maxAttempts, expiresAt: expires)
            t.mail += mail
            t.audit += audit
            InMemoryTables.events(mail.map(\.event) + events, in: &t)
            if let userId = challenge.userId, let language { t.languages[userId] = language }
            // Expired challenges go a day after they expire.
            t.challenges = t.challenges.filter { $0.value.expiresAt >= now.addingTimeInterval(-86400) }
            return .started(expiresAt: expires)
        }
    }

    func codeChallenge(id: String, purpose: NewCodeChallenge.Purpose) throws(StorageError) -> CodeChallengeRead? {
        let now = tables.now()
        return try tables.read { t throws(StorageError) in
            guard let c = t.challenges[id], c.purpose == purpose, c.usedAt == nil, c.expiresAt > now, c.attempts < c.maxAttempts else {
                return nil
            }
            return CodeChallengeRead(userId: c.userId, email: c.email, user: c.userId.flatMap { t.users[$0] },
                                     accountEmail: c.userId.flatMap { t.emails[$0] }, language: c.userId.flatMap { t.languages[$0] })
        }
    }

    /// `RecoveryRepository.attempt`: the attempt counted only on a live challenge of that purpose
    /// still naming the account the read found; a wrong code audited once; a right one used up.
    static func attempt(_ s: CodeSubmission, in t: inout InMemoryTables.Tables, now: Date) -> CodeOutcome<InMemoryTables.Challenge> {
        guard let c = t.challenges[s.id], c.purpose == s.purpose, c.userId == s.userId, c.usedAt == nil, c.expiresAt > now,
              c.attempts < c.maxAttempts else { return .noChallenge }
        t.challenges[s.id]?.attempts += 1
        guard c.codeHash == s.presentedHash else {
            InMemoryTables.audit(s.rejected, subject: c.userId ?? "", detail: [], in: &t)
            return .wrong
        }
        t.challenges[s.id]?.usedAt = now
        return .right(c)
    }

    func verifyAddress(_ code: CodeSubmission, previous: String?, notice: [MailToSend], audit: AuditRecord,
                       events: [OutboxEvent]) throws(StorageError) -> AddressVerification {
        try tables.change { (t, now) throws(StorageError) -> AddressVerification in
            guard let userId = code.userId else { return .noChallenge }
            let current = t.emails[userId]
            guard current == previous else { return .previousChanged(current: current) }
            switch Self.attempt(code, in: &t, now: now) {
            case .noChallenge: return .noChallenge
            case .wrong: return .wrong
            case .right(let c):
                guard let email = c.email else { return .noChallenge }
                // The unique index on account_emails.email: the whole change rolls back.
                if t.emails.contains(where: { $0.key != userId && $0.value == email }) {
                    throw StorageError.conflict(.other("account_emails_email"))
                }
                // Codes already mailed to a replaced address stop working with it.
                if let current, current != email {
                    for (id, c) in t.challenges where c.userId == userId && c.usedAt == nil && [.emailSignIn, .recovery].contains(c.purpose) {
                        t.challenges[id]?.usedAt = now
                    }
                }
                t.emails[userId] = email
                t.audit.append(audit)
                InMemoryTables.events(notice.map(\.event) + events, in: &t)
                t.mail += notice
                return .stored
            }
        }
    }

    func signIn(_ code: CodeSubmission, session: NewSession, audit: [AuditRecord], language: String?) throws(StorageError) -> CodeOutcome<Bool> {
        try tables.change { (t, now) throws(StorageError) -> CodeOutcome<Bool> in
            switch Self.attempt(code, in: &t, now: now) {
            case .noChallenge: return .noChallenge
            case .wrong: return .wrong
            case .right:
                // A session with a DPoP proof seen before is not started.
                guard InMemoryTables.record(session.dpop, in: &t, now: now) else { return .right(false) }
                try InMemoryTables.start(session, in: &t, now: now)
                t.audit += audit
                if let language { t.languages[session.userId] = language }
                return .right(true)
            }
        }
    }

    func recover(_ code: CodeSubmission, address: String?, recovery: NewRecovery, mail: [MailToSend], audit: AuditRecord,
                 events: [OutboxEvent], cancelTokenHash: [UInt8]?) throws(StorageError) -> CodeOutcome<RecoveryRecord> {
        try tables.change { (t, now) throws(StorageError) -> CodeOutcome<RecoveryRecord> in
            guard code.userId.flatMap({ t.emails[$0] }) == address else { return .noChallenge }
            switch Self.attempt(code, in: &t, now: now) {
            case .noChallenge: return .noChallenge
            case .wrong: return .wrong
            case .right:
                return .right(try Self.start(recovery, mail: mail, audit: audit, events: events, cancelTokenHash: cancelTokenHash,
                                             in: &t, now: now))
            }
        }
    }

    func replaceRecoveryCodes(userId: String, hashes: [[UInt8]], audit: AuditRecord, redeeming: StepUpRedemption) throws(StorageError) {
        try tables.change { (t, _) throws(StorageError) in
            try InMemoryTables.redeem(redeeming, in: &t)
            t.recoveryCodes.removeAll { $0.userId == userId }
            t.recoveryCodes += hashes.map { InMemoryTables.RecoveryCode(userId: userId, hash: $0) }
            t.audit.append(audit)
        }
    }

    /// `RecoveryRepository.recover(_: RecoveryCodeSubmission, …)`: a wrong code counts one, a right
    /// one nothing and is refused too once wrong ones fill the window; within it the code used and
    /// the recovery started, or the rejection audited.
    func recover(_ code: RecoveryCodeSubmission, recovery: NewRecovery, mail: [MailToSend], audit: AuditRecord, events: [OutboxEvent],
                 cancelTokenHash: [UInt8]?) throws(StorageError) -> RecoveryCodeOutcome {
        try tables.change { (t, now) throws(StorageError) -> RecoveryCodeOutcome in
            let index = code.userId.flatMap { userId in
                t.recoveryCodes.firstIndex { $0.userId == userId && $0.hash == code.hash && $0.usedAt == nil }
            }
            let window = Double(code.limit.windowSeconds)
            var limit = InMemoryTables.Limit(windowStart: now, count: index == nil ? 1 : 0)
            if let l = t.limits[code.limit.key], l.windowStart.addingTimeInterval(window) > now {
                limit = InMemoryTables.Limit(windowStart: l.windowStart, count: l.count + (index == nil ? 1 : 0))
            }
            t.limits[code.limit.key] = limit
            guard limit.count + (index == nil ? 0 : 1) <= code.limit.max else {
                return .limited(retryAfter: max(1, Int(limit.windowStart.addingTimeInterval(window).timeIntervalSince(now).rounded(.up))))
            }
            guard let index else {
                t.audit.append(code.rejected)
                return .wrong
            }
            t.recoveryCodes[index].usedAt = now
            return .started(try Self.start(recovery, mail: mail, audit: audit, events: events, cancelTokenHash: cancelTokenHash,
                                           in: &t, now: now))
        }
    }

    static func start(_ r: NewRecovery, mail: [MailToSend], audit: AuditRecord, events: [OutboxEvent],
                      cancelTokenHash: [UInt8]?, in t: inout InMemoryTables.Tables, now: Date) throws(StorageError) -> RecoveryRecord {
        guard t.recoveries[r.id] == nil else { throw StorageError.conflict(.other("recoveries_pkey")) }
        let record = RecoveryRecord(id: r.id, userId: r.userId, method: r.method,
                                    notBefore: now.addingTimeInterval(Double(r.delaySeconds)),
                                    expiresAt: now.addingTimeInterval(Double(r.delaySeconds + r.ttlSeconds)), status: .pending)
        t.recoveries[r.id] = InMemoryTables.Recovery(record: record, tokenHash: r.tokenHash, createdAt: now)
        if let cancelTokenHash {
            t.cancelTokens.append(InMemoryTables.CancelToken(hash: cancelTokenHash, userId: r.userId, recoveryId: r.id, credentialId: nil,
                                                             expiresAt: record.expiresAt))
        }
        t.mail += mail
        t.audit.append(audit)
        InMemoryTables.events(mail.map(\.event) + events, in: &t)
        return record
    }

    func recovery(tokenHash: [UInt8]) throws(StorageError) -> (RecoveryRecord, now: Date)? {
        let now = tables.now()
        return try tables.read { t throws(StorageError) in
            t.recoveries.values.first { $0.tokenHash == tokenHash }.map { ($0.record, now) }
        }
    }

    func recovery(id: String) throws(StorageError) -> RecoveryRecord? {
        try tables.read { t throws(StorageError) in t.recoveries[id]?.record }
    }

    func cancel(id: String, userId: String, audit: AuditRecord, events: [OutboxEvent]) throws(StorageError) -> Bool {
        try tables.change { (t, now) throws(StorageError) in
            guard let r = t.recoveries[id], r.record.userId == userId, r.record.status == .pending else { return false }
            t.recoveries[id]?.record = r.record.with(status: .cancelled)
            t.audit.append(audit)
            InMemoryTables.events(events, in: &t)
            _ = now
            return true
        }
    }

    func useCancelToken(hash: [UInt8], now appNow: Date, records: CancelLinkRecords) throws(StorageError) -> CancelTarget? {
        do {
            return try tables.change { (t, now) throws(StorageError) -> CancelTarget? in
                // A recovery's link lives as long as the recovery (the store's clock); a held passkey's
                // as long as its hold (the server's clock, passed in).
                guard let i = t.cancelTokens.firstIndex(where: {
                    $0.hash == hash && $0.usedAt == nil && $0.expiresAt > ($0.recoveryId == nil ? appNow : now)
                }) else { return nil }
                t.cancelTokens[i].usedAt = now
                let token = t.cancelTokens[i]
                if let id = token.recoveryId, let r = t.recoveries[id], r.record.userId == token.userId, r.record.status == .pending,
                   r.record.expiresAt > now {
                    t.recoveries[id]?.record = r.record.with(status: .cancelled)
                    InMemoryTables.audit(records.recoveryAudit, subject: token.userId, detail: [("recoveryId", .string(id))], in: &t)
                    t.events.append(.init(type: records.recoveryEvent.type, accountId: token.userId, key: id))
                    return .recovery(userId: token.userId, recoveryId: id, method: r.record.method)
                }
                if let credentialId = token.credentialId,
                   let c = t.credentials.first(where: { $0.id == credentialId && $0.userId == token.userId }),
                   !t.revokedCredentials.contains(credentialId), let hold = c.approvesFrom, hold > appNow {
                    t.revokedCredentials.insert(credentialId)
                    var ended: [String] = []
                    for (id, f) in t.families where f.credentialId == credentialId && f.userId == token.userId && f.revokedAt == nil {
                        t.families[id]?.revokedAt = now
                        ended.append(id)
                    }
                    InMemoryTables.audit(records.passkeyAudit, subject: token.userId,
                                         detail: [("credentialId", .string(Base64URL.encode(credentialId)))], in: &t)
                    t.events.append(.init(type: records.passkeyEvent.type, accountId: token.userId, key: Base64URL.encode(credentialId)))
                    t.events += ended.map { .init(type: records.sessionEvent.type, accountId: token.userId, key: $0) }
                    return .passkey(userId: token.userId, credential: c, endedSessions: ended)
                }
                // The token was good but what it names is over: nothing is written, the token stays unused.
                throw StorageError.notFound
            }
        } catch .notFound {
            return nil
        }
    }
}

extension RecoveryRecord {
    func with(status: Status) -> RecoveryRecord {
        RecoveryRecord(id: id, userId: userId, method: method, notBefore: notBefore, expiresAt: expiresAt, status: status)
    }
}
