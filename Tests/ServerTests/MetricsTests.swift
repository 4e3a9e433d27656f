import Foundation
import Testing
import LatchkeyServer

/// Issue 13, defect 2: every /metrics label comes from a known set, so no request can grow the
/// series (memory and the /metrics body) or put text of its own into the exposition.
@Suite("Metrics labels are bounded")
struct MetricsTests {
    static let fixture = Result { try TestServer(name: "metrics") }
    var server: TestServer { get throws { try Self.fixture.get() } }

    /// A random method token of 3…12 upper-case letters and digits (RFC 9110 §9.1: a token).
    static func randomMethod() -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        return "Z" + String((0..<Int.random(in: 2...11)).map { _ in alphabet.randomElement()! })
    }

    static let paths = ["/v1/passkeys", "/v1/passkeys/abc", "/admin/v1/origins", "/healthz", "/no/such/path", "/metrics"]

    func series(_ client: Client) throws -> [String] {
        let reply = try client.get("/metrics")
        #expect(reply.status == 200)
        // The label sets, without the values that change with every request.
        return reply.text.split(separator: "\n").filter { !$0.hasPrefix("#") }.map { line in
            String(line.split(separator: " ").dropLast().joined(separator: " "))
        }.filter { !$0.hasPrefix("latchkey_http_requests_total{route=\"/metrics\"") && !$0.contains("route=\"/metrics\"") }
    }

    @Test("random methods do not add series: they are counted as method=\"other\"")
    func randomMethodsDoNotGrowMetrics() throws {
        let client = try server.client()
        // One round of every known method and one unknown one, so every series that may exist does.
        for path in Self.paths {
            for method in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", Self.randomMethod()] {
                _ = try client.send(method, path)
            }
        }
        let before = try series(client)
        var sent: [String] = []
        for _ in 0..<200 {
            let method = Self.randomMethod()
            sent.append(method)
            let reply = try client.send(method, Self.paths.randomElement()!)
            #expect(reply.status < 500, "\(method): \(reply)")
        }
        let after = try series(client)
        #expect(after == before, "series grew by \(Set(after).subtracting(before).sorted().prefix(5))")
        let text = try client.get("/metrics").text
        for method in sent { #expect(!text.contains("method=\"\(method)\""), "\(method) became a label") }
        #expect(text.contains("method=\"other\""))
    }
}

/// Requests are counted per thread shard and summed when /metrics is read: nothing counted on any
/// thread is lost or counted twice.
@Suite("Metrics shards")
struct MetricsShardTests {
    @Test("counts from many threads add up in the exposition")
    func countsFromManyThreadsAddUp() async {
        let metrics = Metrics()
        await withTaskGroup(of: Void.self) { group in
            for t in 0..<8 {
                group.addTask {
                    for i in 0..<500 {
                        metrics.observeRequest(route: "/v1/x", method: "POST", status: 200, seconds: 0.002, roundTrips: 2)
                        if i % 5 == 0 { metrics.observeCeremony("authentication", outcome: t % 2 == 0 ? "ok" : "challenge_invalid") }
                    }
                }
            }
        }
        let text = metrics.render(pool: (open: 0, inUse: 0, waiting: 0))
        #expect(text.contains("latchkey_http_requests_total{route=\"/v1/x\",method=\"POST\",status=\"200\"} 4000\n"), "\(text)")
        #expect(text.contains("latchkey_http_request_duration_seconds_count{route=\"/v1/x\"} 4000\n"))
        #expect(text.contains("latchkey_http_request_duration_seconds_bucket{route=\"/v1/x\",le=\"0.0025\"} 4000\n"))
        #expect(text.contains("latchkey_http_request_duration_seconds_bucket{route=\"/v1/x\",le=\"0.001\"} 0\n"))
        #expect(text.contains("latchkey_db_round_trips_total{route=\"/v1/x\",method=\"POST\"} 8000\n"))
        #expect(text.contains("latchkey_ceremonies_total{ceremony=\"authentication\",outcome=\"ok\"} 400\n"))
        #expect(text.contains("latchkey_ceremonies_total{ceremony=\"authentication\",outcome=\"challenge_invalid\"} 400\n"))
    }
}
