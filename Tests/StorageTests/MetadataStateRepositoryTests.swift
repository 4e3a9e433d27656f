import Foundation
import PostgreSQL
import Storage
import Synchronization
import Testing

/// SPEC "Authenticator metadata": a BLOB's `no` must not be lower than the last BLOB accepted, kept
/// in PostgreSQL (migration 13), per signing root, and only ever raised — in one statement.
@Suite struct MetadataStateRepositoryTests {
    static func root() -> [UInt8] { Fixture.bytes(32) }

    @Test func theFirstBLOBIsAcceptedAndRecorded() throws {
        let s = try TestDatabase.scratch()
        let root = Self.root()
        #expect(try s.database.metadataState.lastAccepted(root: root) == nil)
        #expect(try s.database.metadataState.accept(number: 7, root: root) == .accepted)
        #expect(try s.database.metadataState.lastAccepted(root: root)?.number == 7)
    }

    @Test func theSameNumberAgainIsAccepted_aHigherOneRaisesIt() throws {
        let s = try TestDatabase.scratch()
        let root = Self.root()
        #expect(try s.database.metadataState.accept(number: 7, root: root) == .accepted)
        #expect(try s.database.metadataState.accept(number: 7, root: root) == .accepted, "the same BLOB after a restart")
        #expect(try s.database.metadataState.accept(number: 8, root: root) == .accepted)
        #expect(try s.database.metadataState.lastAccepted(root: root)?.number == 8)
    }

    @Test func aLowerNumberIsARollbackAndLeavesTheStoredOne() throws {
        let s = try TestDatabase.scratch()
        let root = Self.root()
        _ = try s.database.metadataState.accept(number: 42, root: root)
        let at = try #require(try s.database.metadataState.lastAccepted(root: root)).at
        for older in [41, 7, 0] {
            #expect(try s.database.metadataState.accept(number: older, root: root) == .rollback(lastAccepted: 42))
        }
        let stored = try #require(try s.database.metadataState.lastAccepted(root: root))
        #expect(stored.number == 42 && stored.at == at, "a refused BLOB changes nothing")
    }

    @Test func eachRootKeepsItsOwnNumber() throws {
        let s = try TestDatabase.scratch()
        let (fido, other) = (Self.root(), Self.root())
        _ = try s.database.metadataState.accept(number: 90, root: fido)
        #expect(try s.database.metadataState.accept(number: 3, root: other) == .accepted)
        #expect(try s.database.metadataState.accept(number: 89, root: fido) == .rollback(lastAccepted: 90))
        #expect(try s.database.metadataState.lastAccepted(root: other)?.number == 3)
    }

    @Test func theKeyMustBeASHA256() throws {
        let s = try TestDatabase.scratch()
        #expect(throws: StorageError.self) { try s.database.metadataState.accept(number: 1, root: [1, 2, 3]) }
    }

    /// Many instances loading at once: the stored number ends at the highest offered (a last-writer-wins
    /// update would leave whichever came last), the highest is never refused, and a refusal names a
    /// number that was really offered above it.
    @Test func concurrentLoadsNeverMoveItBackwards() throws {
        let s = try TestDatabase.scratch()
        let root = Self.root()
        let instances = (0..<4).map { _ in Database(url: s.url, connections: 2) }
        defer { for d in instances { d.shutdown() } }
        let offers = (0..<64).map { _ in Int.random(in: 0...1000) }
        let outcomes = Mutex<[(offered: Int, outcome: MetadataBLOBAcceptance)]>([])
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: offers.count) { i in
            do {
                let outcome = try instances[i % instances.count].metadataState.accept(number: offers[i], root: root)
                outcomes.withLock { $0.append((offers[i], outcome)) }
            } catch { failures.withLock { $0.append("\(error)") } }
        }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
        let top = offers.max()!
        #expect(try s.database.metadataState.lastAccepted(root: root)?.number == top)
        for (offered, outcome) in outcomes.withLock({ $0 }) {
            switch outcome {
            case .accepted: #expect(offered <= top)
            case .rollback(let last): #expect(last > offered && last <= top)
            }
        }
        #expect(!outcomes.withLock { $0 }.contains { $0.offered == top && $0.outcome != .accepted }, "the highest is never refused")
    }
}
