import Crypto
import JSON
import LatchkeyServer
import Testing
import WebAuthn
import WebAuthnTesting

/// The profile itself (SPEC "Conformance profile"): off by default, refused outside development
/// mode (SPEC "Assurance": no production override), and its relaxations confined to its four endpoints.
@Suite struct ConformanceProfileTests {
    @Test func theProfileIsRefusedOutsideDevelopmentMode() throws {
        #expect(throws: Configuration.Invalid.self) { try Configuration.fromEnvironment(["LATCHKEY_CONFORMANCE": "1"]) }
        #expect(try Configuration.fromEnvironment(["LATCHKEY_CONFORMANCE": "1", "LATCHKEY_DEV": "1"]).conformance)
        // The old override is gone: nothing turns the profile on outside dev mode.
        #expect(throws: Configuration.Invalid.self) {
            try Configuration.fromEnvironment(["LATCHKEY_CONFORMANCE": "1", "LATCHKEY_CONFORMANCE_ALLOW_PRODUCTION": "1"])
        }
        #expect(try !Configuration.fromEnvironment([:]).conformance)
    }

    /// A configuration built in code (not read from the environment) is held to the same rule: the
    /// start-up steps refuse it before anything listens.
    @Test func aServerWithTheProfileOutsideDevelopmentModeDoesNotStart() throws {
        #expect(throws: Configuration.Invalid.self) {
            _ = try TestServer(name: "conformance-production") { c in
                c.developmentMode = false
                c.conformance = true
            }
        }
    }

    @Test func withoutTheProfileTheEndpointsDoNotExist() throws {
        let server = try TestServer(name: "no-conformance")
        let reply = try server.client().post("/attestation/options", .object([("username", "someone")]))
        #expect(reply.status == 404, "\(reply)")
    }

    @Test func theRelaxationsStayOnTheProfilesEndpoints() throws {
        let run = ConformanceRun(fixture: try ConformanceFixture.shared.get())
        let client = run.client
        // RS1 is offered by /attestation/options only.
        let v1 = try client.registrationOptions(username: run.username())
        #expect(v1.json?["pubKeyCredParams"]?.arrayValue?.contains { $0["alg"]?.intValue == -65535 } == false)
        let fido = try run.attestationOptions(run.username())
        #expect(fido.json?["pubKeyCredParams"]?.arrayValue?.contains { $0["alg"]?.intValue == -65535 } == true)
        // UP = 0 passes /assertion/result, not /v1/passkeys/authentication/verify.
        let a = SoftAuthenticator()
        let name = try run.enrol(a)
        let (_, refused) = try client.login(a, username: name) { $0.userPresent = false }
        #expect(refused.status == 400 && refused.code == "user_presence_required", "\(refused)")
        #expect(succeeded(try run.login(a, username: name) { $0.userPresent = false }).isEmpty)
        // Registrations still need UP on the profile's endpoint.
        #expect(failed(try run.register(SoftAuthenticator()) { $0.userPresent = false }).isEmpty)
    }

    /// SPEC: on these four endpoints a failure is a 4xx with FIDO's envelope as application/json,
    /// never problem+json — a body of the wrong media type too (it was the router's 415 problem).
    @Test func aBodyThatIsNotJSONGetsTheEnvelopeToo() throws {
        let run = ConformanceRun(fixture: try ConformanceFixture.shared.get())
        for path in ["/attestation/options", "/attestation/result", "/assertion/options", "/assertion/result"] {
            for contentType: String? in ["text/plain", "application/x-www-form-urlencoded", nil] {
                let reply = try run.client.send("POST", path, body: Array(#"{"username":"x"}"#.utf8), contentType: contentType)
                #expect(reply.status == 415, "\(path): \(reply)")
                #expect(reply.contentType?.hasPrefix("application/json") == true, "\(path): \(reply.contentType ?? "none")")
                #expect(reply.json?["status"]?.stringValue == "failed" && reply.json?["errorMessage"]?.stringValue?.isEmpty == false
                        && reply.code == "invalid_request", "\(path): \(reply)")
            }
        }
    }

    @Test func aRequestedUserVerificationNeverWeakensARequiredOne() throws {
        let fixture = try ConformanceFixture.shared.get()
        let server = try TestServer(name: "conformance-uv") { c in
            ConformanceFixture.configure(fixture.directory)(&c)
            c.userVerification = .required
        }
        let run = ConformanceRun(fixture: fixture, server: server)
        let options = try run.attestationOptions(run.username(), [("authenticatorSelection", .object([("userVerification", "discouraged")]))])
        #expect(options.json?["authenticatorSelection"]?["userVerification"]?.stringValue == "required")
        let a = SoftAuthenticator()
        let name = try run.enrol(a)
        #expect(failed(try run.login(a, username: name, userVerification: "discouraged") { $0.userVerified = false }).isEmpty)
    }

    @Test func getClientExtensionResultsIsReadAsClientExtensionResults() throws {
        let run = ConformanceRun(fixture: try ConformanceFixture.shared.get())
        let reply = try run.register(SoftAuthenticator()) { _ in } edit: { json in
            json.removing("clientExtensionResults").setting("getClientExtensionResults", .object([("credProps", .object([("rk", true)]))]))
        }
        #expect(succeeded(reply).isEmpty, "\(reply)")
    }
}
