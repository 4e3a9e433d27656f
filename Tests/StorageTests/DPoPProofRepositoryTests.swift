import Foundation
import PostgreSQL
import PostgreSQLTesting
import Storage
import Synchronization
import Testing

/// A DPoP proof is accepted once on every instance: its record is the request's one write, and a
/// second record of the same key returns nothing.
@Suite struct DPoPProofRepositoryTests {
    @Test func aProofIsRecordedOnce() throws {
        let s = try TestDatabase.scratch()
        let key = DPoPReplayKey(Fixture.bytes(32))
        #expect(try s.database.dpopProofs.record(key))
        #expect(try !s.database.dpopProofs.record(key), "a replay")
        #expect(try s.database.dpopProofs.record(DPoPReplayKey(Fixture.bytes(32))), "another proof")
    }

    @Test func anotherInstanceRefusesTheReplay() throws {
        let s = try TestDatabase.scratch()
        // A second Database on the same PostgreSQL: another instance's pools.
        let other = Database(url: s.url, connections: 2)
        let key = DPoPReplayKey(Fixture.bytes(32))
        #expect(try other.dpopProofs.record(key))
        #expect(try !s.database.dpopProofs.record(key))
    }

    @Test func concurrentRecordsOfOneProofLetOneThrough() throws {
        let s = try TestDatabase.scratch()
        let key = DPoPReplayKey(Fixture.bytes(32))
        let winners = Atomic(0)
        let errors = onThreads(12) { _ in
            if try s.database.dpopProofs.record(key) { winners.add(1, ordering: .relaxed) }
        }
        #expect(errors.isEmpty)
        #expect(winners.load(ordering: .relaxed) == 1)
    }

    @Test func anExpiredRecordNoLongerCountsAndIsPurged() throws {
        let s = try TestDatabase.scratch()
        let key = DPoPReplayKey(Fixture.bytes(32)), old = DPoPReplayKey(Fixture.bytes(32))
        #expect(try s.database.dpopProofs.record(key))
        #expect(try s.database.dpopProofs.record(old))
        // Age one record past its window, as 120 s would.
        _ = try s.connect().execute("UPDATE dpop_proofs SET expires_at = now() - interval '1 second' WHERE key = \(old.bytes)")
        try s.database.dpopProofs.purgeExpired()
        #expect(try s.count("SELECT count(*) AS n FROM dpop_proofs") == 1)
        #expect(try !s.database.dpopProofs.record(key), "the live one is still refused")
        #expect(try s.database.dpopProofs.record(old), "the purged one is a new record")
        _ = try s.connect().execute("UPDATE dpop_proofs SET expires_at = now() - interval '1 second' WHERE key = \(old.bytes)")
        #expect(try s.database.dpopProofs.record(old), "an expired record is renewed, not a refusal")
        #expect(try !s.database.dpopProofs.record(old))
    }

    @Test func theKeyIs32Bytes() throws {
        let s = try TestDatabase.scratch()
        #expect(throws: (any Error).self) { try s.database.dpopProofs.record(DPoPReplayKey([1, 2, 3])) }
    }
}
