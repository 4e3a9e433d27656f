import Crypto
import PostgreSQL
import Storage
#if canImport(Glibc)
import Glibc
#endif

/// pgbench with the statements one login costs the server (keep in step with Storage's
/// LoginRepository.login): options write nothing (the state is sealed into the challenge); the
/// verify is one transaction — BEGIN and the read (the challenge's use, the credential with its
/// owner and accepted ids), then the one statement (the challenge's id recorded, the counter's
/// compare-and-set, the refresh family bound to its passkey, its token, the audit line) and COMMIT.
/// Prepared statements and two pipelines (BEGIN with the read, the write with COMMIT): the server's
/// round trips.
enum PgbenchBaseline {
    static func script(credentialHex: String) -> String {
        let advances = "(0 > sign_count OR (0 = 0 AND sign_count = 0))"
        let unchanged = "(0 = 0 AND sign_count = 0 AND backed_up = false AND backup_eligible = COALESCE(NULL::boolean, backup_eligible) AND NOT false)"
        // The challenge's id from two random numbers and the client: a constant per transaction (an
        // id built with clock_timestamp() is volatile, and its lookup a sequential scan).
        return """
        \\set r random(1, 2000000000)
        \\set s random(1, 2000000000)
        \\startpipeline
        BEGIN;
        SELECT EXISTS (SELECT 1 FROM used_challenges WHERE id = decode(lpad(to_hex(:r::bigint), 8, '0') || lpad(to_hex(:s::bigint), 8, '0') || lpad(to_hex(:client_id::bigint), 8, '0') || '00000000', 'hex')) AS used, now() + interval '300 seconds' > now() AS live, c.id, c.user_id, c.public_key, c.alg, c.sign_count, c.aaguid, c.transports::text AS transports, c.backup_eligible, c.backed_up, c.attestation_format, c.attestation_type, c.name, c.flagged, c.created_at, c.last_used_at, c.approves_from, c.hardware_bound, u.user_handle, u.username, u.display_name, (SELECT string_agg(encode(a.id, 'hex'), ',' ORDER BY a.created_at, a.id) FROM credentials a WHERE a.user_id = c.user_id AND a.revoked_at IS NULL) AS accepted, pg_advisory_xact_lock_shared(\(RevocationCascade.accountSessionsLock), hashtext(c.user_id))::text AS sessions_lock FROM (VALUES (1)) AS one (x) LEFT JOIN credentials c ON c.id = decode('\(credentialHex)', 'hex') AND c.revoked_at IS NULL LEFT JOIN users u ON u.id = c.user_id;
        \\endpipeline
        \\startpipeline
        WITH used AS (INSERT INTO used_challenges (id, expires_at) SELECT decode(lpad(to_hex(:r::bigint), 8, '0') || lpad(to_hex(:s::bigint), 8, '0') || lpad(to_hex(:client_id::bigint), 8, '0') || '00000000', 'hex'), now() + interval '300 seconds' WHERE now() + interval '300 seconds' > statement_timestamp() ON CONFLICT (id) DO NOTHING RETURNING id), touched AS (UPDATE credentials SET sign_count = GREATEST(sign_count, 0), backed_up = false, backup_eligible = COALESCE(NULL::boolean, backup_eligible), flagged = flagged OR false OR NOT \(advances), last_used_at = now() WHERE id = decode('\(credentialHex)', 'hex') AND revoked_at IS NULL AND \(advances) AND EXISTS (SELECT 1 FROM used) AND NOT \(unchanged) RETURNING id, user_id, sign_count, flagged), cred AS (SELECT id, user_id, sign_count, flagged FROM touched UNION ALL SELECT id, user_id, sign_count, flagged FROM credentials WHERE id = decode('\(credentialHex)', 'hex') AND revoked_at IS NULL AND \(unchanged) AND EXISTS (SELECT 1 FROM used) AND NOT EXISTS (SELECT 1 FROM touched)), fam AS (INSERT INTO refresh_families (id, user_id, method, credential_id, auth_time, last_used_at, browser, asserted) SELECT md5(random()::text || clock_timestamp()::text), user_id, 'passkey', id, now(), now(), false, true FROM cred RETURNING id, user_id), tok AS (INSERT INTO refresh_tokens (hash, family_id, expires_at) SELECT sha256((random()::text || clock_timestamp()::text)::bytea), fam.id, now() + make_interval(secs => 2592000) FROM fam RETURNING hash), audit AS (INSERT INTO audit_log (actor, action, subject, detail) SELECT fam.user_id, 'passkey.login', fam.user_id, '{"bench": true}'::jsonb FROM fam, tok RETURNING id) SELECT (SELECT sign_count FROM cred) AS sign_count, (SELECT flagged FROM cred) AS flagged, CASE WHEN EXISTS (SELECT 1 FROM cred) THEN true ELSE EXISTS (SELECT 1 FROM credentials WHERE id = decode('\(credentialHex)', 'hex') AND revoked_at IS NULL) END AS known, EXISTS (SELECT 1 FROM used) AS fresh;
        COMMIT;
        \\endpipeline

        """
    }

    /// pgbench's rate and the CPU its client process spent (seconds).
    static func run(databaseURL: String, credentialIds: [[UInt8]], concurrency: Int, seconds: Double) -> (tps: Double, clientCPU: Double)? {
        let scripts = credentialIds.prefix(32).map { script(credentialHex: Hex.encode($0)) }
        let before = childrenCPUSeconds()
        guard let tps = tps(databaseURL: databaseURL, scripts: scripts, name: "login", concurrency: concurrency, seconds: seconds) else { return nil }
        return (tps, childrenCPUSeconds() - before)
    }

    /// user + system CPU of this process's waited-for children, in seconds.
    static func childrenCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_CHILDREN.rawValue), &usage)
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// pgbench -n -M prepared at `concurrency` clients for `seconds`, the scripts picked with equal
    /// weights; its tps, or nil (with the reason on stderr).
    static func tps(databaseURL: String, scripts: [String], name: String, concurrency: Int, seconds: Double) -> Double? {
        guard let pgbench = ["/usr/bin/pgbench"] .first(where: { access($0, X_OK) == 0 }) ?? findPgbench() else {
            printError("pgbench \(name) skipped: pgbench not found (Debian: postgresql-client)")
            return nil
        }
        guard let dir = privateTemporaryDirectory("latchkey-bench-pgbench") else { return nil }
        var paths: [String] = []
        defer {
            for path in paths { unlink(path) }
            rmdir(dir)
        }
        var args = [pgbench, "-n", "-M", "prepared", "-c", "\(concurrency)", "-j", "2", "-T", "\(max(1, Int(seconds)))"]
        for (i, script) in scripts.enumerated() {
            let path = "\(dir)/\(name)-\(i).sql"
            let text = Array(script.utf8)
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600)
            guard fd >= 0 else { printError("pgbench \(name) skipped: cannot write \(path)"); return nil }
            paths.append(path)
            _ = text.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count) }
            close(fd)
            args += ["-f", "\(path)@1"]
        }
        args.append(databaseURL)
        guard let output = runProcess(args) else { return nil }
        for line in output.split(separator: "\n") where line.hasPrefix("tps = ") {
            return Double(line.dropFirst(6).split(separator: " ").first ?? "")
        }
        printError("pgbench \(name) failed:\n" + output)
        return nil
    }

    static func findPgbench() -> String? {
        guard let d = opendir("/usr/lib/postgresql") else { return nil }
        defer { closedir(d) }
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            let path = "/usr/lib/postgresql/\(name)/bin/pgbench"
            if access(path, X_OK) == 0 { return path }
        }
        return nil
    }
}

/// The commit floor: pgbench inserting one row per transaction (autocommit, so each INSERT is its
/// own commit, durable when the database's `synchronous_commit` is on) into a scratch table that
/// exists only for the run. It measures what the server, its WAL and its disk allow one durable
/// commit per transaction at this concurrency: a login, which needs one, cannot go faster.
enum CommitFloor {
    static func run(databaseURL: String, concurrency: Int, seconds: Double) -> (tps: Double, synchronousCommit: String)? {
        // A name chosen here (pid and random digits), never input.
        let table = "latchkey_bench_commit_floor_\(getpid())_\(UInt32.random(in: 0...UInt32.max))"
        let connection: PostgresConnection
        do {
            connection = try PostgresConnection(url: databaseURL)
            try connection.executeScript("CREATE TABLE \(table) (client int NOT NULL, n int NOT NULL)")
        } catch {
            printError("pgbench commit floor skipped: could not create its scratch table: \(error)")
            return nil
        }
        defer {
            do { try connection.executeScript("DROP TABLE IF EXISTS \(table)") } catch {
                printError("could not drop the scratch table \(table): \(error)")
            }
        }
        let mode = (try? connection.query("SELECT current_setting('synchronous_commit') AS mode").first?.string("mode")) ?? "unknown"
        let script = """
            \\set r random(1, 2000000000)
            INSERT INTO \(table) (client, n) VALUES (:client_id, :r);

            """
        guard let tps = PgbenchBaseline.tps(databaseURL: databaseURL, scripts: [script], name: "commit-floor",
                                            concurrency: concurrency, seconds: seconds) else { return nil }
        return (tps, mode)
    }
}
