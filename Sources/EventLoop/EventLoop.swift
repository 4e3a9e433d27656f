import CEpoll
import Glibc
import Synchronization

/// One thread that waits on an epoll set and runs what became ready: jobs of Swift tasks that
/// prefer it as their executor (`Task(executorPreference: loop)`), closures handed to `execute`,
/// one-shot waits for a socket to become readable or writable (`readable`, `writable`), and
/// persistent watchers (`watch`). Nothing on it may block: a task waits by suspending, and the
/// thread goes back to `epoll_wait` until a socket it waits on is ready, a job is enqueued from
/// another thread (an eventfd wakes it), or the nearest deadline passes.
///
/// One loop per core: a request's parsing, decision and rendering run on its loop's thread, its
/// database round trips are waits on that thread's epoll set, and no request is ever handed from
/// one thread to another on its way through.
public final class EventLoop: TaskExecutor, @unchecked Sendable {
    /// What a wait for a socket ended with.
    public enum Readiness: Sendable, Equatable {
        case ready
        /// The deadline passed first; the socket's registration is withdrawn.
        case timedOut
        /// The loop is stopping, or epoll refused the descriptor (`errno`).
        case failed(Int32)
    }

    private enum Work: Sendable {
        case job(UnownedJob)
        case closure(@Sendable () -> Void)
    }

    private struct Inbox {
        var work: [Work] = []
        var stopping = false
    }

    /// One suspended wait: its continuation and deadline (monotonic nanoseconds; nil: none).
    private struct Wait {
        let continuation: UnsafeContinuation<Readiness, Never>
        let deadline: UInt64?
    }

    private let epollDescriptor: Int32
    private let wakeDescriptor: Int32
    private let inbox = Mutex(Inbox())
    // Touched on the loop's thread only.
    private var waits: [Int32: Wait] = [:]
    private var watchers: [Int32: () -> Void] = [:]
    private var ticks: [() -> Int32] = []
    /// Set on the loop's thread once `stop` was called: new waits fail at once.
    private var stopping = false
    private let threadID = Atomic<UInt>(0)
    private var thread: StartedThread?
    private let started = Atomic<Bool>(false)
    private let ended = Atomic<Bool>(false)

    public init() {
        epollDescriptor = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeDescriptor = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        precondition(epollDescriptor >= 0 && wakeDescriptor >= 0, "epoll_create1/eventfd failed (errno \(errno))")
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = wakeDescriptor
        precondition(epoll_ctl(epollDescriptor, EPOLL_CTL_ADD, wakeDescriptor, &event) == 0)
    }

    deinit {
        close(wakeDescriptor)
        close(epollDescriptor)
    }

    /// Starts the loop's thread. Call once.
    public func start() {
        precondition(!started.exchange(true, ordering: .acquiringAndReleasing), "an event loop starts once")
        guard let thread = startThread({ self.run() }) else { preconditionFailure("pthread_create failed") }
        self.thread = thread
    }

    /// Runs what is already queued, then ends the thread and joins it. Waits still pending end
    /// `.failed(ECANCELED)` (and so do waits made from then on), and the tasks they resume run to
    /// their end first. Work posted after the thread has ended never runs: stop a loop once
    /// nothing will post to it any more.
    public func stop() {
        let wasRunning = inbox.withLock { inbox -> Bool in
            defer { inbox.stopping = true }
            return !inbox.stopping
        }
        guard wasRunning, started.load(ordering: .acquiring) else { return }
        wake()
        if !isCurrent { thread?.join() }
    }

    /// Whether the loop's thread has ended (`stop`): nothing posted to it runs any more.
    public var hasEnded: Bool { ended.load(ordering: .acquiring) }

    /// CLOCK_MONOTONIC in nanoseconds: the clock of every deadline given to a loop.
    public static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
    }

    /// How long the loop may sleep, in `epoll_wait`'s milliseconds, before `deadline` (rounded
    /// up, so a wait never wakes a little early; 0 once it has passed). Also for `onEveryTurn` hooks.
    public static func milliseconds(until deadline: UInt64, from now: UInt64) -> Int32 {
        deadline <= now ? 0 : Int32(clamping: (deadline - now) / 1_000_000 + 1)
    }

    /// The loop whose thread the caller runs on, if any.
    public static var current: EventLoop? {
        pthread_getspecific(currentLoopKey).map { Unmanaged<EventLoop>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Whether the caller runs on this loop's thread.
    public var isCurrent: Bool { threadID.load(ordering: .relaxed) == UInt(bitPattern: Int(bitPattern: UInt(pthread_self()))) }

    // MARK: Executing

    public func enqueue(_ job: consuming ExecutorJob) {
        post(.job(UnownedJob(job)))
    }

    public func asUnownedTaskExecutor() -> UnownedTaskExecutor { UnownedTaskExecutor(ordinary: self) }

    /// Runs `body` on the loop's thread, after what is already queued.
    public func execute(_ body: @escaping @Sendable () -> Void) {
        post(.closure(body))
    }

    private func post(_ work: Work) {
        let first = inbox.withLock { inbox -> Bool in
            inbox.work.append(work)
            return inbox.work.count == 1
        }
        // Only the first item of a batch wakes the thread: it drains the whole inbox at once.
        if first, !isCurrent { wake() }
    }

    private func wake() {
        var one: UInt64 = 1
        _ = write(wakeDescriptor, &one, 8)
    }

    // MARK: Calls that block

    /// Runs `work` on a thread of its own and resumes the calling task with its result, so a call
    /// that blocks (opening a database connection: libpq's connect, with its `connect_timeout` per
    /// host of a multi-host URL, which its non-blocking form leaves to the caller) does not stop
    /// the loop. A task with this loop as its executor preference resumes on the loop.
    public static func offload<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withUnsafeContinuation { continuation in
            let call: @Sendable () -> Void = { continuation.resume(returning: work()) }
            // No thread to be had: the call runs here, as it did before it could be offloaded.
            if startThread(detached: true, call) == nil { call() }
        }
    }

    // MARK: Waiting on sockets (loop thread only)

    /// Suspends the calling task until `descriptor` is readable or `deadline` (monotonic
    /// nanoseconds) passes. Call from a task running on this loop.
    public func readable(_ descriptor: Int32, until deadline: UInt64?) async -> Readiness {
        await wait(descriptor, events: EPOLLIN.rawValue, until: deadline)
    }

    /// The same for writable (a socket whose send buffer was full).
    public func writable(_ descriptor: Int32, until deadline: UInt64?) async -> Readiness {
        await wait(descriptor, events: EPOLLOUT.rawValue, until: deadline)
    }

    private func wait(_ descriptor: Int32, events: UInt32, until deadline: UInt64?) async -> Readiness {
        await withUnsafeContinuation { continuation in
            precondition(isCurrent, "EventLoop waits are made from a task running on the loop")
            guard !stopping else { return continuation.resume(returning: .failed(ECANCELED)) }
            guard waits[descriptor] == nil else { return continuation.resume(returning: .failed(EBUSY)) }
            guard arm(descriptor, events: events | EPOLLONESHOT.rawValue) else { return continuation.resume(returning: .failed(errno)) }
            waits[descriptor] = Wait(continuation: continuation, deadline: deadline)
        }
    }

    /// Registers `descriptor`, or re-arms it (a one-shot registration stays in the set disarmed;
    /// a descriptor closed and reused since has left it).
    private func arm(_ descriptor: Int32, events: UInt32) -> Bool {
        var event = epoll_event()
        event.events = events
        event.data.fd = descriptor
        if epoll_ctl(epollDescriptor, EPOLL_CTL_MOD, descriptor, &event) == 0 { return true }
        guard errno == ENOENT else { return false }
        return epoll_ctl(epollDescriptor, EPOLL_CTL_ADD, descriptor, &event) == 0
    }

    /// Takes `descriptor` out of the set: before it is closed by its owner, so a later descriptor
    /// with the same number is not mistaken for it.
    public func forget(_ descriptor: Int32) {
        precondition(isCurrent)
        _ = epoll_ctl(epollDescriptor, EPOLL_CTL_DEL, descriptor, nil)
        if let wait = waits.removeValue(forKey: descriptor) { wait.continuation.resume(returning: .failed(ECANCELED)) }
    }

    /// Calls `handler` on the loop's thread whenever `descriptor` is readable (level-triggered),
    /// until the loop stops. Call on the loop's thread (from `execute`).
    public func watch(_ descriptor: Int32, _ handler: @escaping () -> Void) {
        precondition(isCurrent)
        watchers[descriptor] = handler
        _ = arm(descriptor, events: EPOLLIN.rawValue)
    }

    /// Calls `tick` after every round of work; it returns how long the loop may then sleep at most
    /// in milliseconds (-1: no limit of its own). Call on the loop's thread.
    public func onEveryTurn(_ tick: @escaping () -> Int32) {
        precondition(isCurrent)
        ticks.append(tick)
    }

    // MARK: The thread

    private func run() {
        threadID.store(UInt(bitPattern: Int(bitPattern: UInt(pthread_self()))), ordering: .relaxed)
        pthread_setspecific(currentLoopKey, Unmanaged.passUnretained(self).toOpaque())
        let capacity = 64
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        while true {
            let (work, stop) = inbox.withLock { inbox in
                defer { inbox.work.removeAll(keepingCapacity: true) }
                return (inbox.work, inbox.stopping)
            }
            for item in work {
                switch item {
                case .job(let job): job.runSynchronously(on: asUnownedTaskExecutor())
                case .closure(let body): body()
                }
            }
            if stop {
                // Waits end now and later ones at once; the tasks they resume run here until
                // nothing is left to run.
                stopping = true
                let pending = waits
                waits.removeAll()
                for wait in pending.values { wait.continuation.resume(returning: .failed(ECANCELED)) }
                if work.isEmpty, pending.isEmpty {
                    ended.store(true, ordering: .releasing)
                    break
                }
                continue
            }
            var sleep: Int32 = -1
            for tick in ticks {
                let limit = tick()
                if limit >= 0, sleep < 0 || limit < sleep { sleep = limit }
            }
            let now = Self.monotonicNanoseconds()
            for wait in waits.values {
                guard let deadline = wait.deadline else { continue }
                let limit = Self.milliseconds(until: deadline, from: now)
                if sleep < 0 || limit < sleep { sleep = limit }
            }
            // Work posted from this thread (a continuation resumed by a watcher) must not wait.
            if inbox.withLock({ !$0.work.isEmpty || $0.stopping }) { sleep = 0 }
            let count = epoll_wait(epollDescriptor, events, Int32(capacity), sleep)
            if count < 0, errno != EINTR { fatalError("epoll_wait failed (errno \(errno))") }
            for index in 0..<max(0, Int(count)) {
                let descriptor = events[index].data.fd
                if descriptor == wakeDescriptor {
                    var value: UInt64 = 0
                    _ = read(wakeDescriptor, &value, 8)
                } else if let wait = waits.removeValue(forKey: descriptor) {
                    wait.continuation.resume(returning: .ready)
                } else if let watcher = watchers[descriptor] {
                    watcher()
                }
            }
            expireWaits()
        }
    }

    private func expireWaits() {
        let now = Self.monotonicNanoseconds()
        for (descriptor, wait) in waits {
            guard let deadline = wait.deadline, deadline <= now else { continue }
            waits[descriptor] = nil
            _ = epoll_ctl(epollDescriptor, EPOLL_CTL_DEL, descriptor, nil)
            wait.continuation.resume(returning: .timedOut)
        }
    }
}

/// Each loop thread's `EventLoop` (unretained: a loop outlives its thread).
private let currentLoopKey: pthread_key_t = {
    var key = pthread_key_t()
    precondition(pthread_key_create(&key, nil) == 0)
    return key
}()
