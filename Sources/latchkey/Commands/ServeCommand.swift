import Tokens
import HTTP
import LatchkeyServer
import Storage
import WellKnown
#if canImport(Glibc)
import Glibc
#endif

/// `latchkey serve`: check the configuration, listen at once, and run the start-up steps (migrate
/// under an advisory lock, …) on a thread that waits for the database: `/readyz` says 503 with the
/// reason until they are done. Serves until SIGINT/SIGTERM.
enum ServeCommand: Command {
    static let name = "serve"
    static let summary = "run the HTTP server (configuration from LATCHKEY_* and DATABASE_URL)"
    static let help = """
        usage: latchkey serve

        Reads its configuration from the environment (docs/operator.md; `latchkey config check`
        prints what it would use): DATABASE_URL, LATCHKEY_RP_ID, LATCHKEY_ORIGINS, LATCHKEY_LISTEN,
        LATCHKEY_ADMIN_KEY, LATCHKEY_KEY_ENCRYPTION_KEY (required outside development mode),
        LATCHKEY_DEV, …
        LATCHKEY_ADMIN_LISTEN=host:port serves /admin/… (API and console) only on that second
        listener; the public listener then answers 404 there. The console is reached at
        LATCHKEY_ADMIN_ORIGIN (required with it outside development mode).
        The whole configuration, the key-encryption key included, is checked before the first
        socket or database connection: a refusal exits 64 naming the setting and the fix.
        LATCHKEY_THREADS sets the worker threads per process; LATCHKEY_WORKERS starts that many
        processes sharing the listening port (SO_REUSEPORT). With LATCHKEY_MDS_BLOB set, SIGHUP
        reloads the metadata BLOB (so does a change of the file, checked every LATCHKEY_MDS_POLL s).
        """

    static func run(_ arguments: [String]) -> Int32 {
        if arguments.contains("-h") || arguments.contains("--help") { print(help); return ExitCode.success }
        guard arguments.isEmpty else { printError(help); return ExitCode.usage }
        var configuration: Configuration
        do {
            configuration = try Configuration.fromEnvironment()
            try resolveDevelopmentKEK(&configuration, environment: Configuration.processEnvironment(),
                                      announce: Configuration.processEnvironment()["LATCHKEY_WORKER_CHILD"] != "1")
        } catch {
            printError("latchkey serve: \(error.description)"); return ExitCode.usage
        }
        // SPEC "Outside dev mode": the whole configuration, the key-encryption key included, is
        // checked before the first socket or database connection; a refusal names the setting and the fix.
        if let refusal = configuration.startRefusal() {
            printError("latchkey serve: \(refusal)"); return ExitCode.usage
        }
        let isChild = Configuration.processEnvironment()["LATCHKEY_WORKER_CHILD"] == "1"
        // Block the signals we wait for before any thread starts, so they all inherit the mask.
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        sigaddset(&signals, SIGHUP)  // reload the metadata BLOB
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        signal(SIGPIPE, SIG_IGN)

        let database = Database(url: configuration.databaseURL, connections: configuration.threads + 2,
                                pooler: configuration.databasePooler, listenURL: configuration.databaseListenURL,
                                queryTimeout: configuration.databaseQueryTimeout)
        let services = Services(configuration: configuration, database: database)
        // The configuration's rules first, before anything listens: a bad configuration never serves.
        do { try services.validateConfiguration() } catch {
            printError("latchkey serve: \(error.description)")
            return ExitCode.usage
        }
        // The pages it serves, before it listens: a server started from another folder would answer 404 at `/`.
        if let refusal = configuration.webFolderRefusal() {
            printError("latchkey serve: \(refusal)")
            return ExitCode.usage
        }
        if !isChild {
            for warning in configuration.warnings() { printError("latchkey serve: warning: \(warning)") }
        }
        // One route table; with LATCHKEY_ADMIN_LISTEN, /admin/… only on the admin listener.
        let application = Application(services: services)
        let server: HTTPServer
        var adminServer: HTTPServer? = nil
        do {
            server = try HTTPServer(configuration: .init(
                host: configuration.listenHost, port: configuration.listenPort, threadPoolSize: configuration.threads,
                connectionTimeoutSeconds: 30, connectionLimit: 4096,
                perAddressConnectionLimit: configuration.connectionsPerAddress, maxBodyBytes: configuration.maxBody,
                reusePort: configuration.workers > 1, largeBodies: Application.largeBodies(configuration),
                eventLoops: configuration.eventLoops),
                responder: application.serving(configuration.adminListen == nil ? .all : .publicOnly))
        } catch {
            printError("latchkey serve: cannot listen on \(configuration.listenHost):\(configuration.listenPort): \(error)")
            return ExitCode.failure
        }
        if let admin = configuration.adminListen {
            do {
                adminServer = try HTTPServer(configuration: .init(
                    host: admin.host, port: admin.port, threadPoolSize: max(1, configuration.threads / 2),
                    connectionTimeoutSeconds: 30, connectionLimit: 256, maxBodyBytes: configuration.maxBody,
                    reusePort: configuration.workers > 1, largeBodies: Application.largeBodies(configuration)), responder: application.serving(.adminOnly))
            } catch {
                printError("latchkey serve: cannot listen on \(admin.host):\(admin.port) (LATCHKEY_ADMIN_LISTEN): \(error)")
                server.stop()
                return ExitCode.failure
            }
        }
        var children: [pid_t] = []
        if !isChild, configuration.workers > 1 {
            for _ in 1..<configuration.workers { if let pid = spawnSelf(["serve"], extraEnvironment: ["LATCHKEY_WORKER_CHILD=1"]) { children.append(pid) } }
        }
        // Then the start-up steps — migrate, seed LATCHKEY_ORIGINS, signing keys, change feed, … — on
        // their own thread while this one listens, each retried while the database is unreachable or
        // read-only (an instance started mid-failover comes up by itself). Until they are done every
        // route but /healthz, /readyz and /metrics answers 503, and the "serving" line (which scripts
        // wait for) is not printed yet.
        if !isChild {
            printError("latchkey: listening at \(configuration.listenHost):\(server.port); starting up (GET /readyz says when it is ready)")
        }
        let announced = (port: server.port, admin: adminServer?.port)
        let settled = configuration
        do {
            try services.startInBackground(onReady: {
                guard !isChild else { return }
                // SPEC "Assurance": outside dev mode stored http:// origins are ignored; say which.
                if let ignored = try? services.origins.ignoredOrigins(), !ignored.isEmpty {
                    printError("latchkey serve: warning: ignoring \(ignored.count) stored http:// origin(s) outside development mode "
                               + "(ceremonies from them are origin_not_allowed; remove them with `latchkey origins remove`): "
                               + ignored.joined(separator: ", "))
                }
                // A pinned LATCHKEY_WELLKNOWN_DIR that no longer says what the declared apps say (read
                // once the database is reachable: the declared apps live there).
                if let problems = try? services.wellKnown.pinnedDisagreements(), !problems.isEmpty {
                    printError("latchkey serve: warning: the association files pinned in LATCHKEY_WELLKNOWN_DIR (\(settled.wellKnownDirectory ?? "")) "
                               + "disagree with the declared apps, and they are what is served:")
                    for p in problems { printError("  \(p.description)") }
                }
                printError("latchkey: serving rpId \(settled.rpId) on http://\(settled.listenHost):\(announced.port) "
                           + "(\(settled.workers) process(es) × \(settled.threads) threads)")
                if let open = browserAddress(rpId: settled.rpId, host: settled.listenHost, port: announced.port) {
                    printError("latchkey: open \(open)/ in a browser (passkeys for rpId \(settled.rpId) work there, not at http://\(settled.listenHost):\(announced.port))")
                }
                if let admin = announced.admin {
                    printError("latchkey: admin API and console at http://\(settled.adminListen!.host):\(admin)/admin/ only")
                }
            }, onFatal: { error in
                // No KEK or the wrong one, unreadable attestation roots: waiting cannot mend it.
                printError("latchkey serve: cannot start: \(String(describing: error))")
                // `_exit`, not `exit`: this is the start-up thread, and `exit` would run the
                // process's exit handlers (OpenSSL's clean-up among them) while the listener's
                // and the workers' threads still run, which can crash the exit itself (SIGSEGV
                // instead of status 1). Nothing is left to flush but the standard streams.
                fflush(nil)
                _exit(ExitCode.failure)
            })
        } catch {
            printError("latchkey serve: \(error)")
            return ExitCode.usage
        }
        // Expired challenges are useless; sweep them now and then (any instance may).
        // Receipts past LATCHKEY_RECEIPT_RETENTION go the same way; their commitments stay in the log.
        // Sessions ended 30 days ago go hourly: finding unrevoked expired ones reads the whole table.
        let retention = configuration.receiptRetention
        _ = spawnThread {
            var minutes = 0
            while true {
                sleep(60)
                minutes += 1
                try? database.challenges.purgeExpired()
                try? database.dpopProofs.purgeExpired()
                do {
                    while try database.transparencyLog.purgeReceipts(olderThan: retention) > 0 {}
                } catch {
                    printError("latchkey serve: receipts past LATCHKEY_RECEIPT_RETENTION not deleted (next try in a minute): \(error)")
                }
                guard minutes % 60 == 1 else { continue }
                do {
                    while try database.sessions.purgeEnded() > 0 {}
                } catch {
                    printError("latchkey serve: sessions ended 30 days ago not deleted (next try in an hour): \(error)")
                }
            }
        }

        var received: Int32 = 0
        while true {
            sigwait(&signals, &received)
            guard received == SIGHUP else { break }
            // SIGHUP: reload LATCHKEY_MDS_BLOB now (a bad BLOB is reported and the good one stays), here and in the workers.
            for pid in children { kill(pid, SIGHUP) }
            if services.metadata.isConfigured { services.metadata.reload() }
        }
        for pid in children { kill(pid, SIGTERM) }
        server.stop()
        adminServer?.stop()
        for pid in children { var status: Int32 = 0; waitpid(pid, &status, 0) }
        services.stop()
        database.shutdown()
        return ExitCode.success
    }
}

/// Starts this executable again with `arguments`; returns its pid.
func spawnSelf(_ arguments: [String], extraEnvironment: [String] = []) -> pid_t? {
    spawn(["/proc/self/exe"] + arguments, extraEnvironment: extraEnvironment)?.pid
}

/// Where a browser must open a loopback dev server: its host has to be the rpId (or under it), and
/// `127.0.0.1` is not `localhost`. nil when the listen address is not loopback or rpId is not local.
func browserAddress(rpId: String, host: String, port: Int) -> String? {
    guard rpId == "localhost" || rpId.hasSuffix(".localhost"),
          ["127.0.0.1", "0.0.0.0", "::", "::1", "localhost"].contains(host) else { return nil }
    return "http://\(rpId):\(port)"
}
