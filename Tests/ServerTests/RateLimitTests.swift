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
