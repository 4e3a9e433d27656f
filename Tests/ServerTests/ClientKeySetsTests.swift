import Crypto
import Dispatch
import Foundation
import HTTP
import JSON
@testable import LatchkeyServer
import Synchronization
import Testing

/// SPEC "Client authentication": a client's JWKS is cached (≥ 5 minutes, `Cache-Control` up to
/// 24 h), refreshed off the request path, fetched again at most once a minute for an unknown `kid`,
/// and never for a forged signature under a known one. Every fetch here is real HTTP to a JWKS
/// server on loopback (the project's HTTPServer), which counts the requests it answers; the cache's
/// clock is a ManualClock the test steps.
@Suite("Client key sets")
struct ClientKeySetsTests {
    /// A client's `jwks_uri`: answers `keys` with `cacheControl`, or `status` without a JWKS; `hold`
    /// keeps answers waiting until `release()` (a refresh that is still running).
    final class JWKSServer: Responder, Sendable {
        private struct State {
            var keys: [JSONValue]
            var cacheControl: String?
            var status = 200
            var hits = 0
        }
        private let state: Mutex<State>
        private let gate = Mutex<DispatchSemaphore?>(nil)
        private let server = Mutex<HTTPServer?>(nil)

        init(keys: [JSONValue], cacheControl: String? = nil) throws {
            state = Mutex(State(keys: keys, cacheControl: cacheControl))
            let http = try HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadPoolSize: 2, maxBodyBytes: 4096), responder: self)
            server.withLock { $0 = http }
        }

        var uri: String { "http://127.0.0.1:\(server.withLock { $0?.port ?? 0 })/jwks.json" }
        var hits: Int { state.withLock { $0.hits } }
        func serve(keys: [JSONValue]) { state.withLock { $0.keys = keys } }
        func answer(status: Int) { state.withLock { $0.status = status } }
        func hold() { gate.withLock { $0 = DispatchSemaphore(value: 0) } }
        func release() { gate.withLock { $0?.signal(); $0 = nil } }
        func stop() { release(); server.withLock { $0?.stop(); $0 = nil } }

        func respond(to request: Request) -> Response {
            if let waiting = gate.withLock({ $0 }) { _ = waiting.wait(timeout: .now() + 10) }
            let s = state.withLock { s -> State in s.hits += 1; return s }
            guard s.status == 200 else { return .empty(status: s.status) }
            return .json(bytes: JSONValue.object([("keys", .array(s.keys))]).serialized(), headers: s.cacheControl.map { [("Cache-Control", $0)] } ?? [])
        }
    }

    /// A signing key and its public JWK.
    struct SigningKey: Sendable {
        let kid: String
        let alg: String
        let key: PrivateKey

        var jwk: JSONValue {
            let pub = key.publicKey
            if let point = pub.x963Point {
                return .object([("kty", "EC"), ("crv", "P-256"), ("kid", .string(kid)), ("x", .string(Base64URL.encode(Array(point[1..<33])))),
                                ("y", .string(Base64URL.encode(Array(point[33...]))))])
            }
            let (n, e) = pub.rsaComponents!
            return .object([("kty", "RSA"), ("kid", .string(kid)), ("n", .string(Base64URL.encode(n))), ("e", .string(Base64URL.encode(e)))])
        }

        /// A compact JWS over `claims`, signed by this key (or by `forger`, keeping this key's kid) with
        /// the algorithm its header names (or `padding`, to sign it some other way).
        func sign(_ claims: JSONValue, by forger: PrivateKey? = nil, padding: SignatureAlgorithm? = nil) throws -> String {
            let header = JSONValue.object([("alg", .string(alg)), ("typ", "JWT"), ("kid", .string(kid))])
            let input = Base64URL.encode(header.serialized()) + "." + Base64URL.encode(claims.serialized())
            let signer = forger ?? key
            let signature: [UInt8]
            switch padding ?? ClientAssertion.algorithms[alg]! {
            case .ecdsa(let hash): signature = try ECDSASignature.rawFromDER(try signer.sign(Array(input.utf8), algorithm: .ecdsa(hash)), coordinateLength: 32)
            case let other: signature = try signer.sign(Array(input.utf8), algorithm: other)
            }
            return input + "." + Base64URL.encode(signature)
        }
    }

    static let ec = SigningKey(kid: "k1", alg: "ES256", key: .generateEC(.p256))
    static let rsa = PrivateKey.generateRSA(bits: 2048)
    static let issuer = "https://op.latchkey.test"
    static let audiences: Set<String> = [issuer, issuer + "/oauth2/token", issuer + "/oauth2/par"]

    static func claims(now: Int64, exp: Int64? = nil, extra: [(key: String, value: JSONValue)] = []) -> JSONValue {
        .object([("iss", "client"), ("sub", "client"), ("aud", .string(issuer + "/oauth2/token")), ("jti", .string(UUID().uuidString)),
                 ("exp", .number(Double(exp ?? now + 120)))] + extra)
    }

    /// A cache on a clock the test steps, fetching over real HTTP with development mode's address rules
    /// (`http://` to loopback).
    static func cache() -> (ClientKeySets, ManualClock) {
        let clock = ManualClock()
        let fetcher = JWKSFetcher(policy: WebhookAddressPolicy(developmentMode: true, allowPrivate: false), protocols: "http,https",
                                  caFile: nil, resolver: .system)
        return (ClientKeySets(fetcher: fetcher, clock: clock.uptime), clock)
    }

    /// Parses and verifies `token` with the cache, as `verifyAssertion` does after the claims.
    static func verify(_ token: String, _ keys: ClientKeySets, _ uri: String) throws {
        let parsed = try #require(ClientAssertion.parse(token))
        try ClientAssertion.verifySignature(parsed, jwksURI: uri, keySets: keys)
    }

    @Test("a known kid with a forged signature never causes a fetch")
    func forgedSignatureUnderKnownKidFetchesNothing() throws {
        let server = try JWKSServer(keys: [Self.ec.jwk])
        defer { server.stop() }
        let (keys, clock) = Self.cache()
        let now = Int64(Date().timeIntervalSince1970)
        try Self.verify(try Self.ec.sign(Self.claims(now: now)), keys, server.uri)
        #expect(server.hits == 1)  // the first request ever: fetched on its thread, nothing being cached yet
        let forger = PrivateKey.generateEC(.p256)
        for step in 0..<40 {
            clock.advance(5)  // 200 s in all: still fresh, and every fetch interval has passed
            #expect(throws: OAuthError.self, "forgery \(step)") { try Self.verify(try Self.ec.sign(Self.claims(now: now), by: forger), keys, server.uri) }
        }
        keys.waitForRefreshes()
        #expect(server.hits == 1)
        try Self.verify(try Self.ec.sign(Self.claims(now: now)), keys, server.uri)
        #expect(server.hits == 1)
    }

    @Test("an unknown kid causes at most one fetch a minute, and a rotated-in key is found by it")
    func unknownKidFetchesAtMostOnceAMinute() throws {
        let server = try JWKSServer(keys: [Self.ec.jwk])
        defer { server.stop() }
        let (keys, clock) = Self.cache()
        let now = Int64(Date().timeIntervalSince1970)
        try Self.verify(try Self.ec.sign(Self.claims(now: now)), keys, server.uri)
        func unknownKids(_ count: Int) {
            for i in 0..<count {
                let stranger = SigningKey(kid: "random-\(i)-\(UUID().uuidString)", alg: "ES256", key: Self.ec.key)
                #expect(throws: OAuthError.self) { try Self.verify(try stranger.sign(Self.claims(now: now)), keys, server.uri) }
            }
            keys.waitForRefreshes()
        }
        unknownKids(20)
        #expect(server.hits == 1)  // the first fetch was less than a minute ago
        clock.advance(59)
        unknownKids(20)
        #expect(server.hits == 1)
        clock.advance(1)
        unknownKids(20)
        #expect(server.hits == 2)  // one fetch for the twenty
        clock.advance(30)
        unknownKids(20)
        #expect(server.hits == 2)

        // The client rotates in k2: its first assertion is the minute's fetch, on its own request, and
        // verifies; after that k2 costs no fetch.
        let k2 = SigningKey(kid: "k2", alg: "ES256", key: .generateEC(.p256))
        server.serve(keys: [Self.ec.jwk, k2.jwk])
        clock.advance(30)
        try Self.verify(try k2.sign(Self.claims(now: now)), keys, server.uri)
        keys.waitForRefreshes()
        #expect(server.hits == 3)
        try Self.verify(try k2.sign(Self.claims(now: now)), keys, server.uri)
        try Self.verify(try Self.ec.sign(Self.claims(now: now)), keys, server.uri)
        #expect(server.hits == 3)
    }

    /// (Cache-Control, the lifetime it gives): max-age honoured between 5 minutes and 24 hours.
    static let lifetimes: [(String?, Double)] = [
        (nil, 300), ("max-age=3600", 3600), ("public, max-age=90", 300), ("max-age=999999", 86_400),
        ("no-store", 300), ("max-age=\"7200\", must-revalidate", 7200),
    ]

    @Test("Cache-Control max-age is honoured between 5 minutes and 24 hours", arguments: lifetimes)
    func cacheControlSetsTheLifetime(cacheControl: String?, lifetime: Double) throws {
        let server = try JWKSServer(keys: [Self.ec.jwk], cacheControl: cacheControl)
        defer { server.stop() }
        let (keys, clock) = Self.cache()
        let token = try Self.ec.sign(Self.claims(now: Int64(Date().timeIntervalSince1970)))
        try Self.verify(token, keys, server.uri)
        clock.advance(lifetime - ClientKeySets.refreshAhead - 1)
        try Self.verify(token, keys, server.uri)
        keys.waitForRefreshes()
        #expect(server.hits == 1, "refreshed before \(lifetime - ClientKeySets.refreshAhead) s")
        clock.advance(2)
        try Self.verify(token, keys, server.uri)
        keys.waitForRefreshes()
        #expect(server.hits == 2, "not refreshed a minute before \(lifetime) s")
    }

    @Test("a request goes on with the cached keys while a refresh is running")
    func refreshRunsOffTheRequestPath() throws {
        let server = try JWKSServer(keys: [Self.ec.jwk])
        defer { server.stop() }
        let (keys, clock) = Self.cache()
        let token = try Self.ec.sign(Self.claims(now: Int64(Date().timeIntervalSince1970)))
        try Self.verify(token, keys, server.uri)
        server.hold()
        clock.advance(ClientKeySets.minimumLifetime - 30)
        let started = Date()
        try Self.verify(token, keys, server.uri)  // starts the refresh, which the server holds
        try Self.verify(token, keys, server.uri)
        #expect(Date().timeIntervalSince(started) < 2)
        server.release()
        keys.waitForRefreshes()
        #expect(server.hits == 2)
    }

    @Test("a set whose refreshes fail is used for an hour past its lifetime, then refused")
    func staleSetOutlivesFailedRefreshesForAnHour() throws {
        let server = try JWKSServer(keys: [Self.ec.jwk])
        defer { server.stop() }
        let (keys, clock) = Self.cache()
        let token = try Self.ec.sign(Self.claims(now: Int64(Date().timeIntervalSince1970)))
        try Self.verify(token, keys, server.uri)
        server.answer(status: 503)
        clock.advance(ClientKeySets.minimumLifetime + 10)
        try Self.verify(token, keys, server.uri)  // stale: used, and a refresh tried
        keys.waitForRefreshes()
        try Self.verify(token, keys, server.uri)  // that refresh failed: still used, not tried again this minute
        keys.waitForRefreshes()
        #expect(server.hits == 2)
        clock.advance(ClientKeySets.staleGrace)
        #expect(throws: OAuthError.self) { try Self.verify(token, keys, server.uri) }  // nothing usable: fetched here, failed
        #expect(throws: OAuthError.self) { try Self.verify(token, keys, server.uri) }  // and not again within the minute
        #expect(server.hits == 3)
        server.answer(status: 200)
        clock.advance(ClientKeySets.fetchInterval)
        try Self.verify(token, keys, server.uri)
        #expect(server.hits == 4)
    }

    @Test("a first fetch that fails is tried again at most once a minute")
    func failedFirstFetchIsRetriedOnceAMinute() throws {
        let server = try JWKSServer(keys: [Self.ec.jwk])
        defer { server.stop() }
        server.answer(status: 404)
        let (keys, clock) = Self.cache()
        let token = try Self.ec.sign(Self.claims(now: Int64(Date().timeIntervalSince1970)))
        for _ in 0..<5 { #expect(throws: OAuthError.self) { try Self.verify(token, keys, server.uri) } }
        #expect(server.hits == 1)
        server.answer(status: 200)
        clock.advance(ClientKeySets.fetchInterval)
        try Self.verify(token, keys, server.uri)
        #expect(server.hits == 2)
    }

    @Test("RS256 and PS256 verify with an RSA key of the set; the wrong padding does not")
    func rsaAlgorithms() throws {
        let rs = SigningKey(kid: "r1", alg: "RS256", key: Self.rsa), ps = SigningKey(kid: "r1", alg: "PS256", key: Self.rsa)
        let server = try JWKSServer(keys: [Self.ec.jwk, rs.jwk])
        defer { server.stop() }
        let (keys, _) = Self.cache()
        let claims = Self.claims(now: Int64(Date().timeIntervalSince1970))
        try Self.verify(try rs.sign(claims), keys, server.uri)
        try Self.verify(try ps.sign(claims), keys, server.uri)
        // A PKCS#1 v1.5 signature presented as PS256 (and the other way round) is refused.
        #expect(throws: OAuthError.self) { try Self.verify(try ps.sign(claims, padding: .rsaPKCS1(.sha256)), keys, server.uri) }
        #expect(throws: OAuthError.self) { try Self.verify(try rs.sign(claims, padding: .rsaPSS(.sha256)), keys, server.uri) }
        // An EC key never verifies an RSA algorithm, whatever the kid says.
        let confused = SigningKey(kid: "k1", alg: "RS256", key: Self.rsa)
        #expect(throws: OAuthError.self) { try Self.verify(try confused.sign(claims), keys, server.uri) }
        #expect(server.hits == 1)
    }

    @Test("a JWK whose alg or use says otherwise, or an RSA key under 2048 bits, is not used")
    func keysAreUsedOnlyAsTheirJWKAllows() throws {
        var pinned = Self.ec.jwk.objectValue ?? []
        pinned.append(("alg", "ES384"))
        #expect(ClientKey(jwk: .object(pinned))?.fits("ES256") == false)
        var encryption = Self.ec.jwk.objectValue ?? []
        encryption.append(("use", "enc"))
        #expect(ClientKey(jwk: .object(encryption)) == nil)
        #expect(ClientKey(jwk: SigningKey(kid: "small", alg: "RS256", key: .generateRSA(bits: 1024)).jwk) == nil)
        #expect(ClientKey(jwk: Self.ec.jwk)?.fits("ES256") == true)
    }

    @Test("Cache-Control is read for max-age alone")
    func maxAgeParsing() {
        #expect(JWKSFetcher.maxAge("max-age=600") == 600)
        #expect(JWKSFetcher.maxAge("public,MAX-AGE = 42 ") == 42)
        #expect(JWKSFetcher.maxAge("s-maxage=100") == nil)
        #expect(JWKSFetcher.maxAge("max-age=-5") == nil)
        #expect(JWKSFetcher.maxAge("max-age=99999999999999999999") == nil)
        #expect(JWKSFetcher.maxAge(nil) == nil)
    }

    // MARK: RFC 7523 §3 claims (no keys involved)

    static func check(_ claims: JSONValue, now: Int64) throws -> ClientAssertion.CheckedClaims {
        let token = try Self.ec.sign(claims)
        return try ClientAssertion.checkClaims(try #require(ClientAssertion.parse(token)), clientId: "client", audiences: audiences, now: now)
    }

    @Test("nbf and iat in the future are refused, within 30 s they are not")
    func nbfAndIatNotInTheFuture() throws {
        let now: Int64 = 1_800_000_000
        for name in ["nbf", "iat"] {
            #expect(throws: OAuthError.self) { _ = try Self.check(Self.claims(now: now, extra: [(name, .number(Double(now + 31)))]), now: now) }
            #expect(throws: OAuthError.self) { _ = try Self.check(Self.claims(now: now, extra: [(name, "soon")]), now: now) }
            _ = try Self.check(Self.claims(now: now, extra: [(name, .number(Double(now + 30)))]), now: now)
            _ = try Self.check(Self.claims(now: now, extra: [(name, .number(Double(now - 3600)))]), now: now)
        }
    }

    @Test("exp must not be past, nor more than 300 s ahead (30 s leeway each way)")
    func expiryBounds() throws {
        let now: Int64 = 1_800_000_000
        #expect(try Self.check(Self.claims(now: now, exp: now + 330), now: now).exp == now + 330)
        #expect(throws: OAuthError.self) { _ = try Self.check(Self.claims(now: now, exp: now + 331), now: now) }
        #expect(throws: OAuthError.self) { _ = try Self.check(Self.claims(now: now, exp: now + 3600), now: now) }
        _ = try Self.check(Self.claims(now: now, exp: now - 29), now: now)
        #expect(throws: OAuthError.self) { _ = try Self.check(Self.claims(now: now, exp: now - 30), now: now) }
        #expect(throws: OAuthError.self) {
            _ = try Self.check(.object([("iss", "client"), ("sub", "client"), ("aud", .string(Self.issuer)), ("jti", "j")]), now: now)
        }
        // aud as before: the issuer, the token endpoint or the PAR endpoint, as a string or an array member.
        _ = try Self.check(.object([("iss", "client"), ("sub", "client"), ("aud", .array(["https://x", .string(Self.issuer + "/oauth2/par")])),
                                    ("jti", "j"), ("exp", .number(Double(now + 60)))]), now: now)
        #expect(throws: OAuthError.self) {
            _ = try Self.check(.object([("iss", "client"), ("sub", "client"), ("aud", "https://elsewhere"), ("jti", "j"),
                                        ("exp", .number(Double(now + 60)))]), now: now)
        }
    }
}
