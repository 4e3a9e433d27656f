import Foundation
import HTTP
import JSON
@testable import LatchkeyServer
import Testing

/// `iso8601` writes its digits itself (it is on every log line and every JSON timestamp); it must
/// say what a calendar says, also at the edges of days, months, leap years and its 4-digit range.
@Suite struct TimestampFormatTests {
    @Test(arguments: [
        (0.0, "1970-01-01T00:00:00Z"),
        (951_782_400, "2000-02-29T00:00:00Z"),
        (1_767_225_599, "2025-12-31T23:59:59Z"),
        (1_767_225_600, "2026-01-01T00:00:00Z"),
        (1_796_169_599.999, "2026-12-01T23:59:59Z"),
        (4_107_542_400, "2100-03-01T00:00:00Z"),
        (253_402_300_799, "9999-12-31T23:59:59Z"),
        (-1, "1969-12-31T23:59:59Z"),
    ])
    func formats(seconds: Double, expected: String) {
        #expect(iso8601(Date(timeIntervalSince1970: seconds)) == expected)
    }

    @Test func agreesWithFoundationOnADaySweep() {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        var seconds = 1_600_000_000.0
        for _ in 0..<400 {
            let date = Date(timeIntervalSince1970: seconds)
            #expect(iso8601(date) == formatter.string(from: date))
            seconds += 86_400 * 3 + 3_671  // walks days, hours, minutes and seconds over ~3 years
        }
    }

    @Test func yearsPastFourDigitsStillPrint() {
        #expect(iso8601(Date(timeIntervalSince1970: 253_402_300_800)) == "10000-01-01T00:00:00Z")
    }
}

/// The request log's line is written without a JSON tree; it must be the JSON object it always was.
@Suite struct RequestLogLineTests {
    @Test(arguments: [(200, 0.0012345, "127.0.0.1" as String?, nil as String?), (503, 5.5, nil, "timeout"),
                      (404, 0.000004, "::1", "with \"quotes\" and \\ and \u{1}")])
    func lineIsTheJSONObject(status: Int, seconds: Double, remote: String?, databaseError: String?) throws {
        let request = Request(method: "POST", target: "/v1/passkeys/authentication/verify", remoteAddress: remote)
        let at = Date(timeIntervalSince1970: 1_796_169_599)
        let line = RequestLog.line(request: request, route: "/v1/passkeys/authentication/verify", status: status,
                                   seconds: seconds, at: at, databaseError: databaseError)
        #expect(line.last == 0x0A)
        let expected = JSONValue.object([
            ("time", .string("2026-12-01T23:59:59Z")), ("method", .string("POST")), ("route", .string("/v1/passkeys/authentication/verify")),
            ("status", .number(Double(status))), ("ms", .number((seconds * 100_000).rounded() / 100)),
            ("remote", remote.map { .string($0) } ?? .null),
        ] + (databaseError.map { [("db_error", .string($0))] } ?? [])).serialized()
        #expect(Array(line.dropLast()) == expected)
    }

    /// Durations from 0 to ~10^10 ms, dense where requests fall: the integer-hundredths spelling is
    /// byte for byte the Double's JSON spelling.
    @Test func millisecondsAreSpelledAsTheirDouble() {
        var values: [Double] = [0, 0.000004, 0.000005, 0.0000049999, 0.00001, 0.0001, 0.0099999, 0.01, 0.1, 1, 59.99999, 1e4, 1e7 - 0.000001]
        var random = SystemRandomNumberGenerator()
        for _ in 0..<20_000 { values.append(Double.random(in: 0..<2, using: &random)) }
        for _ in 0..<5_000 { values.append(Double.random(in: 0..<10_000_000, using: &random)) }
        for hundredths in 0..<3_000 { values.append(Double(hundredths) / 100_000) }
        for seconds in values {
            var line: [UInt8] = []
            RequestLog.appendMilliseconds(seconds, to: &line)
            #expect(line == JSONValue.number((seconds * 100_000).rounded() / 100).serialized(), "\(seconds)")
        }
    }
}
