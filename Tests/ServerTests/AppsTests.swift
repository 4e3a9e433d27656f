import Foundation
import HTTP
import JSON
import LatchkeyServer
import Testing
import WebAuthn
import WebAuthnTesting
import WellKnown

/// Associated apps over real HTTP and PostgreSQL (issue: native-app association, points 1, 2, 4
/// and the acceptance): admin API auth and audit, the well-known routes, and allowlist changes
/// honoured by a second instance as soon as it hears them (how long that took is printed, not asserted).
@Suite("AppsTests", .serialized)
struct AppsTests {
    /// A server that builds its association files from the database (no folder overrides them).
    static func server(_ name: String) throws -> TestServer {
        try TestServer(name: name) { c in
            c.developmentMode = true
            c.wellKnownDirectory = "/nonexistent/wellknown-\(uniqueSuffix())"
        }
    }

    static func randomFingerprint() -> SigningCertificateFingerprint {
        try! SigningCertificateFingerprint(bytes: (0..<32).map { _ in UInt8.random(in: 0...255) })
    }

    static func androidApp(_ package: String, _ fp: SigningCertificateFingerprint) -> JSONValue {
        .object([("platform", "android"), ("packageName", .string(package)), ("fingerprints", .array([.string(fp.keytool)]))])
    }

    /// Registration options, then a registration whose clientData.origin is `origin`.
    static func register(_ client: Client, origin: String) throws -> Reply {
        let options = try client.registrationOptions(username: "app-\(uniqueSuffix())")
        let challenge = try challengeBytes(try #require(options.json))
        let builder = SoftAuthenticator().registration(challenge: challenge, rpId: client.endpoint.rpId, origin: origin)
        return try client.send("POST", "/v1/passkeys/registration/verify", body: builder.bytes())
    }

    @Test("admin app endpoints refuse a missing or wrong key with 401")
    func adminNeedsKey() throws {
        let s = try Self.server("apps-auth")
        let c = s.client()
        let body = Self.androidApp("com.example.auth", Self.randomFingerprint())
        for auth in [nil, "Bearer wrong-key", "Basic \(s.adminKey)"] as [String?] {
            #expect(try c.get("/admin/v1/apps", authorization: auth).status == 401)
            #expect(try c.post("/admin/v1/apps", body, authorization: auth).status == 401)
            #expect(try c.send("DELETE", "/admin/v1/apps/android:com.example.auth", authorization: auth).status == 401)
        }
        #expect(try c.get("/admin/v1/apps", authorization: "Bearer \(s.adminKey)").status == 200)
    }

    @Test("adding, replacing and removing apps is audited, with the origins they bring")
    func changesAreAudited() throws {
        let s = try Self.server("apps-audit")
        let c = s.client()
        let admin = "Bearer \(s.adminKey)"
        let package = "com.example.audit\(uniqueSuffix())"
        let fp1 = Self.randomFingerprint(), fp2 = Self.randomFingerprint()
        #expect(try c.post("/admin/v1/apps", Self.androidApp(package, fp1), authorization: admin).status == 201)
        let both = JSONValue.object([("platform", "android"), ("packageName", .string(package)),
                                     ("fingerprints", .array([.string(fp1.keytool), .string(fp2.base64url)]))])
        #expect(try c.post("/admin/v1/apps", both, authorization: admin).status == 200)
        let ios = JSONValue.object([("platform", "ios"), ("teamId", "ABCDE12345"), ("bundleId", "com.example.audit")])
        #expect(try c.post("/admin/v1/apps", ios, authorization: admin).status == 201)
        #expect(try c.send("DELETE", "/admin/v1/apps/android:\(package)", authorization: admin).status == 204)
        #expect(try c.send("DELETE", "/admin/v1/apps/ios:ABCDE12345.com.example.audit", authorization: admin).status == 204)
        #expect(try c.send("DELETE", "/admin/v1/apps/android:\(package)", authorization: admin).status == 404)

        let entries = try #require(try c.get("/admin/v1/audit?limit=1000", authorization: admin).json?["entries"]?.arrayValue)
        func has(_ action: String, _ subject: String) -> Bool {
            entries.contains { $0["action"]?.stringValue == action && $0["subject"]?.stringValue == subject }
        }
        #expect(has("app.added", "android:\(package)"))
        #expect(has("app.updated", "android:\(package)"))
        #expect(has("app.removed", "android:\(package)"))
        #expect(has("app.added", "ios:ABCDE12345.com.example.audit"))
        #expect(has("app.removed", "ios:ABCDE12345.com.example.audit"))
        for fp in [fp1, fp2] {
            #expect(has("origin.added", fp.origin))
            #expect(has("origin.removed", fp.origin))
        }
        #expect(has("origin.added", "https://\(s.rpId)") || has("origin.added", s.origin))
    }

    @Test("bad declarations are refused naming the expected form")
    func badDeclarations() throws {
        let s = try Self.server("apps-bad")
        let c = s.client()
        let admin = "Bearer \(s.adminKey)"
        let bad: [JSONValue] = [
            .object([("platform", "android"), ("packageName", "com.example.x"), ("fingerprints", .array(["AB:CD"]))]),
            .object([("platform", "ios"), ("teamId", "ABC"), ("bundleId", "com.example.x")]),
            .object([("platform", "ios"), ("appId", "com.example.x")]),
            .object([("platform", "windows")]),
        ]
        for body in bad {
            let r = try c.post("/admin/v1/apps", body, authorization: admin)
            #expect(r.status == 400, "\(r)")
            #expect(r.code == "invalid_request")
        }
    }

    @Test("well-known routes over HTTP: 200, application/json, no redirect, built from the apps")
    func wellKnownRoutes() throws {
        let s = try Self.server("apps-wk")
        let c = s.client()
        let fp = Self.randomFingerprint()
        let package = "com.example.wk\(uniqueSuffix())"
        #expect(try c.post("/admin/v1/apps", Self.androidApp(package, fp), authorization: "Bearer \(s.adminKey)").status == 201)
        let ios = JSONValue.object([("platform", "ios"), ("appId", "ABCDE12345.com.example.wk")])
        #expect(try c.post("/admin/v1/apps", ios, authorization: "Bearer \(s.adminKey)").status == 201)

        var documents: [WellKnownDocument] = []
        for name in AssociationFiles.names {
            let r = try c.get("/.well-known/\(name)")
            #expect(r.status == 200, "\(name): \(r)")
            #expect(r.contentType?.hasPrefix("application/json") == true, "\(name): \(r.contentType ?? "none")")
            #expect(r.header("Location") == nil)
            #expect(r.header("Cache-Control") != nil)
            #expect(r.json != nil)
            documents.append(WellKnownDocument(name: name, body: r.body,
                                               served: .init(url: "https://\(s.rpId)/.well-known/\(name)", status: r.status,
                                                             contentType: r.contentType, location: r.header("Location"))))
        }
        let assetlinks = try c.get("/.well-known/assetlinks.json").text
        #expect(assetlinks.contains(package) && assetlinks.contains(fp.keytool))
        #expect(try c.get("/.well-known/apple-app-site-association").text.contains("ABCDE12345.com.example.wk"))

        // The files the server serves pass the checker against the server's own allowlist for its
        // apps (the shared test database holds other suites' origins, so compare with ours only).
        let ours = [fp.origin, "https://\(s.rpId)"]
        #expect(AssociationChecker(rpId: s.rpId, origins: ours).check(documents).map(\.description) == [])
    }

    @Test("passkey-endpoints: the web app's enrol, manage and PRF pages on the first web origin, JSON, CORS *, no database")
    func passkeyEndpoints() throws {
        let s = try TestServer(name: "apps-endpoints") { c in
            c.developmentMode = true
            c.origins = [Self.randomFingerprint().origin, "https://app.\(c.rpId)", "https://\(c.rpId)"]
        }
        let r = try s.client().get("/.well-known/passkey-endpoints")
        #expect(r.status == 200 && r.contentType?.hasPrefix("application/json") == true, "\(r)")
        #expect(r.header("Access-Control-Allow-Origin") == "*")
        let web = "https://app.\(s.rpId)"
        #expect(r.json == .object([("enroll", .string(web + "/?enroll=passkey")), ("manage", .string(web + "/#passkeys")),
                                   ("prfUsageDetails", .string(web + "/help/vault"))]), "\(r.text)")
        // Each URL is a page the web app serves.
        #expect(try s.client().get("/help/vault").status == 200)
    }

    @Test("an android:apk-key-hash credential is refused until the app is added, accepted on every instance right after, refused after removal")
    func allowlistFollowsAppsOnEveryInstance() throws {
        let a = try Self.server("apps-prop")
        // A second instance on the same database and rpId.
        let b = try TestServer(name: "apps-prop-b") { c in
            c.rpId = a.rpId
            c.origins = [a.origin]
            c.developmentMode = true
            c.wellKnownDirectory = "/nonexistent/wellknown-\(uniqueSuffix())"
        }
        let ca = a.client()
        let cb = Client(Endpoint(port: b.port, rpId: a.rpId, origin: a.origin, adminKey: b.adminKey))
        let fp = Self.randomFingerprint()
        let package = "com.example.prop\(uniqueSuffix())"

        // B hears changes through LISTEN/NOTIFY (its caches would also expire within a second without it).
        #expect(propagation("B listening") { b.services.isListening } != nil)

        // Before: refused on both (and B's cache is now warm).
        for c in [ca, cb] {
            let r = try Self.register(c, origin: fp.origin)
            #expect(r.status == 400 && r.code == "origin_not_allowed", "\(r)")
        }

        // Added on A → accepted on A at once, and on B as soon as it hears the NOTIFY.
        #expect(try ca.post("/admin/v1/apps", Self.androidApp(package, fp), authorization: "Bearer \(a.adminKey)").status == 201)
        #expect(try Self.register(ca, origin: fp.origin).status == 201)
        #expect(try propagation("added app on B") { try Self.register(cb, origin: fp.origin).status == 201 } != nil)

        // Removed on A → refused on A at once, and on B as soon as it hears the NOTIFY.
        #expect(try ca.send("DELETE", "/admin/v1/apps/android:\(package)", authorization: "Bearer \(a.adminKey)").status == 204)
        let refusedOnA = try Self.register(ca, origin: fp.origin)
        #expect(refusedOnA.status == 400 && refusedOnA.code == "origin_not_allowed", "\(refusedOnA)")
        #expect(try propagation("removed app on B") { try Self.register(cb, origin: fp.origin).code == "origin_not_allowed" } != nil)
    }

    @Test("a plain origin added on one instance is honoured by a second (its NOTIFY, else the one-second cache expiry)")
    func originChangePropagates() throws {
        let a = try Self.server("apps-origin")
        let b = try TestServer(name: "apps-origin-b") { c in
            c.rpId = a.rpId
            c.origins = [a.origin]
            c.developmentMode = true
        }
        let cb = Client(Endpoint(port: b.port, rpId: a.rpId, origin: a.origin, adminKey: nil))
        let other = "https://web-\(uniqueSuffix()).\(a.rpId)"
        #expect(try Self.register(cb, origin: other).code == "origin_not_allowed")
        #expect(try a.client().post("/admin/v1/origins", .object([("origin", .string(other))]), authorization: "Bearer \(a.adminKey)").status == 201)
        #expect(try propagation("added origin on B") { try Self.register(cb, origin: other).status == 201 } != nil)
    }
}
