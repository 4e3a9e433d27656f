import Glibc

/// A body written while it is sent (`Response.stream`): `produce` runs on the worker thread after
/// the head has gone out, and each `write` hands bytes to the connection, waiting while the client
/// is more than `StreamPipe.highWater` bytes behind; a write after the client went away throws.
/// The answer is chunked: a body that stops early (`produce` threw) ends without its last chunk,
/// so the client can tell it is cut short.
public final class BodyStream: Sendable {
    public let produce: @Sendable (_ write: ([UInt8]) throws -> Void) throws -> Void

    public init(_ produce: @escaping @Sendable (_ write: ([UInt8]) throws -> Void) throws -> Void) {
        self.produce = produce
    }
}

/// The client is gone (or the server stopping): the stream's remaining writes are refused.
public struct StreamCancelled: Error {
    public init() {}
}

/// Between one streamed body's producer (a worker thread) and libmicrohttpd's polling thread,
/// which takes bytes as the socket can send them. When it finds none yet, the polling thread
/// suspends the connection (under this lock, so that the producer's resume always comes after).
final class StreamPipe: @unchecked Sendable {
    static let highWater = 256 * 1024

    enum Read { case bytes(Int), wait, end, failed }

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let drained = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    // Guarded by `mutex`.
    private var buffer: [UInt8] = []
    private var start = 0
    private var finished = false
    private var failed = false
    private var cancelled = false
    private var readerWaiting = false
    /// Resumes the connection the reader suspended; set before production starts.
    private let resume: @Sendable () -> Void

    init(resume: @escaping @Sendable () -> Void) {
        self.resume = resume
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(drained, nil)
    }

    deinit {
        pthread_cond_destroy(drained)
        pthread_mutex_destroy(mutex)
        drained.deallocate()
        mutex.deallocate()
    }

    /// The producer's write: waits while the client is behind; throws once it is gone.
    func write(_ bytes: [UInt8]) throws {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while buffer.count - start >= Self.highWater && !cancelled { pthread_cond_wait(drained, mutex) }
        if cancelled { throw StreamCancelled() }
        if start == buffer.count { buffer.removeAll(keepingCapacity: true); start = 0 }
        buffer.append(contentsOf: bytes)
        wakeReader()
    }

    /// The producer is done (`failed`: it stopped early).
    func finish(failed: Bool) {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        finished = true
        self.failed = failed
        wakeReader()
    }

    /// The connection is done with the body (sent, or the client went away).
    func cancel() {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        cancelled = true
        pthread_cond_broadcast(drained)
    }

    /// The polling thread's read of up to `max` bytes into `out`; with none yet, `suspend` is
    /// called (holding the lock) and the answer is `.wait`.
    func read(into out: UnsafeMutableRawPointer, max: Int, suspend: () -> Void) -> Read {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        let available = buffer.count - start
        if available > 0 {
            let n = min(available, max)
            buffer.withUnsafeBytes { out.copyMemory(from: $0.baseAddress! + start, byteCount: n) }
            start += n
            if start > Self.highWater, start * 2 > buffer.count {
                buffer.removeFirst(start)
                start = 0
            }
            pthread_cond_broadcast(drained)
            return .bytes(n)
        }
        if finished { return failed ? .failed : .end }
        readerWaiting = true
        suspend()
        return .wait
    }

    private func wakeReader() {
        guard readerWaiting else { return }
        readerWaiting = false
        resume()
    }
}
