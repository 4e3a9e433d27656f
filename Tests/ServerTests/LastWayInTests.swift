import Crypto
import Foundation
import JSON
import LatchkeyServer
import PostgreSQL
import Storage
import Synchronization
import Testing
import WebAuthn
import WebAuthnTesting

/// SPEC "Assurance", the last way in: an account's last passkey is not revoked while it has no unused
/// recovery code and no verified address that counts (only while email recovery is available):
/// 409 `last_passkey` before the step-up is asked, decided again by the revoking statement on the
/// account's locked passkey rows, and the admin API's revocation obeys it too.
@Suite("The last way in")
struct LastWayInTests {
    /// Mail off (no SMTP, not dev mode): a verified address does not count here.
    static let withoutMail = Result { try TestServer(name: "lastway") }
    /// SMTP configured (never reached: no sender runs): a verified address counts.
    static let withMail = Result { try TestServer(name: "lastway-mail") { $0.smtpURL = "smtp://127.0.0.1:1" } }

    struct Account {
        let client: Client
        let session: Session
        let authenticator: SoftAuthenticator
        var id: String { Base64URL.encode(authenticator.credentialId) }
    }

    func account(_ server: TestServer) throws -> Account {
        let client = server.client()
        let authenticator = SoftAuthenticator()
        return Account(client: client, session: try client.signUp(authenticator, username: server.username("last")), authenticator: authenticator)
    }

    /// What a revocation without a step-up answers, and what it answers with the owner's step-up.
    func revocations(_ a: Account) throws -> (without: Reply, with: Reply) {
        let without = try a.client.send("DELETE", "/v1/passkeys/\(a.id)", authorization: a.session.bearer)
        let with = try a.client.revokePasskey(a.authenticator.credentialId, authorization: a.session.bearer, approver: a.authenticator)
        return (without, with)
    }

    static func sql(url: String? = nil, _ statement: SQL) throws {
        let c = try TestDatabase.connect(url)
        _ = try c.execute(statement)
    }

    /// An unused (or used) recovery code for the account, straight in the database (`url`: another
    /// test database than the shared one): a way in besides its passkeys.
    static func giveRecoveryCode(_ userId: String, used: Bool = false, url: String? = nil) throws {
        try sql(url: url, """
            INSERT INTO recovery_codes (user_id, code_hash, used_at)
            VALUES (\(userId), \(Array(uniqueSuffix().utf8)), CASE WHEN \(used) THEN now() END)
            """)
    }

    /// `email` (default: a fresh one) as the account's verified address, straight in the database.
    static func giveVerifiedAddress(_ userId: String, email: String? = nil) throws {
        let address = email.map(TestSMTP.normalised) ?? "last-\(uniqueSuffix())@latchkey.test"
        try sql("INSERT INTO account_emails (user_id, email) VALUES (\(userId), \(address))")
    }

    @Test("the only passkey, no recovery code, no address: 409 last_passkey before the step-up is asked, and with one")
    func lastPasskeyRefused() throws {
        let server = try Self.withoutMail.get()
        let a = try account(server)
        let (without, with) = try revocations(a)
        expectProblem(without, 409, "last_passkey")
        expectProblem(with, 409, "last_passkey")
        #expect(with.json?["detail"]?.stringValue?.contains("add a recovery method or another passkey first") == true, "\(with)")
        // Nothing changed: the passkey still signs in.
        #expect(try a.client.login(a.authenticator).reply.status == 200)
        // A used recovery code is no way in.
        try Self.giveRecoveryCode(a.session.userId, used: true)
        expectProblem(try revocations(a).without, 409, "last_passkey")
        // An id that names no passkey of the account is not refused: the step-up comes first, then 404.
        let stranger = Base64URL.encode(SoftAuthenticator().credentialId)
        expectProblem(try a.client.send("DELETE", "/v1/passkeys/\(stranger)", authorization: a.session.bearer), 403, "step_up_required")
    }

    @Test("an unused recovery code is a way in: the revocation asks for the step-up and goes ahead")
    func recoveryCodeCounts() throws {
        let server = try Self.withoutMail.get()
        let a = try account(server)
        try Self.giveRecoveryCode(a.session.userId)
        let (without, with) = try revocations(a)
        expectProblem(without, 403, "step_up_required")
        #expect(with.status == 200, "\(with)")
    }

    @Test("another passkey is a way in, a held one too")
    func anotherPasskeyCounts() throws {
        let server = try Self.withoutMail.get()
        let a = try account(server)
        let other = SoftAuthenticator()
        let (_, added) = try a.client.register(other, authorization: a.session.bearer, approver: a.authenticator)
        #expect(added.status == 201, "\(added)")
        let (without, with) = try revocations(a)
        expectProblem(without, 403, "step_up_required")
        #expect(with.status == 200, "\(with)")
        // Now `other` is the last: refused, whoever asks.
        let session = try a.client.signIn(other)
        let id = Base64URL.encode(other.credentialId)
        expectProblem(try a.client.send("DELETE", "/v1/passkeys/\(id)", authorization: session.bearer), 409, "last_passkey")
    }

    @Test("a verified address counts only while email recovery is available")
    func verifiedAddressCountsWithMail() throws {
        let off = try account(try Self.withoutMail.get())
        try Self.giveVerifiedAddress(off.session.userId)
        expectProblem(try revocations(off).without, 409, "last_passkey")

        let on = try account(try Self.withMail.get())
        let bare = try revocations(on)
        expectProblem(bare.without, 409, "last_passkey")
        try Self.giveVerifiedAddress(on.session.userId)
        let (without, with) = try revocations(on)
        expectProblem(without, 403, "step_up_required")
        #expect(with.status == 200, "\(with)")
    }

    @Test("an email session: 409 last_passkey (not step_up_required) where its address does not count")
    func emailSession() throws {
        // One deployment (one rpId, one database) on two instances: A mails (its SMTP server is the
        // test's), B does not — as after SMTP was turned off, the email session living on.
        let a = try TestServer(name: "lastway-email") { RecoveryTests.mailSettings(&$0) }
        let b = try TestServer(name: "lastway-email", rpIdOverride: a.rpId)
        let recovery = RecoveryTests()
        let account = try recovery.account(a)
        let session = try recovery.emailSession(account)
        let path = "/v1/passkeys/\(Base64URL.encode(account.authenticator.credentialId))"
        // With email recovery on, the address is a way in: an email session is refused the revocation by the step-up rule.
        expectProblem(try a.client().send("DELETE", path, authorization: session.bearer), 403, "step_up_required")
        // Without it, the passkey is the last way in: that is said first.
        expectProblem(try b.client().send("DELETE", path, authorization: session.bearer), 409, "last_passkey")
    }

    @Test("the admin API's revocation obeys the rule: 409 last_passkey, then 204 once the account has a recovery code")
    func adminRevocation() throws {
        let server = try Self.withoutMail.get()
        let a = try account(server)
        let path = "/admin/v1/users/\(a.session.userId)/passkeys/\(a.id)"
        let key = "Bearer \(server.adminKey)"
        expectProblem(try a.client.send("DELETE", path, authorization: key), 409, "last_passkey")
        try Self.giveRecoveryCode(a.session.userId)
        #expect(try a.client.send("DELETE", path, authorization: key).status == 204)
    }

    @Test("two concurrent revocations of an account's two passkeys: one passes, the other is 409 last_passkey")
    func concurrentRevocationsOverHTTP() throws {
        // Through the admin API (the admin key: no session of the account ends under the other request).
        let server = try Self.withoutMail.get()
        let key = "Bearer \(server.adminKey)"
        for _ in 0..<3 {
            let a = try account(server)
            let b = SoftAuthenticator()
            #expect(try a.client.register(b, authorization: a.session.bearer, approver: a.authenticator).reply.status == 201)
            let paths = [a.authenticator.credentialId, b.credentialId].map { "/admin/v1/users/\(a.session.userId)/passkeys/\(Base64URL.encode($0))" }
            let statuses = onThreads(2) { i, start in
                let client = server.client()
                start()
                let r = try? client.send("DELETE", paths[i], authorization: key)
                return "\(r?.status ?? 0) \(r?.code ?? "")"
            }
            #expect(statuses.sorted() == ["204 ", "409 last_passkey"], "\(statuses)")
            #expect(try server.database.accounts.credentials(userId: a.session.userId).count == 1)
        }
    }

    /// One revocation with the last-way-in rule, straight through the repository: what it came to.
    static func revoking(_ credentialId: [UInt8], of userId: String, tag: String, in accounts: AccountRepository) -> String {
        let audit = AuditRecord(actor: userId, action: "passkey.revoked", subject: userId, detail: .object([("tag", .string(tag))]))
        do {
            let ended = try accounts.revoke(userId: userId, credentialId: credentialId, audit: audit, keeping: LastWayInRule(addressCounts: false))
            return ended == nil ? "not found" : "revoked"
        } catch .conflict(.lastWayIn) {
            return "last way in"
        } catch {
            return "\(error)"
        }
    }

    @Test("the revoking statement decides on the locked rows: it waits for a concurrent revocation and then refuses")
    func statementDecidesUnderLock() throws {
        let server = try Self.withoutMail.get()
        let a = try account(server)
        let b = SoftAuthenticator()
        #expect(try a.client.register(b, authorization: a.session.bearer, approver: a.authenticator).reply.status == 201)
        let userId = a.session.userId
        // Both passkeys are live when the second revocation reads; the first holds its row until it commits.
        let first = try TestDatabase.connect()
        _ = try first.execute("BEGIN")
        _ = try first.execute("UPDATE credentials SET revoked_at = now() WHERE id = \(a.authenticator.credentialId) AND user_id = \(userId)")
        let outcome = Mutex<String?>(nil)
        let accounts = server.database.accounts
        let tag = "lastway-\(uniqueSuffix())"
        let bId = b.credentialId
        let thread = Thread {
            let result = Self.revoking(bId, of: userId, tag: tag, in: accounts)
            outcome.withLock { $0 = result }
        }
        thread.start()
        // The second revocation is waiting for the first's row lock (not finished, not failed).
        let monitor = try TestDatabase.connect()
        let waiting = try waitFor {
            try monitor.query("""
                SELECT count(*)::int AS n FROM pg_stat_activity
                WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND starts_with(query, 'WITH acct AS')
                """)[0].int("n") > 0
        }
        let activity = try monitor.query("""
            SELECT coalesce(wait_event_type, '-') || ' ' || left(query, 60) AS q FROM pg_stat_activity WHERE pid <> pg_backend_pid()
            """).map { try $0.string("q") }
        #expect(waiting, "the revoking statement never waited for the row lock: \(activity)")
        #expect(outcome.withLock { $0 } == nil)
        _ = try first.execute("COMMIT")
        #expect(waitFor { outcome.withLock { $0 } != nil })
        #expect(outcome.withLock { $0 } == "last way in")
        #expect(try accounts.credentials(userId: userId).map(\.id) == [b.credentialId])
    }
}
