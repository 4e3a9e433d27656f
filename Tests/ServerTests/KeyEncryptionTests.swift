import Crypto
import Foundation
import JSON
@testable import LatchkeyServer
import PostgreSQL
import PostgreSQLTesting
import Storage
import Testing
import Tokens

/// Issue 13 defect 7: token signing keys are sealed at rest (AES-256-GCM under the KEK).
@Suite struct KeyEncryptionTests {
    static func kek() -> (KeyEncryptionKey, String) {
        let text = KeyEncryptionKey.generateText()
        return (try! KeyEncryptionKey.parse(text, name: "test", readFile: { _ in nil }), text)
    }

    /// Services over `scratch` with `kek`, started (migrate, seed, signing keys, change feed).
    static func services(_ scratch: TestDatabase.Scratch, kek: KeyEncryptionKey?) throws -> (Services, Database) {
        var c = Configuration()
        c.rpId = "keys.latchkey.test"
        c.issuer = "https://keys.latchkey.test"
        c.databaseURL = scratch.url
        c.keyEncryptionKey = kek
        let database = Database(url: scratch.url, connections: 2)
        let services = Services(configuration: c, database: database, log: RequestLog(enabled: false))
        _ = try services.migrate()
        try services.prepareSigningKeys()
        return (services, database)
    }

    static func token(_ services: Services) throws -> String {
        let now = Date().timeIntervalSince1970.rounded()
        return try services.signer.sign(.object([("iss", "https://keys.latchkey.test"), ("aud", "keys.latchkey.test"), ("sub", "u"),
                                                 ("iat", .number(now)), ("exp", .number(now + 300))]), type: "at+jwt")
    }

    /// The DER bytes inside a PKCS#8 PEM.
    static func der(_ pem: String) -> [UInt8] {
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        return Base64.decodeStandard(body) ?? []
    }

    @Test("a dump of signing_keys holds no PEM and no private key bytes; a plaintext row from before is sealed on first start")
    func databaseDumpHoldsNoPrivateKey() throws {
        let scratch = try TestDatabase.Scratch()
        let (kek, _) = Self.kek()
        // A row as the server wrote it before keys were encrypted (plaintext PEM), migrated first.
        let legacy = SigningKey.generate()
        do {
            let database = Database(url: scratch.url, connections: 1)
            _ = try database.migrate()
            database.shutdown()
            try scratch.connect().execute("INSERT INTO signing_keys (kid, private_pem) VALUES (\(legacy.kid), \(legacy.privateKey.pkcs8PEM))")
        }
        let (services, database) = try Self.services(scratch, kek: kek)
        defer { services.stop(); database.shutdown() }
        _ = try services.signer.rotateSigningKey()
        let live = services.signer.keySet()
        #expect(live.all[legacy.kid] != nil)  // the old key still verifies what it signed

        let rows = try scratch.connect().query("SELECT kid, private_pem, sealed_key, signing_keys::text AS dump FROM signing_keys")
        #expect(rows.count == 2)
        var privateDER: [[UInt8]] = [Self.der(legacy.privateKey.pkcs8PEM)]
        if let current = live.current { privateDER.append(Self.der(current.privateKey.pkcs8PEM)) }
        for row in rows {
            #expect(try row.isNull("private_pem"))
            let dump = try row.string("dump")
            #expect(!dump.contains("PRIVATE KEY") && !dump.contains("BEGIN") && !dump.contains("MII"))
            let sealed = try #require(try row.optionalBytes("sealed_key"))
            #expect(SealedSecret.keyID(of: sealed) == kek.idText)
            // No 12-byte run of either private key's DER (the scalar is 32 bytes) appears in the envelope.
            for der in privateDER {
                #expect(!stride(from: 0, to: der.count - 12, by: 4).contains { i in
                    sealed.indices.dropLast(11).contains { Array(sealed[$0..<($0 + 12)]) == Array(der[i..<(i + 12)]) }
                })
            }
        }
    }

    @Test("a wrong or missing KEK: Latchkey refuses to start, and says why")
    func wrongKeyEncryptionKeyRefusesToStart() throws {
        let scratch = try TestDatabase.Scratch()
        let (right, _) = Self.kek()
        let (wrong, wrongText) = Self.kek()
        do {
            let (services, database) = try Self.services(scratch, kek: right)
            services.stop(); database.shutdown()
        }
        #expect { _ = try Self.services(scratch, kek: wrong) } throws: { error in
            guard let e = error as? SigningKeyError, e.code == .keyEncryptionKeyWrong else { return false }
            // Each id once (issue 25: the refusal repeated one id twice), and where the key in use came from.
            return e.description.contains("cannot open token signing key") && e.description.contains("LATCHKEY_KEY_ENCRYPTION_KEY")
                && e.description.components(separatedBy: right.idText).count == 2
                && e.description.components(separatedBy: wrong.idText).count == 2
        }
        #expect { _ = try Self.services(scratch, kek: nil) } throws: { error in
            (error as? SigningKeyError)?.code == .keyEncryptionKeyMissing
        }
        // The real binary: a message naming the problem — a missing key is a configuration refusal
        // (64, before the first connection: issue 33), a wrong one is found in the database (1).
        let binary = try #require(ServeProcess.findBinary(), "build the latchkey executable (swift build --build-tests)")
        for (kekValue, expected, code) in [(wrongText, "cannot open token signing key", Int32(1)),
                                           ("", "LATCHKEY_KEY_ENCRYPTION_KEY is not set", Int32(64))] {
            let (status, _, stderr) = try run(binary, ["serve"], environment: [
                "DATABASE_URL": scratch.url, "LATCHKEY_LISTEN": "127.0.0.1:0", "LATCHKEY_RP_ID": "keys.latchkey.test",
                "LATCHKEY_ORIGINS": "https://keys.latchkey.test", "LATCHKEY_DEV": "0", "LATCHKEY_KEY_ENCRYPTION_KEY": kekValue,
            ])
            #expect(status == code, "\(stderr)")
            #expect(stderr.contains(expected), "\(stderr)")
        }
    }

    @Test("latchkey keys rotate --new-key re-encrypts every key; tokens signed before still verify, on running and restarted instances")
    func rotationKeepsTokensVerifiable() throws {
        let scratch = try TestDatabase.Scratch()
        let (old, oldText) = Self.kek()
        let (new, newText) = Self.kek()
        let (running, runningDB) = try Self.services(scratch, kek: old)
        defer { running.stop(); runningDB.shutdown() }
        let before = try Self.token(running)

        let binary = try #require(ServeProcess.findBinary(), "build the latchkey executable (swift build --build-tests)")
        let env = ["DATABASE_URL": scratch.url, "LATCHKEY_KEY_ENCRYPTION_KEY": oldText]
        let rotated = try run(binary, ["keys", "rotate", "--new-key", newText], environment: env)
        #expect(rotated.status == 0, "\(rotated.stderr)")
        let listed = try run(binary, ["keys", "list"], environment: ["DATABASE_URL": scratch.url, "LATCHKEY_KEY_ENCRYPTION_KEY": newText])
        #expect(listed.stdout.contains("kek \(new.idText)") && !listed.stdout.contains(old.idText), "\(listed.stdout)")

        // A restarted instance with the new KEK verifies the old token; the old KEK no longer starts.
        let (restarted, restartedDB) = try Self.services(scratch, kek: new)
        defer { restarted.stop(); restartedDB.shutdown() }
        #expect((try? restarted.signer.verify(before, type: "at+jwt")) != nil)
        #expect(throws: (any Error).self) { _ = try Self.services(scratch, kek: old) }
        // The instance still running with the old KEK keeps the keys it holds (reload included).
        try running.signer.reloadKeys()
        #expect((try? running.signer.verify(before, type: "at+jwt")) != nil)

        // A new signing key (through the CLI, under the new KEK): new tokens use it, old ones still verify.
        let added = try run(binary, ["keys", "rotate", "--signing-key"], environment: ["DATABASE_URL": scratch.url, "LATCHKEY_KEY_ENCRYPTION_KEY": newText])
        #expect(added.status == 0, "\(added.stderr)")
        try restarted.signer.reloadKeys()
        let after = try Self.token(restarted)
        #expect(kid(after) != nil && kid(after) != kid(before))
        #expect((try? restarted.signer.verify(before, type: "at+jwt")) != nil)
        #expect((try? restarted.signer.verify(after, type: "at+jwt")) != nil)
        // Wrong usage is refused without touching anything.
        #expect(try run(binary, ["keys", "rotate"], environment: env).status == 64)
    }

    func kid(_ token: String) -> String? {
        guard let first = token.split(separator: ".").first, let bytes = Base64URL.decode(String(first)) else { return nil }
        return (try? JSONParser.parse(bytes))?["kid"]?.stringValue
    }

    /// Runs `binary` with `arguments` and only `environment` (plus PATH); waits up to 30 s.
    func run(_ binary: String, _ arguments: [String], environment: [String: String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        process.environment = environment.merging(["PATH": "/usr/bin:/bin"]) { a, _ in a }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let deadline = Date().addingTimeInterval(30)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        if process.isRunning { process.terminate(); throw TestSetupError("latchkey \(arguments.joined(separator: " ")) did not exit") }
        let stdout = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return (process.terminationStatus, stdout, stderr)
    }
}
