import Foundation
import HTTP
import LatchkeyServer
import PostgreSQL
import Storage
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// SPEC "Assurance": `serve` refuses a bad configuration before it listens, `LATCHKEY_CONFORMANCE=1`
/// outside dev mode has no override, and stored `http://` origins are named at start-up. Real
/// `latchkey serve` processes (the built binary).
@Suite("serve: configuration outside dev mode")
struct ServeConfigurationTests {
    /// Runs `latchkey serve` until it exits (bounded): its status and stderr, or nil status when it
    /// was still running (then it is killed).
    static func runServe(_ environment: [String: String], seconds: Double = 30) throws -> (status: Int32?, output: String) {
        let binary = try #require(ServeProcess.findBinary(), "build the latchkey executable (swift build --build-tests)")
        let serve = try ServeProcess(binary: binary, environment: environment)
        let deadline = Date().addingTimeInterval(seconds)
        while serve.isRunning, Date() < deadline { usleep(50_000) }
        if serve.isRunning {
            serve.killHard()
            return (nil, serve.output)
        }
        // The pipe's last bytes: the reader thread may not have read them yet (bounded; a loaded machine is slow).
        for _ in 0..<60 where serve.output.isEmpty { usleep(50_000) }
        usleep(50_000)
        return (serve.exitStatus, serve.output)
    }

    /// The production-mode environment of one instance (every required setting present and valid).
    static func production(databaseURL: String, listen: String = "127.0.0.1:0") -> [String: String] {
        let rpId = "serve-config-\(uniqueSuffix()).latchkey.test"
        return ["DATABASE_URL": databaseURL, "LATCHKEY_LISTEN": listen, "LATCHKEY_RP_ID": rpId, "LATCHKEY_ORIGINS": "https://\(rpId)",
                "LATCHKEY_THREADS": "2", "LATCHKEY_WORKERS": "1", "LATCHKEY_OUTBOX_SENDERS": "0",
                "LATCHKEY_KEY_ENCRYPTION_KEY": TestDatabase.keyEncryptionKeyText]
    }

    @Test("LATCHKEY_CONFORMANCE=1 outside dev mode: serve exits non-zero saying why, also with the removed override")
    func conformanceOutsideDevModeRefusesToStart() throws {
        let scratch = try TestDatabase.Scratch()  // a serve that started anyway would write nothing shared
        for extra in [[:], ["LATCHKEY_CONFORMANCE_ALLOW_PRODUCTION": "1"], ["LATCHKEY_DEV": "0"]] {
            var env = Self.production(databaseURL: scratch.url)
            env["LATCHKEY_CONFORMANCE"] = "1"
            env.merge(extra) { $1 }
            let (status, output) = try Self.runServe(env)
            #expect(status != nil && status != 0, "\(extra): \(output)")
            #expect(output.contains("LATCHKEY_CONFORMANCE=1 needs LATCHKEY_DEV=1"), "\(extra): \(output)")
            #expect(!output.contains("serving rpId"), "\(extra): \(output)")
        }
    }

    /// The listen port is held by this test: a serve that bound before validating would fail with
    /// "cannot listen"; one that validates first names the configuration error. A database of its
    /// own: a serve that validated late would have seeded LATCHKEY_ORIGINS into the allowlist.
    @Test("a bad configuration is refused before the listener binds", arguments: [
        ["LATCHKEY_CONFORMANCE": "1"],
        ["LATCHKEY_ORIGINS": "http://localhost:8080"],
        ["LATCHKEY_WEBHOOK_CA": "/nonexistent/latchkey-webhook-ca.pem"],
        // Issue 33: the key-encryption key, the rpId, booleans, the admin key, the admin origin.
        ["LATCHKEY_KEY_ENCRYPTION_KEY": ""],
        ["LATCHKEY_RP_ID": "co.uk"],
        ["LATCHKEY_TRUST_PROXY": "maybe"],
        ["LATCHKEY_ADMIN_KEY": "change-me"],
        ["LATCHKEY_ADMIN_ORIGIN": "https://elsewhere.example"],
    ])
    func validatedBeforeListening(bad: [String: String]) throws {
        let holder = try HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadPoolSize: 1), responder: Router())
        defer { holder.stop() }
        let scratch = try TestDatabase.Scratch()
        var env = Self.production(databaseURL: scratch.url, listen: "127.0.0.1:\(holder.port)")
        env.merge(bad) { $1 }
        let (status, output) = try Self.runServe(env)
        // Nothing reached the database either.
        #expect(try scratch.connect().query("SELECT count(*) AS n FROM pg_tables WHERE tablename = 'origins'")[0].int("n") == 0)
        #expect(status == 64, "\(bad): \(output)")
        #expect(!output.contains("cannot listen") && !output.contains("serving rpId"), "\(bad): \(output)")
        #expect(output.contains(bad.keys.first!), "\(bad): names the variable: \(output)")
    }

    /// Issue 33, point 6: without a key-encryption key and with the database down, serve used to print
    /// "listening", then wait for the database forever while /healthz said ok.
    @Test("no key-encryption key and no database: serve exits 64 at once naming the key and the fix, without listening")
    func noKEKRefusedBeforeTheDatabase() throws {
        var env = Self.production(databaseURL: "postgresql://latchkey@127.0.0.1:1/latchkey?connect_timeout=1")
        env["LATCHKEY_KEY_ENCRYPTION_KEY"] = nil
        let (status, output) = try Self.runServe(env, seconds: 20)
        #expect(status == 64, "\(output)")
        #expect(output.contains("LATCHKEY_KEY_ENCRYPTION_KEY is not set") && output.contains("openssl rand -base64 32"), "\(output)")
        #expect(!output.contains("listening"), "\(output)")
    }

    @Test("outside dev mode serve logs a warning naming the stored http:// origins it ignores, and serves")
    func warnsAboutStoredHTTPOrigins() throws {
        let scratch = try TestDatabase.Scratch()
        let local = "http://localhost:\(Int.random(in: 20000...60000))"
        do {
            // A dev-mode instance put it there.
            // rpId localhost: the only rpId an http://localhost origin can work for.
            let dev = try TestServer(name: "serve-origins-dev", rpIdOverride: "localhost") { c in
                c.databaseURL = scratch.url
                c.developmentMode = true
                c.origins = [local]
            }
            dev.services.stop(); dev.http.stop(); dev.database.shutdown()
        }
        let binary = try #require(ServeProcess.findBinary(), "build the latchkey executable (swift build --build-tests)")
        let serve = try ServeProcess(binary: binary, environment: Self.production(databaseURL: scratch.url))
        defer { serve.stop() }
        _ = try serve.waitUntilServing()
        let output = serve.output
        let warning = try #require(output.split(separator: "\n").first { $0.contains("warning: ignoring") }, "\(output)")
        #expect(warning.contains(local) && warning.contains("http://"), "\(warning)")
        // Before it listens: the warning comes first.
        #expect(output.range(of: "warning: ignoring")!.lowerBound < output.range(of: "serving rpId")!.lowerBound)
        withExtendedLifetime(scratch) {}
    }
}
