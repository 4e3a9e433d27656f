import Foundation
import Tokens
import Storage
import Synchronization

/// Whether this instance has finished its start-up steps; until then `/readyz` answers 503 with
/// `reason` and every other route 503 (`Application`), while `/healthz` answers 200 throughout.
public final class StartupState: Sendable {
    private let state = Mutex<String?>("starting")

    /// Nil once started; else what start-up is waiting for.
    public var pendingReason: String? { state.withLock { $0 } }
    public var isReady: Bool { pendingReason == nil }
    /// What a client is told while start-up waits: the step only, not the database's message after
    /// the first `:` (which may name hosts; the log has it whole).
    public var pendingStep: String? { pendingReason.map { String($0.prefix { $0 != ":" }) } }

    func waiting(_ reason: String) { state.withLock { $0 = reason } }
    func finished() { state.withLock { $0 = nil } }
}

extension Services {
    /// One start-up step (after the configuration check), in `start()`'s order.
    struct StartStep {
        let name: String
        let run: () throws -> Void
    }

    var startSteps: [StartStep] {
        [
            StartStep(name: "migrate") { _ = try self.migrate() },
            StartStep(name: "seed origins") { try self.seedOrigins() },
            StartStep(name: "signing keys") { try self.prepareSigningKeys() },
            StartStep(name: "attestation trust") { try self.loadAttestationTrust() },
            StartStep(name: "change feed") { self.startChangeFeed() },
            StartStep(name: "revocation feed") { try self.startRevocationFeed() },
            StartStep(name: "metadata") { self.loadMetadata() },
            StartStep(name: "outbox") { self.startOutbox() },
            StartStep(name: "transparency log") { try self.startTransparencyLog() },
        ]
    }

    /// `serve`'s start-up when the database may not be reachable yet (an instance started in the
    /// middle of a failover): the configuration is checked here (a bad one throws at once), then
    /// the steps run on a thread of their own while the caller listens. A step that fails because
    /// the database is unreachable, read-only or timed out is retried with backoff (the migrator's
    /// advisory lock makes a retried migration safe); `startup` says what it waits for. A failure
    /// that waiting cannot mend (a wrong key-encryption key, unreadable attestation roots) goes to
    /// `onFatal`; `onReady` runs once every step is done.
    public func startInBackground(onReady: @escaping @Sendable () -> Void,
                                  onFatal: @escaping @Sendable (any Error) -> Void) throws {
        try validateConfiguration()
        let thread = Thread { [self] in
            var backoff = 0.2
            var index = 0
            let steps = self.startSteps
            while index < steps.count {
                do {
                    try steps[index].run()
                    index += 1
                    backoff = 0.2
                } catch where Self.isDatabaseWait(error) {
                    self.startup.waiting("waiting for the database (\(steps[index].name)): \(error)")
                    Thread.sleep(forTimeInterval: backoff)
                    backoff = min(backoff * 2, 2)
                } catch {
                    onFatal(error)
                    return
                }
            }
            self.startup.finished()
            onReady()
        }
        thread.name = "latchkey-startup"
        thread.start()
    }

    /// The database was unreachable, timed out or is read-only: waiting mends it.
    static func isDatabaseWait(_ error: any Error) -> Bool {
        switch error {
        case let e as StorageError: if case .unavailable = e { return true }; return false
        case let e as SigningKeyError: return e.code == .storage
        case let e as ServiceError: return e.code == .internalError
        default: return false
        }
    }
}
