import CEpoll
import Glibc

/// A thread started by `startThread`, to be joined once.
public struct StartedThread: Sendable {
    fileprivate let handle: pthread_t

    /// Waits for the thread to end.
    public func join() { pthread_join(handle, nil) }

    /// Lets the thread end on its own, never to be joined.
    public func detach() { pthread_detach(handle) }
}

/// Starts `body` on a new POSIX thread: joinable (the caller joins what it gets back) or
/// `detached`. Nil when the system would not start one. The one place a thread is made: an event
/// loop's, a worker's, the short-lived one of `EventLoop.offload`, and the CLI's and the tests'
/// `spawnThread`.
@discardableResult
public func startThread(detached: Bool = false, _ body: @escaping @Sendable () -> Void) -> StartedThread? {
    let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    if detached { pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED)) }
    var thread = pthread_t()
    guard pthread_create(&thread, &attributes, { raw in
        Unmanaged<ThreadBody>.fromOpaque(raw!).takeRetainedValue().run()
        return nil
    }, context) == 0 else {
        Unmanaged<ThreadBody>.fromOpaque(context).release()
        return nil
    }
    return StartedThread(handle: thread)
}

/// What `startThread` hands its thread.
private final class ThreadBody: Sendable {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}
