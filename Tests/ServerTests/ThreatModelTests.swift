import Crypto
import Foundation
import JSON
import LatchkeyServer
import Testing
import WebAuthnTesting

/// README "Threat model": each row that a thief plays over HTTP is a test here — over real
/// PostgreSQL and the real SMTP server of scripts/smtp.sh — that holds exactly one stolen thing and
/// asserts no approval, no lasting hold, and that the owner was told and can undo it (SPEC "Assurance").
@Suite("Threat model: one stolen thing")
struct ThreatModelTests {
    /// A deployment with mail, email sign-in and a real recovery delay (an hour), so holds are visible.
    static let deployment = Result { try TestServer(name: "threats") { RecoveryTests.mailSettings(&$0); $0.recoveryDelay = 3600 } }
    var server: TestServer { get throws { try Self.deployment.get() } }
    let recovery = RecoveryTests()

    static let transfer = StepUpTests.transfer

    /// The cancel link's token in the newest message to `address` that names `event`.
    static func cancelToken(to address: String, event: String) throws -> String? {
        guard let message = try TestSMTP.waitForMessage(to: address, containing: "X-Latchkey-Event: \(event)"),
              let r = message.range(of: "/?cancel=") else { return nil }
        let token = message[r.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }
        return token.isEmpty ? nil : String(token)
    }

    func passkeyIds(_ a: RecoveryTests.Account) throws -> [String] {
        let list = try a.client.get("/v1/passkeys", authorization: a.bearer)
        return list.json?["passkeys"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
    }

    @Test("a stolen access token: no passkey added, none revoked, no address moved, no recovery codes, no device key")
    func stolenAccessToken() throws {
        let server = try server
        let owner = try recovery.account(server)
        let thief = Client(server.endpoint)
        let stolen = owner.bearer
        let before = try passkeyIds(owner)
        let mails = try TestSMTP.messages(to: owner.email).count
        expectProblem(try thief.post("/v1/passkeys/registration/options", .object([]), authorization: stolen), 403, "step_up_required")
        expectProblem(try thief.post("/v1/passkeys/registration/options", .object([("mediation", "conditional")]), authorization: stolen),
                      403, "step_up_required")
        expectProblem(try thief.send("DELETE", "/v1/passkeys/\(before[0])", authorization: stolen), 403, "step_up_required")
        expectProblem(try thief.send("PUT", "/v1/account/email", body: JSONValue.object([("email", .string(TestSMTP.address("thief")))]).serialized(),
                                     authorization: stolen), 403, "step_up_required")
        expectProblem(try thief.post("/v1/recovery-codes", .object([]), authorization: stolen), 403, "step_up_required")
        let phone = StepUpTests.Phone(platform: "ios")
        let challenge = try #require(try thief.post("/v1/device-keys/challenges", .object([]), authorization: stolen).json)
        let enrol = JSONValue.object([("deviceId", .string(phone.deviceId)), ("publicKey", .string(Base64URL.encode(phone.publicKey))),
                                      ("platform", "ios"), ("challengeId", challenge["challengeId"]!),
                                      ("signature", .string(try phone.sign(challenge["challenge"]!.stringValue!)))])
        expectProblem(try thief.post("/v1/device-keys", enrol, authorization: stolen), 403, "step_up_required")
        // A step-up made for one change does not open another (the thief cannot make one anyway:
        // the challenge is signed by the owner's passkey, which the thief does not hold).
        let forAdd = try owner.client.stepUpToken(owner.authenticator, authorization: stolen, action: Client.passkeyAddition)
        expectProblem(try thief.send("DELETE", "/v1/passkeys/\(before[0])", authorization: stolen, headers: [("Latchkey-Step-Up", forAdd)]),
                      403, "step_up_required")
        // Nothing changed and so nothing was mailed.
        #expect(try passkeyIds(owner) == before)
        #expect(try TestSMTP.messages(to: owner.email).count == mails)
    }

    @Test("a stolen mailbox: email sign-in adds a held passkey that approves nothing, revokes nothing, moves nothing; the owner's mail undoes it")
    func stolenMailbox() throws {
        let server = try server
        let owner = try recovery.account(server)
        let ownerPasskey = Base64URL.encode(owner.authenticator.credentialId)
        // The thief reads the sign-in code from the mailbox and signs in by email.
        let byEmail = try recovery.emailSession(owner)
        let thiefAccount = RecoveryTests.Account(client: Client(server.endpoint), session: byEmail, authenticator: SoftAuthenticator(),
                                                 username: owner.username, email: owner.email)
        // An email session may not remove the owner's passkey, nor move the address.
        expectProblem(try thiefAccount.client.send("DELETE", "/v1/passkeys/\(ownerPasskey)", authorization: byEmail.bearer), 403, "step_up_required")
        expectProblem(try thiefAccount.client.send("PUT", "/v1/account/email",
                                                   body: JSONValue.object([("email", .string(TestSMTP.address("thief")))]).serialized(),
                                                   authorization: byEmail.bearer), 403, "step_up_required")
        // It may add a passkey (the automatic upgrade) — held: signs in, approves nothing.
        let (_, added) = try thiefAccount.client.register(thiefAccount.authenticator, authorization: byEmail.bearer)
        #expect(added.status == 201, "\(added)")
        let thiefKey = Base64URL.encode(thiefAccount.authenticator.credentialId)
        let thiefSession = try thiefAccount.client.signIn(thiefAccount.authenticator)
        let thief = StepUpTests.Account(client: thiefAccount.client, session: thiefSession, authenticator: thiefAccount.authenticator)
        expectProblem(try recovery.passkeyStepUp(thief, action: Self.transfer), 403, "recovery_pending")
        expectProblem(try recovery.passkeyStepUp(thief, action: .object([("type", "latchkey.passkey.revoke"), ("credentialId", .string(ownerPasskey))])),
                      403, "recovery_pending")
        expectProblem(try thief.client.send("DELETE", "/v1/passkeys/\(ownerPasskey)", authorization: thief.bearer), 403, "step_up_required")
        // The held passkey shows its hold.
        let listed = try #require(try owner.client.get("/v1/passkeys", authorization: owner.bearer).json?["passkeys"]?.arrayValue)
        #expect(listed.first { $0["id"]?.stringValue == thiefKey }?["heldUntil"]?.stringValue != nil)
        #expect(listed.first { $0["id"]?.stringValue == ownerPasskey }?["heldUntil"] == nil)
        // The owner was told, with a link that undoes it without a session.
        let token = try #require(try Self.cancelToken(to: owner.email, event: "passkey.added"), "no passkey.added mail with a cancel link")
        #expect(token.hasPrefix("lkcan_pk_"))
        #expect(try Client(server.endpoint).post("/v1/recovery/cancel", .object([("cancelToken", .string(token))])).status == 204)
        expectProblem(try Client(server.endpoint).post("/v1/recovery/cancel", .object([("cancelToken", .string(token))])), 404, "not_found")
        // The thief's passkey is gone and so are the sessions it began; the owner's passkey still approves.
        expectProblem(try thief.client.get("/v1/passkeys", authorization: thief.bearer), 401, "unauthorized")
        expectProblem(try thief.client.login(thief.authenticator).reply, 400, "credential_unknown")
        #expect(try recovery.passkeyStepUp(owner.stepUpAccount, action: Self.transfer).status == 200)
        #expect(try passkeyIds(owner) == [ownerPasskey])
    }

    @Test("a stolen recovery code: the token only registers a passkey, only after the delay, never conditionally; the owner's mail cancels it")
    func stolenRecoveryCode() throws {
        let server = try server
        let owner = try recovery.account(server)
        let codes = try recovery.createCodes(owner)
        let thief = Client(server.endpoint)
        let reply = try thief.post("/v1/recovery/verify", .object([("username", .string(owner.username)), ("recoveryCode", .string(codes[0]))]))
        let token = try #require(reply.json?["recoveryToken"]?.stringValue, "\(reply)")
        let bearer = "Bearer \(token)"
        expectProblem(try thief.post("/v1/passkeys/registration/options", .object([]), authorization: bearer), 403, "recovery_pending")
        expectProblem(try thief.post("/v1/passkeys/registration/options", .object([("mediation", "conditional")]), authorization: bearer),
                      403, "recovery_pending")
        for (method, path) in [("GET", "/v1/passkeys"), ("DELETE", "/v1/passkeys/\(Base64URL.encode(owner.authenticator.credentialId))"),
                               ("PUT", "/v1/account/email"), ("POST", "/v1/recovery-codes"), ("GET", "/admin/v1/users")] {
            let r = try thief.send(method, path, body: method == "PUT" ? JSONValue.object([("email", "x@latchkey.test")]).serialized() : [],
                                   authorization: bearer)
            expectProblem(r, 403, "forbidden")
        }
        // The owner heard of it at once, with a link that cancels it without a session.
        let cancel = try #require(try Self.cancelToken(to: owner.email, event: "recovery.started"), "no recovery.started mail with a cancel link")
        #expect(cancel.hasPrefix("lkcan_rec_"))
        #expect(try Client(server.endpoint).post("/v1/recovery/cancel", .object([("cancelToken", .string(cancel))])).status == 204)
        expectProblem(try thief.post("/v1/passkeys/registration/options", .object([]), authorization: bearer), 401, "unauthorized")
        #expect(try recovery.passkeyStepUp(owner.stepUpAccount, action: Self.transfer).status == 200)
    }

    @Test("an enrolment ticket for an account that has a passkey: the passkey it registers is held (signs in, approves nothing)")
    func ticketOnAnAccountWithPasskeys() throws {
        let server = try server
        let client = server.client()
        let externalId = "app-user-\(uniqueSuffix())"
        let username = server.username("ticketed")
        let first = try #require(try client.enrolmentTicket(externalId: externalId, username: username).json?["ticket"]?.stringValue)
        let ownerKey = SoftAuthenticator()
        let (_, registered) = try client.register(ownerKey, authorization: "Ticket \(first)")
        #expect(registered.status == 201 && registered.json?["passkey"]?["heldUntil"] == nil, "the account's first passkey is not held: \(registered)")
        // A second ticket (an app backend vouching again, or its key stolen) adds a held passkey.
        let second = try #require(try client.enrolmentTicket(externalId: externalId, username: username).json?["ticket"]?.stringValue)
        let otherKey = SoftAuthenticator()
        let (_, again) = try client.register(otherKey, authorization: "Ticket \(second)")
        #expect(again.status == 201 && again.json?["passkey"]?["heldUntil"]?.stringValue != nil, "\(again)")
        let session = try client.signIn(otherKey)
        expectProblem(try recovery.passkeyStepUp(StepUpTests.Account(client: client, session: session, authenticator: otherKey), action: Self.transfer),
                      403, "recovery_pending")
    }

    @Test("an admin's session begun by a held passkey reads nothing of the admin API")
    func heldPasskeyAdmin() throws {
        let server = try server
        // `latchkey admins add`'s path: the role and a ticket; the first passkey registered with it; a verified address.
        let username = server.username("admin")
        let added = try server.services.admin.addAdmin(username: username, by: .named("cli"))
        let client = server.client()
        let key = SoftAuthenticator()
        let (_, registered) = try client.register(key, authorization: "Ticket \(added.ticket)")
        let owner = RecoveryTests.Account(client: client, session: Session(reply: try #require(registered.json, "\(registered)")),
                                          authenticator: key, username: username, email: TestSMTP.address("admin"))
        try recovery.verifyAddress(owner)
        let read = try owner.client.get("/admin/v1/users?username=admin", authorization: owner.bearer)
        #expect(read.status == 200, "\(read)")
        let byEmail = try recovery.emailSession(owner)
        expectProblem(try owner.client.get("/admin/v1/users?username=admin", authorization: byEmail.bearer), 403, "forbidden")
        let held = try recovery.passkeyAdded(owner, from: byEmail)
        expectProblem(try owner.client.get("/admin/v1/users?username=admin", authorization: held.bearer), 403, "forbidden")
        expectProblem(try owner.client.get("/admin/v1/audit", authorization: held.bearer), 403, "forbidden")
    }

    @Test("LATCHKEY_MAX_PASSKEYS: a full account gets no more registration options (409)")
    func passkeyCap() throws {
        let server = try TestServer(name: "cap") { $0.maxPasskeys = 2 }
        let client = server.client()
        let first = SoftAuthenticator()
        let session = try client.signUp(first, username: server.username("cap"))
        let (_, second) = try client.register(SoftAuthenticator(), authorization: session.bearer, approver: first)
        #expect(second.status == 201, "\(second)")
        let token = try client.stepUpToken(first, authorization: session.bearer, action: Client.passkeyAddition)
        expectProblem(try client.post("/v1/passkeys/registration/options", .object([]), authorization: session.bearer,
                                      headers: [("Latchkey-Step-Up", token)]), 409, "conflict")
    }

    @Test("code mails per account: asking by username and by address counts together; past 3 an hour the answer is 202 and nothing is mailed")
    func codeMailsPerAccount() throws {
        let server = try server
        let owner = try recovery.account(server)
        let before = try TestSMTP.messages(to: owner.email).filter { $0.contains("X-Latchkey-Event: recovery.code") }.count
        let client = Client(server.endpoint)
        // Two identifiers, each within its own limit of 3: the account still gets at most 3 code mails.
        var answers: [Int] = []
        for i in 0..<5 {
            let body: JSONValue = i % 2 == 0 ? .object([("username", .string(owner.username))]) : .object([("email", .string(owner.email))])
            answers.append(try client.post("/v1/recovery/challenges", body).status)
        }
        #expect(answers == [202, 202, 202, 202, 202])
        _ = try TestSMTP.waitForMessages(to: owner.email, count: before + 3)
        Thread.sleep(forTimeInterval: 0.5)  // a fourth mail, were one queued, would have arrived with the third
        let codes = try TestSMTP.messages(to: owner.email).filter { $0.contains("X-Latchkey-Event: recovery.code") }.count
        #expect(codes - before == 3, "\(codes - before) recovery code mails")
    }

    @Test("every mail names its event in X-Latchkey-Event")
    func mailEvents() throws {
        let server = try server
        let owner = try recovery.account(server)  // email.verify
        _ = try recovery.emailSession(owner)       // email.sign-in
        _ = try recovery.passkeyAdded(RecoveryTests.Account(client: owner.client, session: owner.session, authenticator: owner.authenticator,
                                                            username: owner.username, email: owner.email),
                                      from: owner.session, approver: owner.authenticator)  // passkey.added
        let messages = try TestSMTP.waitForMessages(to: owner.email, count: 3)
        let events = Set(messages.compactMap { m in m.split(separator: "\r\n").first { $0.hasPrefix("X-Latchkey-Event: ") }.map { String($0.dropFirst(18)) } })
        #expect(events.isSuperset(of: ["email.verify", "email.sign-in", "passkey.added"]), "\(events)")
        #expect(messages.allSatisfy { $0.contains("\r\nX-Latchkey-Event: ") }, "a mail without X-Latchkey-Event")
    }
}
