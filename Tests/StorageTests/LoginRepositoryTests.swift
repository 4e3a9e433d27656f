import Foundation
import PostgreSQL
import PostgreSQLTesting
import Storage
import Synchronization
import Testing

/// A login's one read and one write against PostgreSQL (SPEC "Rules that must hold" → Challenges:
/// the first verify records the challenge's id in the statement that ends the ceremony).
@Suite struct LoginRepositoryTests {
    static func challenge(expiresIn seconds: Double = 300) -> UsedChallenge {
        UsedChallenge(id: Fixture.bytes(16), expiresAt: Date().addingTimeInterval(seconds))
    }

    static func use(_ credential: CredentialRecord, signCount: Int64) -> CredentialUse {
        CredentialUse(credentialId: credential.id, userId: credential.userId, signCount: signCount, backedUp: false, cloneWarning: false)
    }

    @Test func theReadFindsTheCredentialItsOwnerAndTheirAcceptedIds() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered(signCount: 3)
        var seen: LoginRead? = nil
        let written = try s.database.logins.login(Self.challenge(), credentialId: credential.id) { read in
            seen = read
            return .refused(flag: nil)
        }
        #expect(written == .refused)
        let read = try #require(seen)
        #expect(!read.used && read.live)
        #expect(read.accepted == [credential.id], "the owner's live credentials, for the Signal API")
        let (foundCredential, foundUser) = try #require(read.login)
        #expect(foundUser == user)
        #expect(foundCredential.id == credential.id && foundCredential.signCount == 3)
    }

    @Test func anUnknownOrRevokedCredentialReadsAsNone() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered()
        _ = try s.database.accounts.revoke(userId: user.id, credentialId: credential.id, audit: Fixture.audit("passkey.revoked"))
        for credentialId in [Fixture.bytes(16), credential.id] {
            var found = true
            _ = try s.database.logins.login(Self.challenge(), credentialId: credentialId) { read in
                found = read.login != nil
                return .refused(flag: nil)
            }
            #expect(!found)
        }
    }

    @Test func aSessionWriteRecordsTheChallengeTheUseAndTheSessionAndASecondVerifyFindsItUsed() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered(signCount: 3)
        let challenge = Self.challenge()
        let session = Fixture.session(userId: user.id, credentialId: credential.id)
        let written = try s.database.logins.login(challenge, credentialId: credential.id) { _ in
            .session(session, recording: Self.use(credential, signCount: 4), audit: [Fixture.audit("passkey.login", subject: user.id)],
                     events: [], language: "fr")
        }
        #expect(written == .session(RecordedUse(signCount: 4, flagged: false)))
        #expect(try s.database.sessions.list(userId: user.id).contains { $0.id == session.familyId })
        #expect(try s.count("SELECT count(*)::int AS n FROM used_challenges WHERE id = \(challenge.id)") == 1)
        #expect(try s.connect().query("SELECT language FROM users WHERE id = \(user.id)")[0].optionalString("language") == "fr")
        // The same challenge again: the read sees it used, nothing is decided or written.
        var decided = false
        let again = try s.database.logins.login(challenge, credentialId: credential.id) { _ in
            decided = true
            return .refused(flag: nil)
        }
        #expect(again == .challengeUnusable && !decided)
    }

    @Test func aRefusalRecordsTheChallengeAndTheFlagAlone() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered(signCount: 9)
        let challenge = Self.challenge()
        let flag = CredentialFlag(credentialId: credential.id, audit: Fixture.audit("passkey.flagged", subject: user.id), events: [])
        #expect(try s.database.logins.login(challenge, credentialId: credential.id) { _ in .refused(flag: flag) } == .refused)
        #expect(try s.count("SELECT count(*)::int AS n FROM used_challenges WHERE id = \(challenge.id)") == 1)
        #expect(try s.connect().query("SELECT flagged FROM credentials WHERE id = \(credential.id)")[0].bool("flagged"))
        #expect(try s.auditActions().last == "passkey.flagged")
        #expect(try s.database.logins.login(challenge, credentialId: credential.id) { _ in .refused(flag: nil) } == .challengeUnusable)
    }

    @Test func aChallengeExpiredByTheDatabasesClockIsNotRecorded() throws {
        let s = try TestDatabase.scratch()
        let challenge = Self.challenge(expiresIn: -1)
        var decided = false
        let written = try s.database.logins.login(challenge, credentialId: Fixture.bytes(16)) { _ in
            decided = true
            return .refused(flag: nil)
        }
        #expect(written == .challengeUnusable && !decided)
        #expect(try s.count("SELECT count(*)::int AS n FROM used_challenges") == 0)
    }

    @Test func aCounterThatLostTheRaceIsARegressionWithTheChallengeUsed() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered(signCount: 5)
        let challenge = Self.challenge()
        let sessions = try s.database.sessions.list(userId: user.id).count
        #expect(throws: StorageError.conflict(.signCountRegression)) {
            try s.database.logins.login(challenge, credentialId: credential.id) { _ in
                .session(Fixture.session(userId: user.id, credentialId: credential.id), recording: Self.use(credential, signCount: 5),
                         audit: [Fixture.audit("passkey.login", subject: user.id)], events: [], language: nil)
            }
        }
        #expect(try s.count("SELECT count(*)::int AS n FROM used_challenges WHERE id = \(challenge.id)") == 1)
        #expect(try s.database.sessions.list(userId: user.id).count == sessions, "no session for a refused counter")
    }

    @Test func concurrentVerifiesOfOneChallengeWriteOnce() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered()
        let challenge = Self.challenge()
        let outcomes = Mutex<[LoginWritten]>([])
        let errors = onThreads(8) { _ in
            let written = try s.database.logins.login(challenge, credentialId: credential.id) { _ in
                .session(Fixture.session(userId: user.id, credentialId: credential.id), recording: Self.use(credential, signCount: 0),
                         audit: [Fixture.audit("passkey.login", subject: user.id)], events: [], language: nil)
            }
            outcomes.withLock { $0.append(written) }
        }
        #expect(errors.isEmpty, "\(errors)")
        let all = outcomes.withLock { $0 }
        #expect(all.filter { $0 == .challengeUnusable }.count == 7, "\(all)")
        #expect(all.filter { if case .session = $0 { true } else { false } }.count == 1, "\(all)")
        #expect(try s.count("SELECT count(*)::int AS n FROM audit_log WHERE action = 'passkey.login'") == 1)
    }

    @Test func usernameFirstReadsTheAccountAndItsPasskeysInOneQuery() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered()
        let found = try #require(try s.database.logins.account(username: user.username))
        #expect(found.userId == user.id)
        #expect(found.credentials.map(\.id) == [credential.id])
        #expect(found.credentials.first?.transports == credential.transports)
        #expect(try s.database.logins.account(username: "nobody-\(Fixture.id())") == nil)
        // An account without a live passkey: the account, no credentials.
        _ = try s.database.accounts.revoke(userId: user.id, credentialId: credential.id, audit: Fixture.audit("passkey.revoked"))
        #expect(try s.database.logins.account(username: user.username)?.credentials.isEmpty == true)
    }
}
