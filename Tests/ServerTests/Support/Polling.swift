import Foundation

/// Polls `condition` every `interval` seconds until it holds or `seconds` pass; true when it held.
/// The one bounded wait of the server tests: the bound only keeps a broken feature from hanging the
/// run, so it is generous, and a test never asserts how long the wait took.
func waitFor(seconds: Double = 20, every interval: Double = 0.05, _ condition: () throws -> Bool) rethrows -> Bool {
    try waited(seconds: seconds, every: interval, condition) != nil
}

/// Seconds until `condition` held, or nil when it did not hold within `limit` — printed either way.
///
/// For what travels between instances — the NOTIFY feeds, the revocation poll (every 0.5 s), the
/// caches' one-second expiry. Latchkey aims at well under a second, but a test asserts only that the
/// change arrives, within a limit generous enough for a loaded CI machine, and prints how long it took
/// (tests never assert on wall-clock time; a 1 s window failed CI runs that were merely slow).
func propagation(_ what: String, limit: Double = 15, _ condition: () throws -> Bool) rethrows -> Double? {
    let took = try waited(seconds: limit, every: 0.02, condition)
    print("propagation: \(what): " + (took.map { String(format: "%.3f s", $0) } ?? "not within \(limit) s"))
    return took
}

private func waited(seconds: Double, every interval: Double, _ condition: () throws -> Bool) rethrows -> Double? {
    let started = Date()
    let deadline = started.addingTimeInterval(seconds)
    repeat {
        if try condition() { return Date().timeIntervalSince(started) }
        Thread.sleep(forTimeInterval: interval)
    } while Date() < deadline
    return try condition() ? Date().timeIntervalSince(started) : nil
}
