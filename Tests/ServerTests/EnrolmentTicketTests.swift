import Crypto
import Foundation
import JSON
import LatchkeyServer
import PostgreSQL
import Storage
import Testing
import WebAuthn
import WebAuthnTesting

/// SPEC "Assurance" (a ticket sent with registration options is checked there and used up by the
/// registration verify that stores the passkey: a ceremony that fails keeps it) and "Admin console"
/// → "Tickets." (`POST /admin/v1/accounts/{userId}/enrolment-tickets`: the way back in for an account
/// that lost every way in; an admin user's step-up, never the admin key; the passkey it registers is
/// held and the verified address hears of it).
@Suite("Enrolment tickets")
struct EnrolmentTicketTests {
    /// A recovery delay, so that a held passkey shows `heldUntil`; SMTP configured (no sender runs),
    /// so the notice is written to the outbox.
    static let fixture = Result {
        try TestServer(name: "tickets") {
            $0.recoveryDelay = 3600
            $0.smtpURL = "smtp://127.0.0.1:1"
        }
    }

    func ticket(_ server: TestServer) throws -> String {
        let reply = try server.client().enrolmentTicket(externalId: "ext-\(uniqueSuffix())", username: server.username("tk"))
        #expect(reply.status == 201, "\(reply)")
        return try #require(reply.json?["ticket"]?.stringValue)
    }

    @Test("a registration that fails keeps its ticket; the one that succeeds uses it up; another ceremony it began is then challenge_invalid")
    func failedCeremonyKeepsTheTicket() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let ticket = try ticket(server)
        let authorization = "Ticket \(ticket)"
        // A ceremony from another origin fails…
        let (_, wrongOrigin) = try client.register(SoftAuthenticator(), authorization: authorization) { $0.clientData.origin = "https://elsewhere.example" }
        expectProblem(wrongOrigin, 400, "origin_not_allowed")
        // …and so does one with a broken attestation object: the ticket still opens a ceremony.
        let (_, broken) = try client.register(SoftAuthenticator(), authorization: authorization) { $0.rawAttestationObject = [0xa0] }
        #expect(broken.status == 400, "\(broken)")
        // Two ceremonies begun with the ticket: the first to verify uses it up.
        let spare = try client.post("/v1/passkeys/registration/options", .object([]), authorization: authorization)
        #expect(spare.status == 200, "\(spare)")
        let (_, stored) = try client.register(SoftAuthenticator(), authorization: authorization)
        #expect(stored.status == 201, "\(stored)")
        expectProblem(try client.post("/v1/passkeys/registration/options", .object([]), authorization: authorization), 401, "unauthorized")
        let late = SoftAuthenticator()
        let options = try #require(spare.json)
        late.userHandle = userHandle(options)
        let builder = late.registration(challenge: try challengeBytes(options), rpId: server.rpId, origin: server.origin)
        expectProblem(try client.send("POST", "/v1/passkeys/registration/verify", body: builder.bytes()), 400, "challenge_invalid")
    }

    func accountTicketPath(_ userId: String) -> String { "/admin/v1/accounts/\(userId)/enrolment-tickets" }

    @Test("POST /admin/v1/accounts/{userId}/enrolment-tickets: never the admin key; the admin's step-up; 404 after the guards")
    func accountTicketGuards() throws {
        let server = try Self.fixture.get()
        let console = AdminConsoleTests()
        let admin = try console.admin(server)
        let user = try server.client().signUp(SoftAuthenticator(), username: server.username("lost"))
        let path = accountTicketPath(user.userId)
        // The admin key: 403 forbidden, whatever the id.
        let key = "Bearer \(server.adminKey)"
        expectProblem(try admin.client.send("POST", path, authorization: key), 403, "forbidden")
        expectProblem(try admin.client.send("POST", accountTicketPath("AAAAAAAAAAAAAAAAAAAAAA"), authorization: key), 403, "forbidden")
        // A user who is no admin: 403 forbidden; the admin without a step-up: 403 step_up_required.
        expectProblem(try admin.client.send("POST", path, authorization: user.bearer), 403, "forbidden")
        expectProblem(try admin.client.send("POST", path, authorization: admin.bearer), 403, "step_up_required")
        // An unknown account: 404 only after the step-up.
        let unknown = accountTicketPath("AAAAAAAAAAAAAAAAAAAAAA")
        let forUnknown = try console.approval(admin, AdminConsoleTests.action("POST", unknown, nil))
        expectProblem(try console.send(admin.client, "POST", unknown, nil, bearer: admin.bearer, stepUp: forUnknown), 404, "not_found")
        // With it: 201, single use.
        let token = try console.approval(admin, AdminConsoleTests.action("POST", path, nil))
        let issued = try console.send(admin.client, "POST", path, nil, bearer: admin.bearer, stepUp: token)
        #expect(issued.status == 201, "\(issued)")
        #expect(issued.json?["userId"]?.stringValue == user.userId && issued.json?["ticket"]?.stringValue?.hasPrefix("lkt_") == true)
        #expect(issued.json?["expiresAt"]?.stringValue != nil)
        expectProblem(try console.send(admin.client, "POST", path, nil, bearer: admin.bearer, stepUp: token), 403, "step_up_required")
        let audit = try server.database.audit.entries(limit: 10, before: nil, user: user.userId, action: "ticket.issued")
        #expect(audit.first?.actor == admin.userId, "\(audit)")
    }

    @Test("the way back in: an account with no passkey left registers a held passkey with the ticket, and its address hears of it")
    func lockedOutAccountComesBack() throws {
        let server = try Self.fixture.get()
        let console = AdminConsoleTests()
        let admin = try console.admin(server)
        let client = server.client()
        let old = SoftAuthenticator()
        let user = try client.signUp(old, username: server.username("lost"))
        let address = "lost-\(uniqueSuffix())@latchkey.test"
        let db = try TestDatabase.connect()
        _ = try db.execute("INSERT INTO account_emails (user_id, email) VALUES (\(user.userId), \(address))")
        // Locked out: the account's only passkey is gone (as accounts were before the last-way-in rule).
        _ = try db.execute("UPDATE credentials SET revoked_at = now() WHERE user_id = \(user.userId)")
        let path = accountTicketPath(user.userId)
        let token = try console.approval(admin, AdminConsoleTests.action("POST", path, nil))
        let issued = try console.send(admin.client, "POST", path, nil, bearer: admin.bearer, stepUp: token)
        let ticket = try #require(issued.json?["ticket"]?.stringValue, "\(issued)")
        let fresh = SoftAuthenticator()
        let (_, registered) = try client.register(fresh, authorization: "Ticket \(ticket)")
        #expect(registered.status == 201, "\(registered)")
        // Held although the account had no passkey.
        #expect(registered.json?["passkey"]?["heldUntil"]?.stringValue != nil, "\(registered)")
        // The address is mailed passkey.added with the cancel link.
        // Stored with the passkey; once the outbox has sent it, its text is gone from the row and
        // the test mail server has it.
        let mail = try db.query("SELECT convert_from(message, 'UTF8') AS m FROM mail_messages WHERE recipient = \(address)")
        let row = try #require(mail.first, "no mail to \(address)")
        let raw = try row.isNull("m")
            ? try #require(try TestSMTP.waitForMessage(to: address, containing: "passkey.added"), "the sent mail to \(address)")
            : try row.string("m")
        // Quoted-printable: soft line breaks joined, `=3D` back to `=`.
        let message = raw.replacingOccurrences(of: "=\r\n", with: "").replacingOccurrences(of: "=\n", with: "")
            .replacingOccurrences(of: "=3D", with: "=")
        #expect(message.contains("X-Latchkey-Event: passkey.added") && message.contains("/?cancel=lkcan_pk_"), "\(message)")
    }
}
