import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage
import Synchronization

/// `AdminService`, `WellKnownService` and `WebhookService` over the in-memory stores
/// (`InMemoryAdminTables`), on a clock the test steps and randomness it fixes: no socket, no
/// PostgreSQL. The tables hold what each change wrote (audit lines, events, deliveries).
struct AdminWorld {
    let clock: ManualClock
    let runtime: Runtime
    let tables: InMemoryAdminTables
    let configuration: Configuration
    let caches: Drops
    let wellKnown: WellKnownService
    let admin: AdminService
    let webhooks: WebhookService

    static let rpId = "admin.test"
    static let teamApp = "ABCDE12345.com.example.app"
    static let fingerprint = Array(repeating: "AB", count: 32).joined(separator: ":")

    /// Counts the drops of this instance's caches.
    final class Drops: DroppedOnChange {
        let count = Mutex(0)
        func invalidate() { count.withLock { $0 += 1 } }
        var dropped: Int { count.withLock { $0 } }
    }

    init(configure: (inout Configuration) -> Void = { _ in }) {
        clock = ManualClock(start: Date(timeIntervalSince1970: 1_760_000_000))
        runtime = clock.runtime(random: SeededRandom(seed: 12).bytes)
        tables = InMemoryAdminTables(now: clock.now)
        var c = Configuration.serving(Self.rpId)
        c.keyEncryptionKey = TestDatabase.keyEncryptionKey
        configure(&c)
        configuration = c
        caches = Drops()
        wellKnown = WellKnownService(store: InMemoryAppStore(tables: tables), relyingParty: RelyingParty(c), pinnedDirectory: c.wellKnownDirectory, runtime: runtime)
        let policy = WebhookPolicy(c)
        admin = AdminService(store: InMemoryAdminStore(tables: tables), origins: caches, wellKnown: wellKnown,
                             events: OutboxEvents(runtime: runtime, maxAgeSeconds: policy.maxAgeSeconds), policy: AdminPolicy(c), runtime: runtime)
        webhooks = WebhookService(store: InMemoryWebhookStore(tables: tables), sealer: SecretSealer(configuration: c, runtime: runtime),
                                  policy: policy, runtime: runtime)
    }

    var store: InMemoryAdminStore { InMemoryAdminStore(tables: tables) }

    /// An admin user's caller with a step-up approval for one change, its receipt stored unused.
    func approved(_ admin: UserRecord, action: String) -> AdminCaller {
        let redemption = StepUpRedemption(jti: "jti-" + action, userId: admin.id, actionHash: Array(action.utf8))
        tables.approval(redemption)
        return AdminCaller(actor: admin.id, approval: AdminApproval(redemption: redemption, receiptId: "rcpt-" + action,
                                                                    actionHash: Array(action.utf8)))
    }

    var audit: [AuditEntry] { tables.snapshot.audit }

    func androidApp(_ package: String = "com.example.app", fingerprints: [String] = [fingerprint], handleAll: Bool = false) -> JSONValue {
        .object([("platform", "android"), ("packageName", .string(package)), ("fingerprints", .array(fingerprints.map { .string($0) })),
                 ("handleAllUrls", .bool(handleAll))])
    }
}
