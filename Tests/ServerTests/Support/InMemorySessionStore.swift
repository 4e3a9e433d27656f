import Foundation
@testable import LatchkeyServer
@testable import Storage

/// `SessionStore` (and the revocation source `RevokedSessions` reads) in memory, keeping the rules
/// `SessionRepository`'s SQL keeps: a refresh token is used once, only while unexpired and while its
/// family is live (never an `oauth` or browser family's); rotating moves the family's last use and
/// adds the next token; a token presented after its use revokes its whole family, with the audit line
/// and event, in the same change; a revoked family's sessions are neither listed nor standing; a
/// session is listed only while a token of it is still usable; an unknown session counts as revoked.
struct InMemorySessionStore: SessionStore, SessionRevocationSource {
    let tables: InMemoryTables

    func start(session: NewSession, audit: [AuditRecord], language: String?) throws(StorageError) {
        try tables.change { (t, now) throws(StorageError) in
            try InMemoryTables.start(session, in: &t, now: now)
            t.audit += audit
            if let language { t.languages[session.userId] = language }
        }
    }

    func rotate(hash: [UInt8], newHash: [UInt8], ttlSeconds: Int, reuseAudit: AuditTemplate,
                reuseEvent: EventTemplate?, dpop: DPoPBinding?) throws(StorageError) -> RefreshOutcome {
        try tables.change { (t, now) throws(StorageError) in
            // A bound family rotates only with a proof by its key; a proof is accepted once.
            guard InMemoryTables.record(dpop, in: &t, now: now) else { return .proofReplayed }
            if let token = t.refreshTokens[hash], let family = t.families[token.familyId], let bound = family.dpopJKT, bound != dpop?.jkt {
                return .proofRequired
            }
            if let token = t.refreshTokens[hash], token.usedAt == nil, token.expiresAt > now, let family = t.families[token.familyId],
               family.revokedAt == nil, family.method != .oauth, !family.browser {
                if family.dpopJKT == nil, let jkt = dpop?.jkt { t.families[family.id]?.dpopJKT = jkt }
                t.refreshTokens[hash]?.usedAt = now
                t.families[family.id]?.lastUsedAt = now
                guard t.refreshTokens[newHash] == nil else { throw StorageError.conflict(.other("refresh_tokens_pkey")) }
                t.refreshTokens[newHash] = InMemoryTables.RefreshToken(hash: newHash, familyId: family.id,
                                                                       expiresAt: now.addingTimeInterval(Double(ttlSeconds)))
                return .rotated(userId: family.userId, familyId: family.id, authTime: family.authTime, method: family.method,
                                jkt: t.families[family.id]?.dpopJKT)
            }
            // Presented after its use: the whole family is revoked (RFC 9700 §4.14.2), once.
            if let token = t.refreshTokens[hash], token.usedAt != nil, let family = t.families[token.familyId], family.revokedAt == nil {
                t.families[family.id]?.revokedAt = now
                InMemoryTables.audit(reuseAudit, subject: family.userId, detail: [], in: &t)
                if let reuseEvent { t.events.append(.init(type: reuseEvent.type, accountId: family.userId, key: family.id)) }
                return .reused(familyId: family.id)
            }
            return .invalid
        }
    }

    func revoke(userId: String, familyId: String?, logout: Bool, revokedEvent: EventTemplate?) throws(StorageError) -> [String] {
        try tables.change { (t, now) throws(StorageError) in
            var ended: [String] = []
            for (id, f) in t.families where f.userId == userId && f.revokedAt == nil && (familyId == nil || id == familyId) {
                t.families[id]?.revokedAt = now
                t.families[id]?.endedBy = logout ? "logout" : nil
                ended.append(id)
            }
            if let revokedEvent { t.events += ended.map { .init(type: revokedEvent.type, accountId: userId, key: $0) } }
            return ended.sorted()
        }
    }

    func revoke(userId: String, familyId: String, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> Bool {
        try tables.change { (t, now) throws(StorageError) in
            guard let f = t.families[familyId], f.userId == userId, f.revokedAt == nil else { return false }
            t.families[familyId]?.revokedAt = now
            try InMemoryTables.redeem(redeeming, in: &t)
            t.audit.append(audit)
            return true
        }
    }

    func list(userId: String) throws(StorageError) -> [SessionRecord] {
        let now = tables.now()
        return try tables.read { t throws(StorageError) in
            t.families.values
                .filter { f in
                    f.userId == userId && f.revokedAt == nil
                        && t.refreshTokens.values.contains { $0.familyId == f.id && $0.usedAt == nil && $0.expiresAt > now }
                }
                .sorted { $0.createdAt != $1.createdAt ? $0.createdAt > $1.createdAt : $0.id < $1.id }
                .map { Self.record($0) }
        }
    }

    func session(id: String, userId: String) throws(StorageError) -> (record: SessionRecord, passkeyApprovesFrom: Date?, passkeyHardware: Bool)? {
        try tables.read { t throws(StorageError) in
            guard let f = t.families[id], f.userId == userId, f.revokedAt == nil else { return nil }
            let credential = f.credentialId.flatMap { id in t.credentials.first { $0.id == id } }
            return (Self.record(f), credential?.approvesFrom, credential?.hardwareBound ?? false)
        }
    }

    func ticket(hash: [UInt8]) throws(StorageError) -> EnrolmentTicket? {
        let now = tables.now()
        return try tables.read { t throws(StorageError) in
            t.tickets.first { $0.ticket.hash == hash && !$0.used && $0.expiresAt > now }?.ticket
        }
    }

    // MARK: SessionRevocationSource

    func isRevoked(id: String) throws(StorageError) -> Bool {
        try tables.read { t throws(StorageError) in t.families[id].map { $0.revokedAt != nil } ?? true }
    }

    func revoked(since: Date?, lookbackSeconds: Int) throws(StorageError) -> (ids: [String], at: Date) {
        let now = tables.now()
        let after = since ?? now.addingTimeInterval(-Double(lookbackSeconds))
        return try tables.read { t throws(StorageError) in
            (t.families.values.filter { ($0.revokedAt ?? .distantPast) > after }.map(\.id).sorted(), now)
        }
    }

    /// Nothing to listen to: the feed stays stale, so every token is checked with `isRevoked`.
    func watchRevocations(heartbeat: NotificationWatch.Heartbeat, onConnect: @escaping @Sendable () throws -> Void,
                          onRevoked: @escaping @Sendable ([String]) -> Void) -> NotificationWatch {
        NotificationWatch(url: nil, channel: "in-memory", threadName: "in-memory", heartbeat: heartbeat, onConnect: onConnect,
                          onNotifications: onRevoked)
    }

    static func record(_ f: InMemoryTables.Family) -> SessionRecord {
        SessionRecord(id: f.id, method: f.method, credentialId: f.credentialId, createdAt: f.createdAt, lastUsedAt: f.lastUsedAt,
                      authTime: f.authTime, browser: f.browser, clientId: nil, clientName: nil)
    }
}
