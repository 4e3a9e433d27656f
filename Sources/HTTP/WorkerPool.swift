import EventLoop
import Glibc

/// A fixed set of threads taking jobs from one queue, oldest first.
///
/// Why one queue: a responder blocks on PostgreSQL (a durable commit waits for the disk). When each
/// thread owned its own connections (libmicrohttpd's thread pool), a request waited behind every
/// request on its thread's connections, including one stuck in a commit, while other threads sat
/// idle; the unlucky thread's connections made the tail. Here every request waits only behind the
/// requests that arrived before it, on any connection, and goes to the first free worker.
final class WorkerPool: @unchecked Sendable {
    typealias Job = () -> Void

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let workAvailable = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    // Guarded by `mutex`.
    private var jobs: [Job] = []
    private var head = 0
    private var closed = false
    private var threads: [StartedThread] = []

    init(threads count: Int) {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(workAvailable, nil)
        jobs.reserveCapacity(64)
        for _ in 0..<max(1, count) {
            if let thread = startThread({ self.work() }) { threads.append(thread) }
        }
    }

    deinit {
        pthread_cond_destroy(workAvailable)
        pthread_mutex_destroy(mutex)
        workAvailable.deallocate()
        mutex.deallocate()
    }

    /// Queues `job` for the first free worker. False once the pool is closed (or has no thread):
    /// the caller runs the job itself.
    func submit(_ job: @escaping Job) -> Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        guard !closed, !threads.isEmpty else { return false }
        jobs.append(job)
        pthread_cond_signal(workAvailable)
        return true
    }

    /// Takes no more jobs, lets the workers finish every job already queued, and joins them.
    /// Idempotent; returns once no job of this pool is running.
    func close() {
        pthread_mutex_lock(mutex)
        let joining = closed ? [] : threads
        closed = true
        pthread_cond_broadcast(workAvailable)
        pthread_mutex_unlock(mutex)
        for thread in joining { thread.join() }
    }

    private func work() {
        pthread_mutex_lock(mutex)
        while true {
            while head == jobs.count, !closed { pthread_cond_wait(workAvailable, mutex) }
            if head == jobs.count { break }  // closed and drained
            let job = jobs[head]
            head += 1
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 1024 {
                jobs.removeFirst(head)
                head = 0
            }
            pthread_mutex_unlock(mutex)
            job()
            pthread_mutex_lock(mutex)
        }
        pthread_mutex_unlock(mutex)
    }
}
