import Foundation
import HTTP
import JSON
import LatchkeyServer
import Testing
import WebAuthnTesting

/// Issue 13, defect 5: the admin key is accepted on `/admin/v1/*` only, and with
/// `LATCHKEY_ADMIN_LISTEN` the admin API (and console) is served only on that second listener —
/// 404 on the public one, so it sits behind that address's network restrictions alone.
@Suite("Admin listener")
struct AdminListenerTests {
    @Test("LATCHKEY_ADMIN_LISTEN: host:port, not the public listener's")
    func configuration() throws {
        // Outside dev mode it needs LATCHKEY_ADMIN_ORIGIN (ConfigurationRulesTests).
        let c = try Configuration.fromEnvironment(["LATCHKEY_LISTEN": "0.0.0.0:8080", "LATCHKEY_ADMIN_LISTEN": "127.0.0.1:9090",
                                                   "LATCHKEY_ORIGINS": "https://localhost", "LATCHKEY_ADMIN_ORIGIN": "https://localhost"])
        #expect(c.adminListen == ListenAddress(host: "127.0.0.1", port: 9090))
        #expect(try Configuration.fromEnvironment([:]).adminListen == nil)
        #expect(throws: Configuration.Invalid.self) { try Configuration.fromEnvironment(["LATCHKEY_ADMIN_LISTEN": "9090"]) }
        #expect(throws: Configuration.Invalid.self) {
            try Configuration.fromEnvironment(["LATCHKEY_LISTEN": "127.0.0.1:8080", "LATCHKEY_ADMIN_LISTEN": "localhost:8080"])
        }
    }

    @Test("latchkey serve with LATCHKEY_ADMIN_LISTEN: /admin/ only on the admin listener, 404 on the public one")
    func separateListener() throws {
        guard let binary = ServeProcess.findBinary() else {
            Issue.record("the latchkey executable was not found; build it with `swift build --build-tests` (or set LATCHKEY_BINARY)")
            return
        }
        let rpId = "adminlisten-\(uniqueSuffix()).latchkey.test"
        let origin = "https://\(rpId)"
        let adminKey = "admin-\(uniqueSuffix())-\(uniqueSuffix())-\(uniqueSuffix())"
        let serve = try ServeProcess(binary: binary, environment: [
            "DATABASE_URL": try TestDatabase.url(), "LATCHKEY_LISTEN": "127.0.0.1:0", "LATCHKEY_ADMIN_LISTEN": "127.0.0.1:0",
            "LATCHKEY_ADMIN_ORIGIN": origin,
            "LATCHKEY_RP_ID": rpId, "LATCHKEY_ORIGINS": origin, "LATCHKEY_ADMIN_KEY": adminKey, "LATCHKEY_THREADS": "2",
            "LATCHKEY_DEV": "0", "LATCHKEY_WORKERS": "1", "LATCHKEY_KEY_ENCRYPTION_KEY": TestDatabase.keyEncryptionKeyText,
        ])
        defer { serve.stop() }
        let publicPort = try serve.waitUntilServing()
        let onPublic = Client(Endpoint(port: publicPort, rpId: rpId, origin: origin, adminKey: adminKey))
        let key = "Bearer \(adminKey)"

        // The public listener: /admin/… is not there at all (also spelled with an escape), the rest is.
        for (method, path) in [("GET", "/admin/v1/origins"), ("GET", "/admin/v1/apps"), ("GET", "/admin/v1/audit"),
                               ("GET", "/%61dmin/v1/origins"), ("POST", "/admin/v1/origins"), ("GET", "/admin/")] {
            // An origin of this test's own: the allowlist is shared by every suite on the database,
            // so a regression here must not let a foreign origin into the other suites' ceremonies.
            let body: [UInt8] = method == "POST" ? JSONValue.object([("origin", .string("https://not-\(rpId)"))]).serialized() : []
            let reply = try onPublic.send(method, path, body: body, authorization: key)
            #expect(reply.status == 404 && reply.code == "not_found" && reply.isProblem, "public \(method) \(path): \(reply)")
        }
        #expect(try onPublic.get("/healthz").status == 200)
        #expect(try onPublic.authenticationOptions().status == 200)

        // The admin listener: the admin API, and nothing else.
        let adminPort = try #require(Self.adminPort(serve), "no admin listener reported: \(serve.output)")
        #expect(adminPort != publicPort)
        let onAdmin = Client(Endpoint(port: adminPort, rpId: rpId, origin: origin, adminKey: adminKey))
        // Issue 33: the console is whole on the admin listener — every file it loads is answered there.
        for path in try Self.consoleFiles(onAdmin) {
            let reply = try onAdmin.get(path)
            #expect(reply.status == 200, "the console loads \(path) from the admin listener: \(reply)")
        }
        let origins = try onAdmin.get("/admin/v1/origins", authorization: key)
        #expect(origins.status == 200, "\(origins)")
        #expect(origins.json?["origins"]?.arrayValue?.contains { $0["origin"]?.stringValue == origin } == true)
        #expect(try onAdmin.get("/admin/v1/origins").status == 401)
        for path in ["/v1/passkeys", "/healthz", "/.well-known/jwks.json", "/", "/v1/sessions"] {
            let reply = try onAdmin.get(path)
            #expect(reply.status == 404 && reply.code == "not_found", "admin \(path): \(reply)")
        }
        #expect(try onAdmin.post("/v1/token", .object([])).status == 404)

        // Issue 25: the console works from the admin listener alone — its sign-in, first-passkey,
        // step-up and logout calls (/v1/…) are answered there, not 404.
        // Issue 33: the link `admins add` prints is at LATCHKEY_ADMIN_ORIGIN (what the TLS front routes
        // to the admin listener), and without that setting it refuses (exit 64) naming it.
        var cli = ["DATABASE_URL": try TestDatabase.url(), "LATCHKEY_RP_ID": rpId, "LATCHKEY_ORIGINS": origin,
                   "LATCHKEY_ADMIN_LISTEN": "127.0.0.1:9090", "LATCHKEY_KEY_ENCRYPTION_KEY": TestDatabase.keyEncryptionKeyText]
        let unset = try LatchkeyCLI.run(["admins", "add", "console-\(uniqueSuffix())"], environment: cli)
        #expect(unset.status == 64 && unset.stderr.contains("LATCHKEY_ADMIN_ORIGIN"), "\(unset)")
        cli["LATCHKEY_ADMIN_ORIGIN"] = origin
        let added = try LatchkeyCLI.run(["admins", "add", "console-\(uniqueSuffix())"], environment: cli)
        #expect(added.status == 0, "\(added)")
        let link = try #require(added.lines.last)
        #expect(link.hasPrefix(origin + "/admin/?ticket="), "\(added)")
        let ticket = try #require(link.range(of: "?ticket=").map { String(link[$0.upperBound...]) }, "\(added)")
        let authenticator = SoftAuthenticator()
        let (_, registered) = try onAdmin.register(authenticator, authorization: "Ticket \(ticket)")
        #expect(registered.status == 201, "first passkey on the admin listener: \(registered)")
        let session = try onAdmin.signIn(authenticator)
        let bearer = "Bearer \(session.accessToken)"
        let me = try onAdmin.get("/admin/v1/me", authorization: bearer)
        #expect(me.status == 200, "\(me)")
        let challenge = try onAdmin.post("/v1/step-up/challenges", .object([("method", "passkey"), ("action", .object([
            ("type", "latchkey.admin"), ("method", "POST"), ("path", "/admin/v1/origins"), ("body", .null)]))]), authorization: bearer)
        #expect(challenge.status == 201, "\(challenge)")
        #expect(try onAdmin.post("/v1/logout", .object([]), authorization: bearer).status < 400)
    }

    /// Every same-origin file the console at /admin/ loads: the page's `href`/`src`, the stylesheets'
    /// `@import`/`url()`, the scripts' static `import … from '…'` (relative paths resolved).
    static func consoleFiles(_ client: Client) throws -> [String] {
        var found: [String] = []
        var queue = ["/admin/"]
        func resolve(_ reference: String, from base: String) -> String? {
            guard !reference.hasPrefix("data:"), !reference.hasPrefix("#"), !reference.contains("://") else { return nil }
            if reference.hasPrefix("/") { return reference }
            var parts = base.split(separator: "/", omittingEmptySubsequences: false).dropLast().map(String.init)
            for segment in reference.split(separator: "/") {
                if segment == ".." { parts.removeLast() } else if segment != "." { parts.append(String(segment)) }
            }
            return parts.joined(separator: "/")
        }
        let patterns = [#"(?:href|src)="([^"]+)""#, #"(?<![\w-])url\(\s*["']?([^"')]+)["']?\s*\)"#, #"@import\s+["']([^"']+)["']"#,
                        #"(?:import|from)\s*\(?\s*'(\.{0,2}/[^']+)'"#].map { try! NSRegularExpression(pattern: $0) }
        while let path = queue.popLast() {
            guard !found.contains(path) else { continue }
            found.append(path)
            let reply = try client.get(path)
            guard reply.status == 200 else { continue }
            let text = reply.text
            for pattern in patterns {
                for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                    if let r = Range(match.range(at: 1), in: text), let next = resolve(String(text[r]), from: path) { queue.append(next) }
                }
            }
        }
        return found
    }

    /// Bounded wait for the admin listener's port in serve's start-up lines.
    static func adminPort(_ serve: ServeProcess) -> Int? {
        for _ in 0..<40 {
            let text = serve.output
            if let range = text.range(of: "admin API and console at http://127.0.0.1:") {
                return Int(text[range.upperBound...].prefix { $0.isNumber })
            }
            usleep(50_000)
        }
        return nil
    }
}
