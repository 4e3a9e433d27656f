import EventLoop
import Glibc

/// A pthread mutex with one condition variable (CLOCK_MONOTONIC timed waits), for blocking
/// hand-off between threads. `Synchronization.Mutex` has no condition variable.
final class ConditionLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Waits (lock held by the caller) until signalled or `deadline` (monotonic nanoseconds) passes.
    /// Returns false on timeout. Spurious wake-ups return true; callers re-check their condition.
    func wait(untilMonotonicNanoseconds deadline: UInt64) -> Bool {
        var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        return pthread_cond_timedwait(condition, mutex, &ts) != ETIMEDOUT
    }

    func signal() { pthread_cond_signal(condition) }
    func broadcast() { pthread_cond_broadcast(condition) }

    /// The clock of every deadline here and of an event loop's waits (`EventLoop.monotonicNanoseconds`).
    static func monotonicNanoseconds() -> UInt64 { EventLoop.monotonicNanoseconds() }
}
