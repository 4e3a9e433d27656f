import Foundation
import JSON
import PostgreSQL
@testable import Storage
import Testing

/// The admin API's joined reads, each one round trip on the real server: the console's user page,
/// an admin caller's role with its session, a webhook's deliveries with its endpoint, and the apps
/// with the allowlist. Each answers what the separate reads it replaces answered.
@Suite struct AdminReadsTests {
    func oneRead<T>(_ body: () throws -> T) throws -> T {
        let (value, budget) = try PostgresDeadline.within(seconds: 10) { try body() }
        #expect(budget.counts.reads == 1 && budget.counts.total == 1, "\(budget.counts)")
        return value
    }

    @Test func userPageIsTheAccountWithItsLivePasskeysDeviceKeysAndSessions() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered()
        _ = try s.enrol(Fixture.deviceKey(userId: user.id))
        let page = try #require(try oneRead { try s.database.admins.userPage(id: user.id) })
        #expect(page.summary == (try s.database.admins.userSummary(id: user.id)))
        #expect(page.passkeys.map(\.id) == [credential.id])
        #expect(page.passkeys.map(\.id) == (try s.database.accounts.credentials(userId: user.id)).map(\.id))
        #expect(page.deviceKeys.map(\.id) == (try s.database.deviceKeys.list(userId: user.id)).map(\.id) && page.deviceKeys.count == 1)
        #expect(page.sessions == (try s.database.sessions.list(userId: user.id)) && page.sessions.count == 1)
        #expect(try oneRead { try s.database.admins.userPage(id: "nobody") } == nil)
    }

    @Test func adminSessionIsTheRoleWithTheSessionsStanding() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let sessionId = try #require(try s.database.sessions.list(userId: user.id).first?.id)
        let read = try oneRead { try s.database.admins.adminSession(userId: user.id, sessionId: sessionId) }
        #expect(!read.isAdmin && read.page == nil)
        #expect(read.session?.record.id == sessionId)
        // The page the route shows rides in the same read, whoever asks: the caller decides.
        let withPage = try oneRead {
            try s.database.admins.adminSession(userId: user.id, sessionId: sessionId, preloading: .userPage(id: user.id))
        }
        guard case .userPage(let page?)? = withPage.page else { Issue.record("\(String(describing: withPage.page))"); return }
        #expect(page.summary == (try s.database.admins.userSummary(id: user.id)) && page.sessions.count == 1)
        #expect(withPage.session?.record.id == sessionId && !withPage.isAdmin)
        let absent = try oneRead { try s.database.admins.adminSession(userId: user.id, sessionId: sessionId, preloading: .userPage(id: "nobody")) }
        guard case .userPage(nil)? = absent.page else { Issue.record("\(String(describing: absent.page))"); return }
        let found = try oneRead {
            try s.database.admins.adminSession(userId: user.id, sessionId: sessionId, preloading: .users(prefix: user.username, limit: 20))
        }
        guard case .users(let users)? = found.page else { Issue.record("\(String(describing: found.page))"); return }
        #expect(users == (try s.database.admins.findUsers(usernamePrefix: user.username, limit: 20)) && users.count == 1)
        let candidate = try #require(try s.database.admins.grantCandidate(username: user.username))
        #expect(try s.database.admins.grant(existing: candidate, by: "cli", audit: Fixture.audit("admin.granted")) == .granted)
        #expect(try s.database.admins.adminSession(userId: user.id, sessionId: sessionId).isAdmin)
        #expect(try s.database.admins.adminSession(userId: user.id, sessionId: "other").session == nil)
    }

    /// Every other console page an admin route preloads: one read with the role and the standing,
    /// answering what the route's own read answers.
    @Test func consolePagesRideWithTheRoleInOneRead() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let sessionId = try #require(try s.database.sessions.list(userId: user.id).first?.id)
        _ = try s.database.config.addOrigin("https://a.example.com", source: "admin", audit: Fixture.audit("origin.added"))
        let app = AppRecord(rpId: "example.com", platform: "ios", appId: "ABCDE12345.com.example.app")
        let origins = AppOriginAudit(added: Fixture.template("origin.added"), removed: Fixture.template("origin.removed"))
        _ = try s.database.config.putApp(app, created: Fixture.audit("app.added"), updated: Fixture.audit("app.updated"), origins: origins)
        let endpoint = try s.database.webhooks.create(NewWebhookEndpoint(id: Fixture.id(), url: "https://hooks.example.com/x", events: [.userCreated],
                                                                         sealedSecret: Fixture.bytes()), audit: Fixture.audit("webhook.created"))
        func read(_ page: AdminPageRequest) throws -> AdminPageRead? {
            let read = try oneRead { try s.database.admins.adminSession(userId: user.id, sessionId: sessionId, preloading: page) }
            #expect(read.session?.record.id == sessionId && !read.isAdmin)
            return read.page
        }
        guard case .caller(let me?)? = try read(.caller) else { Issue.record("no caller"); return }
        #expect(me == (try s.database.admins.userSummary(id: user.id)))
        let query = AuditQuery(limit: 2, before: nil, user: nil, action: "origin.", actionPrefix: true)
        guard case .audit(let entries)? = try read(.audit(query)) else { Issue.record("no audit page"); return }
        #expect(entries.map(\.id) == (try s.database.audit.entries(query)).map(\.id) && entries.count == 2)
        guard case .origins(let allowlist)? = try read(.origins) else { Issue.record("no origins"); return }
        #expect(allowlist.map(\.origin) == (try s.database.config.origins()).map(\.origin) && allowlist.count == 2)
        guard case .apps(let apps)? = try read(.apps(rpId: "example.com")) else { Issue.record("no apps"); return }
        #expect(apps == (try s.database.config.apps(rpId: "example.com")) && apps.count == 1)
        guard case .declarations(let rows)? = try read(.declarations(rpId: "example.com")) else { Issue.record("no declarations"); return }
        #expect(rows == (try s.database.config.declarations(rpId: "example.com")))
        guard case .webhooks(let endpoints)? = try read(.webhooks) else { Issue.record("no webhooks"); return }
        #expect(endpoints.map(\.id) == [endpoint.id])
    }

    @Test func deliveriesAreNilForAnAbsentOrDeletedEndpoint() throws {
        let s = try TestDatabase.scratch()
        let endpoint = try s.database.webhooks.create(NewWebhookEndpoint(id: Fixture.id(), url: "https://hooks.example.com/x", events: [.userCreated],
                                                                         sealedSecret: Fixture.bytes()), audit: Fixture.audit("webhook.created"))
        #expect(try oneRead { try s.database.webhooks.deliveries(endpointId: endpoint.id, limit: 10) } == [])
        #expect(try oneRead { try s.database.webhooks.deliveries(endpointId: "absent", limit: 10) } == nil)
        #expect(try s.database.webhooks.delete(id: endpoint.id, audit: Fixture.audit("webhook.deleted")))
        #expect(try s.database.webhooks.deliveries(endpointId: endpoint.id, limit: 10) == nil)
    }

    @Test func declarationsAreTheAppsAndTheAllowlist() throws {
        let s = try TestDatabase.scratch()
        _ = try s.database.config.addOrigin("https://a.example.com", source: "admin", audit: Fixture.audit("origin.added"))
        let app = AppRecord(rpId: "example.com", platform: "ios", appId: "ABCDE12345.com.example.app")
        let origins = AppOriginAudit(added: Fixture.template("origin.added"), removed: Fixture.template("origin.removed"))
        _ = try s.database.config.putApp(app, created: Fixture.audit("app.added"), updated: Fixture.audit("app.updated"), origins: origins)
        let rows = try oneRead { try s.database.config.declarations(rpId: "example.com") }
        #expect(rows.apps == (try s.database.config.apps(rpId: "example.com")))
        #expect(rows.origins.map(\.origin) == (try s.database.config.origins()).map(\.origin))
        #expect(rows.origins.map(\.source) == ["admin", "app"])
    }
}
