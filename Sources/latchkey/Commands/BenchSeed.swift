import Crypto
import LatchkeyServer
import PostgreSQL
import WebAuthn
import WebAuthnTesting
#if canImport(Glibc)
import Glibc
#endif

/// The accounts `bench login --accounts N` seeds with COPY (through `psql`, the ordinary client):
/// N users, one ES256 passkey each, and two audit lines each (what a sign-up writes). Every passkey
/// shares one key pair, so the bench can sign for any of them; credential ids, user ids and user
/// handles are SHA-256 of the index, random-looking as real ones are, so the indexes have the
/// shape of real ones. Index `i` is enough to rebuild the authenticator that logs in.
struct SeededAccounts: @unchecked Sendable {
    let privateKey: PrivateKey
    let count: Int
    static let cacheNote = "keyed by credential id and key bytes, 50,000 keys, oldest out first; with N random accounts most logins miss it and import the key (cold)"

    static func credentialId(_ i: Int) -> [UInt8] { Array(Digest.sha256(Array("bench-credential-\(i)".utf8)).prefix(16)) }
    static func userHandle(_ i: Int) -> [UInt8] { Digest.sha256(Array("bench-handle-\(i)".utf8)) }
    static func userId(_ i: Int) -> String { Base64URL.encode(Array(Digest.sha256(Array("bench-user-\(i)".utf8)).prefix(16))) }

    /// The key every seeded passkey has: fixed, so a reused database still matches.
    static let keyPEM = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgOR0lAl0BkmjvOHEb
        oBoZ+3Gh9B+ZWKB3bTIr++O1OKGhRANCAASE/ZpL1007vJN6ty+e3uLltfIuw6hZ
        22Y2QKFv0enplD7nZOfW30uutkt2ye/UnNjcx12kD0GT3yRSt7J/iOIB
        -----END PRIVATE KEY-----
        """

    init(count: Int) {
        // swiftlint:disable:next force_try
        privateKey = try! PrivateKey(pkcs8PEM: Self.keyPEM)
        self.count = count
    }

    func authenticator(_ i: Int) -> SoftAuthenticator {
        SoftAuthenticator(algorithm: .es256, privateKey: privateKey, credentialId: Self.credentialId(i), userHandle: Self.userHandle(i))
    }

    /// COPYs the rows into `databaseURL` (already migrated by its server); prints what it took.
    func seed(databaseURL: String) -> Bool {
        let start = monotonicNow()
        let keyHex = Hex.encode(COSEKey.encode(privateKey.publicKey, algorithm: .es256)!)
        let ok = copy(databaseURL, "users (id, user_handle, username, display_name)") { i, out in
            out += "\(Self.userId(i))\t\\\\x\(Hex.encode(Self.userHandle(i)))\tseed-\(i)\tSeed \(i)\n"
        } && copy(databaseURL, "credentials (id, user_id, public_key, alg, sign_count, aaguid, transports, backup_eligible, backed_up, "
                  + "attestation_format, attestation_type, name)") { i, out in
            out += "\\\\x\(Hex.encode(Self.credentialId(i)))\t\(Self.userId(i))\t\\\\x\(keyHex)\t-7\t0\t\\\\x00000000000000000000000000000000\t"
                + "[\"internal\"]\tf\tf\tnone\tnone\tSeed passkey\n"
        } && copy(databaseURL, "audit_log (actor, action, subject, detail)") { i, out in
            let u = Self.userId(i)
            out += "\(u)\tuser.created\t\(u)\t{}\n\(u)\tpasskey.registered\t\(u)\t{\"seed\": true}\n"
        }
        guard ok else { return false }
        do {
            try Self.vacuum(try PostgresConnection(url: databaseURL))
        } catch {
            printError("VACUUM after the seed failed: \(error)"); return false
        }
        print("seeded \(count) accounts, \(count) passkeys, \(2 * count) audit lines with COPY in \(formatDecimal(monotonicNow() - start, places: 1)) s")
        fflush(nil)
        return true
    }

    /// Takes a seeded database back to what `seed` left: the sessions, challenges and audit lines
    /// that earlier runs' logins wrote are deleted and the tables vacuumed. The credentials keep the
    /// counters and last uses those logins stored (the bench's passkeys report counter 0, like
    /// synced ones, so every login still passes). False when any step fails.
    static func reset(databaseURL: String) -> Bool {
        do {
            let c = try PostgresConnection(url: databaseURL)
            // audit_log is append-only by trigger (0001); this is the bench's own database, and the
            // trigger is on again before the transaction ends.
            _ = try c.executeScript("""
                BEGIN;
                TRUNCATE refresh_tokens, refresh_families, challenges CASCADE;
                DO $$ BEGIN IF to_regclass('used_challenges') IS NOT NULL THEN TRUNCATE used_challenges; END IF; END $$;
                ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update;
                DELETE FROM audit_log WHERE action NOT IN ('user.created', 'passkey.registered');
                ALTER TABLE audit_log ENABLE TRIGGER audit_log_no_update;
                COMMIT;
                """)
            try vacuum(c)
            return true
        } catch {
            printError("resetting the bench database failed: \(error)")
            return false
        }
    }

    /// Reads every table and index of the bench's database into PostgreSQL's buffer pool
    /// (`pg_prewarm`, in PostgreSQL's contrib): rounds then measure a running database, not the first
    /// reads after a restart, which ran the first 1 M-account round 35–45 % slow. Prints what it
    /// loaded, or why it could not (then the first round reads through the kernel's page cache).
    static func prewarm(databaseURL: String, name: String) {
        do {
            let c = try PostgresConnection(url: databaseURL)
            _ = try c.executeScript("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
            let rows = try c.query("""
                SELECT coalesce(sum(pg_prewarm(c.oid)), 0)::bigint AS blocks, current_setting('block_size')::bigint AS block,
                       pg_size_bytes(current_setting('shared_buffers'))::bigint AS pool
                FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i', 't') AND c.relpersistence = 'p'
                """)
            let blocks = try rows.first?.int64("blocks") ?? 0, block = try rows.first?.int64("block") ?? 8192
            let pool = try rows.first?.int64("pool") ?? 0
            print("prewarmed \(name): \(ScaleBenchmark.megabytes(blocks * block)) read into shared_buffers (\(ScaleBenchmark.megabytes(pool)))")
        } catch {
            print("not prewarmed \(name) (\(error)): its first round reads through the page cache")
        }
        fflush(nil)
    }

    /// VACUUM (ANALYZE) of the tables `seed` fills: hint bits set and statistics fresh before a phase.
    private static func vacuum(_ c: PostgresConnection) throws {
        for table in ["users", "credentials", "audit_log"] { _ = try c.executeScript("VACUUM (ANALYZE) \(table)") }
    }

    /// `COPY table FROM STDIN` through psql, the rows written by `row` in 1 MB chunks.
    private func copy(_ url: String, _ table: String, _ row: (Int, inout String) -> Void) -> Bool {
        guard let psql = findPostgresTool("psql") else { printError("psql not found (Debian: postgresql-client)"); return false }
        guard let child = spawn([psql, "-q", "-v", "ON_ERROR_STOP=1", "-c", "COPY \(table) FROM STDIN", url],
                                capture: .standardOutputAndError, input: true), let fd = child.input else {
            printError("cannot start psql"); return false
        }
        var chunk = ""
        chunk.reserveCapacity(1 << 20)
        var failed = false
        func flush() {
            guard !failed else { return }
            var bytes = Array(chunk.utf8)[...]
            while !bytes.isEmpty {
                let n = bytes.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count) }
                if n < 0 { if errno == EINTR { continue }; failed = true; return }
                bytes = bytes.dropFirst(n)
            }
            chunk.removeAll(keepingCapacity: true)
        }
        for i in 0..<count {
            row(i, &chunk)
            if chunk.utf8.count >= 1 << 20 { flush() }
        }
        flush()
        close(fd)
        let output = String(decoding: child.finish() ?? [], as: UTF8.self)
        if failed || !output.isEmpty {
            printError("COPY \(table) failed: \(output)"); return false
        }
        return true
    }
}

/// A PostgreSQL client program (`psql`, `pgbench`) on PATH's usual places or under /usr/lib/postgresql.
func findPostgresTool(_ name: String) -> String? {
    for dir in ["/usr/bin", "/usr/local/bin"] where access("\(dir)/\(name)", X_OK) == 0 { return "\(dir)/\(name)" }
    guard let d = opendir("/usr/lib/postgresql") else { return nil }
    defer { closedir(d) }
    while let e = readdir(d) {
        let version = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
        let path = "/usr/lib/postgresql/\(version)/bin/\(name)"
        if access(path, X_OK) == 0 { return path }
    }
    return nil
}
