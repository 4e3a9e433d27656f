import Curl
import Storage
import WebAuthn
#if canImport(Glibc)
import Glibc
#endif

/// Server settings from the environment (SPEC "Configuration").
public struct Configuration: Sendable {
    public var rpId = "localhost"
    public var rpName = "Latchkey"
    public var origins: [String] = []
    public var listenHost = "127.0.0.1"
    public var listenPort = 8080
    /// `LATCHKEY_ADMIN_LISTEN`: when set, `/admin/…` (the admin API and console) is served only on
    /// this second listener, and is 404 on the public one. Unset: both on the public listener.
    public var adminListen: ListenAddress? = nil
    public var adminKeyHash: [UInt8]? = nil
    public var databaseURL = ""
    /// `LATCHKEY_DB_POOLER=transaction`: PgBouncer in transaction pooling sits in front of PostgreSQL,
    /// so no session state is used on pooled connections.
    public var databasePooler: PoolerMode = .none
    /// `LATCHKEY_DB_LISTEN_URL`: a direct (unpooled) connection for the change feed's LISTEN;
    /// behind a transaction pooler without it, instances poll (every cache expires within a second).
    public var databaseListenURL: String? = nil
    public var userVerification: VerificationPolicy.UserVerification = .preferred
    public var challengeTTL = 300
    public var maxBody = 65536
    public var stepUpTTL = 120
    /// `LATCHKEY_STEP_UP_TOKEN_TTL`: a step-up token's whole lifetime, verification leeway included (≤ 120 s).
    public var stepUpTokenTTL = 120
    /// `LATCHKEY_DEVICE_KEY_ATTESTATION`: `optional` (verified when sent) or `required`.
    public var deviceKeyAttestation: DeviceKeyAttestationRequirement = .optional
    /// `LATCHKEY_ATTESTATION_ROOTS`: a folder of PEM files replacing the shipped attestation roots.
    public var attestationRootsDirectory: String? = nil
    /// `LATCHKEY_ATTESTATION_STATUS`: a status list in Google's attestation status shape (revoked serials).
    public var attestationStatusFile: String? = nil
    /// `LATCHKEY_APP_ATTEST_DEVELOPMENT=1`: accept App Attest's development environment.
    public var appAttestDevelopment = false
    /// `LATCHKEY_DEVICE_KEY_REQUIRE_VERIFIED_BOOT=1`: Android attestations must show a locked, verified boot.
    public var requireVerifiedBoot = false
    public var wellKnownDirectory = "wellknown"
    /// The web app served at `/` (`LATCHKEY_WEB_DIR`).
    public var webDirectory = "web"
    /// AAGUID → provider names (`LATCHKEY_AAGUIDS`; default `<webDirectory>/aaguids.json`).
    public var aaguidFile = "web/aaguids.json"
    public var developmentMode = false
    public var signCountPolicy: VerificationPolicy.SignCountPolicy = .reject
    /// `attestation` conveyance asked for in creation options.
    public var attestation: AttestationConveyance = .none
    /// Origins whose pages may embed the ceremony in a cross-origin iframe (topOrigin allowlist).
    public var embeddingOrigins: [String] = []
    public var accessTokenTTL = 300
    public var refreshTokenTTL = 30 * 24 * 3600
    /// `iss` of every token; see `issuer(explicit:rpId:developmentMode:configuredOrigins:)`.
    public var issuer = "https://localhost"
    /// Requests per second per client address on ceremony and token endpoints (0: off).
    public var rateLimit = 0
    /// Behind a reverse proxy: take the client address from the last X-Forwarded-For hop.
    public var trustProxy = false
    /// `LATCHKEY_CONNECTIONS_PER_ADDRESS`: simultaneous connections one client address may hold
    /// (0: no cap). Default 64; 0 in development mode and behind a trusted proxy (every connection
    /// is the proxy's there: the proxy caps its clients).
    public var connectionsPerAddress = 0
    /// `LATCHKEY_KEY_ENCRYPTION_KEY`: seals signing keys at rest. Required outside development
    /// mode; in development mode `latchkey serve` falls back to a generated one in a file (README).
    public var keyEncryptionKey: KeyEncryptionKey? = nil
    public var threads = 4
    public var workers = 1
    /// `LATCHKEY_WEBHOOK_MAX_AGE`: seconds after an event's creation its deliveries are retried.
    public var webhookMaxAge = 259_200
    /// `LATCHKEY_HINTS`: copied into every options body as `hints` (WebAuthn L3 §5.4 / §5.5).
    public var hints: [String] = []
    /// `LATCHKEY_OUTBOX_SENDERS`: deliveries this instance sends at once (0: it sends none; others do).
    public var outboxSenders = 8
    /// `LATCHKEY_WEBHOOK_ENDPOINT_CONCURRENCY`: deliveries one endpoint gets at once from this instance.
    public var webhookEndpointConcurrency = 2
    /// `LATCHKEY_WEBHOOK_RETRY_BASE`: seconds before the first retry (before jitter); doubles per attempt.
    public var webhookRetryBase = 5.0
    /// `LATCHKEY_OUTBOX_LEASE`: seconds a claimed delivery stays this instance's (longer than a send
    /// can take, so no two instances hold one delivery at once); a killed instance's claims come back after it.
    public var outboxLease = 30.0
    /// Seconds between an idle outbox worker's looks for deliveries other instances wrote (this
    /// instance's own writes wake it at once). Not an environment variable: tests lengthen it.
    public var outboxPollInterval = 0.25
    /// Outgoing webhook timeout (SPEC: 10 s). The lease must stay well above it.
    public var webhookTimeout = 10
    /// `LATCHKEY_MDS_BLOB`: the FIDO MDS3 BLOB file; nil: metadata off.
    public var mdsBlobPath: String? = nil
    /// `LATCHKEY_MDS_ROOT`: PEM with the BLOB's signing root; nil: the shipped FIDO Alliance root.
    public var mdsRootPath: String? = nil
    /// `LATCHKEY_MDS_CRLS`: a folder of CRL files (DER or PEM) for the BLOB's and attestations' chains.
    public var mdsCRLDirectory: String? = nil
    /// `LATCHKEY_MDS_MAX_STALE`: seconds a BLOB's nextUpdate may be past.
    public var mdsMaxStale = 2_592_000
    /// `LATCHKEY_MDS_SIGNER`: the name the BLOB's signing certificate must carry (subjectAltName
    /// dNSName, else subject CN); exact, ASCII case-insensitive, no wildcard.
    public var mdsSigner = MetadataBLOB.defaultSigner
    /// `LATCHKEY_MDS_POLL`: seconds between checks of the BLOB file's modification time (0: only SIGHUP).
    public var mdsPollSeconds = 5
    /// `LATCHKEY_AUTHENTICATORS_ALLOW` / `_DENY`: AAGUIDs.
    public var authenticatorsAllow: [[UInt8]]? = nil
    public var authenticatorsDeny: [[UInt8]] = []
    /// `LATCHKEY_REQUIRE_CERTIFIED`: `FIDO_CERTIFIED_L1` … `FIDO_CERTIFIED_L3plus`.
    public var requireCertified: CertificationLevel? = nil
    /// `LATCHKEY_CONFORMANCE=1`: the FIDO conformance test API (SPEC "Conformance profile"):
    /// `/attestation/*` and `/assertion/*`. Refused outside development mode unless
    /// `LATCHKEY_CONFORMANCE_ALLOW_PRODUCTION=1`.
    public var conformance = false

    /// `LATCHKEY_EMAIL_SIGN_IN=1`: email one-time-code sign-in is on.
    public var emailSignIn = false
    /// `LATCHKEY_OTP_DIGITS`: digits of mailed codes (6–10).
    public var otpDigits = 6
    /// Seconds a mailed code lives (SPEC: 10 minutes).
    public var otpTTL = 600
    /// `LATCHKEY_RECOVERY_DELAY`: seconds between a recovery's start and its token working
    /// (nil: 0 in development mode, else 86400; see `recoveryDelaySeconds`).
    public var recoveryDelay: Int? = nil
    public var recoveryDelaySeconds: Int { recoveryDelay ?? (developmentMode ? 0 : 86400) }
    /// `LATCHKEY_MAX_PASSKEYS`: passkeys one account may hold (SPEC "Assurance" Limits).
    public var maxPasskeys = 32
    /// Seconds a recovery token works once its delay has passed.
    public var recoveryTokenTTL = 86400
    /// `LATCHKEY_RECOVERY_REVOKES=all`: completing a recovery also revokes the old passkeys.
    public var recoveryRevokesPasskeys = false
    /// `LATCHKEY_SMTP_URL` (`smtp://…` or `smtps://…`), `_USER`, `_PASSWORD`, `_FROM`.
    public var smtpURL: String? = nil
    public var smtpUser: String? = nil
    public var smtpPassword: String? = nil
    public var smtpFrom = "latchkey@localhost"
    /// `LATCHKEY_SMTP_CA`: a PEM file of the CAs the mail server's certificate must chain to
    /// (instead of the system's), for a relay with a private CA.
    public var smtpCAFile: String? = nil
    /// `LATCHKEY_MAIL_DIR`: where development mode without SMTP writes `.eml` files.
    public var mailDirectory = "data/mail"
    /// `LATCHKEY_MAIL_SENDERS`: mails this instance sends at once (unset: up to 2, none when
    /// `LATCHKEY_OUTBOX_SENDERS` is 0).
    public var mailSenders: Int? = nil
    var effectiveMailSenders: Int { mailEnabled ? (mailSenders ?? min(outboxSenders, 2)) : 0 }
    /// `LATCHKEY_MAIL_RETRY_BASE`: seconds before a mail's first retry (doubles per attempt, jittered).
    public var mailRetryBase = 5.0
    /// Mail can go out: SMTP configured, or development mode's `.eml` files. Otherwise the email
    /// endpoints are off (404).
    public var mailEnabled: Bool { smtpURL != nil || developmentMode }

    public init() {}

    public struct Invalid: Error, CustomStringConvertible { public let description: String }

    public static func fromEnvironment(_ env: [String: String] = Configuration.processEnvironment()) throws(Invalid) -> Configuration {
        var c = Configuration()
        c.developmentMode = env["LATCHKEY_DEV"] == "1"
        if let v = env["LATCHKEY_RP_ID"], !v.isEmpty { c.rpId = v }
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
        if let v = env["LATCHKEY_ORIGINS"] {
            c.origins = v.split(separator: ",").map { String($0).trimmed }.filter { !$0.isEmpty }
        } else if c.developmentMode {
            c.origins = ["http://localhost:\(c.listenPort)"]
        }
        c.issuer = Self.issuer(explicit: env["LATCHKEY_ISSUER"], rpId: c.rpId, developmentMode: c.developmentMode,
                               configuredOrigins: env["LATCHKEY_ORIGINS"] == nil ? [] : c.origins)
        if let v = env["LATCHKEY_EMBEDDING_ORIGINS"] {
            c.embeddingOrigins = v.split(separator: ",").map { String($0).trimmed }.filter { !$0.isEmpty }
        }
        if let v = env["LATCHKEY_ADMIN_KEY"], !v.isEmpty { c.adminKeyHash = AdminKey.hash(v) }
        c.databaseURL = env["DATABASE_URL"] ?? ""
        if let v = env["LATCHKEY_DB_POOLER"], !v.isEmpty {
            guard let mode = PoolerMode(rawValue: v) else { throw Invalid(description: "LATCHKEY_DB_POOLER must be transaction (or unset)") }
            c.databasePooler = mode
        }
        if let v = env["LATCHKEY_DB_LISTEN_URL"], !v.isEmpty { c.databaseListenURL = v }
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
        if let n = try int("LATCHKEY_STEP_UP_TTL", 10...86400) { c.stepUpTTL = n }
        c.stepUpTTL = min(c.stepUpTTL, c.challengeTTL)
        if let n = try int("LATCHKEY_STEP_UP_TOKEN_TTL", 10...120) { c.stepUpTokenTTL = n }
        if let v = env["LATCHKEY_DEVICE_KEY_ATTESTATION"], !v.isEmpty {
            guard let r = DeviceKeyAttestationRequirement(rawValue: v) else {
                throw Invalid(description: "LATCHKEY_DEVICE_KEY_ATTESTATION must be optional or required")
            }
            c.deviceKeyAttestation = r
        }
        if let v = env["LATCHKEY_ATTESTATION_ROOTS"], !v.isEmpty { c.attestationRootsDirectory = v }
        if let v = env["LATCHKEY_ATTESTATION_STATUS"], !v.isEmpty { c.attestationStatusFile = v }
        c.appAttestDevelopment = env["LATCHKEY_APP_ATTEST_DEVELOPMENT"] == "1"
        c.requireVerifiedBoot = env["LATCHKEY_DEVICE_KEY_REQUIRE_VERIFIED_BOOT"] == "1"
        // On by default in production; off in development mode, where benchmarks and demos run from one address.
        c.rateLimit = try int("LATCHKEY_RATE_LIMIT", 0...100_000) ?? (c.developmentMode ? 0 : 50)
        c.trustProxy = env["LATCHKEY_TRUST_PROXY"] == "1"
        c.connectionsPerAddress = try int("LATCHKEY_CONNECTIONS_PER_ADDRESS", 0...100_000)
            ?? (c.developmentMode || c.trustProxy ? 0 : 64)
        if let n = try int("LATCHKEY_THREADS", 1...256) { c.threads = n }
        if let n = try int("LATCHKEY_WORKERS", 1...64) { c.workers = n }
        if let v = env["LATCHKEY_WELLKNOWN_DIR"], !v.isEmpty { c.wellKnownDirectory = v }
        if let v = env["LATCHKEY_WEB_DIR"], !v.isEmpty { c.webDirectory = v }
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
        if let n = try int("LATCHKEY_OUTBOX_SENDERS", 0...256) { c.outboxSenders = n }
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
        c.emailSignIn = env["LATCHKEY_EMAIL_SIGN_IN"] == "1"
        if let n = try int("LATCHKEY_OTP_DIGITS", 6...10) { c.otpDigits = n }
        if let n = try int("LATCHKEY_RECOVERY_DELAY", 0...(30 * 86400)) { c.recoveryDelay = n }
        if let n = try int("LATCHKEY_MAX_PASSKEYS", 1...1000) { c.maxPasskeys = n }
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
        c.conformance = env["LATCHKEY_CONFORMANCE"] == "1"
        if c.conformance, !c.developmentMode, env["LATCHKEY_CONFORMANCE_ALLOW_PRODUCTION"] != "1" {
            throw Invalid(description: "LATCHKEY_CONFORMANCE=1 needs LATCHKEY_DEV=1 (or LATCHKEY_CONFORMANCE_ALLOW_PRODUCTION=1)")
        }
        for origin in c.origins { _ = try OriginRules.validate(origin, developmentMode: c.developmentMode).mapError() }
        return c
    }

    /// A small file's bytes (a key file), nil when it cannot be read.
    static func readWholeFile(_ path: String) -> [UInt8]? {
        guard let handle = fopen(path, "rb") else { return nil }
        defer { fclose(handle) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while out.count <= 1 << 16 {
            let n = fread(&buffer, 1, buffer.count, handle)
            if n == 0 { break }
            out += buffer[0..<n]
        }
        return ferror(handle) == 0 ? out : nil
    }

    /// The token issuer (`iss`) is a property of the deployment, identical on every instance behind
    /// one origin: `LATCHKEY_ISSUER`, else in dev mode the first web origin of `LATCHKEY_ORIGINS`,
    /// else `https://<rpId>`. Never the listen port: instances on 8081 and 8082 behind one proxy
    /// must accept each other's tokens (issue 13, defect 10).
    static func issuer(explicit: String?, rpId: String, developmentMode: Bool, configuredOrigins: [String]) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if developmentMode, let web = configuredOrigins.first(where: { $0.hasPrefix("https://") || $0.hasPrefix("http://") }) {
            return web
        }
        return "https://\(rpId)"
    }

    public static func processEnvironment() -> [String: String] {
        var out: [String: String] = [:]
        var p = environ
        while let entry = p.pointee {
            let s = String(cString: entry)
            if let eq = s.firstIndex(of: "=") { out[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
            p += 1
        }
        return out
    }
}

/// A listener's `host:port` (`LATCHKEY_LISTEN`, `LATCHKEY_ADMIN_LISTEN`): an empty host is every
/// address, `localhost` is 127.0.0.1.
public struct ListenAddress: Sendable, Hashable {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    init?(parsing text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
            return nil
        }
        var host = String(text[..<colon])
        if host == "localhost" { host = "127.0.0.1" }
        self.init(host: host.isEmpty ? "0.0.0.0" : host, port: port)
    }
}

/// Whether a device key must prove it lives in hardware to be enrolled (SPEC "Trust chain": Policy).
public enum DeviceKeyAttestationRequirement: String, Sendable { case optional, required }

extension Result where Failure == OriginRules.Rejection {
    func mapError() throws(Configuration.Invalid) -> Success {
        switch self {
        case .success(let s): return s
        case .failure(let e): throw Configuration.Invalid(description: "LATCHKEY_ORIGINS: \(e.reason)")
        }
    }
}

extension String {
    var trimmed: String { String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed()) }
}
