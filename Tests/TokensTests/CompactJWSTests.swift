import Crypto
import JSON
import Testing
import Tokens

/// The one JWS parser (`CompactJWS`): Latchkey's own ES256 tokens, RS256 id_tokens (`verifyRS256`,
/// the id_token hints) and clients' assertions are all read by it.
@Suite struct CompactJWSTests {
    static let key = SigningKey.generate()
    static let rsa = PrivateKey.generateRSA(bits: 2048)

    @Test func readsWhatJWTSigns() throws {
        let token = JWT.sign(claims: ["sub": "u1", "exp": 1000], key: Self.key, type: "JWT")
        let jws = try #require(CompactJWS(token))
        #expect(jws.alg == "ES256" && jws.type == "JWT" && jws.kid == Self.key.kid)
        #expect(jws.claims["sub"]?.stringValue == "u1")
        let parts = token.split(separator: ".").map(String.init)
        #expect(jws.signingInput == Array((parts[0] + "." + parts[1]).utf8))
        #expect(jws.signature.count == 64)
        #expect(jws.verifies(with: Self.key.publicKey, algorithm: .ecdsa(.sha256)))
        #expect(!jws.verifies(with: SigningKey.generate().publicKey, algorithm: .ecdsa(.sha256)))
        #expect(JWT.unverifiedClaims(token) == jws.claims)
    }

    @Test func refusesWhatIsNotOne() {
        let header = Base64URL.encode(Array(#"{"alg":"ES256"}"#.utf8))
        let claims = Base64URL.encode(Array(#"{"sub":"u"}"#.utf8))
        #expect(CompactJWS("\(header).\(claims).AAAA") != nil)
        for bad in ["", "a.b", "\(header).\(claims)", "\(header).\(claims).AAAA.x", "\(header).\(claims).!!",
                    "\(Base64URL.encode(Array("not json".utf8))).\(claims).AAAA",
                    "\(header).\(Base64URL.encode(Array("[1]".utf8))).AAAA",
                    "\(header).\(claims).\(String(repeating: "A", count: CompactJWS.maximumLength))"] {
            #expect(CompactJWS(bad) == nil, "\(bad.prefix(60))")
        }
        let deep = Base64URL.encode(Array(#"{"a":{"b":{"c":{"d":1}}}}"#.utf8))
        #expect(CompactJWS("\(header).\(deep).AAAA", claimsDepth: 6) != nil)
        #expect(CompactJWS("\(header).\(deep).AAAA", claimsDepth: 3) == nil)
    }

    @Test func anECDSASignatureIsRAndS() throws {
        let token = JWT.sign(claims: ["sub": "u1", "exp": 1000], key: Self.key)
        let parts = token.split(separator: ".").map(String.init)
        let short = parts[0] + "." + parts[1] + "." + Base64URL.encode(Array(try #require(Base64URL.decode(parts[2])).prefix(63)))
        #expect(try #require(CompactJWS(short)).verifies(with: Self.key.publicKey, algorithm: .ecdsa(.sha256)) == false)
        #expect(throws: TokenError(.badSignature, "")) { try JWT.verify(short, keys: [Self.key.kid: Self.key.publicKey], now: 900) }
    }

    @Test func rs256IdTokensVerifyWithTheirKeyAndKid() throws {
        let token = try JWT.signRS256(claims: ["iss": "https://op", "sub": "u1", "exp": 1], key: Self.rsa, kid: "r1")
        #expect(JWT.verifyRS256(token, key: Self.rsa.publicKey, kid: "r1")?["sub"]?.stringValue == "u1", "expiry is not its to check")
        #expect(JWT.verifyRS256(token, key: Self.rsa.publicKey, kid: "r2") == nil)
        #expect(JWT.verifyRS256(token, key: PrivateKey.generateRSA(bits: 2048).publicKey, kid: "r1") == nil)
        let parts = token.split(separator: ".").map(String.init)
        let forged = parts[0] + "." + Base64URL.encode(Array(#"{"iss":"https://op","sub":"admin","exp":1}"#.utf8)) + "." + parts[2]
        #expect(JWT.verifyRS256(forged, key: Self.rsa.publicKey, kid: "r1") == nil)
        let es256 = JWT.sign(claims: ["sub": "u1", "exp": 1000], key: Self.key, type: "JWT")
        #expect(JWT.verifyRS256(es256, key: Self.rsa.publicKey, kid: Self.key.kid) == nil)
    }
}
