import Crypto
import JSON
import Testing
import Tokens
import WebAuthn

@Suite struct JWTTests {
    let key = SigningKey.generate()
    var keys: [String: PublicKey] { [key.kid: key.publicKey] }

    @Test func signsAndVerifies() throws {
        let token = JWT.sign(claims: ["sub": "u1", "exp": 1000, "iat": 900], key: key)
        let claims = try JWT.verify(token, keys: keys, now: 950)
        #expect(claims["sub"]?.stringValue == "u1")
    }

    @Test func refusesTampering() {
        let token = JWT.sign(claims: ["sub": "u1", "exp": 1000], key: key)
        var parts = token.split(separator: ".").map(String.init)
        parts[1] = Base64URL.encode(Array(#"{"sub":"admin","exp":1000}"#.utf8))
        #expect(throws: TokenError(.badSignature, "")) { try JWT.verify(parts.joined(separator: "."), keys: keys, now: 950) }
        #expect(throws: TokenError(.expired, "")) { try JWT.verify(token, keys: keys, now: 2000) }
        #expect(throws: TokenError(.unknownKey, "")) { try JWT.verify(token, keys: [:], now: 950) }
        #expect(throws: TokenError(.malformed, "")) { try JWT.verify("a.b", keys: keys, now: 950) }
        #expect(throws: TokenError(.wrongType, "")) { try JWT.verify(token, keys: keys, type: "JWT", now: 950) }
    }

    @Test func thumbprintIsStableAndKeyRoundTrips() throws {
        let again = SigningKey(try PrivateKey(pkcs8PEM: key.privateKey.pkcs8PEM))
        #expect(again.kid == key.kid)
        #expect(SigningKey.jwk(key.publicKey, kid: key.kid)["kty"] == "EC")
    }

    // RFC 7638 §3.1 example thumbprint for an RSA key isn't applicable; check an EC vector shape instead.
    @Test func canonicalRawSignatureIs64Bytes() {
        let token = JWT.sign(claims: ["exp": 1], key: key)
        #expect(Base64URL.decode(String(token.split(separator: ".")[2]))?.count == 64)
    }
}

/// The access token's payload is written without a JSON tree: the same bytes as the tree's.
@Suite struct AccessClaimsPayloadTests {
    @Test(arguments: [AuthenticationClaims.passkeyVerified, .passkey, .emailOTP, .deviceKeyAttested])
    func directPayloadIsTheTreePayload(authentication: AuthenticationClaims) {
        for subject in ["u-1", "with \"quote\" and \\ and \u{7}", "ünï😀"] {
            let claims = AccessClaims(subject: subject, sessionId: "s\u{0}1", jwtId: "j", issuedAt: 1_796_169_599,
                                      expiresAt: 9_007_199_254_740_992, authTime: 0,
                                      authentication: authentication)
            #expect(claims.payloadBytes(issuer: "https://id.example", audience: "api")
                    == claims.payload(issuer: "https://id.example", audience: "api").serialized())
        }
    }

    @Test func signedTokenCarriesTheSamePayload() throws {
        let key = SigningKey.generate()
        let claims = AccessClaims(subject: "u", sessionId: "s", jwtId: "j", issuedAt: 100, expiresAt: 4_000_000_000, authTime: 99,
                                  authentication: .passkey)
        let token = JWT.sign(payload: claims.payloadBytes(issuer: "i", audience: "a"), key: key)
        let verified = try JWT.verify(token, keys: [key.kid: key.publicKey], now: 200)
        #expect(verified == claims.payload(issuer: "i", audience: "a"))
        #expect(token.split(separator: ".")[0] == JWT.sign(claims: claims.payload(issuer: "i", audience: "a"), key: key).split(separator: ".")[0])
    }
}
