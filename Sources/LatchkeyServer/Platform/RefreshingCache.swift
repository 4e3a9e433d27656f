import PostgreSQL
import Synchronization

/// A value re-read at most every `maxAge` seconds; `invalidate()` forces the next read. A read that
/// raced an invalidation is not cached, so a change is never hidden by a load that started before it.
/// `clock`: monotonic seconds (`Runtime.uptime`).
final class RefreshingCache<Value: Sendable>: Sendable {
    private let state = Mutex<(value: Value?, at: Double?, generation: Int)>((nil, nil, 0))
    let maxAge: Double
    let clock: @Sendable () -> Double

    init(maxAge: Double, clock: @escaping @Sendable () -> Double) {
        self.maxAge = maxAge
        self.clock = clock
    }

    /// The cached value while fresh, else `load()`'s result (cached unless invalidated meanwhile).
    /// A reload is the instance's, at most once per `maxAge`, not the cost of the request it lands
    /// on: its round trips are not counted against that request's route (ARCHITECTURE.md "Round
    /// trips per route"), and it still runs under the request's deadline.
    func get<E: Error>(_ load: () throws(E) -> Value) throws(E) -> Value {
        let (value, at, generation) = state.withLock { $0 }
        let now = clock()
        if let value, let at, now - at < maxAge { return value }
        let fresh = try PostgresDeadline.uncounted(load)
        state.withLock { if $0.generation == generation { $0 = (fresh, now, generation) } }
        return fresh
    }

    /// The last value loaded, however old (a fallback when the database cannot be read).
    var stale: Value? { state.withLock { $0.value } }

    func invalidate() { state.withLock { $0.at = nil; $0.generation += 1 } }
}
