#if canImport(WebAuthnTesting)
import Crypto
import Foundation
import LatchkeyClient
import Synchronization
import Testing

/// DPoP proofs (RFC 9449 §4) as the client makes them, checked with OpenSSL (the server package's
/// Crypto): the JWS verifies under the header's own `jwk`, and every claim is what §4.2 asks; then
/// what the client sends on each kind of call, and its one retry on `use_dpop_nonce`, over a
/// recording transport (the live test against a DPoP server is DPoPLiveTests).
@Suite("DPoP proofs")
struct DPoPProofTests {
    struct Decoded {
        let header: LatchkeyJSON
        let claims: LatchkeyJSON
        let signingInput: [UInt8]
        let signature: [UInt8]
    }

    static func decode(_ jwt: String) throws -> Decoded {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try #require(parts.count == 3)
        let part = { (s: String) throws -> [UInt8] in try #require(Crypto.Base64URL.decode(s)) }
        return Decoded(header: try LatchkeyJSON(parsing: Data(try part(parts[0]))), claims: try LatchkeyJSON(parsing: Data(try part(parts[1]))),
                       signingInput: Array((parts[0] + "." + parts[1]).utf8), signature: try part(parts[2]))
    }

    /// The JWS signature checked under the `jwk` it carries (ES256: raw r ‖ s → DER for OpenSSL).
    static func verifies(_ d: Decoded) throws -> Bool {
        let jwk = try #require(d.header["jwk"])
        let x = try #require(Crypto.Base64URL.decode(jwk["x"]?.stringValue ?? "")), y = try #require(Crypto.Base64URL.decode(jwk["y"]?.stringValue ?? ""))
        let key = try PublicKey.ec(curve: .p256, x963: [4] + x + y)
        return key.verify(signature: try ECDSASignature.derFromRaw(d.signature), message: d.signingInput, algorithm: .ecdsa(.sha256))
    }

    @Test("a proof: dpop+jwt, ES256, the public jwk only, jti, htm, htu without query or fragment, iat, ath, and a signature that verifies")
    func proofClaims() async throws {
        let key = SoftDPoPKey()
        let proofs = DPoPProofs(key: key, clock: { 1_765_000_000 })
        let url = try #require(URL(string: "https://login.example.com:8443/v1/passkeys?cursor=abc#frag"))
        let token = "eyJhbGciOiJFUzI1NiJ9.an-access-token.sig"
        let d = try Self.decode(try await proofs.proof(method: "get", url: url, accessToken: token))
        #expect(d.header["typ"]?.stringValue == "dpop+jwt")
        #expect(d.header["alg"]?.stringValue == "ES256")
        #expect(d.header["jwk"]?["kty"]?.stringValue == "EC")
        #expect(d.header["jwk"]?["crv"]?.stringValue == "P-256")
        #expect(d.header["jwk"]?["d"] == nil)
        #expect(d.claims["htm"]?.stringValue == "GET")
        #expect(d.claims["htu"]?.stringValue == "https://login.example.com:8443/v1/passkeys")
        #expect(d.claims["iat"]?.intValue == 1_765_000_000)
        #expect(d.claims["ath"]?.stringValue == Crypto.Base64URL.encode(Digest.sha256(Array(token.utf8))))
        #expect(d.claims["nonce"] == nil)
        #expect(Crypto.Base64URL.decode(d.claims["jti"]?.stringValue ?? "")?.count == 16)
        #expect(d.signature.count == 64)
        #expect(try Self.verifies(d))
        // A changed claim does not verify; another key's proof does not verify under this jwk.
        var tampered = d.signingInput
        tampered[tampered.count - 2] ^= 1
        #expect(try !Self.verifies(Decoded(header: d.header, claims: d.claims, signingInput: tampered, signature: d.signature)))
        let other = try Self.decode(try await DPoPProofs(key: SoftDPoPKey()).proof(method: "GET", url: url))
        #expect(try !Self.verifies(Decoded(header: d.header, claims: other.claims, signingInput: other.signingInput, signature: other.signature)))

        // Without a token: no ath. With the server's nonce: nonce. Every jti differs.
        proofs.nonce = "server-nonce-1"
        let second = try Self.decode(try await proofs.proof(method: "POST", url: try #require(URL(string: "https://login.example.com/v1/token"))))
        #expect(second.claims["ath"] == nil)
        #expect(second.claims["nonce"]?.stringValue == "server-nonce-1")
        #expect(second.claims["htu"]?.stringValue == "https://login.example.com/v1/token")
        var jtis = Set<String>()
        for _ in 0..<20 { jtis.insert(try Self.decode(try await proofs.proof(method: "GET", url: url)).claims["jti"]?.stringValue ?? "") }
        #expect(jtis.count == 20)
    }

    @Test("the JWK thumbprint is RFC 7638's: SHA-256 of crv, kty, x, y in order, no whitespace")
    func thumbprint() throws {
        let key = SoftDPoPKey()
        let jwk = key.publicJWK
        let text = #"{"crv":"P-256","kty":"EC","x":""# + (jwk["x"]?.stringValue ?? "") + #"","y":""# + (jwk["y"]?.stringValue ?? "") + #""}"#
        #expect(key.thumbprint == Crypto.Base64URL.encode(Digest.sha256(Array(text.utf8))))
        #expect(Crypto.Base64URL.decode(jwk["x"]?.stringValue ?? "")?.count == 32)
    }

    /// Records each request and answers from a script.
    final class Recorder: LatchkeyTransport {
        let sent = Mutex<[HTTPRequest]>([])
        let answers = Mutex<[HTTPResponse]>([])

        func send(_ request: HTTPRequest, baseURL: URL) async throws -> HTTPResponse {
            sent.withLock { $0.append(request) }
            return answers.withLock { $0.isEmpty ? HTTPResponse(status: 200, headers: [:], body: Data("{}".utf8)) : $0.removeFirst() }
        }
    }

    static func header(_ r: HTTPRequest, _ name: String) -> String? { r.headers.first { $0.name == name }?.value }

    @Test("the client: DPoP <token> and a proof with ath on authenticated calls, a proof on sign-in and refresh, Bearer for unbound tokens")
    func clientHeaders() async throws {
        let recorder = Recorder()
        let key = SoftDPoPKey()
        let latchkey = Latchkey(baseURL: try #require(URL(string: "https://login.example.com")), transport: recorder, dpopKey: key)
        recorder.answers.withLock { $0 = [HTTPResponse(status: 200, headers: [:], body: Data(#"{"passkeys":[]}"#.utf8))] }
        _ = try await latchkey.passkeys(accessToken: "access-1")
        recorder.answers.withLock { $0 = [HTTPResponse(status: 200, headers: ["DPoP-Nonce": "n-1"], body: Data(#"{"access_token":"a","token_type":"DPoP","expires_in":900}"#.utf8))] }
        let tokens = try await latchkey.refresh(refreshToken: "refresh-1")
        #expect(tokens.tokenType == "DPoP")
        _ = try await latchkey.consumeStepUp(token: "step-up-1", action: .passkeyAddition)
        let sent = recorder.sent.withLock { $0 }
        try #require(sent.count == 3)

        #expect(Self.header(sent[0], "Authorization") == "DPoP access-1")
        let listing = try Self.decode(try #require(Self.header(sent[0], "DPoP")))
        #expect(listing.claims["htm"]?.stringValue == "GET")
        #expect(listing.claims["htu"]?.stringValue == "https://login.example.com/v1/passkeys")
        #expect(listing.claims["ath"]?.stringValue == Crypto.Base64URL.encode(Digest.sha256(Array("access-1".utf8))))
        #expect(try Self.verifies(listing))

        #expect(Self.header(sent[1], "Authorization") == nil)
        let refresh = try Self.decode(try #require(Self.header(sent[1], "DPoP")))
        #expect(refresh.claims["htm"]?.stringValue == "POST")
        #expect(refresh.claims["htu"]?.stringValue == "https://login.example.com/v1/token")
        #expect(refresh.claims["ath"] == nil)
        #expect(refresh.header["jwk"] == key.publicJWK)

        // A step-up token is never bound: Bearer, no proof. The nonce the refresh answered is kept.
        #expect(Self.header(sent[2], "Authorization") == "Bearer step-up-1")
        #expect(Self.header(sent[2], "DPoP") == nil)
        #expect(latchkey.dpop?.nonce == "n-1")
    }

    @Test("use_dpop_nonce: one retry with the nonce the server sent, on a token route (400) and a resource route (401)")
    func nonceRetry() async throws {
        let recorder = Recorder()
        let latchkey = Latchkey(baseURL: try #require(URL(string: "https://login.example.com")), transport: recorder, dpopKey: SoftDPoPKey())
        recorder.answers.withLock {
            $0 = [
                HTTPResponse(status: 400, headers: ["DPoP-Nonce": "n-400", "Content-Type": "application/problem+json"],
                             body: Data(#"{"code":"use_dpop_nonce","status":400}"#.utf8)),
                HTTPResponse(status: 200, headers: [:], body: Data(#"{"access_token":"a","expires_in":900}"#.utf8)),
                HTTPResponse(status: 401, headers: ["DPoP-Nonce": "n-401", "WWW-Authenticate": #"DPoP error="use_dpop_nonce", algs="ES256""#,
                                                    "Content-Type": "application/problem+json"], body: Data(#"{"code":"unauthorized","status":401}"#.utf8)),
                HTTPResponse(status: 200, headers: [:], body: Data(#"{"passkeys":[]}"#.utf8)),
                // A second nonce demand in a row is an answer, not a loop.
                HTTPResponse(status: 401, headers: ["DPoP-Nonce": "n-a", "WWW-Authenticate": #"DPoP error="use_dpop_nonce""#], body: Data(#"{"code":"unauthorized"}"#.utf8)),
                HTTPResponse(status: 401, headers: ["DPoP-Nonce": "n-b", "WWW-Authenticate": #"DPoP error="use_dpop_nonce""#], body: Data(#"{"code":"unauthorized"}"#.utf8)),
            ]
        }
        _ = try await latchkey.refresh(refreshToken: "r")
        _ = try await latchkey.passkeys(accessToken: "t")
        await #expect(throws: LatchkeyError.Code.unauthorized.asError) { _ = try await latchkey.passkeys(accessToken: "t") }
        let sent = recorder.sent.withLock { $0 }
        #expect(sent.count == 6)
        let nonces = try sent.map { try Self.decode(try #require(Self.header($0, "DPoP"))).claims["nonce"]?.stringValue }
        #expect(nonces == [nil, "n-400", "n-400", "n-401", "n-401", "n-a"])
    }
}
#endif
