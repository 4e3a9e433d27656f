import CMicroHTTPD
import EventLoop
import Synchronization

/// What the C callbacks reach through their `cls` pointer.
final class ServerCore: Sendable {
    let responder: any Responder
    /// The answers made on `loop` (nil: every request goes to a worker).
    let loopResponder: (any LoopResponder)?
    let maxBodyBytes: Int
    let largeBodies: [String: Int]
    let workers: WorkerPool
    let loop: EventLoop?
    /// Per-request contexts allocated and not yet freed (a leak check for tests).
    let liveExchanges = Atomic<Int>(0)
    /// Requests being answered on `loop` right now (stopping waits for them).
    let onLoop = Atomic<Int>(0)
    /// The daemon (bit pattern of its pointer) of a core with a loop, set once it has started.
    let daemon = Atomic<UInt>(0)

    init(responder: any Responder, loopResponder: (any LoopResponder)?, maxBodyBytes: Int, largeBodies: [String: Int],
         workers: WorkerPool, loop: EventLoop?) {
        self.responder = responder
        self.loopResponder = loop == nil ? nil : loopResponder
        self.maxBodyBytes = maxBodyBytes
        self.largeBodies = largeBodies
        self.workers = workers
        self.loop = loop
    }

    /// Answers `request`, whose connection is suspended: on the loop when its responder takes it
    /// there, else on the first free worker; resumes the connection with the answer.
    func dispatch(_ request: Request, _ exchange: Exchange, _ suspended: SuspendedConnection) {
        if let loop, let loopResponder {
            onLoop.add(1, ordering: .relaxed)
            Task(executorPreference: loop) {
                defer { self.onLoop.subtract(1, ordering: .releasing) }
                if let response = await loopResponder.respondOnLoop(to: request) {
                    if response.stream == nil { return self.deliver(response, exchange, suspended, onWorker: false) }
                    if self.workers.submit({ self.deliver(response, exchange, suspended, onWorker: true) }) { return }
                    return self.deliver(response, exchange, suspended, onWorker: false)
                }
                self.answerOnWorker(request, exchange, suspended)
            }
            return
        }
        answerOnWorker(request, exchange, suspended)
    }

    private func answerOnWorker(_ request: Request, _ exchange: Exchange, _ suspended: SuspendedConnection) {
        let answered = workers.submit { self.deliver(self.responder.respond(to: request), exchange, suspended, onWorker: true) }
        // Stopping: answered here, on the polling thread.
        if !answered { deliver(responder.respond(to: request), exchange, suspended, onWorker: false) }
    }

    /// Resumes a suspended connection. With a loop, on the loop's thread, which then runs the
    /// daemon (libmicrohttpd without its own thread has no other way to learn of it).
    func resume(_ suspended: SuspendedConnection) {
        guard let loop else { return MHD_resume_connection(suspended.pointer) }
        let daemon = DaemonPointer(bits: daemon.load(ordering: .acquiring))
        loop.execute {
            MHD_resume_connection(suspended.pointer)
            if let pointer = daemon.pointer { _ = MHD_run(pointer) }
        }
    }

    /// Hands `response` to the connection and resumes it; a streamed body is produced here, so
    /// only on a worker (nothing may wait on a polling thread or a loop for a client to read).
    func deliver(_ response: Response, _ exchange: Exchange, _ suspended: SuspendedConnection, onWorker: Bool) {
        guard let stream = response.stream else {
            exchange.answer.withLock { $0 = (response, nil) }
            return resume(suspended)
        }
        guard onWorker else {
            exchange.answer.withLock { $0 = (.problem(status: 503, code: "internal_error", detail: "The server is stopping."), nil) }
            return resume(suspended)
        }
        // The head goes out now; the body follows as the producer writes it (`StreamPipe`).
        let pipe = StreamPipe(resume: { self.resume(suspended) })
        exchange.answer.withLock { $0 = (response, pipe) }
        resume(suspended)
        do { try stream.produce(pipe.write); pipe.finish(failed: false) } catch { pipe.finish(failed: true) }
    }
}

/// Per-request state kept in libmicrohttpd's `con_cls` between access-handler calls; retained on
/// the first call, released in `requestCompleted`. Only touched by the polling thread, except
/// `answer`, which a worker fills while the connection is suspended.
final class Exchange: @unchecked Sendable {
    var headers: [(String, String)] = []
    var body: [UInt8] = []
    /// Upload bytes seen so far, kept or not.
    var received = 0
    /// The body outgrew the limit: the rest is read and dropped, then 413 is sent.
    var overflowed = false
    var responded = false
    /// This request's body limit (`maxBodyBytes`, or its route's entry in `largeBodies`).
    var limit = 0
    /// The responder's answer, from the worker to the polling thread (taken once), with the pipe
    /// of a streamed body.
    let answer = Mutex<(Response, StreamPipe?)?>(nil)
}

/// A suspended connection, handed to the one worker (or task) that resumes it.
struct SuspendedConnection: @unchecked Sendable {
    let pointer: OpaquePointer
}


/// A daemon pointer carried to a loop by value.
struct DaemonPointer: @unchecked Sendable {
    let bits: UInt
    var pointer: OpaquePointer? { OpaquePointer(bitPattern: bits) }
}
