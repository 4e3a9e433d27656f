import Foundation
import JSON
import PostgreSQL
import Storage
import Synchronization
import Testing

/// Issue 10 point 7: a credential use is compared and stored in one statement. The stored counter
/// must still be below the new one (or both 0); otherwise `.reject` writes nothing and `.flag`
/// stores the use with the credential flagged.
@Suite struct CompareAndSetTests {
    func use(_ credential: CredentialRecord, _ count: Int64, _ policy: CredentialUse.OnRegression = .reject) -> CredentialUse {
        CredentialUse(credentialId: credential.id, userId: credential.userId, signCount: count, backedUp: false, cloneWarning: false,
                      onRegression: policy)
    }

    @Test func aLoginCarryingTheStoredCounterIsRefusedUnderRejectAndNothingIsWritten() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered(signCount: 7)
        let session = Fixture.session(userId: user.id, credentialId: credential.id)
        for count: Int64 in [7, 3, 0] {
            #expect(throws: StorageError.conflict(.signCountRegression)) {
                try s.database.sessions.start(Fixture.session(userId: user.id, credentialId: credential.id),
                                              recording: use(credential, count), audit: [Fixture.audit("passkey.login")])
            }
        }
        #expect(try s.count("SELECT count(*) AS n FROM refresh_families WHERE user_id = \(user.id)") == 1, "the registration's only")
        #expect(try s.auditActions() == ["passkey.registered"])
        let stored = try #require(try s.database.accounts.credentialForLogin(id: credential.id)).0
        #expect(stored.signCount == 7 && !stored.flagged && stored.lastUsedAt == nil)

        #expect(try s.database.sessions.start(session, recording: use(credential, 8)) == RecordedUse(signCount: 8, flagged: false))
    }

    @Test func bothZeroIsNotARegression() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered(signCount: 0)
        for _ in 0..<2 {
            #expect(try s.database.sessions.start(Fixture.session(userId: user.id, credentialId: credential.id),
                                                  recording: use(credential, 0)) == RecordedUse(signCount: 0, flagged: false))
        }
        // A counter that starts being used, then goes back to 0: a regression.
        try s.database.sessions.start(Fixture.session(userId: user.id, credentialId: credential.id), recording: use(credential, 1))
        #expect(throws: StorageError.conflict(.signCountRegression)) {
            try s.database.sessions.start(Fixture.session(userId: user.id, credentialId: credential.id), recording: use(credential, 0))
        }
    }

    @Test func underFlagTheUseIsStoredAndTheCredentialFlagged() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered(signCount: 7)
        let session = Fixture.session(userId: user.id, credentialId: credential.id)
        #expect(try s.database.sessions.start(session, recording: use(credential, 7, .flag)) == RecordedUse(signCount: 7, flagged: true))
        #expect(try s.count("SELECT count(*) AS n FROM refresh_families WHERE id = \(session.familyId)") == 1)
        #expect(try #require(try s.database.accounts.credentialForLogin(id: credential.id)).0.flagged)
    }

    @Test func aPasskeyStepUpReceiptIsComparedAndSetToo() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered(signCount: 5)
        let refused = Fixture.receipt(userId: user.id, keyId: "cred", method: .passkey)
        #expect(throws: StorageError.conflict(.signCountRegression)) {
            try s.database.deviceKeys.insertReceipt(refused, liveDeviceKeyId: nil, credentialUse: use(credential, 5),
                                                    audit: [Fixture.audit("step_up.approved")])
        }
        #expect(try s.database.deviceKeys.receipt(id: refused.id) == nil)
        #expect(try s.auditActions() == ["passkey.registered"])

        let flagged = Fixture.receipt(userId: user.id, keyId: "cred", method: .passkey)
        #expect(try s.database.deviceKeys.insertReceipt(flagged, liveDeviceKeyId: nil, credentialUse: use(credential, 5, .flag), audit: []))
        #expect(try s.database.deviceKeys.receipt(id: flagged.id) != nil)
        #expect(try #require(try s.database.accounts.credentialForLogin(id: credential.id)).0.flagged)
    }

    @Test("16 rounds: two logins carrying one counter on two connections at once never both store")
    func concurrentUsesWithOneCounter() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered(signCount: 1)
        let database = s.database
        for round in 0..<16 {
            let count = Int64(round + 2)
            let outcomes = Mutex<[String]>([])
            let group = DispatchGroup()
            for _ in 0..<2 {
                group.enter()
                Thread {
                    defer { group.leave() }
                    do {
                        try database.sessions.start(Fixture.session(userId: user.id, credentialId: credential.id),
                                                    recording: self.use(credential, count))
                        outcomes.withLock { $0.append("stored") }
                    } catch {
                        outcomes.withLock { $0.append("\(error)") }
                    }
                }.start()
            }
            group.wait()
            let result = outcomes.withLock { $0 }
            #expect(result.filter { $0 == "stored" }.count == 1, "round \(round): \(result)")
            #expect(result.filter { $0 == StorageError.conflict(.signCountRegression).description }.count == 1, "round \(round): \(result)")
        }
    }
}
