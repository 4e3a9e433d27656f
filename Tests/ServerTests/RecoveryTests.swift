import Crypto
import Curl
import Foundation
import JSON
import LatchkeyServer
import PostgreSQL
import PostgreSQLTesting
import Storage
import Synchronization
import Testing
import WebAuthn
import WebAuthnTesting

/// SPEC "Recovery and fallback sign-in" over real HTTP, real PostgreSQL and a real SMTP server
/// (aiosmtpd from scripts/smtp.sh): every code is read from what that server received.
@Suite("Recovery and fallback sign-in", .serialized)
struct RecoveryTests {
    /// Two instances of one deployment (one rpId, one database), both sending mail.
    static let pair = Result { () throws -> (TestServer, TestServer) in
        let rpId = "recovery-\(uniqueSuffix()).latchkey.test"
        let a = try TestServer(name: "recovery", rpIdOverride: rpId) { Self.mailSettings(&$0) }
        let b = try TestServer(name: "recovery", rpIdOverride: rpId) { Self.mailSettings(&$0) }
        return (a, b)
    }

    static func mailSettings(_ c: inout Configuration) {
        c.smtpURL = (try? TestSMTP.server().url) ?? "smtp://127.0.0.1:1"
        c.smtpCAFile = try? TestSMTP.server().caFile
        c.smtpFrom = "latchkey@latchkey.test"
        c.mailSenders = 2
        c.mailRetryBase = 0.2
        c.emailSignIn = true
        c.recoveryDelay = 0
    }

    let stepUp = StepUpTests()

    struct Account {
        let client: Client
        var session: Session
        let authenticator: SoftAuthenticator
        let username: String
        let email: String
        var bearer: String { session.bearer }
        var stepUpAccount: StepUpTests.Account { StepUpTests.Account(client: client, session: session, authenticator: authenticator) }
    }

    /// A passkey account with a verified address (the code read from the SMTP server).
    func account(_ server: TestServer, verified: Bool = true) throws -> Account {
        let client = server.client()
        let authenticator = SoftAuthenticator()
        let username = server.username("rec")
        let session = try client.signUp(authenticator, username: username)
        let email = TestSMTP.address()
        let a = Account(client: client, session: session, authenticator: authenticator, username: username, email: email)
        if verified { try verifyAddress(a, sent: .string("  " + email + " ")) }
        return a
    }

    /// `a.email` set as the verified address (its step-up, the mailed code read from the SMTP server).
    func verifyAddress(_ a: Account, sent: JSONValue? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let started = try putEmail(a, sent ?? .string(a.email))
        #expect(started.status == 202, "\(started)", sourceLocation: sourceLocation)
        let code = try TestSMTP.code(to: a.email)
        let done = try a.client.post("/v1/account/email/verify", .object([("challengeId", started.json!["challengeId"]!), ("code", .string(code))]),
                                     authorization: a.bearer)
        #expect(done.status == 200, "\(done)", sourceLocation: sourceLocation)
    }

    func claims(_ token: String) throws -> JSONValue { try StepUpTests.claims(token) }

    /// `PUT /v1/account/email` from `a`'s session with the step-up SPEC "Assurance" asks of an account
    /// with a passkey: `{"type":"latchkey.email.change","email":<as sent>}` by `a`'s passkey.
    func putEmail(_ a: Account, _ email: JSONValue) throws -> Reply {
        let action = JSONValue.object([("type", "latchkey.email.change"), ("email", email)])
        let token = try a.client.stepUpToken(a.authenticator, authorization: a.bearer, action: action)
        return try a.client.send("PUT", "/v1/account/email", body: JSONValue.object([("email", email)]).serialized(),
                                 authorization: a.bearer, headers: [("Latchkey-Step-Up", token)])
    }

    // MARK: Verified email and one-time codes

    @Test("verified email: 202 + a mailed code; wrong → code_invalid; right → 200 normalised; used → challenge_invalid; no address in events or audit")
    func verifiedEmail() throws {
        let (server, _) = try Self.pair.get()
        let a = try account(server, verified: false)
        let started = try putEmail(a, .string(" \(a.email) "))
        #expect(started.status == 202, "\(started)")
        let challenge = try #require(started.json)
        #expect(challenge["challengeId"]?.stringValue != nil && challenge["expiresAt"]?.stringValue != nil)
        let code = try TestSMTP.code(to: a.email)
        #expect(code.count == 6)
        let mail = try TestSMTP.messages(to: a.email).last ?? ""
        #expect(mail.contains("Content-Type: text/plain; charset=utf-8") && mail.contains("Message-ID: <") && mail.contains("Date: "))
        // smtp:// with STARTTLS offered: libcurl took it (the certificate checked against the test CA).
        #expect(mail.contains("X-Test-TLS: yes"), "\(mail.prefix(300))")
        let wrong = code == "000000" ? "111111" : "000000"
        let bad = try a.client.post("/v1/account/email/verify", .object([("challengeId", challenge["challengeId"]!), ("code", .string(wrong))]),
                                    authorization: a.bearer)
        #expect(bad.status == 400 && bad.code == "code_invalid", "\(bad)")
        let ok = try a.client.post("/v1/account/email/verify", .object([("challengeId", challenge["challengeId"]!), ("code", .string(code))]),
                                   authorization: a.bearer)
        #expect(ok.status == 200, "\(ok)")
        #expect(ok.json?["email"]?.stringValue == TestSMTP.normalised(a.email))
        #expect(ok.json?["verified"] == .bool(true))
        let again = try a.client.post("/v1/account/email/verify", .object([("challengeId", challenge["challengeId"]!), ("code", .string(code))]),
                                      authorization: a.bearer)
        #expect(again.code == "challenge_invalid", "\(again)")
        #expect(try a.client.get("/v1/account/recovery", authorization: a.bearer).json?["email"]?.stringValue == TestSMTP.normalised(a.email))
        // SPEC: addresses never appear in events or audit lines; the code never in events.
        let db = try TestDatabase.connect()
        let local = String(a.email.split(separator: "@")[0])
        let leaks = try db.query("""
            SELECT (SELECT count(*) FROM outbox_events WHERE data::text LIKE '%' || \(local) || '%' OR data::text LIKE '%' || \(code) || '%')
                 + (SELECT count(*) FROM audit_log WHERE detail::text LIKE '%' || \(local) || '%') AS n
            """)
        #expect(try leaks[0].int64("n") == 0)
        let verifiedEvents = try db.query("SELECT count(*) AS n FROM outbox_events WHERE type = 'email.verified' AND account_id = \(a.session.userId)")
        _ = verifiedEvents  // written only when a webhook subscribes (outbox fan-out); the audit line is always there
        let audit = try db.query("SELECT count(*) AS n FROM audit_log WHERE action = 'email.verified' AND subject = \(a.session.userId)")
        #expect(try audit[0].int64("n") == 1)
        // A malformed address is invalid_request.
        #expect(try putEmail(a, "not an address").code == "invalid_request")
    }

    @Test("replacing the verified address tells the old one (a stolen session moving recovery to another mailbox is seen)")
    func addressChangeTellsTheOldAddress() throws {
        let (server, _) = try Self.pair.get()
        let a = try account(server)
        let oldBefore = try TestSMTP.messages(to: a.email).count
        let attackers = TestSMTP.address("attacker")
        let started = try putEmail(a, .string(attackers))
        #expect(started.status == 202, "\(started)")
        let code = try TestSMTP.code(to: attackers)
        let done = try a.client.post("/v1/account/email/verify", .object([("challengeId", started.json!["challengeId"]!), ("code", .string(code))]),
                                     authorization: a.bearer)
        #expect(done.status == 200, "\(done)")
        let notice = try TestSMTP.waitForMessage(to: a.email, containing: "Subject: The email address of your Latchkey account was changed")
        #expect(notice != nil, "the replaced address was not told")
        #expect(notice?.contains(attackers) == false && notice?.contains(TestSMTP.normalised(attackers)) == false, "the notice names the new address")
        #expect(try TestSMTP.messages(to: a.email).count == oldBefore + 1)
    }

    @Test("codes mailed to the old address stop working once the address is replaced")
    func addressChangeEndsCodesMailedToTheOldOne() throws {
        let (server, _) = try Self.pair.get()
        let a = try account(server)
        // Sign-in and recovery codes just mailed to the old address (a mailbox the owner is leaving).
        var before = try TestSMTP.messages(to: a.email).count
        let signIn = try server.client().post("/v1/email/challenges", .object([("email", .string(a.email))]))
        let signInCode = try TestSMTP.code(to: a.email, after: before)
        before = try TestSMTP.messages(to: a.email).count
        let recovery = try server.client().post("/v1/recovery/challenges", .object([("username", .string(a.username))]))
        let recoveryCode = try TestSMTP.code(to: a.email, after: before)
        // The owner moves to a new address.
        let fresh = TestSMTP.address("moved")
        let started = try putEmail(a, .string(fresh))
        let code = try TestSMTP.code(to: fresh)
        #expect(try a.client.post("/v1/account/email/verify", .object([("challengeId", started.json!["challengeId"]!), ("code", .string(code))]),
                                  authorization: a.bearer).status == 200)
        let late = try server.client().post("/v1/email/verify", .object([("challengeId", signIn.json!["challengeId"]!), ("code", .string(signInCode))]))
        #expect(late.status == 400 && late.code == "challenge_invalid", "\(late)")
        let lateRecovery = try server.client().post("/v1/recovery/verify", .object([("challengeId", recovery.json!["challengeId"]!),
                                                                                     ("code", .string(recoveryCode))]))
        #expect(lateRecovery.status == 400 && lateRecovery.code == "challenge_invalid", "\(lateRecovery)")
    }

    @Test("5 wrong attempts, then the challenge is challenge_invalid even for the right code; 16 concurrent guesses count 5")
    func attempts() throws {
        let (server, other) = try Self.pair.get()
        let a = try account(server, verified: false)
        let started = try putEmail(a, .string(a.email))
        let id = try #require(started.json?["challengeId"])
        let code = try TestSMTP.code(to: a.email)
        let wrong = code == "999999" ? "888888" : "999999"
        let bearer = a.bearer
        let endpoints = [server.endpoint, other.endpoint]
        let results = onThreads(16) { i, start -> String in
            let c = Client(endpoints[i % 2])
            start()
            return (try? c.post("/v1/account/email/verify", .object([("challengeId", id), ("code", .string(wrong))]), authorization: bearer))?.code
                ?? "error"
        }
        #expect(results.filter { $0 == "code_invalid" }.count == 5, "\(results)")
        #expect(results.filter { $0 == "challenge_invalid" }.count == 11, "\(results)")
        let right = try a.client.post("/v1/account/email/verify", .object([("challengeId", id), ("code", .string(code))]), authorization: a.bearer)
        #expect(right.code == "challenge_invalid", "\(right)")
    }

    @Test("a right code is good once: 8 concurrent verifies of it on two instances → one 200, seven challenge_invalid (address, sign-in, recovery)")
    func rightCodeOnce() throws {
        let (server, other) = try Self.pair.get()
        let endpoints = [server.endpoint, other.endpoint]
        func race(_ path: String, _ body: JSONValue, authorization: String? = nil) -> [String] {
            onThreads(8) { i, start -> String in
                let c = Client(endpoints[i % 2])
                start()
                guard let reply = try? c.post(path, body, authorization: authorization) else { return "error" }
                return reply.status == 200 ? "200" : reply.code ?? "\(reply.status)"
            }
        }
        // The verified address.
        let a = try account(server, verified: false)
        let started = try putEmail(a, .string(a.email))
        let verified = race("/v1/account/email/verify", .object([("challengeId", try #require(started.json?["challengeId"])),
                                                                ("code", .string(try TestSMTP.code(to: a.email)))]), authorization: a.bearer)
        #expect(verified.filter { $0 == "200" }.count == 1 && verified.filter { $0 == "challenge_invalid" }.count == 7, "\(verified)")
        // Replacing that address (the statement locks the account's address row): still one.
        let next = TestSMTP.address("next")
        let replacing = try putEmail(a, .string(next))
        let replaced = race("/v1/account/email/verify", .object([("challengeId", try #require(replacing.json?["challengeId"])),
                                                                ("code", .string(try TestSMTP.code(to: next)))]), authorization: a.bearer)
        #expect(replaced.filter { $0 == "200" }.count == 1 && replaced.filter { $0 == "challenge_invalid" }.count == 7, "\(replaced)")
        // The replaced address heard of it once.
        _ = try TestSMTP.waitForMessage(to: a.email, containing: "Subject: The email address of your Latchkey account was changed")
        #expect(try TestSMTP.messages(to: a.email).filter { $0.contains("account was changed") }.count == 1)
        // Email sign-in: one session.
        var before = try TestSMTP.messages(to: next).count
        let signIn = try a.client.post("/v1/email/challenges", .object([("email", .string(next))]))
        let signedIn = race("/v1/email/verify", .object([("challengeId", try #require(signIn.json?["challengeId"])),
                                                        ("code", .string(try TestSMTP.code(to: next, after: before)))]))
        #expect(signedIn.filter { $0 == "200" }.count == 1 && signedIn.filter { $0 == "challenge_invalid" }.count == 7, "\(signedIn)")
        // Recovery: one recovery.
        before = try TestSMTP.messages(to: next).count
        let recovery = try a.client.post("/v1/recovery/challenges", .object([("username", .string(a.username))]))
        let recovered = race("/v1/recovery/verify", .object([("challengeId", try #require(recovery.json?["challengeId"])),
                                                            ("code", .string(try TestSMTP.code(to: next, after: before)))]))
        #expect(recovered.filter { $0 == "200" }.count == 1 && recovered.filter { $0 == "challenge_invalid" }.count == 7, "\(recovered)")
        let pending = try a.client.get("/v1/account/recovery", authorization: a.bearer)
        #expect(pending.json?["pendingRecoveries"]?.arrayValue?.count == 1, "\(pending)")
    }

    @Test("five address changes an hour per account, counted in the change's own statement; the sixth is 429 and spends no step-up")
    func addressChangesPerHour() throws {
        let (server, _) = try Self.pair.get()
        let a = try account(server, verified: false)
        for i in 0..<5 {  // five an hour (RecoveryService.verificationsPerHour)
            let started = try putEmail(a, .string(TestSMTP.address("change\(i)")))
            #expect(started.status == 202, "\(started)")
        }
        let action = JSONValue.object([("type", "latchkey.email.change"), ("email", .string(a.email))])
        let token = try a.client.stepUpToken(a.authenticator, authorization: a.bearer, action: action)
        let sixth = try a.client.send("PUT", "/v1/account/email", body: JSONValue.object([("email", .string(a.email))]).serialized(),
                                      authorization: a.bearer, headers: [("Latchkey-Step-Up", token)])
        #expect(sixth.status == 429 && sixth.code == "rate_limited" && sixth.header("Retry-After") != nil, "\(sixth)")
        // Refused before the redemption: the step-up is still good for its own action.
        let actionHash = try #require(try StepUpTests.claims(token)["action_hash"]?.stringValue)
        let consumed = try a.client.post("/v1/step-up/consume", .object([("actionHash", .string(actionHash))]), authorization: "Bearer \(token)")
        #expect(consumed.status == 200, "\(consumed)")
    }

    @Test("an expired code is challenge_invalid")
    func expiry() throws {
        let server = try TestServer(name: "recovery-expiry") { Self.mailSettings(&$0); $0.otpTTL = 1 }
        let a = try account(server, verified: false)
        let started = try putEmail(a, .string(a.email))
        let code = try TestSMTP.code(to: a.email)
        Thread.sleep(forTimeInterval: 1.6)
        let late = try a.client.post("/v1/account/email/verify", .object([("challengeId", started.json!["challengeId"]!), ("code", .string(code))]),
                                     authorization: a.bearer)
        #expect(late.code == "challenge_invalid", "\(late)")
    }

    // MARK: Email sign-in

    @Test("email sign-in: same answer for known and unknown addresses; the code signs in with acr email-otp; such a session cannot enrol a device key")
    func emailSignIn() throws {
        let (server, other) = try Self.pair.get()
        let a = try account(server)
        let before = try TestSMTP.messages(to: a.email).count
        // The address as typed differently (spaces, domain case): the same account.
        let known = try a.client.post("/v1/email/challenges", .object([("email", .string(" " + a.email.replacingOccurrences(of: "Mail.Latchkey.TEST", with: "mail.latchkey.test")))]))
        let unknown = try a.client.post("/v1/email/challenges", .object([("email", .string(TestSMTP.address("nobody")))]))
        #expect(known.status == 202 && unknown.status == 202, "\(known) \(unknown)")
        #expect(Self.shape(known.json) == Self.shape(unknown.json))
        #expect(known.header("Content-Type") == unknown.header("Content-Type"))
        // Wrong code on the unknown one: the same code_invalid as on a known one.
        #expect(try a.client.post("/v1/email/verify", .object([("challengeId", unknown.json!["challengeId"]!), ("code", "123456")])).code == "code_invalid")
        let exact = known
        let code = try TestSMTP.code(to: a.email, after: before)
        // Verify on the other instance.
        let signedIn = try other.client().post("/v1/email/verify", .object([("challengeId", exact.json!["challengeId"]!), ("code", .string(code))]))
        #expect(signedIn.status == 200, "\(signedIn)")
        #expect(signedIn.json?["user"]?["id"]?.stringValue == a.session.userId)
        let token = try #require(signedIn.json?["tokens"]?["access_token"]?.stringValue)
        let c = try claims(token)
        #expect(c["acr"]?.stringValue == "urn:latchkey:acr:email-otp")
        #expect(c["amr"]?.arrayValue == ["otp"])
        // A refresh keeps saying how the session began.
        let refreshed = try other.client().post("/v1/token", .object([("grant_type", "refresh_token"),
                                                                       ("refresh_token", signedIn.json!["tokens"]!["refresh_token"]!)]))
        #expect(try claims(try #require(refreshed.json?["access_token"]?.stringValue))["acr"]?.stringValue == "urn:latchkey:acr:email-otp")
        let sessions = try a.client.get("/v1/sessions", authorization: "Bearer \(token)")
        #expect(sessions.json?["sessions"]?.arrayValue?.first { $0["current"] == .bool(true) }?["method"]?.stringValue == "email")
        // SPEC: such a session can never enrol a device key on its own.
        let emailAccount = StepUpTests.Account(client: a.client, session: Session(reply: signedIn.json!), authenticator: a.authenticator)
        let phone = StepUpTests.Phone(platform: "android")
        let body = try TrustChainTests().enrolmentBody(emailAccount, phone)
        let alone = try a.client.post("/v1/device-keys", body, authorization: "Bearer \(token)")
        #expect(alone.status == 403 && alone.code == "step_up_required", "\(alone)")
        // Its access token is no step-up token either.
        let asStepUp = try a.client.post("/v1/device-keys", try TrustChainTests().enrolmentBody(emailAccount, phone), authorization: "Bearer \(token)",
                                         headers: [("Latchkey-Step-Up", token)])
        #expect(asStepUp.code == "step_up_required", "\(asStepUp)")
        // With the user's passkey step-up (allowed for an email session) it can.
        let withPasskey = try stepUp.enrol(emailAccount, StepUpTests.Phone(platform: "ios"))
        #expect(withPasskey.status == 201, "\(withPasskey)")
    }

    /// Signs `a` in with a code mailed to its verified address; the session's tokens.
    func emailSession(_ a: Account) throws -> Session {
        let before = try TestSMTP.messages(to: a.email).count
        let started = try a.client.post("/v1/email/challenges", .object([("email", .string(a.email))]))
        #expect(started.status == 202, "\(started)")
        let code = try TestSMTP.code(to: a.email, after: before)
        let signedIn = try a.client.post("/v1/email/verify", .object([("challengeId", started.json!["challengeId"]!), ("code", .string(code))]))
        return Session(reply: try #require(signedIn.json, "\(signedIn)"))
    }

    /// A passkey step-up for `action` by `a.authenticator`: the verify reply, whatever it says.
    func passkeyStepUp(_ a: StepUpTests.Account, action: JSONValue) throws -> Reply {
        let c = try a.client.post("/v1/step-up/challenges", .object([("method", "passkey"), ("action", action)]), authorization: a.bearer)
        let challenge = try #require(c.json, "\(c)")
        let assertion = try a.client.assertion(a.authenticator, options: try #require(challenge["publicKey"])).json()
        return try a.client.post("/v1/step-up/verify", .object([("challengeId", challenge["challengeId"]!), ("credential", assertion)]),
                                 authorization: a.bearer)
    }

    /// A new passkey added from `session` (201), and a session its own login began.
    func passkeyAdded(_ a: Account, from session: Session, approver: SoftAuthenticator? = nil,
                      sourceLocation: SourceLocation = #_sourceLocation) throws -> StepUpTests.Account {
        let authenticator = SoftAuthenticator()
        let (_, added) = try a.client.register(authenticator, authorization: session.bearer, approver: approver)
        #expect(added.status == 201, "\(added)", sourceLocation: sourceLocation)
        return StepUpTests.Account(client: a.client, session: try a.client.signIn(authenticator), authenticator: authenticator)
    }

    @Test("a passkey added from an email sign-in signs in at once but approves step-ups only after LATCHKEY_RECOVERY_DELAY, and so does one added from its session")
    func emailSessionPasskeyIsHeld() throws {
        let server = try TestServer(name: "recovery-hold") { Self.mailSettings(&$0); $0.recoveryDelay = 3600 }
        let a = try account(server)
        let byEmail = try emailSession(a)
        // The automatic upgrade: a passkey from the email session is registered and signs in at once.
        let held = try passkeyAdded(a, from: byEmail)
        // Its notice names the end of the hold for people ("… until 7 December 2026, 08:05 UTC"), not in ISO 8601.
        let notice = try #require(try TestSMTP.waitForMessage(to: a.email, containing: "X-Latchkey-Event: passkey.added"))
        #expect(notice.contains(/until \d{1,2} (January|February|March|April|May|June|July|August|September|October|November|December) \d{4}, \d{2}:\d{2} UTC\./),
                "\(notice)")
        #expect(!notice.contains(/\d{4}-\d{2}-\d{2}T\d{2}:/), "\(notice)")
        // But a mailbox alone must not approve a payment, enrol a device key or create recovery
        // codes sooner than a recovery could: its step-ups are recovery_pending until the delay ends.
        expectProblem(try passkeyStepUp(held, action: StepUpTests.transfer), 403, "recovery_pending")
        expectProblem(try passkeyStepUp(held, action: .object([("type", "latchkey.recovery-codes.create")])), 403, "recovery_pending")
        // A passkey added from the held passkey's session inherits the hold (no laundering through a login).
        let laundered = try passkeyAdded(a, from: held.session)
        expectProblem(try passkeyStepUp(laundered, action: StepUpTests.transfer), 403, "recovery_pending")
        // The owner's passkey still approves, from the email session too (SPEC: such a session can use
        // passkey step-up), and a passkey added from the owner's passkey session has no hold.
        let owner = StepUpTests.Account(client: a.client, session: byEmail, authenticator: a.authenticator)
        #expect(try passkeyStepUp(owner, action: StepUpTests.transfer).status == 200)
        #expect(try passkeyStepUp(try passkeyAdded(a, from: a.session, approver: a.authenticator), action: StepUpTests.transfer).status == 200)
    }

    @Test("a stolen refresh token (or the access token it mints) adds no passkey, revokes none and moves no address without the owner's step-up")
    func refreshedSessionAddsNothing() throws {
        let server = try TestServer(name: "recovery-stale") { Self.mailSettings(&$0); $0.recoveryDelay = 3600 }
        let a = try account(server)
        // The thief holds only the refresh token: it mints a fresh access token (auth_time stays the sign-up's)…
        let refreshed = try a.client.post("/v1/token", .object([("grant_type", "refresh_token"), ("refresh_token", .string(a.session.refreshToken))]))
        let stolen = Session(reply: .object([("tokens", try #require(refreshed.json, "\(refreshed)"))]))
        // …which is exactly what a fresh token looks like: SPEC "Assurance" asks a passkey session for
        // the account's passkey now, so no freshness window lets the thief's passkey in.
        expectProblem(try a.client.post("/v1/passkeys/registration/options", .object([]), authorization: stolen.bearer), 403, "step_up_required")
        let victim = Base64URL.encode(a.authenticator.credentialId)
        expectProblem(try a.client.send("DELETE", "/v1/passkeys/\(victim)", authorization: stolen.bearer), 403, "step_up_required")
        expectProblem(try a.client.send("PUT", "/v1/account/email", body: JSONValue.object([("email", .string(TestSMTP.address("thief")))]).serialized(),
                                        authorization: stolen.bearer), 403, "step_up_required")
        // The owner's passkey, present now, still approves each of them.
        #expect(try passkeyStepUp(a.stepUpAccount, action: StepUpTests.transfer).status == 200)
        #expect(try passkeyAdded(a, from: a.session, approver: a.authenticator).session.userId == a.session.userId)
    }

    @Test("without a recovery delay (development default) a passkey added from an email sign-in approves at once")
    func emailSessionPasskeyWithoutDelay() throws {
        let (server, _) = try Self.pair.get()
        let a = try account(server)
        let upgraded = try passkeyAdded(a, from: try emailSession(a))
        #expect(try passkeyStepUp(upgraded, action: StepUpTests.transfer).status == 200)
    }

    @Test("limits hold across instances: 16 concurrent challenges for one address on two instances → 3 accepted, 13 × 429; the same for an unknown address")
    func limits() throws {
        let (server, other) = try Self.pair.get()
        let a = try account(server)
        let endpoints = [server.endpoint, other.endpoint]
        for (path, field, value) in [("/v1/email/challenges", "email", a.email), ("/v1/email/challenges", "email", TestSMTP.address("ghost")),
                                     ("/v1/recovery/challenges", "username", a.username), ("/v1/recovery/challenges", "username", "ghost-\(uniqueSuffix())")] {
            let results = onThreads(16) { i, start -> Reply? in
                let c = Client(endpoints[i % 2])
                start()
                return try? c.post(path, .object([(field, .string(value))]))
            }
            #expect(results.filter { $0?.status == 202 }.count == 3, "\(path) \(results.map { $0?.status ?? 0 })")
            let limited = results.filter { $0?.status == 429 }
            #expect(limited.count == 13)
            #expect(limited.allSatisfy { $0?.code == "rate_limited" && Int($0?.header("Retry-After") ?? "") ?? 0 > 0 })
        }
    }

    // MARK: Recovery codes

    @Test("recovery codes need a passkey step-up for latchkey.recovery-codes.create; 10 codes, each single use; a new set replaces the old")
    func recoveryCodes() throws {
        let (server, other) = try Self.pair.get()
        let a = try account(server)
        #expect(try a.client.post("/v1/recovery-codes", .object([]), authorization: a.bearer).code == "step_up_required")
        let wrongAction = try TrustChainTests().stepUpToken(a.stepUpAccount, action: .object([("type", "latchkey.device-key.enrol"), ("deviceId", "x")]))
        #expect(try a.client.post("/v1/recovery-codes", .object([]), authorization: a.bearer, headers: [("Latchkey-Step-Up", wrongAction)]).code
                == "step_up_required")
        let codes = try createCodes(a)
        #expect(codes.count == 10 && Set(codes).count == 10)
        let first = try other.client().post("/v1/recovery/verify", .object([("username", .string(a.username)), ("recoveryCode", .string(codes[0]))]))
        #expect(first.status == 200, "\(first)")
        #expect(first.json?["recoveryToken"]?.stringValue?.hasPrefix("lkrec_") == true)
        let reused = try other.client().post("/v1/recovery/verify", .object([("username", .string(a.username)), ("recoveryCode", .string(codes[0]))]))
        #expect(reused.code == "code_invalid", "\(reused)")
        #expect(try a.client.get("/v1/account/recovery", authorization: a.bearer).json?["recoveryCodesLeft"]?.intValue == 9)
        let newer = try createCodes(a)
        let old = try a.client.post("/v1/recovery/verify", .object([("username", .string(a.username)), ("recoveryCode", .string(codes[1]))]))
        #expect(old.code == "code_invalid")
        #expect(newer.count == 10)
    }

    func createCodes(_ a: Account) throws -> [String] {
        let token = try TrustChainTests().stepUpToken(a.stepUpAccount, action: .object([("type", "latchkey.recovery-codes.create")]))
        let r = try a.client.post("/v1/recovery-codes", .object([]), authorization: a.bearer, headers: [("Latchkey-Step-Up", token)])
        #expect(r.status == 201, "\(r)")
        // The step-up is used up.
        #expect(try a.client.post("/v1/recovery-codes", .object([]), authorization: a.bearer, headers: [("Latchkey-Step-Up", token)]).code
                == "step_up_required")
        return try #require(r.json?["codes"]?.arrayValue).compactMap(\.stringValue)
    }

    @Test("10 wrong recovery codes a day, counted across instances under 16 concurrent guesses; then 429 even for a right code")
    func wrongRecoveryCodes() throws {
        let (server, other) = try Self.pair.get()
        let a = try account(server)
        let codes = try createCodes(a)
        let endpoints = [server.endpoint, other.endpoint]
        let username = a.username
        let results = onThreads(16) { i, start -> String in
            let c = Client(endpoints[i % 2])
            start()
            return (try? c.post("/v1/recovery/verify", .object([("username", .string(username)), ("recoveryCode", .string("aaaa-bbbb-cccc"))])))?.code
                ?? "error"
        }
        #expect(results.filter { $0 == "code_invalid" }.count == 10, "\(results)")
        #expect(results.filter { $0 == "rate_limited" }.count == 6, "\(results)")
        let right = try a.client.post("/v1/recovery/verify", .object([("username", .string(a.username)), ("recoveryCode", .string(codes[0]))]))
        #expect(right.status == 429 && right.code == "rate_limited" && right.header("Retry-After") != nil, "\(right)")
        // An unknown username is counted the same way (a 429 reveals nothing).
        let ghost = "ghost-\(uniqueSuffix())"
        var last: Reply? = nil
        for _ in 0..<11 { last = try a.client.post("/v1/recovery/verify", .object([("username", .string(ghost)), ("recoveryCode", "aaaa-bbbb-cccc")])) }
        #expect(last?.code == "rate_limited")
    }

    // MARK: Recovery

    /// Recovery by emailed code → the recovery token.
    func recoverByEmail(_ a: Account, on server: TestServer) throws -> JSONValue {
        let before = try TestSMTP.messages(to: a.email).count
        let started = try server.client().post("/v1/recovery/challenges", .object([("username", .string(a.username))]))
        #expect(started.status == 202, "\(started)")
        let code = try TestSMTP.code(to: a.email, after: before)
        let verified = try server.client().post("/v1/recovery/verify", .object([("challengeId", started.json!["challengeId"]!), ("code", .string(code))]))
        #expect(verified.status == 200, "\(verified)")
        return try #require(verified.json)
    }

    @Test("recovery by email: the token registers a passkey; completion revokes every other session and device key, on the other instance too")
    func recoveryCompletes() throws {
        let (server, other) = try Self.pair.get()
        let a = try account(server)
        let keyId = try stepUp.enrolled(a.stepUpAccount, StepUpTests.Phone(platform: "android"))
        let second = try a.client.signIn(a.authenticator)
        // Unknown usernames answer the same.
        let ghost = try server.client().post("/v1/recovery/challenges", .object([("username", .string("ghost-\(uniqueSuffix())"))]))
        #expect(ghost.status == 202 && Self.shape(ghost.json) == Self.shape(.object([("challengeId", "x"), ("expiresAt", "y")])))
        let recovery = try recoverByEmail(a, on: server)
        let token = try #require(recovery["recoveryToken"]?.stringValue)
        #expect(recovery["recoveryId"]?.stringValue != nil && recovery["notBefore"]?.stringValue != nil && recovery["expiresIn"]?.intValue ?? 0 > 0)
        // The "recovery started" notice reached the verified address.
        let notice = try TestSMTP.waitForMessage(to: a.email, containing: "Subject: Recovery of your Latchkey account started")
        #expect(notice?.contains(recovery["recoveryId"]?.stringValue ?? "?") == true)
        // The token anywhere else: 403 forbidden.
        let c = other.client()
        for (method, path) in [("GET", "/v1/passkeys"), ("GET", "/v1/sessions"), ("POST", "/v1/device-keys/challenges"), ("POST", "/v1/logout"),
                               ("GET", "/v1/account/recovery"), ("POST", "/v1/step-up/consume"), ("GET", "/admin/v1/audit")] {
            let r = try c.send(method, path, body: method == "POST" ? Array("{}".utf8) : [], authorization: "Bearer \(token)")
            #expect(r.status == 403 && r.code == "forbidden", "\(method) \(path): \(r)")
        }
        #expect(try c.post("/v1/device-keys", .object([]), authorization: a.bearer, headers: [("Latchkey-Step-Up", token)]).code == "forbidden")
        // Register a new passkey with it (options on one instance, verify on the other).
        let newAuthenticator = SoftAuthenticator()
        let (_, registered) = try c.register(newAuthenticator, authorization: "Bearer \(token)")
        #expect(registered.status == 201, "\(registered)")
        let newSession = Session(reply: try #require(registered.json))
        // Every other session is dead: at once on the instance that completed the recovery, and on the
        // other one once RevokedSessions' feed brings it (NOTIFY, else the 0.5 s poll).
        for bearer in [a.bearer, second.bearer] {
            #expect(try other.client().get("/v1/passkeys", authorization: bearer).code == "unauthorized")
        }
        let arrived = try propagation("sessions the recovery revoked, on the other instance") {
            try [a.bearer, second.bearer].allSatisfy { try server.client().get("/v1/passkeys", authorization: $0).status == 401 }
        }
        #expect(arrived != nil, "the other instance still accepts a session the recovery revoked")
        let refresh = try server.client().post("/v1/token", .object([("grant_type", "refresh_token"), ("refresh_token", .string(a.session.refreshToken))]))
        #expect(refresh.code == "invalid_grant")
        let list = try server.client().get("/v1/sessions", authorization: newSession.bearer)
        #expect(list.json?["sessions"]?.arrayValue?.map { $0["method"]?.stringValue } == ["recovery"], "\(list)")
        // Every device key is revoked; the old passkey remains (LATCHKEY_RECOVERY_REVOKES=sessions).
        #expect(try server.client().get("/v1/device-keys", authorization: newSession.bearer).json?["deviceKeys"]?.arrayValue?.isEmpty == true)
        let challenge = try server.client().post("/v1/step-up/challenges", .object([("keyId", .string(keyId)), ("action", StepUpTests.transfer)]),
                                                 authorization: newSession.bearer)
        #expect(challenge.status >= 400, "\(challenge)")
        #expect(try server.client().get("/v1/passkeys", authorization: newSession.bearer).json?["passkeys"]?.arrayValue?.count == 2)
        // Twice → unauthorized.
        let twice = try c.post("/v1/passkeys/registration/options", .object([]), authorization: "Bearer \(token)")
        #expect(twice.status == 401 && twice.code == "unauthorized", "\(twice)")
        // Audit: every step.
        let db = try TestDatabase.connect()
        let actions = try db.query("SELECT action FROM audit_log WHERE subject = \(a.session.userId) ORDER BY id").map { try $0.string("action") }
        for step in ["recovery.challenge_started", "recovery.started", "recovery.completed"] { #expect(actions.contains(step), "\(actions)") }
    }

    @Test("completing a recovery ends the account's other pending recoveries: a second stolen one cannot undo it")
    func completionEndsOtherRecoveries() throws {
        let (server, other) = try Self.pair.get()
        let a = try account(server)
        // The attacker (mailbox or codes) starts one recovery; so, later, does the owner.
        let attackers = try recoverByEmail(a, on: server)
        // (Its "recovery started" notice is in before the next code is looked for.)
        _ = try TestSMTP.waitForMessage(to: a.email, containing: "Subject: Recovery of your Latchkey account started")
        let owners = try recoverByEmail(a, on: other)
        let attackerToken = try #require(attackers["recoveryToken"]?.stringValue)
        let ownerToken = try #require(owners["recoveryToken"]?.stringValue)
        // The owner's completes first (options issued for the attacker's before that do not help either).
        let early = try server.client().post("/v1/passkeys/registration/options", .object([]), authorization: "Bearer \(attackerToken)")
        #expect(early.status == 200, "\(early)")
        let (_, mine) = try other.client().register(SoftAuthenticator(), authorization: "Bearer \(ownerToken)")
        #expect(mine.status == 201, "\(mine)")
        let owner = Session(reply: try #require(mine.json))
        // The attacker's recovery is over: options → unauthorized, and the options fetched before cannot complete it.
        let late = try server.client().post("/v1/passkeys/registration/options", .object([]), authorization: "Bearer \(attackerToken)")
        #expect(late.status == 401 && late.code == "unauthorized", "\(late)")
        let thief = SoftAuthenticator()
        let challenge = try challengeBytes(try #require(early.json))
        let builder = thief.registration(challenge: challenge, rpId: server.endpoint.rpId, origin: server.endpoint.origin)
        thief.userHandle = userHandle(early.json!)
        let finished = try server.client().send("POST", "/v1/passkeys/registration/verify", body: builder.bytes())
        #expect(finished.status == 401 && finished.code == "unauthorized", "\(finished)")
        // The owner's new session lives; the banner shows no pending recovery; the cancellation is audited.
        let state = try server.client().get("/v1/account/recovery", authorization: owner.bearer)
        #expect(state.json?["pendingRecoveries"]?.arrayValue?.isEmpty == true, "\(state)")
        let db = try TestDatabase.connect()
        let status = try db.query("SELECT status FROM recoveries WHERE id = \(attackers["recoveryId"]!.stringValue!)")[0].string("status")
        #expect(status == "cancelled")
        let cancelled = try db.query("""
            SELECT count(*)::int AS n FROM audit_log WHERE action = 'recovery.cancelled' AND detail->>'recoveryId' = \(attackers["recoveryId"]!.stringValue!)
            """)[0].int("n")
        #expect(cancelled == 1)
    }

    @Test("LATCHKEY_RECOVERY_REVOKES=all also revokes the old passkeys; a recovery code starts the recovery")
    func revokesAll() throws {
        let server = try TestServer(name: "recovery-all") { Self.mailSettings(&$0); $0.recoveryRevokesPasskeys = true }
        let a = try account(server)
        let codes = try createCodes(a)
        let r = try server.client().post("/v1/recovery/verify", .object([("username", .string(a.username)), ("recoveryCode", .string(codes[3].uppercased()))]))
        #expect(r.status == 200, "\(r)")
        let token = try #require(r.json?["recoveryToken"]?.stringValue)
        let (_, registered) = try server.client().register(SoftAuthenticator(), authorization: "Bearer \(token)")
        #expect(registered.status == 201, "\(registered)")
        let newSession = Session(reply: try #require(registered.json))
        #expect(try server.client().get("/v1/passkeys", authorization: newSession.bearer).json?["passkeys"]?.arrayValue?.count == 1)
        #expect(try server.client().login(a.authenticator).reply.code == "credential_unknown")
    }

    @Test("before LATCHKEY_RECOVERY_DELAY → recovery_pending; any session can cancel it; after cancel → unauthorized; unknown id → 404")
    func delayAndCancel() throws {
        let rpId = "recovery-delay-\(uniqueSuffix()).latchkey.test"
        let server = try TestServer(name: "recovery-delay", rpIdOverride: rpId) { Self.mailSettings(&$0); $0.recoveryDelay = 3600 }
        let peer = try TestServer(name: "recovery-delay", rpIdOverride: rpId) { Self.mailSettings(&$0); $0.recoveryDelay = 3600 }
        let a = try account(server)
        let recovery = try recoverByEmail(a, on: server)
        let token = try #require(recovery["recoveryToken"]?.stringValue)
        let id = try #require(recovery["recoveryId"]?.stringValue)
        let early = try peer.client().post("/v1/passkeys/registration/options", .object([]), authorization: "Bearer \(token)")
        #expect(early.status == 403 && early.code == "recovery_pending", "\(early)")
        // The banner: the account sees it pending.
        let state = try a.client.get("/v1/account/recovery", authorization: a.bearer)
        #expect(state.json?["pendingRecoveries"]?.arrayValue?.first?["recoveryId"]?.stringValue == id, "\(state)")
        #expect(try a.client.send("DELETE", "/v1/recovery/rec_unknown", authorization: a.bearer).status == 404)
        let other = try account(server)
        #expect(try other.client.send("DELETE", "/v1/recovery/\(id)", authorization: other.bearer).status == 404)
        #expect(try peer.client().send("DELETE", "/v1/recovery/\(id)", authorization: a.bearer).status == 204)
        let cancelled = try server.client().post("/v1/passkeys/registration/options", .object([]), authorization: "Bearer \(token)")
        #expect(cancelled.status == 401 && cancelled.code == "unauthorized", "\(cancelled)")
        #expect(try a.client.send("DELETE", "/v1/recovery/\(id)", authorization: a.bearer).status == 404)
    }

    // MARK: Conditional create

    @Test("conditional create: only a registration answering {mediation: conditional} options may have UP = 0")
    func conditionalCreate() throws {
        let (server, _) = try Self.pair.get()
        let a = try account(server, verified: false)
        let c = a.client
        // Ordinary options: UP = 0 is user_presence_required.
        let (_, plain) = try c.register(SoftAuthenticator(), authorization: a.bearer, approver: a.authenticator) { $0.userPresent = false }
        #expect(plain.code == "user_presence_required", "\(plain)")
        // Conditional options with a session.
        // A new authenticator answering `authorization`'s conditional options without UP (the automatic upgrade).
        func conditionalCreate(authorization: String, approver: SoftAuthenticator? = nil) throws -> (SoftAuthenticator, Reply) {
            let headers = try approver.map { [("Latchkey-Step-Up", try c.stepUpToken($0, authorization: authorization, action: Client.passkeyAddition))] } ?? []
            let options = try #require(try c.post("/v1/passkeys/registration/options", .object([("mediation", "conditional")]),
                                                  authorization: authorization, headers: headers).json)
            let authenticator = SoftAuthenticator()
            var builder = authenticator.registration(challenge: try challengeBytes(options), rpId: server.rpId, origin: server.origin)
            authenticator.userHandle = userHandle(options)
            builder.userPresent = false
            return (authenticator, try c.send("POST", "/v1/passkeys/registration/verify", body: builder.bytes()))
        }
        let (authenticator, upgraded) = try conditionalCreate(authorization: a.bearer, approver: a.authenticator)
        #expect(upgraded.status == 201, "\(upgraded)")
        // An assertion with UP = 0 is still refused, even from that passkey.
        let (_, login) = try c.login(authenticator) { $0.userPresent = false }
        #expect(login.code == "user_presence_required")
        // Conditional options without a session are a new-account registration: no conditional there.
        let anonymous = try c.post("/v1/passkeys/registration/options", .object([("username", .string(server.username())), ("mediation", "conditional")]))
        #expect(anonymous.status == 200)
        let bad = try c.post("/v1/passkeys/registration/options", .object([("mediation", "sometimes")]), authorization: a.bearer)
        #expect(bad.code == "invalid_request")
        // After recovery: the recovery token may not ask for conditional options; it registers with UP.
        let codes = try createCodes(Account(client: c, session: a.session, authenticator: authenticator, username: a.username, email: a.email))
        let token = try #require(try c.post("/v1/recovery/verify", .object([("username", .string(a.username)), ("recoveryCode", .string(codes[0]))]))
                                    .json?["recoveryToken"]?.stringValue)
        // SPEC "Assurance" Limits: never for a recovery — its passkey is made with the user present.
        expectProblem(try c.post("/v1/passkeys/registration/options", .object([("mediation", "conditional")]), authorization: "Bearer \(token)"),
                      403, "forbidden")
        let (_, recovered) = try c.register(SoftAuthenticator(), authorization: "Bearer \(token)")
        #expect(recovered.status == 201, "\(recovered)")
    }

    // MARK: Mail delivery

    @Test("smtps:// (TLS from the first byte) with the certificate checked; an untrusted certificate is retried, never sent in the clear")
    func smtps() throws {
        let smtp = try TestSMTP.server()
        let server = try TestServer(name: "recovery-smtps") { Self.mailSettings(&$0); $0.smtpURL = smtp.smtpsURL }
        let a = try account(server, verified: false)
        let started = try putEmail(a, .string(a.email))
        #expect(started.status == 202)
        _ = try TestSMTP.code(to: a.email)
        #expect(try TestSMTP.messages(to: a.email).last?.contains("X-Test-TLS: yes") == true)
        // Without the test CA the certificate is refused (libcurl verifies peer and host name): nothing
        // is sent, the outbox worker records a `tls` failure and retries.
        let rcpt = TestSMTP.normalised(TestSMTP.address("untrusted")).lowercased()
        #expect(throws: CurlError.self) {
            try Curl.sendMail(SMTPSettings(url: smtp.smtpsURL), from: "latchkey@latchkey.test", to: [rcpt], message: Array("Subject: x\r\n\r\nx\r\n".utf8))
        }
        do {
            _ = try Curl.sendMail(SMTPSettings(url: smtp.smtpsURL), from: "latchkey@latchkey.test", to: [rcpt], message: Array("Subject: x\r\n\r\nx\r\n".utf8))
        } catch {
            #expect(error.code == .tls, "\(error)")
        }
        #expect(try TestSMTP.messages(to: rcpt).isEmpty)
    }

    @Test("development mode without LATCHKEY_SMTP_URL writes each mail as an .eml file to LATCHKEY_MAIL_DIR; outside it the email endpoints are 404")
    func developmentMailFiles() throws {
        // A database of its own: no other instance (with SMTP) may send this deployment's mail.
        let scratch = try TestDatabase.Scratch()
        let folder = NSTemporaryDirectory() + "lk-mail-\(uniqueSuffix())"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let server = try TestServer(name: "recovery-dev") {
            $0.databaseURL = scratch.url
            $0.developmentMode = true
            $0.mailDirectory = folder
            $0.mailSenders = 1
        }
        let a = try account(server, verified: false)
        let started = try putEmail(a, .string(a.email))
        #expect(started.status == 202, "\(started)")
        let deadline = Date().addingTimeInterval(20)
        var files: [String] = []
        while files.isEmpty && Date() < deadline {
            files = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".eml") }
            if files.isEmpty { usleep(50_000) }
        }
        #expect(files.count == 1)
        let text = TestSMTP.decodeQuotedPrintable(String(decoding: FileManager.default.contents(atPath: folder + "/" + (files.first ?? "")) ?? Data(),
                                                         as: UTF8.self))
        #expect(text.contains("To: <\(TestSMTP.normalised(a.email))>") && TestSMTP.extractCode(text)?.count == 6, "\(text.prefix(400))")
        // Production mode without SMTP: the email endpoints do not exist.
        let production = try TestServer(name: "recovery-nomail") { $0.emailSignIn = true }
        let b = try account(production, verified: false)
        #expect(try b.client.send("PUT", "/v1/account/email", body: JSONValue.object([("email", .string(b.email))]).serialized(), authorization: b.bearer).status == 404)
        #expect(try b.client.post("/v1/email/challenges", .object([("email", .string(b.email))])).status == 404)
        #expect(try b.client.post("/v1/recovery/challenges", .object([("username", "x")])).status == 404)
    }

    @Test("a mail server that refuses the first attempts: the mail arrives later")
    func refusedThenDelivered() throws {
        let (server, _) = try Self.pair.get()
        let a = try account(server, verified: false)
        try TestSMTP.refuse(a.email, times: 3)
        let started = try putEmail(a, .string(a.email))
        #expect(started.status == 202)
        let code = try TestSMTP.code(to: a.email, timeoutSeconds: 60)
        #expect(code.count == 6)
        let db = try TestDatabase.connect()
        let rows = try db.query("""
            SELECT d.attempts, d.status FROM outbox_deliveries d JOIN outbox_events e ON e.id = d.event_id
            WHERE d.channel = 'mail' AND e.account_id = \(a.session.userId) ORDER BY d.seq DESC LIMIT 1
            """)
        let attempts = try rows.first?.int("attempts") ?? 0
        #expect(attempts >= 4, "attempts \(attempts)")
    }

    /// A `latchkey serve` process of deployment `rpId` (not development mode) mailing through `smtpURL`.
    /// `databaseURL`: a database of the test's own, so that no other instance of this process (every
    /// instance is woken by every outbox write) takes the mail the test follows.
    static func instanceEnvironment(rpId: String, smtpURL: String, databaseURL: String? = nil) throws -> [String: String] {
        ["DATABASE_URL": try databaseURL ?? TestDatabase.url(), "LATCHKEY_LISTEN": "127.0.0.1:0", "LATCHKEY_RP_ID": rpId,
         "LATCHKEY_ORIGINS": "https://\(rpId)", "LATCHKEY_THREADS": "2", "LATCHKEY_DEV": "0", "LATCHKEY_WORKERS": "1",
         "LATCHKEY_KEY_ENCRYPTION_KEY": TestDatabase.keyEncryptionKeyText, "LATCHKEY_SMTP_URL": smtpURL,
         "LATCHKEY_SMTP_FROM": "latchkey@latchkey.test", "LATCHKEY_OUTBOX_LEASE": "12"]
    }

    /// A new passkey account on `instance` that asks to verify a fresh address (a mail is queued).
    static func signUpAndAddEmail(on instance: ServeProcess, rpId: String, prefix: String) throws -> (Session, String) {
        let port = try instance.waitUntilServing()
        let client = Client(Endpoint(port: port, rpId: rpId, origin: "https://\(rpId)", adminKey: nil))
        let authenticator = SoftAuthenticator()
        let session = try client.signUp(authenticator, username: "\(prefix)-\(uniqueSuffix())")
        let email = TestSMTP.address(prefix)
        let token = try client.stepUpToken(authenticator, authorization: session.bearer,
                                           action: .object([("type", "latchkey.email.change"), ("email", .string(email))]))
        let started = try client.send("PUT", "/v1/account/email", body: JSONValue.object([("email", .string(email))]).serialized(),
                                      authorization: session.bearer, headers: [("Latchkey-Step-Up", token)])
        #expect(started.status == 202, "\(started)")
        return (session, email)
    }

    @Test("kill -9 of the instance between the request and the mail: another instance sends it")
    func killedBeforeSending() throws {
        guard let binary = ServeProcess.findBinary() else {
            Issue.record("the latchkey executable was not found; build it with `swift build --build-tests`")
            return
        }
        let smtp = try TestSMTP.server()
        let rpId = "recovery-kill-\(uniqueSuffix()).latchkey.test"
        let scratch = try TestDatabase.Scratch()
        var environment = try Self.instanceEnvironment(rpId: rpId, smtpURL: smtp.url, databaseURL: scratch.url)
        environment["LATCHKEY_EMAIL_SIGN_IN"] = "1"
        environment["LATCHKEY_MAIL_RETRY_BASE"] = "0.2"
        environment["LATCHKEY_SMTP_CA"] = smtp.caFile
        // The instance that takes the request sends nothing itself (it only writes the outbox), and dies.
        environment["LATCHKEY_OUTBOX_SENDERS"] = "0"
        environment["LATCHKEY_MAIL_SENDERS"] = "0"
        let first = try ServeProcess(binary: binary, environment: environment)
        defer { first.stop() }
        let (session, email) = try Self.signUpAndAddEmail(on: first, rpId: rpId, prefix: "kill")
        first.killHard()
        #expect(try TestSMTP.messages(to: email).isEmpty)
        // Another instance of the deployment, started afterwards, delivers it.
        environment["LATCHKEY_MAIL_SENDERS"] = "2"
        let second = try ServeProcess(binary: binary, environment: environment)
        defer { second.stop() }
        _ = try second.waitUntilServing()
        let code = try TestSMTP.code(to: email, timeoutSeconds: 60)
        #expect(code.count == 6)
    }

    @Test("kill -9 of the instance while it holds the mail's claim (its mail server hangs): the lease runs out and another instance sends it")
    func killedWhileSending() throws {
        guard let binary = ServeProcess.findBinary() else {
            Issue.record("the latchkey executable was not found; build it with `swift build --build-tests`")
            return
        }
        // A mail server that accepts the connection and never answers: the send hangs inside libcurl.
        let hang = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(hang) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { p in
            try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                guard bind(hang, sa, length) == 0, listen(hang, 16) == 0, getsockname(hang, sa, &length) == 0 else {
                    throw TestSetupError("could not listen")
                }
            }
        }
        let hangPort = Int(UInt16(bigEndian: address.sin_port))
        let rpId = "recovery-lease-\(uniqueSuffix()).latchkey.test"
        // The two instances on a database of their own: nothing else can take the mail first.
        let scratch = try TestDatabase.Scratch()
        var environment = try Self.instanceEnvironment(rpId: rpId, smtpURL: "smtp://127.0.0.1:\(hangPort)", databaseURL: scratch.url)
        environment["LATCHKEY_OUTBOX_SENDERS"] = "0"
        environment["LATCHKEY_MAIL_SENDERS"] = "1"
        let first = try ServeProcess(binary: binary, environment: environment)
        defer { first.stop() }
        let db = try PostgresConnection(url: scratch.url)
        // Wait (bounded) until the first instance holds the delivery's lease, then kill it.
        let (session, email) = try Self.signUpAndAddEmail(on: first, rpId: rpId, prefix: "lease")
        var claimed = false
        for _ in 0..<400 where !claimed {
            claimed = try !db.query("""
                SELECT 1 AS one FROM outbox_deliveries WHERE channel = 'mail' AND account_id = \(session.userId) AND lease_id IS NOT NULL
                """).isEmpty
            if !claimed { usleep(50_000) }
        }
        #expect(claimed, "the first instance never claimed the mail")
        usleep(200_000)  // inside the hung send
        first.killHard()
        #expect(try TestSMTP.messages(to: email).isEmpty)
        // Another instance of the deployment, with a mail server that answers, takes it once the lease ends.
        let smtp = try TestSMTP.server()
        environment["LATCHKEY_SMTP_URL"] = smtp.url
        environment["LATCHKEY_SMTP_CA"] = smtp.caFile
        environment["LATCHKEY_MAIL_RETRY_BASE"] = "0.2"
        let second = try ServeProcess(binary: binary, environment: environment)
        defer { second.stop() }
        _ = try second.waitUntilServing()
        let code = try TestSMTP.code(to: email, timeoutSeconds: 60)
        #expect(code.count == 6)
        let attempts = try db.query("SELECT attempts FROM outbox_deliveries WHERE channel = 'mail' AND account_id = \(session.userId)")
        #expect(try attempts.first?.int("attempts") ?? 0 >= 2)
    }

    /// The member names of a JSON object, for "same answer shape" checks.
    static func shape(_ json: JSONValue?) -> [String] {
        guard case .object(let members)? = json else { return [] }
        return members.map(\.key)
    }
}
