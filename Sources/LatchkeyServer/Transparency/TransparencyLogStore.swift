import Storage

/// What the transparency log reads and writes (migration 26, and the receipts' queue of migration
/// 25), each operation one transaction or one query.
protocol TransparencyLogStore: Sendable {
    typealias LogState = TransparencyLogRepository.LogState
    typealias NodeHash = TransparencyLogRepository.NodeHash
    typealias Queued = TransparencyLogRepository.Queued
    typealias Append = TransparencyLogRepository.Append
    typealias Served = TransparencyLogRepository.Served
    typealias ReceiptWithProof = TransparencyLogRepository.ReceiptWithProof

    func state() throws(StorageError) -> LogState?
    func create(origin: String, publicKey: [UInt8], sealedKey: [UInt8]) throws(StorageError) -> LogState
    /// One integration under the writers' lock (nil: another instance holds it, or nothing to do).
    func integrate(limit: Int, build: (LogState, [NodeHash], [Queued]) throws -> Append?) throws(StorageError) -> Append?
    func newestCheckpoint() throws(StorageError) -> Served?
    func nodes(level: Int, start: Int64, count: Int) throws(StorageError) -> [[UInt8]]
    func entries(start: Int64, count: Int) throws(StorageError) -> [[UInt8]]
    func receipt(id: String, userId: String?, minWitnesses: Int) throws(StorageError) -> ReceiptWithProof?
    func nodes(_ wanted: [(level: Int, index: Int64)]) throws(StorageError) -> [NodeHash]
    func witnessSize(origin: String, witness: String) throws(StorageError) -> Int64
    func recordCosignature(origin: String, size: Int64, witness: String, lines: String) throws(StorageError)
    func recordWitnessSize(origin: String, witness: String, size: Int64) throws(StorageError)
}

extension TransparencyLogRepository: TransparencyLogStore {}
