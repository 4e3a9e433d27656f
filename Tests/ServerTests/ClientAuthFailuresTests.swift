@testable import LatchkeyServer
import Testing

/// SPEC "Limits": failed client authentications count per client id and client address; after 20 a
/// minute that pair's failures are answered 429 for the rest of the minute; a success is never
/// refused (the counter is only ever handed a failure). The clock is a ManualClock the test steps.
@Suite("Client authentication failures")
struct ClientAuthFailuresTests {
    static func counter(capacity: Int = 100_000) -> (ClientAuthFailures, ManualClock) {
        let clock = ManualClock()
        return (ClientAuthFailures(capacity: capacity, clock: clock.uptime), clock)
    }

    @Test("the 21st failure in a minute is limited, for the rest of that minute")
    func twentyFailuresThenLimited() {
        let (failures, clock) = Self.counter()
        for i in 1...20 {
            #expect(failures.recordFailure(clientId: "app", address: "198.51.100.7") == .counted, "failure \(i)")
            clock.advance(1)
        }
        #expect(failures.recordFailure(clientId: "app", address: "198.51.100.7") == .limited(retryAfter: 40))
        clock.advance(30)
        #expect(failures.recordFailure(clientId: "app", address: "198.51.100.7") == .limited(retryAfter: 10))
        clock.advance(9.5)
        #expect(failures.recordFailure(clientId: "app", address: "198.51.100.7") == .limited(retryAfter: 1))
    }

    @Test("another client, or the same client from another address, is not limited by this pair")
    func pairsAreIndependent() {
        let (failures, _) = Self.counter()
        for _ in 1...25 { _ = failures.recordFailure(clientId: "app", address: "198.51.100.7") }
        #expect(failures.recordFailure(clientId: "app", address: "198.51.100.7") != .counted)
        #expect(failures.recordFailure(clientId: "other-app", address: "198.51.100.7") == .counted)
        #expect(failures.recordFailure(clientId: "app", address: "203.0.113.9") == .counted)
        // An IPv6 client is its /64, as for the rate limiter: rotating through it buys nothing.
        for i in 1...20 { _ = failures.recordFailure(clientId: "app", address: "2001:db8:1:2::\(String(i, radix: 16))") }
        #expect(failures.recordFailure(clientId: "app", address: "2001:db8:1:2:ffff::1") != .counted)
        #expect(failures.recordFailure(clientId: "app", address: "2001:db8:1:3::1") == .counted)
    }

    @Test("the window ends a minute after its first failure, and a new one starts from zero")
    func windowExpires() {
        let (failures, clock) = Self.counter()
        for _ in 1...30 { _ = failures.recordFailure(clientId: "app", address: "198.51.100.7") }
        clock.advance(59)
        #expect(failures.recordFailure(clientId: "app", address: "198.51.100.7") != .counted)
        clock.advance(1)
        for i in 1...20 { #expect(failures.recordFailure(clientId: "app", address: "198.51.100.7") == .counted, "failure \(i) of the new minute") }
        #expect(failures.recordFailure(clientId: "app", address: "198.51.100.7") == .limited(retryAfter: 60))
    }

    @Test("the table stays bounded, and spraying new pairs does not free a limited one")
    func boundedMemory() {
        let (failures, clock) = Self.counter(capacity: 100)
        for _ in 1...21 { _ = failures.recordFailure(clientId: "app", address: "198.51.100.7") }
        for i in 0..<1000 {
            clock.advance(0.01)  // 10 s in all: the limited pair's minute is not over
            _ = failures.recordFailure(clientId: "app-\(i)", address: "10.0.\(i / 256).\(i % 256)")
            #expect(failures.count <= 100)
        }
        #expect(failures.recordFailure(clientId: "app", address: "198.51.100.7") != .counted)
        // Windows that ended go first once the table is full.
        clock.advance(61)
        for i in 0..<100 { _ = failures.recordFailure(clientId: "late-\(i)", address: "192.0.2.1") }
        #expect(failures.count <= 100)
        #expect(failures.recordFailure(clientId: "app", address: "198.51.100.7") == .counted)
    }

    @Test("a long client id is keyed by its first 128 bytes")
    func keyIsBounded() {
        let long = String(repeating: "a", count: 10_000)
        #expect(ClientAuthFailures.key(clientId: long, address: "198.51.100.7").utf8.count == 128 + 1 + 12)
    }
}
