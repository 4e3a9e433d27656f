import Foundation
import PostgreSQL
import PostgreSQLTesting
import Storage
import Testing

/// A passkey's last use is kept on the session a sign-in starts (migration 24): a sign-in whose
/// only change to the credential would be its last use leaves the row alone, the passkey list reads
/// the use back from the session, and ending the session folds the time into the row first.
@Suite struct PasskeyLastUseTests {
    static func use(_ credential: CredentialRecord, signCount: Int64 = 0, backedUp: Bool = false) -> CredentialUse {
        CredentialUse(credentialId: credential.id, userId: credential.userId, signCount: signCount, backedUp: backedUp, cloneWarning: false)
    }

    /// The credential row's version: it changes whenever the row is written.
    static func version(_ s: Scratch, _ credential: CredentialRecord) throws -> String {
        try s.connect().query("SELECT xmin::text AS v FROM credentials WHERE id = \(credential.id)")[0].string("v")
    }

    static func signIn(_ s: Scratch, _ user: UserRecord, _ credential: CredentialRecord, at authTime: Date,
                       signCount: Int64 = 0, backedUp: Bool = false) throws -> (NewSession, LoginWritten) {
        let session = Fixture.session(userId: user.id, credentialId: credential.id, authTime: authTime)
        let written = try s.database.logins.login(LoginRepositoryTests.challenge(), credentialId: credential.id) { _ in
            .session(session, recording: Self.use(credential, signCount: signCount, backedUp: backedUp),
                     audit: [Fixture.audit("passkey.login", subject: user.id)], events: [], language: nil)
        }
        return (session, written)
    }

    static func lastUse(_ s: Scratch, _ user: UserRecord, _ credential: CredentialRecord) throws -> Date? {
        try #require(try s.database.accounts.credentials(userId: user.id).first { $0.id == credential.id }).lastUsedAt
    }

    @Test func aSignInThatChangesNothingButTheLastUseLeavesThePasskeysRowAlone() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered()
        #expect(try Self.lastUse(s, user, credential) == nil, "registration is not a use: its session does not count")
        let before = try Self.version(s, credential)
        let at = Date(timeIntervalSince1970: Double(Int(Date().timeIntervalSince1970) - 30))
        let (session, written) = try Self.signIn(s, user, credential, at: at)
        #expect(written == .session(RecordedUse(signCount: 0, flagged: false)))
        #expect(try Self.version(s, credential) == before, "the row was not written")
        #expect(try Self.lastUse(s, user, credential) == at, "the list reads the use from the session")
        // The session ends: its time moves into the row, and the last use stays.
        _ = try s.database.sessions.revoke(userId: user.id, familyId: session.familyId)
        #expect(try Self.version(s, credential) != before)
        #expect(try s.connect().query("SELECT last_used_at FROM credentials WHERE id = \(credential.id)")[0].optionalDate("last_used_at") == at)
        #expect(try Self.lastUse(s, user, credential) == at)
        // An older session ending later does not move the time back.
        let earlier = at.addingTimeInterval(-600)
        let (old, _) = try Self.signIn(s, user, credential, at: earlier)
        _ = try s.database.sessions.revoke(userId: user.id, familyId: old.familyId)
        #expect(try Self.lastUse(s, user, credential) == at)
    }

    @Test func aCounterOrABackupStateChangeStillWritesTheRowInTheSameStatement() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered(signCount: 3)
        let before = try Self.version(s, credential)
        let at = Date(timeIntervalSince1970: Double(Int(Date().timeIntervalSince1970) - 30))
        #expect(try Self.signIn(s, user, credential, at: at, signCount: 4).1 == .session(RecordedUse(signCount: 4, flagged: false)))
        #expect(try Self.version(s, credential) != before)
        // The counter's compare-and-set is the write's alone: the same counter again is refused, no session.
        let sessions = try s.database.sessions.list(userId: user.id).count
        #expect(throws: StorageError.conflict(.signCountRegression)) { _ = try Self.signIn(s, user, credential, at: at, signCount: 4) }
        #expect(try s.database.sessions.list(userId: user.id).count == sessions)

        let (other, passkey) = try s.registered()
        let quiet = try Self.version(s, passkey)
        _ = try Self.signIn(s, other, passkey, at: at, backedUp: true)
        #expect(try Self.version(s, passkey) != quiet, "the backup state changed: the row is written")
        #expect(try s.database.accounts.credentials(userId: other.id)[0].backedUp)
    }

    @Test func anUnknownCredentialStartsNoSession() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered()
        let ghost = Fixture.credential(userId: user.id)
        let session = Fixture.session(userId: user.id, credentialId: ghost.id)
        #expect(throws: StorageError.notFound) {
            _ = try s.database.logins.login(LoginRepositoryTests.challenge(), credentialId: ghost.id) { _ in
                .session(session, recording: Self.use(ghost), audit: [], events: [], language: nil)
            }
        }
        #expect(try s.database.sessions.list(userId: user.id).allSatisfy { $0.id != session.familyId })
        #expect(try Self.lastUse(s, user, credential) == nil)
    }
}
