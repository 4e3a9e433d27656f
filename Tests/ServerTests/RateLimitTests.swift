import HTTP
import JSON
@testable import LatchkeyServer
import Testing

@Suite struct RateLimitTests {
    /// A limiter on a clock the test moves (no wall-clock timing in these tests).
    static func limiter(rate: Int, capacity: Int = 100_000) -> (RateLimiter, ManualClock) {
        let clock = ManualClock()
        return (RateLimiter(ratePerSecond: rate, capacity: capacity, clock: clock.uptime), clock)
    }

    @Test func bucketRefusesPastBurstAndNamesTheWait() {
        let (limiter, clock) = Self.limiter(rate: 5)
        let admitted = (0..<30).filter { _ in limiter.admit("198.51.100.7") == nil }.count
        #expect(admitted == 10)  // the burst (2 × rate) while the clock stands still
        #expect(limiter.admit("198.51.100.7") == 1)
        #expect(limiter.admit("203.0.113.9") == nil)  // another client has its own bucket
        clock.advance(1)
        #expect((0..<30).filter { _ in limiter.admit("198.51.100.7") == nil }.count == 5)  // one second refills `rate`
        #expect(RateLimiter(ratePerSecond: 0).admit("x") == nil)
    }

    /// Issue 13 defect 8: an IPv6 client owns a whole /64; rotating through it must not buy new buckets.
    @Test func ipv6ClientsAreKeyedByTheir64() {
        let (limiter, _) = Self.limiter(rate: 5)
        let admitted = (0..<30).filter { i in limiter.admit("2001:db8:1:2:\(String(i, radix: 16))::\(String(i + 1, radix: 16))") == nil }.count
        #expect(admitted == 10)
        #expect(limiter.admit("2001:DB8:1:2:ffff:ffff:ffff:ffff") != nil)  // the same /64, however written
        #expect(limiter.admit("2001:db8:1:3::1") == nil)  // the neighbouring /64 is another client
        // An IPv4-mapped address is the IPv4 client.
        let (v4, _) = Self.limiter(rate: 1)
        #expect(v4.admit("198.51.100.7") == nil)
        #expect(v4.admit("::ffff:198.51.100.7") == nil)
        #expect(v4.admit("198.51.100.7") != nil)
        #expect(RateLimiter.clientKey("2001:db8:1:2:3:4:5:6") == "2001:db8:1:2::/64")
        #expect(RateLimiter.clientKey("203.0.113.9") == "203.0.113.9")
    }

    /// Issue 13 defect 8: spraying new addresses evicts the oldest buckets, never every bucket (which
    /// gave a limited client a fresh one); the table stays within its capacity.
    @Test func sprayingAddressesEvictsTheOldestNotEveryBucket() {
        let (limiter, clock) = Self.limiter(rate: 1, capacity: 100)
        while limiter.admit("198.51.100.7") == nil {}  // the burst used up
        for i in 0..<500 {
            clock.advance(0.0001)  // 500 steps: 0.05 s, far from a refill of the busy client's bucket
            _ = limiter.admit("10.0.\(i / 256).\(i % 256)")
            #expect(limiter.admit("198.51.100.7") != nil, "the busy client got a fresh bucket after \(i) new addresses")
            #expect(limiter.count <= 100)
        }
    }

    /// Issue 13 defect 8: GETs that touch the database are limited too, not only POST /v1/*.
    /// The server's monotonic clock stands still: its buckets never refill during the test, so a
    /// slow machine between two requests cannot turn an expected 429 into a 200.
    static func frozenClock() -> Runtime {
        var runtime = Runtime.system
        runtime.uptime = ManualClock().uptime
        return runtime
    }

    @Test func databaseReadsAreLimitedToo() throws {
        let server = try TestServer(name: "ratelimitget", runtime: Self.frozenClock()) { $0.rateLimit = 2 }
        let client = server.client()
        var statuses: [Int] = []
        for _ in 0..<10 { statuses.append(try client.get("/v1/passkeys", authorization: "Bearer nope").status) }
        #expect(statuses.contains(429))
        var ready: [Int] = []
        for _ in 0..<10 { ready.append(try client.get("/readyz").status) }
        #expect(ready.contains(429))
    }

    /// The hole: `/oauth2/*` and `/v1/oauth/*` were outside `LATCHKEY_RATE_LIMIT`, so an
    /// unauthenticated `/oauth2/authorize` could be sent without end. SPEC "OpenID Provider" →
    /// "Limits": they are limited like `/v1`, and a 429 is the styled page at the authorization
    /// endpoint (never a redirect), OAuth's JSON on the other `/oauth2/*` endpoints, problem+json on `/v1/oauth/*`.
    @Test("/oauth2/* and /v1/oauth/* are under LATCHKEY_RATE_LIMIT: the styled 429 page at /oauth2/authorize, JSON at /oauth2/token")
    func oauthRoutesAreRateLimited() throws {
        let server = try TestServer(name: "ratelimit-oauth", runtime: Self.frozenClock()) { $0.rateLimit = 2 }
        defer { server.http.stop() }
        let client = server.client()
        // The burst used up on the authorization endpoint alone (the clock stands still: no refill).
        var authorize: [Reply] = []
        for _ in 0..<10 {
            authorize.append(try client.send("GET", "/oauth2/authorize?response_type=code&client_id=lkc_AAAAAAAAAAAAAAAAAAAAAA",
                                             headers: [("Accept-Language", "de")]))
        }
        #expect(authorize.prefix(while: { $0.status != 429 }).allSatisfy { $0.status == 400 }, "\(authorize.map(\.status))")
        let page = try #require(authorize.last)
        #expect(page.status == 429 && page.header("Retry-After") != nil && page.header("Location") == nil, "\(page)")
        #expect(page.contentType?.hasPrefix("text/html") == true && page.text.contains("lang=\"de\""), "the styled page in the browser's language: \(page)")
        // The other OAuth endpoints share the address's bucket, each answering in its format.
        let form = "application/x-www-form-urlencoded"
        for path in ["/oauth2/token", "/oauth2/par", "/oauth2/revoke"] {
            let reply = try client.send("POST", path, body: Array("grant_type=authorization_code&code=x".utf8), contentType: form)
            #expect(reply.status == 429 && reply.header("Retry-After") != nil, "\(path): \(reply)")
            #expect(reply.contentType?.hasPrefix("application/json") == true && reply.json?["error"]?.stringValue == "temporarily_unavailable",
                    "\(path): \(reply)")
        }
        // At the CIBA poll the 429 is CIBA Core §11's slow_down.
        let poll = try client.send("POST", "/oauth2/token", body: Array("grant_type=urn%3Aopenid%3Aparams%3Agrant-type%3Aciba&auth_req_id=x".utf8),
                                   contentType: form)
        #expect(poll.status == 429 && poll.header("Retry-After") != nil && poll.json?["error"]?.stringValue == "slow_down", "\(poll)")
        let userinfo = try client.get("/oauth2/userinfo", authorization: "Bearer x")
        #expect(userinfo.status == 429 && userinfo.json?["error"]?.stringValue == "temporarily_unavailable", "\(userinfo)")
        for (method, path) in [("GET", "/v1/oauth/requests/lkq_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), ("GET", "/v1/oauth/consents"),
                               ("POST", "/v1/oauth/requests/lkq_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/approve")] {
            let reply = try client.send(method, path, body: method == "POST" ? Array("{}".utf8) : [])
            #expect(reply.status == 429 && reply.isProblem && reply.code == "rate_limited" && reply.header("Retry-After") != nil,
                    "\(method) \(path): \(reply)")
        }
        // Discovery and the JWKS are static files, never counted.
        #expect(try client.get("/.well-known/openid-configuration").status == 200)
    }

    @Test func limitedRequestsGet429ProblemWithRetryAfter() throws {
        let server = try TestServer(name: "ratelimit", runtime: Self.frozenClock()) { $0.rateLimit = 2 }
        let client = server.client()
        var statuses: [Int] = []
        for _ in 0..<10 { statuses.append(try client.post("/v1/passkeys/authentication/options", .object([])).status) }
        #expect(statuses.contains(429))
        let limited = try client.post("/v1/passkeys/authentication/options", .object([]))
        #expect(limited.status == 429)
        #expect(limited.header("Retry-After") != nil)
        #expect(limited.json?["code"]?.stringValue == "rate_limited")
        // Reads are not limited.
        #expect(try client.get("/healthz").status == 200)
    }
}

@Suite struct CORSTests {
    @Test func allowlistedOriginsGetCORSHeadersAndPreflight() throws {
        let server = try TestServer(name: "cors")
        let client = server.client()
        let preflight = try client.http.send(method: "OPTIONS", path: "/v1/passkeys/authentication/options",
                                             headers: [("Origin", server.origin), ("Access-Control-Request-Method", "POST")])
        #expect(preflight.status == 204)
        #expect(preflight.header("Access-Control-Allow-Origin") == server.origin)
        #expect(preflight.header("Access-Control-Allow-Headers")?.contains("Authorization") == true)
        let options = try client.http.send(method: "POST", path: "/v1/passkeys/authentication/options",
                                           headers: [("Origin", server.origin), ("Content-Type", "application/json")], body: Array("{}".utf8))
        #expect(options.status == 200)
        #expect(options.header("Access-Control-Allow-Origin") == server.origin)
        // An origin that is not allowlisted gets no CORS headers; nor do admin routes.
        let foreign = try client.http.send(method: "POST", path: "/v1/passkeys/authentication/options",
                                           headers: [("Origin", "https://evil.example"), ("Content-Type", "application/json")], body: Array("{}".utf8))
        #expect(foreign.header("Access-Control-Allow-Origin") == nil)
        let admin = try client.http.send(method: "GET", path: "/admin/v1/origins", headers: [("Origin", server.origin)])
        #expect(admin.header("Access-Control-Allow-Origin") == nil)
    }
}
