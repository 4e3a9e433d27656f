import Foundation
import LatchkeyClient
import Testing

/// Typed errors: a problem document becomes its `code`; other failures get local codes.
@Suite("LatchkeyError from answers")
struct LatchkeyErrorTests {
    /// Answers every request with one canned response (or no answer at all).
    struct Canned: LatchkeyTransport {
        let response: HTTPResponse?
        func send(_ request: HTTPRequest, baseURL: URL) async throws -> HTTPResponse {
            guard let response else { throw URLError(.notConnectedToInternet) }
            return response
        }
    }

    func client(_ status: Int, _ body: String, headers: [String: String] = ["Content-Type": "application/problem+json"]) -> Latchkey {
        Latchkey(baseURL: URL(string: "https://login.example.com")!,
                 transport: Canned(response: HTTPResponse(status: status, headers: headers, body: Data(body.utf8))))
    }

    @Test func problemCode() async throws {
        let latchkey = client(429, #"{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"slow down","code":"rate_limited"}"#,
                              headers: ["Content-Type": "application/problem+json", "Retry-After": "7"])
        do {
            _ = try await latchkey.authenticationOptions()
            Issue.record("no error")
        } catch {
            #expect(error == .rateLimited)
            #expect(error.status == 429)
            #expect(error.retryAfter == 7)
            #expect(error.reason == "slow down")
        }
    }

    @Test func unknownCodeStaysACode() async {
        await #expect(throws: LatchkeyError(LatchkeyError.Code(rawValue: "brand_new"), "")) {
            _ = try await client(400, #"{"code":"brand_new","detail":"?"}"#).authenticationOptions()
        }
    }

    @Test func notLatchkeysAnswer() async {
        await #expect(throws: LatchkeyError(.unexpectedResponse, "")) {
            _ = try await client(502, "<html>Bad Gateway</html>", headers: ["Content-Type": "text/html"]).authenticationOptions()
        }
        // 200 but not the promised shape.
        await #expect(throws: LatchkeyError(.unexpectedResponse, "")) {
            _ = try await client(200, #"{"rpId":"example.com"}"#, headers: [:]).authenticationOptions()
        }
    }

    @Test func noAnswer() async {
        let latchkey = Latchkey(baseURL: URL(string: "https://login.example.com")!, transport: Canned(response: nil))
        await #expect(throws: LatchkeyError(.transport, "")) { _ = try await latchkey.authenticationOptions() }
    }

    /// A challenge bound to another action than the one asked for is refused on the device.
    @Test func boundAnotherAction() async throws {
        let other = try StepUpAction(jsonText: #"{"type":"payment","amount":"9999.00"}"#)
        let body = #"{"challengeId":"AAAA","challenge":"AAAA","expiresAt":"2030-01-01T00:00:00Z","actionHash":"\#(other.hashBase64URL)"}"#
        let asked = try StepUpAction(jsonText: #"{"type":"payment","amount":"1.00"}"#)
        await #expect(throws: LatchkeyError(.actionMismatch, "")) {
            _ = try await client(201, body, headers: [:]).stepUpChallenge(action: asked, keyId: "k", accessToken: "t")
        }
    }
}
