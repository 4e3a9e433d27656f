import Curl
import Storage
import WebAuthn
import Glibc

/// The configuration from the process environment (SPEC "Configuration"): each variable parsed and
/// range-checked here, then the rules between them (`validate`), before anything listens.
extension Configuration {
    public static func fromEnvironment(_ env: [String: String] = Configuration.processEnvironment()) throws(Invalid) -> Configuration {
        var c = Configuration()
        c.developmentMode = try developmentMode(env)
        if let v = env["LATCHKEY_RP_ID"], !v.isEmpty {
            try checkRPId(v)
            c.rpId = v
        }
        if let v = env["LATCHKEY_RP_NAME"], !v.isEmpty { c.rpName = v }
        if let v = env["LATCHKEY_LISTEN"], !v.isEmpty {
            guard let address = ListenAddress(parsing: v) else { throw Invalid(description: "LATCHKEY_LISTEN must be host:port") }
            c.listenHost = address.host
            c.listenPort = address.port
        }
        if let v = env["LATCHKEY_ADMIN_LISTEN"], !v.isEmpty {
            guard let address = ListenAddress(parsing: v) else { throw Invalid(description: "LATCHKEY_ADMIN_LISTEN must be host:port") }
            guard address != ListenAddress(host: c.listenHost, port: c.listenPort) || address.port == 0 else {
                throw Invalid(description: "LATCHKEY_ADMIN_LISTEN must differ from LATCHKEY_LISTEN")
            }
            c.adminListen = address
        }
        if let v = env["LATCHKEY_ADMIN_ORIGIN"], !v.trimmed.isEmpty {
            c.adminOrigin = v.trimmed
            c.adminOriginExplicit = true
        } else if let admin = c.adminListen, c.developmentMode, admin.port != 0, c.rpId == "localhost",
                  ["127.0.0.1", "0.0.0.0", "::", "::1"].contains(admin.host) {
            // Development mode: the console is opened on the admin listener itself.
            c.adminOrigin = "http://localhost:\(admin.port)"
        }
        if let v = env["LATCHKEY_ORIGINS"] {
            c.origins = v.split(separator: ",").map { String($0).trimmed }.filter { !$0.isEmpty }
        } else if c.developmentMode {
            c.origins = ["http://localhost:\(c.listenPort)"] + (c.adminOrigin.map { [$0] } ?? [])
        }
        c.issuer = Self.issuer(explicit: env["LATCHKEY_ISSUER"], rpId: c.rpId, developmentMode: c.developmentMode,
                               configuredOrigins: env["LATCHKEY_ORIGINS"] == nil ? [] : c.origins)
        if let v = env["LATCHKEY_EMBEDDING_ORIGINS"] {
            c.embeddingOrigins = v.split(separator: ",").map { String($0).trimmed }.filter { !$0.isEmpty }
        }
        if let v = env["LATCHKEY_ADMIN_KEY"], !v.isEmpty {
            try checkAdminKey(v, developmentMode: c.developmentMode)
            c.adminKeyHash = AdminKey.hash(v)
        }
        c.databaseURL = env["DATABASE_URL"] ?? ""
        if let v = env["LATCHKEY_DB_POOLER"], !v.isEmpty {
            guard let mode = PoolerMode(rawValue: v) else { throw Invalid(description: "LATCHKEY_DB_POOLER must be transaction (or unset)") }
            c.databasePooler = mode
        }
        if let v = env["LATCHKEY_DB_LISTEN_URL"], !v.isEmpty { c.databaseListenURL = v }
        if let v = env["LATCHKEY_DB_QUERY_TIMEOUT"], !v.isEmpty {
            guard let d = Double(v), d >= 0.1, d <= 600 else { throw Invalid(description: "LATCHKEY_DB_QUERY_TIMEOUT must be 0.1…600 seconds") }
            c.databaseQueryTimeout = d
        }
        if let v = env["LATCHKEY_REVOCATION_MAX_LAG"], !v.isEmpty {
            // Above the 250 ms heartbeat with room for a round trip; at most a minute (an access token lives five).
            guard let d = Double(v), d >= 0.5, d <= 60 else { throw Invalid(description: "LATCHKEY_REVOCATION_MAX_LAG must be 0.5…60 seconds") }
            c.revocationMaxLag = d
        }
        if let v = env["LATCHKEY_USER_VERIFICATION"] {
            guard let uv = VerificationPolicy.UserVerification(rawValue: v) else {
                throw Invalid(description: "LATCHKEY_USER_VERIFICATION must be required, preferred or discouraged")
            }
            c.userVerification = uv
        }
        func int(_ name: String, _ range: ClosedRange<Int>) throws(Invalid) -> Int? {
            guard let v = env[name] else { return nil }
            guard let n = Int(v), range.contains(n) else { throw Invalid(description: "\(name) must be a number in \(range)") }
            return n
        }
        if let n = try int("LATCHKEY_CHALLENGE_TTL", 10...86400) { c.challengeTTL = n }
        if let n = try int("LATCHKEY_MAX_BODY", 1024...(16 << 20)) { c.maxBody = n }
        if let n = try int("LATCHKEY_IMPORT_MAX_BODY", 1024...(1 << 30)) { c.importMaxBody = n }
        if let n = try int("LATCHKEY_STEP_UP_TTL", 10...86400) { c.stepUpTTL = n }
        c.stepUpTTL = min(c.stepUpTTL, c.challengeTTL)
        if let n = try int("LATCHKEY_STEP_UP_TOKEN_TTL", 10...120) { c.stepUpTokenTTL = n }
        if let n = try int("LATCHKEY_OP_SESSION_TTL", 60...2_592_000) { c.opSessionTTL = n }
        if let v = env["LATCHKEY_DEVICE_KEY_ATTESTATION"], !v.isEmpty {
            guard let r = DeviceKeyAttestationRequirement(rawValue: v) else {
                throw Invalid(description: "LATCHKEY_DEVICE_KEY_ATTESTATION must be optional or required")
            }
            c.deviceKeyAttestation = r
        }
        if let v = env["LATCHKEY_ATTESTATION_ROOTS"], !v.isEmpty { c.attestationRootsDirectory = v }
        if let v = env["LATCHKEY_ATTESTATION_STATUS"], !v.isEmpty { c.attestationStatusFile = v }
        c.appAttestDevelopment = try boolean("LATCHKEY_APP_ATTEST_DEVELOPMENT", env) ?? false
        c.requireVerifiedBoot = try boolean("LATCHKEY_DEVICE_KEY_REQUIRE_VERIFIED_BOOT", env) ?? false
        // On by default in production; off in development mode, where benchmarks and demos run from one address.
        c.rateLimit = try int("LATCHKEY_RATE_LIMIT", 0...100_000) ?? (c.developmentMode ? 0 : 50)
        c.trustProxy = try boolean("LATCHKEY_TRUST_PROXY", env) ?? false
        c.connectionsPerAddress = try int("LATCHKEY_CONNECTIONS_PER_ADDRESS", 0...100_000)
            ?? (c.developmentMode || c.trustProxy ? 0 : 64)
        if let n = try int("LATCHKEY_THREADS", 1...256) { c.threads = n }
        if let n = try int("LATCHKEY_WORKERS", 1...64) { c.workers = n }
        if let n = try int("LATCHKEY_EVENT_LOOPS", 0...64) { c.eventLoops = n }
        if let v = env["LATCHKEY_WELLKNOWN_DIR"], !v.isEmpty { c.wellKnownDirectory = v }
        c.webDirectory = WebFolder.resolve(setting: env["LATCHKEY_WEB_DIR"])
        c.aaguidFile = env["LATCHKEY_AAGUIDS"].flatMap { $0.isEmpty ? nil : $0 } ?? c.webDirectory + "/aaguids.json"
        if let v = env["LATCHKEY_SIGN_COUNT_POLICY"] {
            guard let p = VerificationPolicy.SignCountPolicy(rawValue: v) else {
                throw Invalid(description: "LATCHKEY_SIGN_COUNT_POLICY must be reject or flag")
            }
            c.signCountPolicy = p
        }
        if let v = env["LATCHKEY_ATTESTATION"] {
            guard let conveyance = AttestationConveyance(rawValue: v) else {
                throw Invalid(description: "LATCHKEY_ATTESTATION must be none, indirect, direct or enterprise")
            }
            c.attestation = conveyance
        }
        if let n = try int("LATCHKEY_WEBHOOK_MAX_AGE", 1...(30 * 86400)) { c.webhookMaxAge = n }
        if let v = env["LATCHKEY_HINTS"], !v.isEmpty {
            c.hints = v.split(separator: ",").map { String($0).trimmed }.filter { !$0.isEmpty }
            for hint in c.hints where !["security-key", "client-device", "hybrid"].contains(hint) {
                throw Invalid(description: "LATCHKEY_HINTS: \(hint) is not security-key, client-device or hybrid")
            }
        }
        c.webhookAllowPrivate = try boolean("LATCHKEY_WEBHOOK_ALLOW_PRIVATE", env) ?? false
        if let v = env["LATCHKEY_WEBHOOK_CA"], !v.isEmpty { c.webhookCAFile = v }
        if let n = try int("LATCHKEY_OUTBOX_SENDERS", 0...256) { c.outboxSenders = n }
        if let n = try int("LATCHKEY_RECEIPT_RETENTION", 86400...(100 * 365 * 86400)) { c.receiptRetention = n }
        if let v = env["LATCHKEY_LOG_INTERVAL"] {
            guard let d = Double(v), d == 0 || (d >= 0.05 && d <= 3600) else { throw Invalid(description: "LATCHKEY_LOG_INTERVAL must be 0 or 0.05…3600 seconds") }
            c.logInterval = d
        }
        if let v = env["LATCHKEY_LOG_ORIGIN"], !v.isEmpty {
            guard TransparencyLog.isValidOrigin(v) else { throw Invalid(description: "LATCHKEY_LOG_ORIGIN must be non-empty with no spaces, `+` or control characters") }
            c.logOrigin = v
        }
        if let v = env["LATCHKEY_LOG_WITNESSES"], !v.trimmed.isEmpty {
            c.logWitnesses = try v.split(separator: ",").map { pair throws(Invalid) -> LogWitness in
                let parts = pair.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
                guard parts.count == 2, parts[0].hasPrefix("https://") || parts[0].hasPrefix("http://"),
                      TransparencyLog.isWitnessKey(parts[1]) else {
                    throw Invalid(description: "LATCHKEY_LOG_WITNESSES is a comma-separated list of `<add-checkpoint URL prefix> <cosignature/v1 vkey>` pairs")
                }
                return LogWitness(url: parts[0], key: parts[1])
            }
        }
        if let v = env["LATCHKEY_LOG_STATE"], !v.isEmpty { c.logStateFile = v }
        if let n = try int("LATCHKEY_WEBHOOK_ENDPOINT_CONCURRENCY", 1...64) { c.webhookEndpointConcurrency = n }
        if let v = env["LATCHKEY_WEBHOOK_RETRY_BASE"] {
            guard let d = Double(v), d >= 0.05, d <= 3600 else { throw Invalid(description: "LATCHKEY_WEBHOOK_RETRY_BASE must be 0.05…3600 seconds") }
            c.webhookRetryBase = d
        }
        if let v = env["LATCHKEY_OUTBOX_LEASE"] {
            guard let d = Double(v), d >= Double(c.webhookTimeout) + 2, d <= 3600 else {
                throw Invalid(description: "LATCHKEY_OUTBOX_LEASE must be \(c.webhookTimeout + 2)…3600 seconds (longer than a delivery's timeout)")
            }
            c.outboxLease = d
        }
        c.emailSignIn = try boolean("LATCHKEY_EMAIL_SIGN_IN", env) ?? false
        if let n = try int("LATCHKEY_OTP_DIGITS", 6...10) { c.otpDigits = n }
        if let n = try int("LATCHKEY_RECOVERY_DELAY", 0...(30 * 86400)) { c.recoveryDelay = n }
        if let n = try int("LATCHKEY_MAX_PASSKEYS", 1...1000) { c.maxPasskeys = n }
        if let n = try int("LATCHKEY_ADMIN_QUORUM", 1...100) { c.adminQuorum = n }
        if let v = env["LATCHKEY_RECOVERY_REVOKES"], !v.isEmpty {
            guard v == "sessions" || v == "all" else { throw Invalid(description: "LATCHKEY_RECOVERY_REVOKES must be sessions or all") }
            c.recoveryRevokesPasskeys = v == "all"
        }
        if let v = env["LATCHKEY_SMTP_URL"], !v.isEmpty {
            guard SMTPSettings.isValid(v) else { throw Invalid(description: "LATCHKEY_SMTP_URL must be smtp://host:port or smtps://host:port") }
            c.smtpURL = v
        }
        if let v = env["LATCHKEY_SMTP_USER"], !v.isEmpty { c.smtpUser = v }
        if let v = env["LATCHKEY_SMTP_PASSWORD"], !v.isEmpty { c.smtpPassword = v }
        if let v = env["LATCHKEY_SMTP_FROM"], !v.isEmpty {
            guard EmailAddress(v) != nil else { throw Invalid(description: "LATCHKEY_SMTP_FROM must be an email address") }
            c.smtpFrom = v
        }
        if let v = env["LATCHKEY_SMTP_CA"], !v.isEmpty { c.smtpCAFile = v }
        if let v = env["LATCHKEY_MAIL_DIR"], !v.isEmpty { c.mailDirectory = v }
        if let n = try int("LATCHKEY_MAIL_SENDERS", 0...64) { c.mailSenders = n }
        if let v = env["LATCHKEY_MAIL_RETRY_BASE"] {
            guard let d = Double(v), d >= 0.05, d <= 3600 else { throw Invalid(description: "LATCHKEY_MAIL_RETRY_BASE must be 0.05…3600 seconds") }
            c.mailRetryBase = d
        }
        if let v = env["LATCHKEY_KEY_ENCRYPTION_KEY"], !v.isEmpty {
            c.keyEncryptionKey = try KeyEncryptionKey.parse(v, name: "LATCHKEY_KEY_ENCRYPTION_KEY", readFile: readWholeFile)
        }
        if let v = env["LATCHKEY_MDS_BLOB"], !v.isEmpty { c.mdsBlobPath = v }
        if let v = env["LATCHKEY_MDS_ROOT"], !v.isEmpty { c.mdsRootPath = v }
        if let v = env["LATCHKEY_MDS_CRLS"], !v.isEmpty { c.mdsCRLDirectory = v }
        if let n = try int("LATCHKEY_MDS_MAX_STALE", 0...(10 * 365 * 86400)) { c.mdsMaxStale = n }
        if let n = try int("LATCHKEY_MDS_POLL", 0...86400) { c.mdsPollSeconds = n }
        if let v = env["LATCHKEY_MDS_SIGNER"], !v.isEmpty {
            guard v.utf8.count <= 255, v.utf8.allSatisfy({ (0x21...0x7E).contains($0) || $0 == 0x20 }), !v.contains("*"), v.trimmed == v else {
                throw Invalid(description: "LATCHKEY_MDS_SIGNER must be one name (printable ASCII, no wildcard), such as mds.fidoalliance.org")
            }
            c.mdsSigner = v
        }
        func aaguids(_ name: String) throws(Invalid) -> [[UInt8]]? {
            guard let v = env[name], !v.trimmed.isEmpty else { return nil }
            var out: [[UInt8]] = []
            for item in v.split(separator: ",").map({ String($0).trimmed }) where !item.isEmpty {
                guard let bytes = parseUUID(item) else { throw Invalid(description: "\(name): \(item) is not an AAGUID (8-4-4-4-12 hex)") }
                out.append(bytes)
            }
            return out
        }
        c.authenticatorsAllow = try aaguids("LATCHKEY_AUTHENTICATORS_ALLOW")
        c.authenticatorsDeny = try aaguids("LATCHKEY_AUTHENTICATORS_DENY") ?? []
        if let v = env["LATCHKEY_REQUIRE_CERTIFIED"], !v.isEmpty {
            guard let level = CertificationLevel(rawValue: v), level != .none else {
                throw Invalid(description: "LATCHKEY_REQUIRE_CERTIFIED must be FIDO_CERTIFIED_L1, _L1plus, _L2, _L2plus, _L3 or _L3plus")
            }
            guard c.mdsBlobPath != nil else { throw Invalid(description: "LATCHKEY_REQUIRE_CERTIFIED needs LATCHKEY_MDS_BLOB") }
            c.requireCertified = level
        }
        c.conformance = try boolean("LATCHKEY_CONFORMANCE", env) ?? false
        try c.validate()
        return c
    }
}
