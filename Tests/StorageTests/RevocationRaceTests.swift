import Foundation
import PostgreSQL
import PostgreSQLTesting
@testable import Storage
import Synchronization
import Testing

/// What a revocation ends is never begun again beside it (ARCHITECTURE.md "Revocation cascades";
/// `RevocationCascade`): a passkey revoked while a login of it is under way leaves no live session,
/// and a recovery's completion leaves no passkey or device key added at the same moment. Each
/// interleaving is driven step by step on real PostgreSQL: the login paused between its read and its
/// write (its decision is the pause), or the revocation held open on a connection of the test's own.
/// Both shapes of the login's write are taken: a counter of 0 (the passkey's row left alone) and a
/// counter that advances (the row updated).
@Suite struct RevocationRaceTests {
    static func use(_ credential: CredentialRecord) -> CredentialUse {
        CredentialUse(credentialId: credential.id, userId: credential.userId, signCount: credential.signCount == 0 ? 0 : credential.signCount + 1,
                      backedUp: false, cloneWarning: false)
    }

    static func liveSessions(_ s: Scratch, of credential: CredentialRecord) throws -> Int {
        try s.count("SELECT count(*)::int AS n FROM refresh_families WHERE credential_id = \(credential.id) AND revoked_at IS NULL")
    }

    @Test(arguments: [0, 3] as [Int64])
    func aRevocationDuringALoginWaitsForItAndEndsItsSession(signCount: Int64) throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered(signCount: signCount)
        let session = Fixture.session(userId: user.id, credentialId: credential.id)
        let read = DispatchSemaphore(value: 0), proceed = DispatchSemaphore(value: 0), loggedIn = DispatchSemaphore(value: 0)
        let login = Mutex<Result<LoginWritten, StorageError>?>(nil)
        DispatchQueue.global().async {
            let result = Result { () throws(StorageError) -> LoginWritten in
                try s.database.logins.login(LoginRepositoryTests.challenge(), credentialId: credential.id) { _ in
                    read.signal()
                    _ = proceed.wait(timeout: .now() + 30)
                    return .session(session, recording: Self.use(credential), audit: [Fixture.audit("passkey.login", subject: user.id)],
                                    events: [], language: nil)
                }
            }
            login.withLock { $0 = result }
            loggedIn.signal()
        }
        // 1. The login has read the passkey live and is deciding.
        #expect(read.wait(timeout: .now() + 30) == .success)
        // 2. The revocation starts and must wait for the login to commit.
        let revocation = Mutex<Result<[String]?, StorageError>?>(nil)
        let revoked = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let result = Result { () throws(StorageError) -> [String]? in
                try s.database.accounts.revoke(userId: user.id, credentialId: credential.id, audit: Fixture.audit("passkey.revoked"))
            }
            revocation.withLock { $0 = result }
            revoked.signal()
        }
        #expect(try s.waitsForALock { revocation.withLock { $0 != nil } }, "the revocation waited for the login in flight")
        // 3. The login writes its session and commits; the revocation then ends it.
        proceed.signal()
        #expect(loggedIn.wait(timeout: .now() + 30) == .success && revoked.wait(timeout: .now() + 30) == .success)
        #expect(try login.withLock { $0 }?.get() == .session(RecordedUse(signCount: Self.use(credential).signCount, flagged: false)))
        let ended = try #require(try revocation.withLock { $0 }?.get())
        #expect(ended.contains(session.familyId), "the login's session is among those the revocation ended: \(ended)")
        #expect(try Self.liveSessions(s, of: credential) == 0)
    }

    @Test(arguments: [0, 3] as [Int64])
    func aLoginThatReadBesideARevocationFindsThePasskeyGone(signCount: Int64) throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered(signCount: signCount)
        // 1. A revocation in flight, as `revokePasskey` runs it: the sessions lock, then the passkey
        //    and its sessions (the registration's) revoked.
        let revoker = try s.connect()
        _ = try revoker.execute("BEGIN")
        _ = try revoker.query(RevocationCascade.endingSessions(userId: user.id))
        _ = try revoker.execute("UPDATE credentials SET revoked_at = now() WHERE id = \(credential.id)")
        _ = try revoker.execute("UPDATE refresh_families SET revoked_at = now() WHERE credential_id = \(credential.id)")
        let revokerPid = try revoker.query("SELECT pg_backend_pid() AS pid")[0].int("pid")
        // 2. A login of the passkey: its read waits for the revocation.
        let login = Mutex<Result<LoginWritten, StorageError>?>(nil)
        let loggedIn = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let result = Result { () throws(StorageError) -> LoginWritten in
                try s.database.logins.login(LoginRepositoryTests.challenge(), credentialId: credential.id) { _ in
                    .session(Fixture.session(userId: user.id, credentialId: credential.id), recording: Self.use(credential),
                             audit: [Fixture.audit("passkey.login", subject: user.id)], events: [], language: nil)
                }
            }
            login.withLock { $0 = result }
            loggedIn.signal()
        }
        #expect(try s.waitsForALock(blockedBy: revokerPid) { login.withLock { $0 != nil } }, "the login's read waited for the revocation")
        // 3. The revocation commits; the login's one statement finds the passkey revoked and writes no session.
        _ = try revoker.execute("COMMIT")
        #expect(loggedIn.wait(timeout: .now() + 30) == .success)
        #expect(throws: StorageError.notFound) { try login.withLock { $0 }?.get() }
        #expect(try Self.liveSessions(s, of: credential) == 0)
    }

    /// A passkey added to the account (approved by a step-up of its passkey) beside a recovery's
    /// completion that revokes every passkey: the addition waits for the completion, and its step-up
    /// is then judged by a passkey the completion revoked, so the new passkey is never written.
    @Test func aPasskeyAddedBesideARecoverysCompletionIsRefused() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered()
        let receipt = Fixture.receipt(userId: user.id, keyId: Fixture.base64url(credential.id), method: .passkey)
        #expect(try s.database.deviceKeys.insertReceipt(receipt, liveDeviceKeyId: nil, credentialUse: nil, audit: []))
        // 1. A completion in flight (`RecoveryCompletion` under LATCHKEY_RECOVERY_REVOKES=all): the
        //    sessions lock, then every passkey revoked.
        let completion = try s.connect()
        _ = try completion.execute("BEGIN")
        _ = try completion.query(RevocationCascade.endingSessions(userId: user.id))
        _ = try completion.execute("UPDATE credentials SET revoked_at = now() WHERE user_id = \(user.id)")
        let completionPid = try completion.query("SELECT pg_backend_pid() AS pid")[0].int("pid")
        // 2. The addition's verify, with the step-up its options presented.
        let added = Fixture.credential(userId: user.id)
        let registration = NewRegistration(newUser: nil, credential: added, session: Fixture.session(userId: user.id, credentialId: added.id),
                                           audit: Fixture.audit("passkey.registered", subject: user.id),
                                           redeeming: StepUpRedemption(jti: receipt.tokenJTI, userId: user.id, actionHash: receipt.actionHash))
        let outcome = Mutex<Result<RegistrationWritten, StorageError>?>(nil)
        let finished = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let result = Result { () throws(StorageError) -> RegistrationWritten in
                try s.database.accounts.finishRegistration(LoginRepositoryTests.challenge(), .register(registration))
            }
            outcome.withLock { $0 = result }
            finished.signal()
        }
        #expect(try s.waitsForALock(blockedBy: completionPid) { outcome.withLock { $0 != nil } }, "the addition waited for the completion")
        _ = try completion.execute("COMMIT")
        #expect(finished.wait(timeout: .now() + 30) == .success)
        #expect(try outcome.withLock { $0 }?.get() == .stepUpUsed)
        #expect(try s.count("SELECT count(*)::int AS n FROM credentials WHERE user_id = \(user.id) AND revoked_at IS NULL") == 0)
    }

    /// A device key enrolled (its gate a step-up of the account's device key) beside a recovery's
    /// completion, which revokes every device key: the enrolment waits, its gate is then judged by a
    /// key the completion revoked, and no device key of the account is left live.
    @Test func aDeviceKeyEnrolledBesideARecoverysCompletionIsRefused() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let (_, receipt) = try s.deviceKeyWithReceipt(userId: user.id)
        let completion = try s.connect()
        _ = try completion.execute("BEGIN")
        _ = try completion.query(RevocationCascade.endingSessions(userId: user.id))
        _ = try completion.execute("UPDATE device_keys SET revoked_at = now() WHERE user_id = \(user.id)")
        let completionPid = try completion.query("SELECT pg_backend_pid() AS pid")[0].int("pid")
        let outcome = Mutex<Result<EnrolmentWritten, StorageError>?>(nil)
        let finished = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let result = Result { () throws(StorageError) -> EnrolmentWritten in
                try s.database.deviceKeys.enrol(Fixture.deviceKey(userId: user.id, deviceId: "device-2"), usingChallenge: nil,
                                                gate: .stepUp(jti: receipt.tokenJTI, actionHash: receipt.actionHash),
                                                audit: Fixture.template("device_key.enrolled"), enrolled: [], replacedEvent: nil)
            }
            outcome.withLock { $0 = result }
            finished.signal()
        }
        #expect(try s.waitsForALock(blockedBy: completionPid) { outcome.withLock { $0 != nil } }, "the enrolment waited for the completion")
        _ = try completion.execute("COMMIT")
        #expect(finished.wait(timeout: .now() + 30) == .success)
        guard case .gateRefused? = try outcome.withLock({ $0 })?.get() else { Issue.record("enrolled beside the completion"); return }
        #expect(try s.database.deviceKeys.list(userId: user.id).isEmpty)
    }
}
