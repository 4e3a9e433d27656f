import Foundation

/// Seconds until `condition` held (polled every 20 ms), or nil when it did not hold within `limit`.
///
/// For what travels between instances — the NOTIFY feeds, the revocation poll (every 0.5 s), the
/// caches' one-second expiry. Latchkey aims at well under a second, but a test asserts only that the
/// change arrives, within a limit generous enough for a loaded CI machine, and prints how long it took
/// (tests never assert on wall-clock time; a 1 s window failed CI runs that were merely slow).
func propagation(_ what: String, limit: Double = 15, _ condition: () throws -> Bool) rethrows -> Double? {
    let started = Date()
    let deadline = started.addingTimeInterval(limit)
    repeat {
        if try condition() {
            let took = Date().timeIntervalSince(started)
            print("propagation: \(what): \(String(format: "%.3f", took)) s")
            return took
        }
        Thread.sleep(forTimeInterval: 0.02)
    } while Date() < deadline
    print("propagation: \(what): not within \(limit) s")
    return nil
}
