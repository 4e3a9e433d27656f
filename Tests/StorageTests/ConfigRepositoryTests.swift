import Foundation
import JSON
import PostgreSQL
import Storage
import Synchronization
import Testing

@Suite struct ConfigRepositoryTests {
    static let origins = AppOriginAudit(added: AuditTemplate(actor: "test", action: "origin.added", detail: ["source": "app"]),
                                        removed: AuditTemplate(actor: "test", action: "origin.removed", detail: ["source": "app"]))

    @Test func originsAddOnceRemoveOnce() throws {
        let s = try TestDatabase.scratch()
        let config = s.database.config
        #expect(try config.addOrigin("https://a.example", source: "admin", audit: Fixture.audit("origin.added")))
        #expect(try !config.addOrigin("https://a.example", source: "admin", audit: Fixture.audit("origin.added")))
        #expect(try config.origins().map(\.origin) == ["https://a.example"])
        #expect(try config.removeOrigin("https://a.example", audit: Fixture.audit("origin.removed")))
        #expect(try !config.removeOrigin("https://a.example", audit: Fixture.audit("origin.removed")))
        #expect(try s.auditActions() == ["origin.added", "origin.removed"])
    }

    @Test func appsKeepTheirOriginsInLine() throws {
        let s = try TestDatabase.scratch()
        let config = s.database.config
        var android = AppRecord(rpId: "example.com", platform: "android", appId: "com.example", fingerprints: ["fp1"])
        #expect(try config.putApp(android, created: Fixture.audit("app.added"), updated: Fixture.audit("app.updated"), origins: Self.origins) == .created)
        #expect(try config.putApp(android, created: Fixture.audit("app.added"), updated: Fixture.audit("app.updated"), origins: Self.origins) == .unchanged)
        #expect(try config.origins().map(\.origin) == ["android:apk-key-hash:fp1"])
        android.fingerprints = ["fp2"]
        // The change, its audit lines and the origins' sync: one round trip, no transaction control.
        let (updated, work) = try PostgresDeadline.within(seconds: 5, tracing: true) {
            try config.putApp(android, created: Fixture.audit("app.added"), updated: Fixture.audit("app.updated"), origins: Self.origins)
        }
        #expect(updated == .updated)
        #expect(work.counts == RoundTripCounts(writes: 1), "\(work.statements)")
        #expect(try config.origins().map { "\($0.origin) \($0.source)" } == ["android:apk-key-hash:fp2 app"])
        #expect(try config.apps(rpId: "example.com").map(\.fingerprints) == [["fp2"]])
        #expect(try config.apps(rpId: "other.example").isEmpty)
        let (removed, removal) = try PostgresDeadline.within(seconds: 5, tracing: true) {
            try config.removeApp(rpId: "example.com", platform: "android", appId: "com.example", audit: Fixture.audit("app.removed"),
                                 origins: Self.origins)
        }
        #expect(removed)
        #expect(removal.counts == RoundTripCounts(writes: 1), "\(removal.statements)")
        #expect(try !config.removeApp(rpId: "example.com", platform: "android", appId: "com.example", audit: Fixture.audit("app.removed"),
                                      origins: Self.origins))
        #expect(try config.origins().isEmpty)
        let entries = try s.database.audit.entries(limit: 100, before: nil).reversed().map { "\($0.action) \($0.subject ?? "")" }
        #expect(Array(entries) == ["app.added ", "origin.added android:apk-key-hash:fp1", "app.updated ",
                                   "origin.added android:apk-key-hash:fp2", "origin.removed android:apk-key-hash:fp1",
                                   "app.removed ", "origin.removed android:apk-key-hash:fp2"])
    }

    /// Two app changes at once that need the same origin — one app going, another coming with the
    /// same signing key — each leave it as the apps after both need it: each change's statement
    /// reads the apps only once the changes before it committed.
    @Test func concurrentAppChangesNeverMissEachOthersOrigins() throws {
        let s = try TestDatabase.scratch()
        let config = s.database.config
        let app: @Sendable (String) -> AppRecord = { AppRecord(rpId: "example.com", platform: "android", appId: $0, fingerprints: ["shared"]) }
        for round in 0..<8 {
            let (going, coming) = ("com.example.a\(round)", "com.example.b\(round)")
            _ = try config.putApp(app(going), created: Fixture.audit("app.added"), updated: Fixture.audit("app.updated"), origins: Self.origins)
            let failures = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 2) { i in
                do {
                    if i == 0 {
                        _ = try config.removeApp(rpId: "example.com", platform: "android", appId: going, audit: Fixture.audit("app.removed"),
                                                 origins: Self.origins)
                    } else {
                        _ = try config.putApp(app(coming), created: Fixture.audit("app.added"), updated: Fixture.audit("app.updated"),
                                              origins: Self.origins)
                    }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
            #expect(failures.withLock { $0 }.isEmpty)
            #expect(try config.origins().map(\.origin) == ["android:apk-key-hash:shared"], "round \(round)")
            _ = try config.removeApp(rpId: "example.com", platform: "android", appId: coming, audit: Fixture.audit("app.removed"),
                                     origins: Self.origins)
            #expect(try config.origins().isEmpty, "round \(round)")
        }
    }

    @Test func watchSeesChangesFromAnyConnection() async throws {
        let s = try TestDatabase.scratch()
        let calls = Atomic(0)
        let watch = s.database.config.watch { calls.add(1, ordering: .relaxed) }
        try await waitUntil { watch.isListening && calls.load(ordering: .relaxed) >= 1 }  // one call on connect
        let before = calls.load(ordering: .relaxed)
        _ = try s.database.config.addOrigin("https://watched.example", source: "admin", audit: Fixture.audit("origin.added"))
        try await waitUntil { calls.load(ordering: .relaxed) > before }
        watch.stop()
        try await waitUntil { !watch.isListening }  // its connection closed before the database is dropped
    }

    @Test func theOutboxWakeUpsShareTheChangeFeedsConnection() async throws {
        let s = try TestDatabase.scratch()
        let woken = Mutex<[Set<OutboxChannel>]>([])
        let changes = Atomic(0)
        let watch = s.database.config.watch(also: [OutboxRepository.wakeUps { channels in woken.withLock { $0.append(channels) } }]) {
            changes.add(1, ordering: .relaxed)
        }
        // On connect: every channel (a notification may have been missed while nobody listened).
        try await waitUntil { watch.isListening && woken.withLock { $0 } == [Set(OutboxChannel.allCases)] }
        let listeners = try s.count("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%LISTEN%'")
        #expect(listeners == 1, "one LISTEN session for both feeds")
        try s.database.outbox.append([OutboxEvent(id: TestDatabase.uniqueName("evt"), type: .mailMessage, accountId: "a", data: .object([]),
                                                  fanOut: [.direct(channel: .mail, target: "m1")], maxAgeSeconds: 60, createdAt: Date())])
        try await waitUntil { woken.withLock { $0.count } == 2 }
        #expect(woken.withLock { $0.last } == [.mail])
        #expect(changes.load(ordering: .relaxed) == 1, "an outbox write is no config change")
        watch.stop()
        try await waitUntil { !watch.isListening }
    }

    @Test func noListenBehindATransactionPoolerWithoutAListenURL() async throws {
        let s = try TestDatabase.scratch(pooler: .transaction)
        let watch = s.database.config.watch {}
        try await Task.sleep(for: .milliseconds(300))
        #expect(!watch.isListening)
        watch.stop()
    }

    private func waitUntil(seconds: Double = 10, _ condition: () -> Bool) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            guard Date() < deadline else { Issue.record("timed out"); return }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}
