import Foundation
import JSON
import Storage
import Testing
import WebAuthnTesting
@testable import LatchkeyServer

/// SPEC "Performance targets" → "Round trips": the answers to a sign-in, an email sign-in and a
/// recovery are built not to say whether the username or address exists, so neither may the work
/// behind them. Each request's statements are traced (`TestServer(tracing:)`) and compared, text
/// for text: a known account and an unknown one send the same statements in the same order.
@Suite("An unknown username or address costs the same statements as a known one", .serialized)
struct LookAlikeTests {
    static let server = Result { try TestServer(name: "look-alike", tracing: true) { RecoveryTests.mailSettings(&$0) } }

    /// The statements `request` made at `route` ("POST /v1/…").
    static func statements(_ server: TestServer, _ route: String, refused code: String? = nil, _ request: () throws -> Reply,
                           sourceLocation: SourceLocation = #_sourceLocation) throws -> [String] {
        let reply = try request()
        if let code {
            #expect(reply.code == code, "\(route): \(reply)", sourceLocation: sourceLocation)
        } else {
            #expect(reply.status < 300, "\(route): \(reply)", sourceLocation: sourceLocation)
        }
        let statements = try #require(server.traces?.last(route), sourceLocation: sourceLocation)
        // BEGIN carries the request's remaining budget, which differs by the millisecond.
        return statements.map { $0.replacingOccurrences(of: #"interval '\d+ milliseconds'"#, with: "interval 'N milliseconds'", options: .regularExpression) }
    }

    /// A passkey account, with a verified address when `email` is given.
    static func account(_ server: TestServer, _ label: String, email: String? = nil) throws -> String {
        let client = server.client()
        let username = server.username(label)
        let session = try client.signUp(SoftAuthenticator(), username: username)
        if let email { try LastWayInTests.giveVerifiedAddress(session.userId, email: email) }
        return username
    }

    @Test("sign-in options: a known username and an unknown one send the same statements, and challenges of one length")
    func signInOptions() throws {
        let server = try Self.server.get()
        let client = server.client()
        let known = try Self.account(server, "known")
        let route = "POST /v1/passkeys/authentication/options"
        _ = try client.authenticationOptions(username: server.username("warm"))
        var lengths: Set<Int> = []
        var traces: [[String]] = []
        for name in [known, server.username("unknown")] {
            traces.append(try Self.statements(server, route) {
                let reply = try client.authenticationOptions(username: name)
                lengths.insert(try challengeBytes(try #require(reply.json)).count)
                return reply
            })
        }
        #expect(traces[0] == traces[1], "known: \(traces[0])\nunknown: \(traces[1])")
        #expect(traces[0].count == 1)
        #expect(lengths == [SealedAuthentication.challengeLength])
    }

    @Test("recovery start: an account with a verified address, one without, and no account send the same statements")
    func recoveryStart() throws {
        let server = try Self.server.get()
        let client = server.client()
        let address = TestSMTP.address("look-alike")
        let withAddress = try Self.account(server, "addressed", email: address)
        let withoutAddress = try Self.account(server, "bare")
        let route = "POST /v1/recovery/challenges"
        _ = try client.post("/v1/recovery/challenges", .object([("username", .string(server.username("warm")))]))
        var traces: [String: [String]] = [:]
        for (label, name) in [("verified address", withAddress), ("no address", withoutAddress), ("no account", server.username("ghost"))] {
            traces[label] = try Self.statements(server, route) {
                try client.post("/v1/recovery/challenges", .object([("username", .string(name))]))
            }
        }
        #expect(traces["verified address"] == traces["no account"], "\(traces)")
        #expect(traces["no address"] == traces["no account"], "\(traces)")
        #expect(traces["no account"]?.count == 2, "one read and one write: \(traces)")
        // The same statements, and still the code reaches the one with an address.
        #expect(try TestSMTP.code(to: address).count == server.configuration.otpDigits)
    }

    @Test("email sign-in start: a known address and an unknown one send the same statements")
    func emailSignInStart() throws {
        let server = try Self.server.get()
        let client = server.client()
        let address = TestSMTP.address("look-alike-in")
        _ = try Self.account(server, "mailed", email: address)
        let route = "POST /v1/email/challenges"
        _ = try client.post("/v1/email/challenges", .object([("email", .string(TestSMTP.address("warm")))]))
        let known = try Self.statements(server, route) { try client.post("/v1/email/challenges", .object([("email", .string(address))])) }
        let unknown = try Self.statements(server, route) {
            try client.post("/v1/email/challenges", .object([("email", .string(TestSMTP.address("nobody")))]))
        }
        #expect(known == unknown, "known: \(known)\nunknown: \(unknown)")
        #expect(known.count == 2, "one read and one write: \(known)")
        #expect(try TestSMTP.code(to: address).count == server.configuration.otpDigits)
    }

    @Test("a wrong code for a known address's challenge and for nobody's: the same statements, one read and one write")
    func wrongCodes() throws {
        let server = try Self.server.get()
        let client = server.client()
        let address = TestSMTP.address("look-alike-code")
        let known = try Self.account(server, "coded", email: address)
        for (start, verify, body) in [("/v1/email/challenges", "/v1/email/verify", ("email", address, TestSMTP.address("nobody-code"))),
                                      ("/v1/recovery/challenges", "/v1/recovery/verify", ("username", known, server.username("ghost-code")))] {
            var traces: [[String]] = []
            for who in [body.1, body.2] {
                let before = try TestSMTP.messages(to: address).count
                let started = try client.post(start, .object([(body.0, .string(who))]))
                let id = try #require(started.json?["challengeId"])
                // A code of the right shape that is not the mailed one (nobody's challenge mails none).
                let zeros = String(repeating: "0", count: server.configuration.otpDigits)
                let mailed = who == body.1 ? try TestSMTP.code(to: address, after: before) : nil
                let wrong = mailed == zeros ? String(repeating: "1", count: zeros.count) : zeros
                traces.append(try Self.statements(server, "POST " + verify, refused: "code_invalid") {
                    try client.post(verify, .object([("challengeId", id), ("code", .string(wrong))]))
                })
            }
            #expect(traces[0] == traces[1], "\(verify) known: \(traces[0])\nunknown: \(traces[1])")
            #expect(traces[0].count == 2, "\(verify): one read and one write: \(traces[0])")
        }
    }
}
