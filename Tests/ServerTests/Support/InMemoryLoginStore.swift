import Foundation
@testable import LatchkeyServer
@testable import Storage

/// `LoginStore` in memory over `InMemoryTables`, keeping the rules `LoginRepository`'s SQL keeps:
/// options read the account's live passkeys, oldest first; a verify's read finds the challenge's
/// use, whether it is still live (the tables' clock plays the database's), and the live (not
/// revoked) credential with its owner; a challenge used before or expired ends it with nothing
/// written. The write records the challenge's id used — a second verify of it, even one that read
/// before the first wrote, finds it and writes nothing — and only then stores the use: the
/// counter's compare-and-set (under `.reject` a counter that does not advance stores nothing but
/// the challenge's use and is `.conflict(.signCountRegression)`; under `.flag` the use is stored
/// and the credential flagged), the session, audit lines, events and language memo in the same
/// change. A refused verify records the challenge used and its flag, if any.
/// Also `CredentialFlags` (`AccountRepository.flag`) over the same tables.
struct InMemoryLoginStore: LoginStore, CredentialFlags {
    let tables: InMemoryTables

    func account(username: String) throws(StorageError) -> (userId: String, credentials: [(id: [UInt8], transports: [String])])? {
        try tables.read { t throws(StorageError) in
            guard let user = t.users.values.first(where: { $0.username == username }) else { return nil }
            let live = Self.live(of: user.id, in: t)
            return (user.id, live.map { (id: $0.id, transports: $0.transports) })
        }
    }

    func login(_ challenge: UsedChallenge, credentialId: [UInt8], decide: (LoginRead) -> LoginWrite) throws(StorageError) -> LoginWritten {
        let now = tables.now()
        let read = try tables.read { t throws(StorageError) in
            let credential = t.credentials.first { $0.id == credentialId && !t.revokedCredentials.contains($0.id) }
            let login = credential.flatMap { c in t.users[c.userId].map { (credential: c, user: $0) } }
            return LoginRead(used: t.usedChallenges[challenge.id] != nil, live: challenge.expiresAt > now, login: login,
                             accepted: login.map { Self.live(of: $0.user.id, in: t).map(\.id) } ?? [])
        }
        guard !read.used, read.live else { return .challengeUnusable }
        let write = decide(read)
        // What the one statement found; a refused compare-and-set or a vanished credential is an
        // error only after the change (the challenge's use) is kept, as after COMMIT.
        enum Outcome: Sendable {
            case written(LoginWritten)
            case failed(StorageError)
        }
        let outcome = try tables.change { (t, now) throws(StorageError) -> Outcome in
            guard t.usedChallenges[challenge.id] == nil, challenge.expiresAt > now else { return .written(.challengeUnusable) }
            t.usedChallenges[challenge.id] = challenge.expiresAt
            switch write {
            case .session(let session, let use, let audit, let events, let language):
                guard let recorded = Self.record(use, in: &t, now: now) else { return .failed(Self.why(use, in: t)) }
                guard InMemoryTables.record(session.dpop, in: &t, now: now) else { return .written(.proofReplayed) }
                try InMemoryTables.start(session, in: &t, now: now)
                t.audit += audit
                InMemoryTables.events(events, in: &t)
                if let language { t.languages[session.userId] = language }
                return .written(.session(recorded))
            case .browserSession(let session, let use, let replacing, let audit, let events):
                guard let recorded = Self.record(use, in: &t, now: now) else { return .failed(Self.why(use, in: t)) }
                try InMemoryTables.start(session, in: &t, now: now)
                t.audit += audit
                InMemoryTables.events(events, in: &t)
                var ended: [String] = []
                if let replacing, let token = t.refreshTokens[replacing], let family = t.families[token.familyId], family.browser,
                   family.revokedAt == nil {
                    t.families[family.id]?.revokedAt = now
                    t.families[family.id]?.endedBy = "logout"
                    ended.append(family.id)
                }
                return .written(.browserSession(recorded, ended: ended))
            case .refused(let flag):
                if let flag, let i = t.credentials.firstIndex(where: { $0.id == flag.credentialId }) {
                    t.credentials[i].flagged = true
                    t.audit.append(flag.audit)
                    InMemoryTables.events(flag.events, in: &t)
                }
                return .written(.refused)
            }
        }
        switch outcome {
        case .written(let written): return written
        case .failed(let error): throw error
        }
    }

    func flag(credentialId: [UInt8], audit: AuditRecord, events: [OutboxEvent]) throws(StorageError) {
        try tables.change { (t, _) throws(StorageError) in
            guard let i = t.credentials.firstIndex(where: { $0.id == credentialId }) else { throw StorageError.notFound }
            t.credentials[i].flagged = true
            t.audit.append(audit)
            InMemoryTables.events(events, in: &t)
        }
    }

    /// The account's live passkeys, oldest first (then by id).
    static func live(of userId: String, in t: InMemoryTables.Tables) -> [CredentialRecord] {
        t.credentials.filter { $0.userId == userId && !t.revokedCredentials.contains($0.id) }
            .sorted { $0.createdAt != $1.createdAt ? $0.createdAt < $1.createdAt : $0.id.lexicographicallyPrecedes($1.id) }
    }

    /// `AccountRepository.recording`: the counter's compare-and-set. Nil: nothing stored (no such
    /// live credential — one revoked since the read too — or a counter that does not advance under `.reject`).
    static func record(_ use: CredentialUse, in t: inout InMemoryTables.Tables, now: Date) -> RecordedUse? {
        guard !t.revokedCredentials.contains(use.credentialId), let i = t.credentials.firstIndex(where: { $0.id == use.credentialId }) else { return nil }
        let stored = t.credentials[i].signCount
        let advances = use.signCount > stored || (use.signCount == 0 && stored == 0)
        if use.onRegression == .reject, !advances { return nil }
        t.credentials[i].signCount = max(stored, use.signCount)
        t.credentials[i].backedUp = use.backedUp
        if let eligible = use.backupEligible { t.credentials[i].backupEligible = eligible }
        t.credentials[i].flagged = t.credentials[i].flagged || use.cloneWarning || !advances
        t.credentials[i].lastUsedAt = now
        return RecordedUse(signCount: t.credentials[i].signCount, flagged: t.credentials[i].flagged)
    }

    /// `AccountRepository.recorded`: why no use was stored.
    static func why(_ use: CredentialUse, in t: InMemoryTables.Tables) -> StorageError {
        t.credentials.contains { $0.id == use.credentialId && !t.revokedCredentials.contains($0.id) } ? .conflict(.signCountRegression) : .notFound
    }
}
