#if canImport(WebAuthnTesting)
import Foundation
import LatchkeyClient
import Testing

/// DPoP-bound first-party sessions (RFC 9449, docs/integration/ios.md) against a live server that
/// binds them: sign-in and refresh with a proof, every call as `DPoP <token>` with one, and the
/// stolen token refused without the key.
@Suite("DPoP against a live server", .serialized)
struct DPoPLiveTests {
    @Test("a DPoP-bound session: sign-in, calls, step-up, refresh; the token without the key is refused")
    func boundSession() async throws {
        try await withLiveServer("client-dpop") { server in
            let key = SoftDPoPKey()
            // The server knows itself as its origin; the test reaches it on loopback.
            let latchkey = Latchkey(baseURL: server.baseURL, dpop: DPoPProofs(key: key, publicBaseURL: URL(string: server.origin)))
            let passkey = SoftPasskey()
            _ = try await Latchkey(baseURL: server.baseURL).verifyRegistration(
                passkey.register(try await latchkey.registrationOptions(username: "dpop-\(UInt32.random(in: 0...UInt32.max))", displayName: "D"),
                                 origin: server.origin))
            // Sign-in with a proof binds the session.
            let signUp = try await latchkey.verifyAuthentication(passkey.assert(try await latchkey.authenticationOptions(), origin: server.origin))
            #expect(signUp.tokens.tokenType == "DPoP")
            let access = signUp.tokens.accessToken
            #expect(try await latchkey.passkeys(accessToken: access).count == 1)

            // A step-up from the bound session; the step-up token itself is a plain Bearer at consume.
            let payment = try StepUpAction(jsonText: #"{"type":"payment","amount":"12.00","currency":"EUR"}"#)
            let approved = try await latchkey.stepUpWithPasskey(action: payment, accessToken: access, assert: passkey.provider(origin: server.origin))
            _ = try await latchkey.consumeStepUp(token: approved.token, action: payment)

            // The stolen access token: as Bearer, and with another key's proof, refused.
            let thief = Latchkey(baseURL: server.baseURL)
            await #expect(throws: LatchkeyError.Code.unauthorized.asError) { _ = try await thief.passkeys(accessToken: access) }
            let otherKey = Latchkey(baseURL: server.baseURL, dpop: DPoPProofs(key: SoftDPoPKey(), publicBaseURL: URL(string: server.origin)))
            await #expect(throws: LatchkeyError.Code.unauthorized.asError) { _ = try await otherKey.passkeys(accessToken: access) }

            // A proof replayed (same jti) is refused.
            let url = try #require(URL(string: server.origin + "/v1/passkeys"))
            let proof = try await latchkey.dpop!.proof(method: "GET", url: url, accessToken: access)
            let request = HTTPRequest(method: "GET", path: "/v1/passkeys", headers: [("Authorization", "DPoP \(access)"), ("DPoP", proof)])
            #expect(try await URLSessionTransport().send(request, baseURL: server.baseURL).status == 200)
            #expect(try await URLSessionTransport().send(request, baseURL: server.baseURL).status == 401)

            // The refresh token works only with the key's proof.
            let refreshToken = try #require(signUp.tokens.refreshToken)
            do {
                _ = try await otherKey.refresh(refreshToken: refreshToken)
                Issue.record("another key refreshed a bound session")
            } catch let error as LatchkeyError { #expect(error.status == 400 || error.status == 401, "\(error)") }
            do {
                _ = try await thief.refresh(refreshToken: refreshToken)
                Issue.record("a bound refresh token worked without a proof")
            } catch let error as LatchkeyError { #expect(error.status == 400 || error.status == 401, "\(error)") }
            let refreshed = try await latchkey.refresh(refreshToken: refreshToken)
            #expect(refreshed.tokenType == "DPoP")
            #expect(try await latchkey.passkeys(accessToken: refreshed.accessToken).count == 1)
            try await latchkey.logout(accessToken: refreshed.accessToken)
        }
    }
}
#endif
