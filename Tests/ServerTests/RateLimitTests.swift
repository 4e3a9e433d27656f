import HTTP
import JSON
import LatchkeyServer
import Testing

@Suite struct RateLimitTests {
    @Test func bucketRefusesPastBurstAndNamesTheWait() {
        let limiter = RateLimiter(ratePerSecond: 5)
        var refused = 0
        for _ in 0..<30 where limiter.admit("198.51.100.7") != nil { refused += 1 }
        #expect(refused >= 20)  // burst of 10, then the rate (the loop is far faster than 5/s)
        #expect(limiter.admit("198.51.100.7").map { $0 >= 1 } == true)
        #expect(limiter.admit("203.0.113.9") == nil)  // another client has its own bucket
        #expect(RateLimiter(ratePerSecond: 0).admit("x") == nil)
    }

    @Test func limitedRequestsGet429ProblemWithRetryAfter() throws {
        let server = try TestServer(name: "ratelimit") { $0.rateLimit = 2 }
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
