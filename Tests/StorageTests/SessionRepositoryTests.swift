import Foundation
import JSON
import PostgreSQL
import Storage
import Synchronization
import Testing

@Suite struct SessionRepositoryTests {
    @Test func startRecordingAUseMovesTheCounterForwardOnlyAndWritesTheAudit() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered(signCount: 10)
        let lower = CredentialUse(credentialId: credential.id, userId: user.id, signCount: 4, backedUp: true, cloneWarning: true,
                                  onRegression: .flag)
        let session = Fixture.session(userId: user.id)
        try s.database.sessions.start(session, recording: lower,
                                      audit: [Fixture.audit("passkey.clone_warning", subject: user.id), Fixture.audit("passkey.login", subject: user.id)])
        var stored = try #require(try s.database.accounts.credentialForLogin(id: credential.id)).0
        #expect(stored.signCount == 10, "a lower counter never replaces a higher one")
        #expect(stored.flagged && stored.backedUp && stored.lastUsedAt != nil)
        #expect(try s.auditActions() == ["passkey.registered", "passkey.clone_warning", "passkey.login"])
        #expect(try s.count("SELECT count(*) AS n FROM refresh_tokens WHERE family_id = \(session.familyId)") == 1)

        let higher = CredentialUse(credentialId: credential.id, userId: user.id, signCount: 11, backedUp: false, cloneWarning: false)
        try s.database.sessions.start(Fixture.session(userId: user.id), recording: higher)
        stored = try #require(try s.database.accounts.credentialForLogin(id: credential.id)).0
        #expect(stored.signCount == 11 && !stored.backedUp && stored.flagged)
    }

    @Test func startRecordingAnUnknownCredentialWritesNothing() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let use = CredentialUse(credentialId: Fixture.bytes(16), userId: user.id, signCount: 1, backedUp: false, cloneWarning: false)
        let session = Fixture.session(userId: user.id)
        #expect(throws: StorageError.notFound) {
            try s.database.sessions.start(session, recording: use, audit: [Fixture.audit("passkey.login")])
        }
        #expect(try s.count("SELECT count(*) AS n FROM refresh_families WHERE id = \(session.familyId)") == 0)
        #expect(try s.auditActions() == ["passkey.registered"])
    }

    @Test func rotateThenReuseRevokesTheFamilyAndWritesOnReusesRecord() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let session = Fixture.session(userId: user.id)
        try s.database.sessions.start(session)
        let second = Fixture.bytes(), third = Fixture.bytes()
        let onReuse = AuditTemplate(actor: "latchkey", action: "refresh.reuse_detected")

        #expect(try s.database.sessions.rotate(hash: session.refreshHash, newHash: second, ttlSeconds: 60, reuseAudit: onReuse)
                == .rotated(userId: user.id, familyId: session.familyId, authTime: session.authTime, method: session.method))
        // The first token again: stolen or replayed. The whole family goes.
        #expect(try s.database.sessions.rotate(hash: session.refreshHash, newHash: third, ttlSeconds: 60, reuseAudit: onReuse) == .reused(familyId: session.familyId))
        #expect(try s.database.sessions.rotate(hash: second, newHash: third, ttlSeconds: 60, reuseAudit: onReuse) == .invalid)
        #expect(try s.count("SELECT count(*) AS n FROM refresh_families WHERE id = \(session.familyId) AND revoked_at IS NOT NULL") == 1)
        let reuse = try #require(try s.database.audit.entries(limit: 1, before: nil).first)
        #expect(reuse.action == "refresh.reuse_detected" && reuse.actor == "latchkey" && reuse.subject == user.id)
        #expect(try s.auditActions() == ["passkey.registered", "refresh.reuse_detected"], "written once")
    }

    @Test func anUnknownOrExpiredTokenIsInvalid() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let expired = Fixture.session(userId: user.id, ttlSeconds: -1)
        try s.database.sessions.start(expired)
        for hash in [Fixture.bytes(), expired.refreshHash] {
            #expect(try s.database.sessions.rotate(hash: hash, newHash: Fixture.bytes(), ttlSeconds: 60, reuseAudit: Fixture.template("x")) == .invalid)
        }
    }

    @Test func revokeOneFamilyOrAll() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let a = Fixture.session(userId: user.id), b = Fixture.session(userId: user.id)
        try s.database.sessions.start(a)
        try s.database.sessions.start(b)
        try s.database.sessions.revoke(userId: user.id, familyId: a.familyId)
        let rotate = { (hash: [UInt8]) in
            try s.database.sessions.rotate(hash: hash, newHash: Fixture.bytes(), ttlSeconds: 60, reuseAudit: Fixture.template("x"))
        }
        #expect(try rotate(a.refreshHash) == .invalid)
        #expect(try rotate(b.refreshHash) == .rotated(userId: user.id, familyId: b.familyId, authTime: b.authTime, method: b.method))
        try s.database.sessions.revoke(userId: user.id, familyId: nil)
        #expect(try s.count("SELECT count(*) AS n FROM refresh_families WHERE user_id = \(user.id) AND revoked_at IS NULL") == 0)
    }
}

/// Issue 10 point 6: sessions bound to how they began, revoked with their passkey, and the feed
/// (NOTIFY and poll) that carries revocations to every instance.
@Suite struct SessionBindingTests {
    @Test func aSessionRecordsHowItBeganAndARefreshNeverMovesItsAuthTime() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered()
        let authTime = Date(timeIntervalSince1970: 1_700_000_000)
        let session = Fixture.session(userId: user.id, credentialId: credential.id, authTime: authTime)
        try s.database.sessions.start(session)
        let listed = try #require(try s.database.sessions.list(userId: user.id).first { $0.id == session.familyId })
        #expect(listed.method == .passkey && listed.credentialId == credential.id && listed.authTime == authTime)
        var hash = session.refreshHash
        for _ in 0..<3 {
            let next = Fixture.bytes()
            #expect(try s.database.sessions.rotate(hash: hash, newHash: next, ttlSeconds: 60, reuseAudit: Fixture.template("x"))
                    == .rotated(userId: user.id, familyId: session.familyId, authTime: authTime))
            hash = next
        }
        let after = try #require(try s.database.sessions.list(userId: user.id).first { $0.id == session.familyId })
        #expect(after.authTime == authTime && after.lastUsedAt >= listed.lastUsedAt && after.createdAt == listed.createdAt)
    }

    @Test func listShowsOnlyLiveSessionsOfTheUser() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered()
        let (other, _) = try s.registered()
        let ticket = Fixture.session(userId: user.id)
        let expired = Fixture.session(userId: user.id, credentialId: credential.id, ttlSeconds: -1)
        let ended = Fixture.session(userId: user.id, credentialId: credential.id)
        for session in [ticket, expired, ended] { try s.database.sessions.start(session) }
        #expect(try s.database.sessions.revoke(userId: other.id, familyId: ended.familyId).isEmpty, "someone else's")
        #expect(try s.database.sessions.revoke(userId: user.id, familyId: ended.familyId) == [ended.familyId])
        #expect(try s.database.sessions.revoke(userId: user.id, familyId: ended.familyId).isEmpty, "already ended")
        let listed = try s.database.sessions.list(userId: user.id)
        #expect(listed.count == 2, "the registration's and the ticket's: \(listed.map(\.id))")
        #expect(listed.contains { $0.id == ticket.familyId && $0.method == .ticket && $0.credentialId == nil })
        #expect(!listed.contains { $0.id == expired.familyId || $0.id == ended.familyId })
    }

    @Test func revokingAPasskeyRevokesTheLiveSessionsItBeganAndNoOthers() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered()
        let second = Fixture.credential(userId: user.id)
        try s.database.accounts.register(newUser: nil, credential: second, session: Fixture.session(userId: user.id, credentialId: second.id),
                                         audit: Fixture.audit("passkey.registered"))
        let first = Fixture.session(userId: user.id, credentialId: credential.id)
        let already = Fixture.session(userId: user.id, credentialId: credential.id)
        let byTicket = Fixture.session(userId: user.id)
        for session in [first, already, byTicket] { try s.database.sessions.start(session) }
        try s.database.sessions.revoke(userId: user.id, familyId: already.familyId)

        let ended = try #require(try s.database.accounts.revoke(userId: user.id, credentialId: credential.id,
                                                                audit: Fixture.audit("passkey.revoked")))
        #expect(ended.count == 2 && ended.contains(first.familyId) && !ended.contains(already.familyId), "registration's + first: \(ended)")
        #expect(try s.database.sessions.rotate(hash: first.refreshHash, newHash: Fixture.bytes(), ttlSeconds: 60, reuseAudit: Fixture.template("x"))
                == .invalid)
        let live = try s.database.sessions.list(userId: user.id)
        #expect(Set(live.map(\.id)).contains(byTicket.familyId) && live.allSatisfy { $0.credentialId != credential.id })
        #expect(live.count == 2, "the second passkey's and the ticket's")
    }

    /// Migration 19: a session start writes one entry into the live-session indexes, and that one
    /// index serves both lookups (by owner; by owner and passkey).
    @Test func oneLiveSessionIndexServesOwnerAndPasskeyLookups() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered()
        let connection = try s.connect()
        let live = try connection.query("""
            SELECT indexrelid::regclass::text AS name FROM pg_index
            WHERE indrelid = 'refresh_families'::regclass AND pg_get_expr(indpred, indrelid) = '(revoked_at IS NULL)'
            """).map { try $0.string("name") }
        #expect(live == ["refresh_families_user"])
        try connection.execute("SET enable_seqscan = off")
        for query: SQL in ["SELECT id FROM refresh_families WHERE user_id = \(user.id) AND revoked_at IS NULL",
                           """
                           SELECT id FROM refresh_families
                           WHERE credential_id = \(credential.id) AND user_id = \(user.id) AND revoked_at IS NULL
                           """] {
            let plan = try connection.plan(query)
            #expect(plan.contains("refresh_families_user"), "\(plan)")
        }
    }

    @Test func thePollFindsRevocationsSinceAGivenTime() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let a = Fixture.session(userId: user.id), b = Fixture.session(userId: user.id)
        try s.database.sessions.start(a)
        try s.database.sessions.start(b)
        let before = try s.database.sessions.revoked(since: nil, lookbackSeconds: 360)
        #expect(before.ids.isEmpty)
        try s.database.sessions.revoke(userId: user.id, familyId: a.familyId)
        let recent = try s.database.sessions.revoked(since: before.at.addingTimeInterval(-1), lookbackSeconds: 360)
        #expect(recent.ids == [a.familyId] && recent.at >= before.at)
        #expect(try s.database.sessions.revoked(since: nil, lookbackSeconds: 360).ids == [a.familyId])
        #expect(try s.database.sessions.revoked(since: recent.at.addingTimeInterval(1), lookbackSeconds: 360).ids.isEmpty)
        // The query is served by the partial index on revoked_at.
        let connection = try s.connect()
        try connection.execute("SET enable_seqscan = off")
        let plan = try connection.plan("SELECT id FROM refresh_families WHERE revoked_at > \(before.at)")
        #expect(plan.contains("refresh_families_revoked"), "\(plan)")
    }

    @Test func aRevocationNotifiesChannelLatchkeySessionsWithTheSessionId() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let session = Fixture.session(userId: user.id)
        try s.database.sessions.start(session)
        let received = Mutex<[String]>([])
        let watch = s.database.sessions.watchRevocations(heartbeat: Self.heartbeat(), onConnect: {},
                                                         onRevoked: { ids in received.withLock { $0 += ids } })
        defer { watch.stop() }
        var waited = 0.0
        while !watch.isListening && waited < 10 { Thread.sleep(forTimeInterval: 0.02); waited += 0.02 }
        #expect(watch.isListening)
        try s.database.sessions.revoke(userId: user.id, familyId: session.familyId)
        try s.database.sessions.revoke(userId: user.id, familyId: session.familyId)  // already revoked: no second notification
        waited = 0
        while received.withLock({ $0.isEmpty }) && waited < 5 { Thread.sleep(forTimeInterval: 0.02); waited += 0.02 }
        Thread.sleep(forTimeInterval: 0.2)
        #expect(received.withLock { $0 } == [session.familyId])
    }

    static func heartbeat(alive: @escaping @Sendable (Double) -> Void = { _ in }, lost: @escaping @Sendable () -> Void = {}) -> NotificationWatch.Heartbeat {
        NotificationWatch.Heartbeat(interval: 0.25, clock: { ProcessInfo.processInfo.systemUptime }, alive: alive, lost: lost)
    }

    /// SPEC "Sessions" → "How fast.": a heartbeat heard back vouches for every revocation committed
    /// before it was sent (notifications arrive in commit order, and are handed over before it).
    @Test func aHeartbeatHeardBackVouchesForEveryRevocationCommittedBeforeItWasSent() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let sessions = (0..<3).map { _ in Fixture.session(userId: user.id) }
        for session in sessions { try s.database.sessions.start(session) }
        struct Seen { var ids: Set<String> = []; var alive: [(at: Double, ids: Set<String>)] = []; var lost = 0 }
        let seen = Mutex(Seen())
        let watch = s.database.sessions.watchRevocations(
            heartbeat: Self.heartbeat(alive: { at in seen.withLock { $0.alive.append((at, $0.ids)) } },
                                      lost: { seen.withLock { $0.lost += 1 } }),
            onConnect: {}, onRevoked: { ids in seen.withLock { $0.ids.formUnion(ids) } })
        defer { watch.stop() }
        func heard(after t: Double) -> Bool {
            for _ in 0..<500 {
                if seen.withLock({ $0.alive.contains { $0.at >= t } }) { return true }
                Thread.sleep(forTimeInterval: 0.02)
            }
            return false
        }
        #expect(heard(after: 0), "the feed is heard from once listening")
        for session in sessions {
            try s.database.sessions.revoke(userId: user.id, familyId: session.familyId)
            let answered = ProcessInfo.processInfo.systemUptime
            watch.beat()
            #expect(heard(after: answered))
            // Every sign of life stamped after the commit came with the revocation already handed over.
            #expect(seen.withLock { $0.alive.filter { $0.at >= answered }.allSatisfy { $0.ids.contains(session.familyId) } })
        }

        // The LISTEN connection killed: the watch reports it lost, reconnects, and is heard from again.
        let admin = try s.connect()
        let before = ProcessInfo.processInfo.systemUptime
        let killed = try admin.query("""
            SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%pg_notify%'
            """)
        #expect(killed.count == 1)
        var waited = 0
        while seen.withLock({ $0.lost }) == 0 && waited < 500 { Thread.sleep(forTimeInterval: 0.02); waited += 1 }
        #expect(seen.withLock { $0.lost } == 1)
        #expect(heard(after: before), "heard from again after the reconnect")
    }
}
