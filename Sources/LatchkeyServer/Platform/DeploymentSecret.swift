import Storage
import Synchronization

/// A per-deployment secret shared by every instance (created once in PostgreSQL by whichever
/// instance needs it first), read on first use and then kept in memory.
final class DeploymentSecret: Sendable {
    let name: String
    let keys: any DeploymentSecretSource
    let runtime: Runtime
    private let cached = Mutex<[UInt8]?>(nil)

    init(name: String, keys: any DeploymentSecretSource, runtime: Runtime) {
        self.name = name
        self.keys = keys
        self.runtime = runtime
    }

    func value() throws(ServiceError) -> [UInt8] {
        if let hit = cached.withLock({ $0 }) { return hit }
        let random = runtime.random
        let secret = try storage { () throws(StorageError) in try keys.secret(named: name, candidate: random(32)) }
        guard secret.count == 32 else { throw ServiceError(.internalError, "deployment secret \(name) is unreadable") }
        cached.withLock { $0 = secret }
        return secret
    }
}

/// Where deployment secrets are kept: `KeyRepository` (table `server_secrets`), or a test's memory.
protocol DeploymentSecretSource: Sendable {
    /// The secret named `name`, stored as `candidate` when there is none yet.
    func secret(named name: String, candidate: [UInt8]) throws(StorageError) -> [UInt8]
}

extension KeyRepository: DeploymentSecretSource {}
