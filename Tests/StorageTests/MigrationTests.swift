import Foundation
import PostgreSQL
import PostgreSQLTesting
import Storage
import Synchronization
import Testing

@Suite struct MigrationTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources/Storage/Migrations")

    /// Numbers run 1…N in order, one file each (a gap would be a migration lost in a merge), except
    /// the numbers another branch has reserved, which must not be taken here.
    @Test func numberedOneToNWithoutGaps() {
        let versions = LatchkeyMigrations.all.map(\.version)
        let top = versions.last ?? 0
        #expect(versions == Array(1...top).filter { !LatchkeyMigrations.reserved.contains($0) })
        #expect(LatchkeyMigrations.reserved.allSatisfy { $0 < top && !versions.contains($0) },
                "a reserved version is taken or past the last one: drop it from LatchkeyMigrations.reserved")
    }

    @Test func listMatchesTheFilesInTheFolder() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.folder.path).filter { $0.hasSuffix(".sql") }.sorted()
        #expect(LatchkeyMigrations.all.map(\.file) == files)
        for m in LatchkeyMigrations.all {
            #expect(m.file.hasPrefix(String(repeating: "0", count: 4 - String(m.version).count) + "\(m.version)_"))
            // The embedded text is the file, byte for byte.
            let onDisk = try String(contentsOf: Self.folder.appendingPathComponent(m.file), encoding: .utf8)
            #expect(m.sql == onDisk, "\(m.file) differs from its embedded copy")
        }
    }

    @Test func appliedOnceThenNothing() throws {
        let s = try TestDatabase.scratch(migrated: false)
        #expect(try s.database.migrate() == LatchkeyMigrations.all.map(\.version))
        #expect(try s.database.migrate() == [])
        let recorded = try s.connect().query("SELECT version, name FROM schema_migrations ORDER BY version")
        #expect(try recorded.map { try $0.int("version") } == LatchkeyMigrations.all.map(\.version))
        #expect(try recorded.map { try $0.string("name") } == LatchkeyMigrations.all.map(\.name))
    }

    @Test func concurrentMigrationsApplyEachVersionOnce() throws {
        let s = try TestDatabase.scratch(migrated: false)
        let applied = Mutex<[Int]>([])
        let errors = onThreads(4) { _ in
            let other = Database(url: s.url, connections: 1)
            defer { other.shutdown() }
            let versions = try other.migrate()
            applied.withLock { $0 += versions }
        }
        #expect(errors.isEmpty)
        #expect(applied.withLock { $0.sorted() } == LatchkeyMigrations.all.map(\.version))
    }

    /// 0004: challenges keep the core's state bytes; the policy column is gone.
    @Test func challengesCarryStateNotPolicy() throws {
        let s = try TestDatabase.scratch()
        let columns = try s.connect().query("""
            SELECT column_name, data_type, is_nullable FROM information_schema.columns
            WHERE table_name = 'challenges' ORDER BY column_name
            """)
        let byName = Dictionary(uniqueKeysWithValues: try columns.map { (try $0.string("column_name"), try $0.string("data_type")) })
        #expect(byName["state"] == "bytea")
        #expect(byName["policy"] == nil)
    }
}
