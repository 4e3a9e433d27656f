import Crypto
import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage
import Synchronization
import Testing

/// SPEC "/admin/v1" and "Admin console": `AdminService`'s decisions over the in-memory admin store
/// (`AdminWorld`), on a manual clock: no socket, no PostgreSQL. AdminConsoleTests, AppsTests and
/// EnrolmentTicketTests keep the same behaviour over HTTP and PostgreSQL.
@Suite("Admin service, in memory")
struct AdminServiceTests {
    @Test("an origin is added once: audited with its approval, the step-up used even when present, a used one refused")
    func originAddedOnce() throws {
        let w = AdminWorld()
        let ana = w.tables.addUser("ana", admin: true)
        let (origin, created) = try w.admin.addOrigin(.object([("origin", "https://login.admin.test")]), by: w.approved(ana, action: "add-1"))
        #expect(origin == "https://login.admin.test" && created)
        #expect(w.tables.snapshot.origins[origin] == "admin")
        #expect(w.caches.dropped == 1)
        let line = try #require(w.audit.last)
        #expect(line.action == "origin.added" && line.actor == ana.id && line.subject == origin)
        #expect(line.detail["receiptId"]?.stringValue == "rcpt-add-1")

        // Present already: a success (no second line), and it uses its own step-up.
        let again = w.approved(ana, action: "add-2")
        #expect(try w.admin.addOrigin(.object([("origin", "https://login.admin.test")]), by: again).1 == false)
        #expect(w.audit.count == 1)
        expectRefusal(.stepUpRequired) { try w.admin.addOrigin(.object([("origin", "https://other.admin.test")]), by: again) }
        #expect(w.tables.snapshot.origins["https://other.admin.test"] == nil, "a refused redemption writes nothing")
    }

    @Test("an origin the rpId can never use (an IP address as a related origin), or http:// outside development mode, is refused before anything is written")
    func originRules() throws {
        let w = AdminWorld()
        expectRefusal(.invalidRequest) { try w.admin.addOrigin(.object([("origin", "https://192.0.2.1")]), by: .adminKey) }
        expectRefusal(.invalidRequest) { try w.admin.addOrigin(.object([("origin", "http://login.admin.test")]), by: .adminKey) }
        expectRefusal(.invalidRequest) { try w.admin.addOrigin(.object([("androidFingerprint", "AB:CD")]), by: .adminKey) }
        expectRefusal(.invalidRequest) { try w.admin.addOrigin(.object([]), by: .adminKey) }
        #expect(w.tables.snapshot.origins.isEmpty && w.audit.isEmpty)
        let (android, _) = try w.admin.addOrigin(.object([("androidFingerprint", .string(AdminWorld.fingerprint))]), by: .adminKey)
        #expect(android == "android:apk-key-hash:" + Base64URL.encode([UInt8](repeating: 0xAB, count: 32)))
    }

    @Test("removing an absent origin is 404 and leaves its step-up unused; a present one is removed with its line")
    func originRemoved() throws {
        let w = AdminWorld()
        let ana = w.tables.addUser("ana", admin: true)
        _ = try w.admin.addOrigin(.object([("origin", "https://login.admin.test")]), by: .adminKey)
        let caller = w.approved(ana, action: "rm")
        expectRefusal(.notFound) { try w.admin.removeOrigin("https://absent.admin.test", by: caller) }
        try w.admin.removeOrigin("https://login.admin.test", by: caller)
        #expect(w.tables.snapshot.origins["https://login.admin.test"] == nil)
        #expect(w.audit.last?.action == "origin.removed")
        #expect(w.tables.snapshot.receipts.allSatisfy { $0.consumed })
    }

    @Test("an app brings its origins: created, unchanged, updated (the old fingerprint's origin dropped), removed; hand-added origins stay")
    func appsSyncOrigins() throws {
        let w = AdminWorld()
        let other = Array(repeating: "CD", count: 32).joined(separator: ":")
        let first = "android:apk-key-hash:" + Base64URL.encode([UInt8](repeating: 0xAB, count: 32))
        let second = "android:apk-key-hash:" + Base64URL.encode([UInt8](repeating: 0xCD, count: 32))
        // An admin declared the second origin by hand before any app needed it.
        _ = try w.admin.addOrigin(.object([("androidFingerprint", .string(other))]), by: .adminKey)

        let (app, created) = try w.admin.putApp(w.androidApp(), by: .adminKey)
        #expect(created && AppRenderer.app(app)["id"]?.stringValue == "android:com.example.app" && app.createdAt == nil)
        #expect(w.tables.snapshot.origins[first] == "app")
        #expect(w.audit.map(\.action).suffix(2) == ["app.added", "origin.added"])

        let lines = w.audit.count
        #expect(try w.admin.putApp(w.androidApp(), by: .adminKey).1 == false)
        #expect(w.audit.count == lines, "an unchanged app writes no line")

        _ = try w.admin.putApp(w.androidApp(fingerprints: [other]), by: .adminKey)
        #expect(w.tables.snapshot.origins[first] == nil)
        #expect(w.tables.snapshot.origins[second] == "admin", "a hand-added origin stays as the admin added it")
        #expect(w.audit.map(\.action).suffix(2) == ["app.updated", "origin.removed"])

        expectRefusal(.notFound) { try w.admin.removeApp("android:com.example.absent", by: .adminKey) }
        expectRefusal(.notFound) { try w.admin.removeApp("windows:thing", by: .adminKey) }
        try w.admin.removeApp("android:com.example.app", by: .adminKey)
        #expect(w.tables.snapshot.apps.isEmpty)
        #expect(w.tables.snapshot.origins[second] == "admin")
        #expect(try w.admin.listApps().isEmpty)
    }

    @Test("an iOS app adds https://<rpId>, listed with its origins")
    func iosApp() throws {
        let w = AdminWorld()
        _ = try w.admin.putApp(.object([("platform", "ios"), ("appId", .string(AdminWorld.teamApp))]), by: .adminKey)
        #expect(w.tables.snapshot.origins["https://admin.test"] == "app")
        let listed = try #require(try AppRenderer.apps(try w.admin.listApps())["apps"]?.arrayValue?.first)
        #expect(listed["teamId"]?.stringValue == "ABCDE12345")
        #expect(listed["origins"] == .array(["https://admin.test"]))
        #expect(listed["createdAt"]?.stringValue == iso8601(w.clock.now()))
    }

    @Test("an enrolment ticket makes the app backend's user once, lives 10 minutes on the store's clock, and is used once")
    func enrolmentTickets() throws {
        let w = AdminWorld()
        let first = try w.admin.enrolmentTicket(externalId: "ext-1", body: .object([("username", "ana")]), by: .adminKey)
        let userId = first.userId
        #expect(first.expiresAt == w.clock.now().addingTimeInterval(600))
        #expect(AdminRenderer.ticket(first)["expiresAt"]?.stringValue == iso8601(w.clock.now().addingTimeInterval(600)))
        let again = try w.admin.enrolmentTicket(externalId: "ext-1", body: .object([("username", "ana")]), by: .adminKey)
        #expect(again.userId == userId)
        #expect(w.tables.snapshot.users.count == 1)
        expectRefusal(.conflict) { try w.admin.enrolmentTicket(externalId: "ext-2", body: .object([("username", "ana")]), by: .adminKey) }
        expectRefusal(.invalidRequest) { try w.admin.enrolmentTicket(externalId: "", body: .object([("username", "bob")]), by: .adminKey) }

        let token = first.ticket
        #expect(try w.store.redeemTicket(hash: OpaqueSecret.hash(token), purpose: .passkey) == userId)
        #expect(try w.store.redeemTicket(hash: OpaqueSecret.hash(token), purpose: .passkey) == nil, "single use")
        let late = again.ticket
        w.clock.advance(601)
        #expect(try w.store.redeemTicket(hash: OpaqueSecret.hash(late), purpose: .passkey) == nil, "expired")
        #expect(w.audit.filter { $0.action == "ticket.issued" }.count == 2)
    }

    @Test("device-key tickets need an enrolled account; account tickets hold the passkey and refuse an unknown id")
    func otherTickets() throws {
        let w = AdminWorld()
        expectRefusal(.notFound) { try w.admin.deviceKeyTicket(externalId: "nobody", by: .adminKey) }
        expectRefusal(.notFound) { try w.admin.accountTicket(userId: "usr_nobody", by: .adminKey) }
        #expect(w.tables.snapshot.tickets.isEmpty && w.audit.isEmpty)
        let ana = w.tables.addUser("ana", externalId: "ext-ana")
        let dk = try w.admin.deviceKeyTicket(externalId: "ext-ana", by: .adminKey)
        #expect(dk.ticket.hasPrefix("lkd_"))
        _ = try w.admin.accountTicket(userId: ana.id, by: .adminKey)
        let tickets = w.tables.snapshot.tickets
        #expect(tickets.map(\.purpose) == [.deviceKey, .passkey])
        #expect(tickets.map(\.holds) == [false, true])
        #expect(w.audit.last?.detail["holds"] == .bool(true))
    }

    @Test("tickets with an approval: a used one writes nothing, not even the account; an unknown account leaves it unused")
    func ticketsRedeemTheirStepUp() throws {
        let w = AdminWorld()
        let admin = w.tables.addUser("root", admin: true)
        let once = w.approved(admin, action: "ticket-1")
        let first = try w.admin.enrolmentTicket(externalId: "ext-1", body: .object([("username", "ana")]), by: once)
        #expect(w.audit.last?.action == "ticket.issued" && w.audit.last?.subject == first.userId && w.audit.last?.actor == admin.id)
        #expect(w.audit.last?.detail["receiptId"]?.stringValue == "rcpt-ticket-1")
        let users = w.tables.snapshot.users.count
        expectRefusal(.stepUpRequired) { try w.admin.enrolmentTicket(externalId: "ext-2", body: .object([("username", "bob")]), by: once) }
        #expect(w.tables.snapshot.users.count == users, "a used step-up leaves no account behind")
        // Unknown: 404, and the approval is still good for the account once it exists.
        let deviceKey = w.approved(admin, action: "device-key")
        expectRefusal(.notFound) { try w.admin.deviceKeyTicket(externalId: "ext-3", by: deviceKey) }
        _ = w.tables.addUser("cy", externalId: "ext-3")
        #expect(try w.admin.deviceKeyTicket(externalId: "ext-3", by: deviceKey).ticket.hasPrefix("lkd_"))
        expectRefusal(.stepUpRequired) { try w.admin.deviceKeyTicket(externalId: "ext-3", by: deviceKey) }
        expectRefusal(.stepUpRequired) { try w.admin.accountTicket(userId: first.userId, by: deviceKey) }
        #expect(w.tables.snapshot.tickets.count == 2)
    }

    @Test("the audit log: newest first, paged by id, by user (as actor or subject) and by action or action prefix")
    func auditLog() throws {
        let w = AdminWorld()
        let ana = w.tables.addUser("ana", admin: true)
        _ = try w.admin.addOrigin(.object([("origin", "https://a.admin.test")]), by: .named(ana.id))
        _ = try w.admin.accountTicket(userId: ana.id, by: .adminKey)
        _ = try w.admin.putApp(w.androidApp(), by: .adminKey)
        let all = try w.admin.auditLog(limit: nil, before: nil)
        let ids = all.map(\.id)
        #expect(ids == ids.sorted(by: >) && ids.count == 4)
        #expect(all.last?.actorUsername == "ana")
        #expect(AdminRenderer.auditEntries(all)["entries"]?.arrayValue?.last?["actorUsername"]?.stringValue == "ana")
        let page = try w.admin.auditLog(limit: 2, before: nil)
        let next = try w.admin.auditLog(limit: 2, before: page[1].id)
        #expect((page + next).map(\.id) == ids)
        #expect(try w.admin.auditLog(limit: nil, before: nil, user: ana.id).count == 2)
        #expect(try w.admin.auditLog(limit: nil, before: nil, action: "origin.*").count == 2)
        #expect(try w.admin.auditLog(limit: nil, before: nil, action: "origin.added").count == 2)
        #expect(try w.admin.auditLog(limit: 0, before: nil).count == 1, "a limit below 1 reads one")
        expectRefusal(.invalidRequest) { try w.admin.auditLog(limit: nil, before: nil, action: String(repeating: "a", count: 129)) }
    }

    @Test("what an admin user's resolution read with the role is answered as it is, without reading again; refused filters preload nothing")
    func preloadedPages() throws {
        let w = AdminWorld()
        let ana = w.tables.addUser("ana", admin: true)
        _ = try w.admin.addOrigin(.object([("origin", "https://a.admin.test")]), by: .named(ana.id))
        // Not the store's answer: the page handed over is the one shown.
        let other = UserSummary(user: UserRecord(id: "other", userHandle: [1], username: "other", displayName: "Other"), externalId: nil,
                                createdAt: w.clock.now(), isAdmin: true)
        #expect(try w.admin.me(.named(ana.id), loaded: .caller(other)).user == other)
        #expect(try w.admin.me(.named(ana.id)).user?.user.username == "ana")
        #expect(try w.admin.me(.adminKey, loaded: .caller(other)).user == nil, "the admin key is no account")
        #expect(try w.admin.listOrigins(loaded: .origins([.init(origin: "https://x.test", source: "admin")])).map(\.origin) == ["https://x.test"])
        #expect(try w.admin.listOrigins().map(\.origin) == ["https://a.admin.test"])
        #expect(try w.admin.listApps(loaded: .apps([])).isEmpty)
        #expect(try w.admin.auditLog(limit: nil, before: nil, loaded: .audit([])).isEmpty)
        #expect(try w.admin.auditLog(limit: nil, before: nil).count == 1)
        // The page the route preloads is the one the service reads; a filter it refuses preloads nothing.
        #expect(try AdminService.auditQuery(limit: 0, before: 9, user: "", action: "origin.*")
                == AuditQuery(limit: 1, before: 9, user: nil, action: "origin.", actionPrefix: true))
        expectRefusal(.invalidRequest) { try AdminService.auditQuery(limit: nil, before: nil, user: String(repeating: "u", count: 129), action: nil) }
        #expect(w.admin.appsRead == .apps(rpId: w.configuration.rpId))
    }

    @Test("admins: add refuses a taken name; a link only for an admin with no passkey, replacing the unused one")
    func adminsFromTheCommandLine() throws {
        let w = AdminWorld()
        let added = try w.admin.addAdmin(username: "root", by: .named("cli"))
        #expect(try w.admin.listAdmins().map(\.user.username) == ["root"])
        expectRefusal(.conflict) { try w.admin.addAdmin(username: "root", by: .named("cli")) }
        let bob = w.tables.addUser("bob")
        expectRefusal(.conflict) { try w.admin.adminLink(username: "bob", by: .named("cli")) }
        expectRefusal(.notFound) { try w.admin.adminLink(username: "nobody", by: .named("cli")) }
        let link = try w.admin.adminLink(username: "root", by: .named("cli"))
        #expect(try w.store.redeemTicket(hash: OpaqueSecret.hash(added.ticket), purpose: .passkey) == nil, "the fresh link replaced it")
        #expect(w.audit.last?.detail["replaced"] == .number(1))
        w.tables.addPasskey(added.user, id: [1, 2, 3], name: "laptop", createdAt: w.clock.now())
        expectRefusal(.conflict) { try w.admin.adminLink(username: "root", by: .named("cli")) }
        #expect(try w.store.redeemTicket(hash: OpaqueSecret.hash(link.ticket), purpose: .passkey) == added.user.id)
        #expect(try w.admin.removeAdmin(username: "root", by: .named("cli")))
        #expect(try w.admin.removeAdmin(username: bob.username, by: .named("cli")) == false)
    }

    @Test("the users page reads one account with its live passkeys and sessions; the list puts the exact match first")
    func usersPage() throws {
        let w = AdminWorld()
        let anna = w.tables.addUser("anna")
        let ann = w.tables.addUser("ann", admin: true)
        _ = w.tables.addUser("bob")
        #expect(try w.store.findUsers(usernamePrefix: "ann", limit: 20).map(\.user.username) == ["ann", "anna"])
        #expect(try w.store.findUsers(usernamePrefix: "ann", limit: 20).map(\.isAdmin) == [true, false])
        let t0 = w.clock.now()
        w.tables.addPasskey(anna, id: [1], name: "old", createdAt: t0)
        w.tables.addPasskey(anna, id: [2], name: "new", createdAt: t0.addingTimeInterval(5))
        w.tables.addSession(anna, id: "s1", createdAt: t0)
        w.tables.addSession(anna, id: "s2", createdAt: t0.addingTimeInterval(5))
        w.tables.rows.withLock { _ = $0.revokedPasskeys.insert([1]) }
        let page = try #require(try w.store.userPage(id: anna.id))
        #expect(page.passkeys.map(\.name) == ["new"])
        #expect(page.sessions.map(\.id) == ["s2", "s1"], "newest first")
        #expect(try w.store.userPage(id: ann.id)?.passkeys.isEmpty == true)
        #expect(try w.store.userPage(id: "usr_nobody") == nil)
        #expect(AdminRenderer.user(page.summary)["admin"] == .bool(false))
    }

    @Test("a storage failure fails the request as 503 internal_error, never an empty answer or a skipped write")
    func storageFailure() throws {
        let w = AdminWorld()
        w.tables.down.withLock { $0 = true }
        expectRefusal(.internalError) { try w.admin.listOrigins() }
        expectRefusal(.internalError) { try w.admin.addOrigin(.object([("origin", "https://a.admin.test")]), by: .adminKey) }
        expectRefusal(.internalError) { try w.admin.listApps() }
        expectRefusal(.internalError) { try w.admin.auditLog(limit: nil, before: nil) }
        expectRefusal(.internalError) { try w.admin.accountTicket(userId: "usr_ana", by: .adminKey) }
        #expect(w.caches.dropped == 0, "nothing changed, so nothing is dropped")
    }
}
