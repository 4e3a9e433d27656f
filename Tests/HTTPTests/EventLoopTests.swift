import EventLoop
import HTTP
import Glibc
import Synchronization
import Testing

@Suite("EventLoop: tasks, closures and socket waits on one thread")
struct EventLoopTests {
    /// A pipe whose ends close with the value.
    final class Pipe: @unchecked Sendable {
        let read: Int32
        let write: Int32
        init() {
            var ends: [Int32] = [0, 0]
            precondition(pipe(&ends) == 0)
            read = ends[0]
            write = ends[1]
            _ = fcntl(read, F_SETFL, fcntl(read, F_GETFL) | O_NONBLOCK)
        }
        deinit {
            close(read)
            close(write)
        }
    }

    @Test("a task that prefers the loop runs on its thread, before and after it suspends")
    func taskRunsOnTheLoop() async {
        let loop = EventLoop()
        loop.start()
        defer { loop.stop() }
        let pipe = Pipe()
        let (before, after, readiness) = await Task(executorPreference: loop) { () async -> (Bool, Bool, EventLoop.Readiness) in
            let before = EventLoop.current === loop && loop.isCurrent
            let writer = pipe.write
            spawnThread { usleep(20_000); var byte: UInt8 = 1; _ = Glibc.write(writer, &byte, 1) }.detach()
            let readiness = await loop.readable(pipe.read, until: nil)
            return (before, EventLoop.current === loop, readiness)
        }.value
        #expect(before)
        #expect(after)
        #expect(readiness == .ready)
    }

    @Test("a wait whose deadline passes ends timedOut, and the descriptor can be waited on again")
    func deadlinePasses() async {
        let loop = EventLoop()
        loop.start()
        defer { loop.stop() }
        let pipe = Pipe()
        let outcomes = await Task(executorPreference: loop) { () async -> [EventLoop.Readiness] in
            let soon = EventLoop.monotonicNanoseconds() + 30_000_000
            let first = await loop.readable(pipe.read, until: soon)
            var byte: UInt8 = 7
            _ = write(pipe.write, &byte, 1)
            let second = await loop.readable(pipe.read, until: EventLoop.monotonicNanoseconds() + 5_000_000_000)
            return [first, second]
        }.value
        #expect(outcomes == [.timedOut, .ready])
    }

    @Test("closures from other threads run on the loop, in the order each thread posted them")
    func closuresFromOtherThreads() async {
        let loop = EventLoop()
        loop.start()
        defer { loop.stop() }
        let seen = Mutex<[Int]>([])
        let offLoop = Atomic<Int>(0)
        let done = Atomic<Int>(0)
        for n in 0..<200 {
            loop.execute {
                if !loop.isCurrent { offLoop.add(1, ordering: .relaxed) }
                seen.withLock { $0.append(n) }
                done.add(1, ordering: .relaxed)
            }
        }
        while done.load(ordering: .relaxed) < 200 { usleep(1000) }
        #expect(offLoop.load(ordering: .relaxed) == 0)
        #expect(seen.withLock { $0 } == Array(0..<200))
    }

    @Test("stopping ends a pending wait with failed(ECANCELED)")
    func stopCancelsWaits() async {
        let loop = EventLoop()
        loop.start()
        let pipe = Pipe()
        let waiting = Task(executorPreference: loop) { await loop.readable(pipe.read, until: nil) }
        usleep(20_000)
        loop.stop()
        #expect(await waiting.value == .failed(ECANCELED))
    }
}

/// `/loop/…` answered on the event loop (after a wait on it), everything else by the router on a worker.
private struct LoopEcho: LoopResponder {
    let router: Router = {
        var router = Router()
        router.get("/worker") { _, _ in .text("worker:\(EventLoop.current != nil)") }
        return router
    }()

    func respond(to request: Request) -> Response { router.respond(to: request) }

    func respondOnLoop(to request: Request) async -> Response? {
        guard request.path.hasPrefix("/loop/"), let loop = EventLoop.current else { return nil }
        let pipe = EventLoopTests.Pipe()
        var byte: UInt8 = 1
        _ = write(pipe.write, &byte, 1)
        let readiness = await loop.readable(pipe.read, until: EventLoop.monotonicNanoseconds() + 5_000_000_000)
        return .text("loop:\(EventLoop.current === loop):\(readiness == .ready):\(request.path.dropFirst(6))")
    }
}

@Suite("HTTPServer with event loops")
struct LoopServerTests {
    @Test("a LoopResponder's requests are answered on their loop, the rest on workers, over many connections at once")
    func loopAndWorkerRequests() throws {
        let server = try HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadPoolSize: 2, eventLoops: 2), responder: LoopEcho())
        defer { server.stop() }
        let failures = Mutex<[String]>([])
        let port = server.port
        let threads = (0..<8).map { thread in
            spawnThread {
                let client = HTTPClient(host: "127.0.0.1", port: port)
                for n in 0..<25 {
                    do {
                        let onLoop = try client.send(method: "GET", path: "/loop/\(thread)-\(n)")
                        if onLoop.status != 200 || onLoop.text != "loop:true:true:\(thread)-\(n)" {
                            failures.withLock { $0.append("loop \(onLoop.status) \(onLoop.text)") }
                        }
                        let onWorker = try client.send(method: "GET", path: "/worker")
                        if onWorker.status != 200 || onWorker.text != "worker:false" {
                            failures.withLock { $0.append("worker \(onWorker.status) \(onWorker.text)") }
                        }
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                }
            }
        }
        for thread in threads { thread.join() }
        #expect(failures.withLock { $0 } == [])
        let missing = try HTTPClient(host: "127.0.0.1", port: port).send(method: "GET", path: "/nowhere")
        #expect(missing.status == 404)
    }

    @Test("stopping a server with loops returns, and its port is free again")
    func stops() throws {
        let server = try HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadPoolSize: 1, eventLoops: 2), responder: LoopEcho())
        let port = server.port
        #expect(try HTTPClient(host: "127.0.0.1", port: port).send(method: "GET", path: "/loop/x").status == 200)
        server.stop()
        let again = try HTTPServer(configuration: .init(host: "127.0.0.1", port: port, threadPoolSize: 1), responder: LoopEcho())
        again.stop()
    }
}
