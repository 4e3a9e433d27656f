import Crypto
import JSON
import Testing
import Tokens

/// RFC 9449 §4.3's checks, one malformed proof each: every refusal is a `DPoPError` with the RFC's
/// code, never a crash.
@Suite struct DPoPTests {
    static let key = DPoPKey.generate()
    static let now: Int64 = 1_800_000_000
    static let url = "https://id.example/oauth2/token"
    static let request = DPoPRequest(method: "POST", path: "/oauth2/token", origins: ["https://id.example", "https://app.example"])

    func verify(_ proof: String, _ request: DPoPRequest = request, now: Int64 = now) throws(DPoPError) -> DPoPProof {
        try DPoP.verify(proof, request: request, now: now)
    }

    func refused(_ proof: String, _ comment: Comment, sourceLocation: SourceLocation = #_sourceLocation) {
        refused(proof, Self.request, comment, sourceLocation: sourceLocation)
    }

    func refused(_ proof: String, _ request: DPoPRequest, code: DPoPError.Code = .invalidProof,
                 _ comment: Comment, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(throws: DPoPError(code, ""), comment, sourceLocation: sourceLocation) { try verify(proof, request) }
    }

    /// A proof by `key` with `header` and `claims` members replaced (nil removes one).
    func forged(header: [String: JSONValue?] = [:], claims: [String: JSONValue?] = [:], key: DPoPKey = key) -> String {
        var h: [(key: String, value: JSONValue)] = [("typ", "dpop+jwt"), ("alg", .string(key.algorithm.rawValue)), ("jwk", key.jwk)]
        var c: [(key: String, value: JSONValue)] = [("jti", "j-1"), ("htm", "POST"), ("htu", .string(Self.url)),
                                                    ("iat", .number(Double(Self.now)))]
        func apply(_ changes: [String: JSONValue?], to members: inout [(key: String, value: JSONValue)]) {
            for (name, value) in changes {
                members.removeAll { $0.key == name }
                if let value { members.append((name, value)) }
            }
        }
        apply(header, to: &h)
        apply(claims, to: &c)
        return key.sign(header: .object(h), claims: .object(c))
    }

    @Test(arguments: DPoPAlgorithm.allCases)
    func aGoodProofGivesItsKeysThumbprint(algorithm: DPoPAlgorithm) throws {
        let key = algorithm == .es256 ? Self.key : DPoPKey.generate(algorithm)
        let proof = try verify(key.proof(method: "POST", url: Self.url, iat: Self.now, jti: "abc"))
        #expect(proof.jkt == key.jkt && proof.jti == "abc" && proof.iat == Self.now)
        #expect(!key.jkt.isEmpty)
    }

    @Test func theThumbprintIsRFC7638s() {
        // The signing keys' kid is the same RFC 7638 computation, written separately.
        let signing = SigningKey.generate()
        let key = DPoPKey(signing.privateKey, algorithm: .es256)
        #expect(key.jkt == signing.kid)
        #expect(DPoP.thumbprint(jwk: key.jwk) == signing.kid)
        // Member order and extra members do not change it.
        guard case .object(let members) = key.jwk else { Issue.record("not an object"); return }
        #expect(DPoP.thumbprint(jwk: .object(Array(members.reversed()) + [("use", "sig"), ("kid", "x")])) == signing.kid)
        // RFC 7638 §3.1's example key.
        let rfc: JSONValue = [
            "kty": "RSA", "e": "AQAB", "alg": "RS256", "kid": "2011-04-29",
            "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"]
        #expect(DPoP.thumbprint(jwk: rfc) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs")
    }

    @Test func malformedProofsAreRefused() {
        refused("", "empty")
        refused("a.b.c", "not base64url JSON")
        refused(Self.key.proof(method: "POST", url: Self.url, iat: Self.now) + "x", "signature bytes changed")
        refused(forged(header: ["typ": .none]), "typ missing")
        refused(forged(header: ["typ": "JWT"]), "typ wrong")
        refused(forged(header: ["typ": 1]), "typ of another type")
        refused(forged(header: ["alg": .none]), "alg missing")
        refused(forged(header: ["alg": "none"]), "alg none")
        refused(forged(header: ["alg": "HS256"]), "a MAC")
        refused(forged(header: ["alg": "ES384"]), "an unsupported alg")
        refused(forged(header: ["alg": "RS256"]), "alg not the key's")
        refused(forged(header: ["jwk": .none]), "jwk missing")
        refused(forged(header: ["jwk": "a string"]), "jwk not an object")
        refused(forged(header: ["jwk": ["kty": "EC", "crv": "P-256", "x": "AAAA", "y": "AAAA"]]), "not a point")
        refused(forged(header: ["jwk": ["kty": "oct", "k": "c2VjcmV0"]]), "a symmetric key")
        guard case .object(let members) = Self.key.jwk else { return }
        refused(forged(header: ["jwk": .object(members + [("d", "AAAA")])]), "a private key in jwk")
        refused(forged(header: ["jwk": DPoPKey.generate().jwk]), "signed by another key than jwk's")
        refused(forged(claims: ["jti": .none]), "jti missing")
        refused(forged(claims: ["jti": ""]), "jti empty")
        refused(forged(claims: ["jti": 7]), "jti a number")
        refused(forged(claims: ["jti": .string(String(repeating: "j", count: 129))]), "jti too long")
        refused(forged(claims: ["htm": .none]), "htm missing")
        refused(forged(claims: ["htm": "GET"]), "htm another method")
        refused(forged(claims: ["htm": "post"]), "htm is case-sensitive")
        refused(forged(claims: ["htu": .none]), "htu missing")
        refused(forged(claims: ["htu": "https://evil.example/oauth2/token"]), "htu another host")
        refused(forged(claims: ["htu": "https://id.example/oauth2/par"]), "htu another path")
        refused(forged(claims: ["htu": "http://id.example/oauth2/token"]), "htu another scheme")
        refused(forged(claims: ["htu": "https://id.example:8443/oauth2/token"]), "htu another port")
        refused(forged(claims: ["htu": "https://user@id.example/oauth2/token"]), "htu with userinfo")
        refused(forged(claims: ["htu": "/oauth2/token"]), "htu relative")
        refused(forged(claims: ["iat": .none]), "iat missing")
        refused(forged(claims: ["iat": .string(String(Self.now))]), "iat a string")
        refused(forged(claims: ["iat": .number(Double(Self.now + 61))]), "iat in the future")
        refused(forged(claims: ["iat": .number(Double(Self.now - 61))]), "iat too old")
    }

    @Test func htuIgnoresQueryFragmentCaseAndDefaultPort() throws {
        for htu in ["https://id.example/oauth2/token?x=1", "https://id.example/oauth2/token#f", "HTTPS://ID.example/oauth2/token",
                    "https://id.example:443/oauth2/token", "https://app.example/oauth2/token"] {
            #expect(throws: Never.self, "\(htu)") { try verify(forged(claims: ["htu": .string(htu)])) }
        }
        #expect(throws: Never.self) { try verify(forged(claims: ["iat": .number(Double(Self.now + 60))])) }
        #expect(throws: Never.self) { try verify(forged(claims: ["iat": .number(Double(Self.now - 60))])) }
    }

    /// RFC 9449 §4.3 step 9 with RFC 3986 §6.2.2–§6.2.3 normalisation on both sides: escaped
    /// unreserved characters, the case of escapes, dot segments and an empty path compare equal;
    /// an escaped reserved character ("/" as %2F) is not the character, another path is another URI.
    @Test func htuIsComparedAfterNormalisation() throws {
        for htu in ["https://id.example/oauth2/%74oken", "https://id.example/oauth2/%74%6f%6Ben",
                    "https://id.example/oauth2/./token", "https://id.example/x/../oauth2/token", "https://ID.EXAMPLE:443/%6Fauth2/token#x",
                    "hTTpS://id.example/oauth2/token?a=b"] {
            #expect(throws: Never.self, "\(htu)") { try verify(forged(claims: ["htu": .string(htu)])) }
        }
        refused(forged(claims: ["htu": "https://id.example/oauth2%2Ftoken"]), "an escaped slash is not a slash")
        refused(forged(claims: ["htu": "https://id.example/oauth2/token/"]), "a trailing slash is another path")
        refused(forged(claims: ["htu": "https://id.example/oauth2/to%ken"]), "a malformed escape")
        // The request's path as sent, escaped, compared normalised too; escapes compare without case.
        var escaped = Self.request
        escaped.path = "/oauth2/%74oken"
        #expect(throws: Never.self) { try verify(forged(claims: ["htu": .string(Self.url)]), escaped) }
        escaped.path = "/a%2fb"
        #expect(throws: Never.self) { try verify(forged(claims: ["htu": "https://id.example/a%2Fb"]), escaped) }
        refused(forged(claims: ["htu": "https://id.example/a/b"]), escaped, "%2F in the request is not a segment boundary")
        // An empty path is "/".
        escaped.path = "/"
        #expect(throws: Never.self) { try verify(forged(claims: ["htu": "https://id.example"]), escaped) }
    }

    @Test func presentedWithATokenTheProofCarriesItsHash() throws {
        var request = Self.request
        request.method = "GET"
        request.path = "/oauth2/userinfo"
        request.accessToken = "the.access.token"
        let url = "https://id.example/oauth2/userinfo"
        let good = Self.key.proof(method: "GET", url: url, iat: Self.now, accessToken: "the.access.token")
        #expect(try verify(good, request).jkt == Self.key.jkt)
        #expect(DPoP.ath("the.access.token") == Base64URL.encode(Digest.sha256(Array("the.access.token".utf8))))
        refused(Self.key.proof(method: "GET", url: url, iat: Self.now), request, "ath missing")
        refused(Self.key.proof(method: "GET", url: url, iat: Self.now, accessToken: "another.token"), request, "ath of another token")
        request.boundKey = Self.key.jkt
        #expect(try verify(good, request).jkt == Self.key.jkt)
        request.boundKey = DPoPKey.generate().jkt
        refused(good, request, "a proof by another key than the token's")
    }

    @Test func aSignedAlgorithmOutsideTheAllowedSetIsRefused() {
        let rsa = DPoPKey.generate(.rs256)
        var request = Self.request
        request.algorithms = [.es256, .ps256, .edDSA]
        refused(rsa.proof(method: "POST", url: Self.url, iat: Self.now), request, "RS256 where it is not allowed")
        let small = DPoPKey(.generateRSA(bits: 1024), algorithm: .rs256)
        refused(small.proof(method: "POST", url: Self.url, iat: Self.now), "an RSA key under 2048 bits")
    }

    @Test func nonces() throws {
        let nonces = DPoPNonces(keyEncryptionKey: Array(repeating: 7, count: 32))
        // The construction, by hand: HMAC(HKDF(KEK, info), slot as 8 bytes big-endian), 16 bytes.
        let k = HKDF.sha256(key: Array(repeating: 7, count: 32), info: Array("latchkey dpop nonce v1".utf8))
        let slot = Self.now / 10
        let counter: [UInt8] = (0..<8).map { UInt8((slot >> (56 - 8 * Int64($0))) & 0xff) }
        #expect(nonces.nonce(at: Self.now) == Base64URL.encode(Array(HMAC.sha256(key: k, data: counter).prefix(16))))
        #expect(nonces.nonce(at: Self.now).count == 22)
        #expect(nonces.nonce(at: Self.now) == nonces.nonce(at: Self.now + 9))
        #expect(nonces.nonce(at: Self.now) != nonces.nonce(at: Self.now + 10))
        #expect(nonces.accepts(nonces.nonce(at: Self.now), at: Self.now + 19), "the previous slot's")
        #expect(!nonces.accepts(nonces.nonce(at: Self.now), at: Self.now + 20), "two slots back")
        #expect(!nonces.accepts(nonces.nonce(at: Self.now + 10), at: Self.now), "a future slot's")
        #expect(!DPoPNonces(keyEncryptionKey: Array(repeating: 8, count: 32)).accepts(nonces.nonce(at: Self.now), at: Self.now))

        var request = Self.request
        request.nonces = nonces
        refused(Self.key.proof(method: "POST", url: Self.url, iat: Self.now), request, code: .useNonce, "no nonce")
        refused(Self.key.proof(method: "POST", url: Self.url, iat: Self.now, nonce: "stale"), request, code: .useNonce, "not a nonce")
        refused(Self.key.proof(method: "POST", url: Self.url, iat: Self.now, nonce: nonces.nonce(at: Self.now - 20)), request,
                code: .useNonce, "an old slot's")
        let proof = Self.key.proof(method: "POST", url: Self.url, iat: Self.now, nonce: nonces.nonce(at: Self.now - 10))
        #expect(try verify(proof, request).jkt == Self.key.jkt)
        // A nonce the server did not ask for is not judged.
        #expect(try verify(Self.key.proof(method: "POST", url: Self.url, iat: Self.now, nonce: "whatever")).jkt == Self.key.jkt)
    }
}
