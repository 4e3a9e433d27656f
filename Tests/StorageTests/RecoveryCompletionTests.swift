import Foundation
import JSON
import PostgreSQL
import Storage
import Testing

/// A registration with a recovery token completes the recovery in the registration's own statement
/// (SPEC "Recovery and fallback sign-in"): what it revokes, the lines and events it writes for each
/// thing it ended, and nothing at all when the recovery is no longer pending and due.
@Suite struct RecoveryCompletionTests {
    static func completion(_ recoveryId: String, revokePasskeys: Bool = true) -> RecoveryCompletion {
        RecoveryCompletion(recoveryId: recoveryId, revokePasskeys: revokePasskeys, audit: Fixture.audit("recovery.completed"),
                           events: [OutboxRepositoryTests.event(.recoveryCompleted)],
                           sessionRevoked: Fixture.event(.sessionRevoked), deviceKeyRevoked: Fixture.event(.deviceKeyRevoked),
                           passkeyRevoked: Fixture.event(.passkeyRevoked),
                           otherCancelledAudit: Fixture.template("recovery.cancelled", detail: ["completedBy": .string(recoveryId)]),
                           otherCancelledEvent: Fixture.event(.recoveryCancelled))
    }

    static func start(_ s: Scratch, userId: String, method: RecoveryMethod = .email) throws -> String {
        let id = Fixture.id()
        _ = try s.database.recovery.start(NewRecovery(id: id, userId: userId, method: method, tokenHash: Fixture.bytes(), delaySeconds: 0,
                                                      ttlSeconds: 600),
                                          mail: [], audit: Fixture.audit("recovery.started"), events: [])
        return id
    }

    @Test func theRegistrationRevokesWhatCameBeforeItAndWritesOneLineAndEventPerThing() throws {
        let s = try TestDatabase.scratch()
        let target = try OutboxRepositoryTests.endpoint(s, [.sessionRevoked, .deviceKeyRevoked, .passkeyRevoked, .recoveryCancelled,
                                                            .recoveryCompleted, .passkeyCreated])
        let (user, old) = try s.registered()
        let (key, _) = try s.enrol(Fixture.deviceKey(userId: user.id))
        let recovery = try Self.start(s, userId: user.id)
        let other = try Self.start(s, userId: user.id, method: .recoveryCode)
        let credential = Fixture.credential(userId: user.id)
        let session = Fixture.session(userId: user.id, credentialId: credential.id)
        let revoked = try #require(try s.database.accounts.register(newUser: nil, credential: credential, session: session,
                                                                    audit: Fixture.audit("passkey.registered"),
                                                                    events: [OutboxRepositoryTests.event(.passkeyCreated, account: user.id)],
                                                                    completing: Self.completion(recovery)))
        #expect(revoked.deviceKeys == [key.id] && revoked.passkeys == [old.id] && revoked.sessions.count == 1)
        #expect(!revoked.sessions.contains(session.familyId), "the new session survives what the recovery revokes")
        #expect(try s.database.sessions.list(userId: user.id).map(\.id) == [session.familyId])
        #expect(try s.database.accounts.credentials(userId: user.id).map(\.id) == [credential.id])
        #expect(try s.database.recovery.recovery(id: recovery)?.status == .completed)
        #expect(try s.database.recovery.recovery(id: other)?.status == .cancelled)
        let lines = try s.database.audit.entries(limit: 3, before: nil).reversed()
        #expect(lines.map(\.action) == ["recovery.completed", "recovery.cancelled", "passkey.registered"])
        let cancelledLine = try #require(lines.dropFirst().first)
        #expect(cancelledLine.detail["completedBy"]?.stringValue == recovery && cancelledLine.detail["recoveryId"]?.stringValue == other)
        #expect(cancelledLine.subject == user.id && cancelledLine.actor == "test")
        // In the order the transaction used to write them: the completion's, then what it ended, then the registration's.
        let deliveries = try s.database.outbox.deliveries(channel: .webhook, target: target, limit: 20).reversed()
        #expect(deliveries.map(\.type) == [.recoveryCompleted, .sessionRevoked, .deviceKeyRevoked, .passkeyRevoked,
                                           .recoveryCancelled, .passkeyCreated])
        let ids = deliveries.map(\.eventId)
        #expect(Set(ids).count == ids.count)
        #expect(ids.allSatisfy { $0.hasPrefix("evt_") })
        let data = try s.connect().query("""
            SELECT e.type, e.id, e.account_id, e.data::text AS data FROM outbox_events e
            WHERE e.type IN ('session.revoked', 'device_key.revoked', 'passkey.revoked', 'recovery.cancelled') ORDER BY e.seq
            """).map { r in (try r.string("type"), try r.string("id"), try r.string("account_id"), try JSONParser.parse(try r.string("data"))) }
        #expect(data.allSatisfy { $0.2 == user.id && $0.3["userId"]?.stringValue == user.id })
        #expect(data.allSatisfy { $0.1.utf8.count == 4 + 22 }, "templated ids look like the others: evt_ + 16 bytes base64url")
        #expect(data[0].3["sessionId"]?.stringValue == revoked.sessions.first)
        #expect(data[1].3["keyId"]?.stringValue == key.id && data[1].3["deviceId"]?.stringValue == key.deviceId
                    && data[1].3["platform"] == "ios" && data[1].3["attested"] == false)
        #expect(data[2].3["credentialId"]?.stringValue == Fixture.base64url(old.id) && data[2].3["aaguid"] == nil)
        #expect(data[3].3["recoveryId"]?.stringValue == other && data[3].3["method"] == "recovery-code")
    }

    @Test func aRecoveryNoLongerPendingWritesNothing() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let recovery = try Self.start(s, userId: user.id)
        #expect(try s.database.recovery.cancel(id: recovery, userId: user.id, audit: Fixture.audit("recovery.cancelled"), events: []))
        let before = try s.auditActions()
        let credential = Fixture.credential(userId: user.id)
        let session = Fixture.session(userId: user.id, credentialId: credential.id)
        #expect(throws: StorageError.notFound) {
            try s.database.accounts.register(newUser: nil, credential: credential, session: session, audit: Fixture.audit("passkey.registered"),
                                             completing: Self.completion(recovery))
        }
        #expect(try s.auditActions() == before)
        #expect(try s.count("SELECT count(*)::int AS n FROM credentials WHERE id = \(credential.id)") == 0)
        #expect(try s.count("SELECT count(*)::int AS n FROM refresh_families WHERE id = \(session.familyId)") == 0)
        #expect(try s.database.sessions.list(userId: user.id).count == 1, "the session from before is untouched")
    }
}

/// A cancel link on PostgreSQL: one statement that spends the token only when what it names could
/// still be undone.
@Suite struct CancelLinkStatementTests {
    static let records = CancelLinkRecords(recoveryAudit: Fixture.template("recovery.cancelled"), recoveryEvent: Fixture.event(.recoveryCancelled),
                                           passkeyAudit: Fixture.template("passkey.revoked"), passkeyEvent: Fixture.event(.passkeyRevoked),
                                           sessionEvent: Fixture.event(.sessionRevoked))

    @Test func aHeldPasskeysLinkRevokesItOnceAndALinkWhoseHoldEndedStaysUnused() throws {
        let s = try TestDatabase.scratch()
        let user = Fixture.user()
        let held = Fixture.credential(userId: user.id), over = Fixture.credential(userId: user.id)
        try s.database.accounts.register(newUser: user, credential: held, session: Fixture.session(userId: user.id, credentialId: held.id),
                                         audit: Fixture.audit("passkey.registered"))
        try s.database.accounts.register(newUser: nil, credential: over, session: Fixture.session(userId: user.id, credentialId: over.id),
                                         audit: Fixture.audit("passkey.registered"))
        let c = try s.connect()
        let now = Date()
        try c.execute("UPDATE credentials SET approves_from = \(now.addingTimeInterval(3600)) WHERE id = \(held.id)")
        try c.execute("UPDATE credentials SET approves_from = \(now.addingTimeInterval(-60)) WHERE id = \(over.id)")
        for (hash, credential) in [([UInt8](repeating: 1, count: 32), held.id), ([UInt8](repeating: 2, count: 32), over.id)] {
            try c.execute("""
                INSERT INTO cancel_tokens (hash, user_id, credential_id, expires_at) VALUES (\(hash), \(user.id), \(credential), \(now.addingTimeInterval(3600)))
                """)
        }
        let (undone, work) = try PostgresDeadline.within(seconds: 5) {
            try s.database.recovery.useCancelToken(hash: [UInt8](repeating: 1, count: 32), now: now, records: Self.records)
        }
        guard case .passkey(_, let credential, let ended)? = undone else { Issue.record("\(String(describing: undone))"); return }
        #expect(credential.id == held.id && ended.count == 1)
        #expect(work.counts == RoundTripCounts(writes: 1), "one statement, no transaction around it")
        #expect(try s.database.recovery.useCancelToken(hash: [UInt8](repeating: 1, count: 32), now: now, records: Self.records) == nil, "used once")
        // The hold has ended: nothing to undo, so nothing is written and the token stays unused.
        #expect(try s.database.recovery.useCancelToken(hash: [UInt8](repeating: 2, count: 32), now: now, records: Self.records) == nil)
        #expect(try s.count("SELECT count(*) AS n FROM cancel_tokens WHERE used_at IS NULL AND hash = \([UInt8](repeating: 2, count: 32))") == 1)
        #expect(try s.count("SELECT count(*) AS n FROM credentials WHERE revoked_at IS NULL AND id = \(over.id)") == 1)
    }
}
