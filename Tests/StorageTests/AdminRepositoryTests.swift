import Foundation
import JSON
import PostgreSQL
import Storage
import Synchronization
import Testing

/// SPEC "Assurance" (Admins): `latchkey admins add` creates a new account with the role and refuses
/// a username that exists; `latchkey admins grant` gives an existing account the role, for exactly
/// the passkeys and device keys it was shown with. Every grant is audited in the same transaction.
@Suite struct AdminRepositoryTests {
    func audit(_ action: String, _ user: UserRecord) -> AuditRecord {
        Fixture.audit(action, subject: user.id, detail: .object([("username", .string(user.username))]))
    }

    func adminRows(_ s: Scratch, _ userId: String) throws -> Int {
        try s.count("SELECT count(*) AS n FROM admins WHERE user_id = \(userId)")
    }

    // MARK: add

    @Test func addCreatesANewUserWithTheRole() throws {
        let s = try TestDatabase.scratch()
        let candidate = Fixture.user()
        let created = try #require(try s.database.admins.createAdmin(candidate, by: "cli", audit: audit("admin.added", candidate)))
        #expect(created == candidate)
        #expect(try s.database.accounts.user(username: candidate.username) == candidate)
        #expect(try s.database.admins.isAdmin(userId: candidate.id))
        #expect(try s.database.admins.admins().map(\.createdBy) == ["cli"])
        #expect(try s.auditActions() == ["admin.added"])
    }

    @Test func addRefusesAUsernameThatExistsAndWritesNothing() throws {
        let s = try TestDatabase.scratch()
        let (squatter, _) = try s.registered()  // registered the name first, with a passkey of their own
        var candidate = Fixture.user(username: squatter.username)
        candidate = UserRecord(id: candidate.id, userHandle: candidate.userHandle, username: squatter.username, displayName: "Admin")
        #expect(try s.database.admins.createAdmin(candidate, by: "cli", audit: audit("admin.added", candidate)) == nil)
        #expect(try !s.database.admins.isAdmin(userId: squatter.id))
        #expect(try s.database.admins.admins().isEmpty)
        #expect(try s.database.accounts.user(username: squatter.username) == squatter, "the account is untouched")
        #expect(try s.database.accounts.user(id: candidate.id) == nil)
        #expect(try s.auditActions() == ["passkey.registered"])
    }

    @Test func addRefusesAnExistingAdminToo() throws {
        let s = try TestDatabase.scratch()
        let candidate = Fixture.user()
        _ = try s.database.admins.createAdmin(candidate, by: "cli", audit: audit("admin.added", candidate))
        #expect(try s.database.admins.createAdmin(Fixture.user(username: candidate.username), by: "cli", audit: audit("admin.added", candidate)) == nil)
        #expect(try s.auditActions() == ["admin.added"])
    }

    // MARK: grant

    @Test func grantCandidateShowsTheLivePasskeysAndDeviceKeys() throws {
        let s = try TestDatabase.scratch()
        #expect(try s.database.admins.grantCandidate(username: "nobody-\(Fixture.id())") == nil)
        let (user, first) = try s.registered()
        let second = Fixture.credential(userId: user.id)
        try s.database.accounts.register(newUser: nil, credential: second, session: Fixture.session(userId: user.id, credentialId: second.id),
                                         audit: Fixture.audit("passkey.registered", subject: user.id))
        let revoked = Fixture.credential(userId: user.id)
        try s.database.accounts.register(newUser: nil, credential: revoked, session: Fixture.session(userId: user.id, credentialId: revoked.id),
                                         audit: Fixture.audit("passkey.registered", subject: user.id))
        _ = try s.database.accounts.revoke(userId: user.id, credentialId: revoked.id, audit: Fixture.audit("passkey.revoked"))
        let (key, _) = try s.enrol(Fixture.deviceKey(userId: user.id))

        let shown = try #require(try s.database.admins.grantCandidate(username: user.username))
        #expect(shown.user == user && !shown.isAdmin)
        #expect(shown.passkeys.map(\.id) == [first.id, second.id], "live passkeys, oldest first; the revoked one is not trusted")
        #expect(shown.deviceKeys.map(\.id) == [key.id])
    }

    @Test func grantGivesAnExistingAccountTheRoleOnce() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let shown = try #require(try s.database.admins.grantCandidate(username: user.username))
        #expect(try s.database.admins.grant(existing: shown, by: "cli", audit: audit("admin.granted", shown.user)) == .granted)
        #expect(try s.database.admins.isAdmin(userId: user.id))
        #expect(try s.database.admins.admins().map(\.user) == [user])
        #expect(try s.database.admins.grantCandidate(username: user.username)?.isAdmin == true)
        // Again: nothing changes, nothing is audited.
        #expect(try s.database.admins.grant(existing: shown, by: "cli", audit: audit("admin.granted", shown.user)) == .alreadyAdmin)
        #expect(try adminRows(s, user.id) == 1)
        #expect(try s.auditActions() == ["passkey.registered", "admin.granted"])
    }

    /// What was printed is what is trusted: a passkey or device key added (or revoked) between the
    /// listing and the grant refuses the grant.
    @Test(arguments: ["passkey added", "device key added", "passkey revoked"])
    func grantRefusesAnAccountThatChangedSinceItWasShown(_ change: String) throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered()
        let shown = try #require(try s.database.admins.grantCandidate(username: user.username))
        switch change {
        case "passkey added":
            let added = Fixture.credential(userId: user.id)
            try s.database.accounts.register(newUser: nil, credential: added, session: Fixture.session(userId: user.id, credentialId: added.id),
                                             audit: Fixture.audit("passkey.registered", subject: user.id))
        case "device key added":
            _ = try s.enrol(Fixture.deviceKey(userId: user.id))
        default:
            _ = try s.database.accounts.revoke(userId: user.id, credentialId: credential.id, audit: Fixture.audit("passkey.revoked"))
        }
        let before = try s.auditActions()
        #expect(try s.database.admins.grant(existing: shown, by: "cli", audit: audit("admin.granted", shown.user)) == .changed)
        #expect(try adminRows(s, user.id) == 0)
        #expect(try s.auditActions() == before)
        // Shown again, it is granted.
        let again = try #require(try s.database.admins.grantCandidate(username: user.username))
        #expect(try s.database.admins.grant(existing: again, by: "cli", audit: audit("admin.granted", again.user)) == .granted)
    }

    /// The grant locks the user row first: a passkey being registered while it runs (inserted, not
    /// committed yet) makes it wait, and is then among the passkeys compared — it cannot slip in
    /// between the comparison and the grant.
    @Test func aPasskeyBeingAddedDuringTheGrantIsSeenByIt() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let shown = try #require(try s.database.admins.grantCandidate(username: user.username))
        let registering = try s.connect()
        try registering.execute("BEGIN")
        let added = Fixture.credential(userId: user.id)
        try registering.execute("""
            INSERT INTO credentials (id, user_id, public_key, alg, sign_count, aaguid, transports, backup_eligible, backed_up,
                                     attestation_format, attestation_type, name)
            VALUES (\(added.id), \(user.id), \(added.publicKey), -7, 0, \(added.aaguid), '[]'::jsonb, false, false, 'none', 'none', 'x')
            """)
        let outcome = Mutex<Result<AdminGrantOutcome, StorageError>?>(nil)
        let database = s.database
        let grant = Thread { [audit] in
            let r = Result { () throws(StorageError) in try database.admins.grant(existing: shown, by: "cli", audit: audit("admin.granted", shown.user)) }
            outcome.withLock { $0 = r }
        }
        grant.start()
        Thread.sleep(forTimeInterval: 0.5)
        #expect(outcome.withLock { $0 } == nil, "the grant waits for the registration's lock on the user")
        try registering.execute("COMMIT")
        let deadline = Date().addingTimeInterval(10)
        while outcome.withLock({ $0 }) == nil, Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        #expect(try outcome.withLock { $0 }?.get() == .changed)
        #expect(try adminRows(s, user.id) == 0)
    }

    @Test func grantForAUserThatIsGoneIsUnknown() throws {
        let s = try TestDatabase.scratch()
        let ghost = try AdminGrantCandidateFixture.ghost()
        #expect(try s.database.admins.grant(existing: ghost, by: "cli", audit: audit("admin.granted", ghost.user)) == .unknownUser)
        #expect(try s.database.admins.admins().isEmpty)
    }
}

/// A candidate for a user that does not exist (read, then deleted): built through the repository.
enum AdminGrantCandidateFixture {
    static func ghost() throws -> AdminGrantCandidate {
        let s = try TestDatabase.scratch()
        let user = Fixture.user()
        _ = try s.database.admins.createAdmin(user, by: "test", audit: Fixture.audit("admin.added", subject: user.id))
        return try #require(try s.database.admins.grantCandidate(username: user.username))
    }
}
