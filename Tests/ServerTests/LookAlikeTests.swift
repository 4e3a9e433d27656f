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
    static func statements(_ server: TestServer, _ route: String, _ request: () throws -> Reply,
                           sourceLocation: SourceLocation = #_sourceLocation) throws -> [String] {
        let reply = try request()
        #expect(reply.status < 300, "\(route): \(reply)", sourceLocation: sourceLocation)
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
}
