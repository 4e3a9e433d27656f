import Crypto
import Foundation
@testable import LatchkeyServer
import Storage
import Synchronization
import Testing
import Transparency

/// `TransparencyLog` over the in-memory store, with no socket and no database: integration in
/// batches, a receipt's proof, the checkpoint against the key, the refusals of start-up.
@Suite struct TransparencyLogServiceTests {
    static func makeLog(_ store: InMemoryTransparencyLogStore, kek: Bool = true, batch: Int = 7) -> TransparencyLog {
        var c = Configuration()
        c.rpId = "rp.example"
        c.keyEncryptionKey = kek ? TestDatabase.keyEncryptionKey : nil
        var settings = TransparencyLog.Settings(c)
        settings.batchLimit = batch
        return TransparencyLog(store: store, sealer: SecretSealer(configuration: c), settings: settings, metrics: Metrics(), runtime: .system)
    }

    @Test func integratesInBatchesAndProves() throws {
        let store = InMemoryTransparencyLogStore()
        let log = Self.makeLog(store)
        try log.prepare()
        let key = try log.verifierKey()
        #expect(key.hasPrefix("rp.example/latchkey/receipts+"))
        var documents: [String: [UInt8]] = [:]
        for i in 0..<20 {
            let id = "r\(i)", doc = Array("{\"id\":\"\(id)\"}".utf8)
            documents[id] = doc
            store.addReceipt(id: id, userId: i % 2 == 0 ? "u1" : "u2", document: doc, commitment: Digest.sha256(doc), at: Date(timeIntervalSince1970: Double(i)))
        }
        // 20 waiting, 7 a batch: three integrations, then nothing to do.
        var sizes: [UInt64] = []
        while let done = try log.integrate() { sizes.append(done.checkpoint.size) }
        #expect(sizes == [7, 14, 20])
        let opened = try Checkpoint.open(try log.checkpoint(), logKey: try VerifierKey(parsing: key))
        #expect(opened.checkpoint.size == 20)
        for (id, doc) in documents {
            let owner = Int(id.dropFirst())! % 2 == 0 ? "u1" : "u2"
            let found = try log.receipt(id: id, userId: owner, minWitnesses: 0)
            #expect(found.document == doc)
            let checks = TlogProofVerifier.verify(proofText: try #require(found.proof), commitment: Digest.sha256(doc), logKey: key)
            #expect(checks.allSatisfy { $0.passed }, "\(id): \(checks)")
            #expect(throws: ServiceError.self) { try log.receipt(id: id, userId: owner == "u1" ? "u2" : "u1", minWitnesses: 0) }
        }
        // Oldest first: entry i is receipt r<i>.
        let bundle = try EntryBundle.decode(try log.tile(TilePath(level: nil, index: 0, width: 20)))
        #expect(bundle == (0..<20).map { Digest.sha256(documents["r\($0)"]!) })
        #expect(throws: ServiceError.self) { try log.tile(TilePath(level: nil, index: 0, width: 21)) }
        // A receipt from before documents: not found, with where to read it.
        store.addReceipt(id: "old", userId: "u1", document: nil, commitment: nil, at: Date())
        #expect(throws: ServiceError.self) { try log.receipt(id: "old", userId: "u1", minWitnesses: 0) }
    }

    @Test func offWithoutAKEKAndRefusesARolledBackTree() throws {
        let store = InMemoryTransparencyLogStore()
        let off = Self.makeLog(store, kek: false)
        try off.prepare()
        #expect(try store.state() == nil, "no key is made, sealed or not")
        #expect(throws: ServiceError.self) { try off.checkpoint() }
        #expect(try off.integrate() == nil)

        let log = Self.makeLog(store)
        try log.prepare()
        store.addReceipt(id: "a", userId: "u", document: [1], commitment: Digest.sha256([1]), at: Date())
        try log.integrate()
        store.tables.withLock { t in
            let s = t.state!
            t.state = .init(origin: s.origin, publicKey: s.publicKey, sealedKey: s.sealedKey, size: 0, signedSize: 1)
        }
        #expect(throws: TransparencyLog.Refusal.self) { try Self.makeLog(store).prepare() }
        // A key sealed under another KEK does not open: refused, never replaced.
        store.tables.withLock { t in
            let s = t.state!
            t.state = .init(origin: s.origin, publicKey: s.publicKey, sealedKey: Array(s.sealedKey.dropLast()) + [s.sealedKey.last! ^ 1], size: 1, signedSize: 1)
        }
        #expect(throws: TransparencyLog.Refusal.self) { try Self.makeLog(store).prepare() }
    }
}
