import Foundation
import JSON
import PostgreSQL
import Storage
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
        let onReuse: (String) -> AuditRecord = { AuditRecord(actor: "latchkey", action: "refresh.reuse_detected", subject: $0) }

        #expect(try s.database.sessions.rotate(hash: session.refreshHash, newHash: second, ttlSeconds: 60, onReuse: onReuse)
                == .rotated(userId: user.id, familyId: session.familyId, authTime: session.authTime))
        // The first token again: stolen or replayed. The whole family goes.
        #expect(try s.database.sessions.rotate(hash: session.refreshHash, newHash: third, ttlSeconds: 60, onReuse: onReuse) == .reused)
        #expect(try s.database.sessions.rotate(hash: second, newHash: third, ttlSeconds: 60, onReuse: onReuse) == .invalid)
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
            #expect(try s.database.sessions.rotate(hash: hash, newHash: Fixture.bytes(), ttlSeconds: 60) { _ in Fixture.audit("x") } == .invalid)
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
            try s.database.sessions.rotate(hash: hash, newHash: Fixture.bytes(), ttlSeconds: 60) { _ in Fixture.audit("x") }
        }
        #expect(try rotate(a.refreshHash) == .invalid)
        #expect(try rotate(b.refreshHash) == .rotated(userId: user.id, familyId: b.familyId, authTime: b.authTime))
        try s.database.sessions.revoke(userId: user.id, familyId: nil)
        #expect(try s.count("SELECT count(*) AS n FROM refresh_families WHERE user_id = \(user.id) AND revoked_at IS NULL") == 0)
    }
}
