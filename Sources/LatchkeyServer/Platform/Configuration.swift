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
    /// `LATCHKEY_ADMIN_ORIGIN`: the origin the console is reached at (allowlisted, host under the
    /// rpId), where `latchkey admins add` points its link. Required outside development mode with
    /// `LATCHKEY_ADMIN_LISTEN`; in development mode with a local rpId the admin listener's
    /// `http://localhost:<port>` by default. nil: the first web origin (`consoleOrigin`).
    public var adminOrigin: String? = nil
    /// `adminOrigin` came from `LATCHKEY_ADMIN_ORIGIN` (not a default).
    public var adminOriginExplicit = false
    public var adminKeyHash: [UInt8]? = nil
    public var databaseURL = ""
    /// `LATCHKEY_DB_POOLER=transaction`: PgBouncer in transaction pooling sits in front of PostgreSQL,
    /// so no session state is used on pooled connections.
    public var databasePooler: PoolerMode = .none
    /// `LATCHKEY_DB_LISTEN_URL`: a direct (unpooled) connection for the change and revocation feeds'
    /// LISTEN; behind a transaction pooler without it, caches expire within a second and every
    /// token's session is read from the database (the revocation feed is down).
    public var databaseListenURL: String? = nil
    /// `LATCHKEY_DB_QUERY_TIMEOUT` (seconds): a request's whole budget for database calls, and the
    /// longest any one call waits; then it is cancelled, its connection dropped, and the request 503.
    public var databaseQueryTimeout = 5.0
    /// `LATCHKEY_REVOCATION_MAX_LAG` (seconds): a revocation answered by any instance is in force on
    /// every instance this long after the answer; a revocation feed not heard from for longer means
    /// each token's session is read from the database (SPEC "Sessions" → "How fast.").
    public var revocationMaxLag = 1.0
    public var userVerification: VerificationPolicy.UserVerification = .preferred
    public var challengeTTL = 300
    public var maxBody = 65536
    /// `LATCHKEY_IMPORT_MAX_BODY`: the body limit of `POST /admin/v1/import` (a whole file).
    public var importMaxBody = 64 << 20
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
    /// `LATCHKEY_WELLKNOWN_DIR`: an operator's pinned folder of association files, served instead of
    /// the files built from the declared apps. nil (the default): built from the apps.
    public var wellKnownDirectory: String? = nil
    /// The web app served at `/` (`LATCHKEY_WEB_DIR`).
    public var webDirectory = "web"
    /// AAGUID → provider names and icons (`LATCHKEY_AAGUIDS`; default `<webDirectory>/aaguids.json`).
    public var aaguidFile = "web/aaguids.json"
    public var developmentMode = false
    public var signCountPolicy: VerificationPolicy.SignCountPolicy = .reject
    /// `attestation` conveyance asked for in creation options.
    public var attestation: AttestationConveyance = .none
    /// Origins whose pages may embed the ceremony in a cross-origin iframe (topOrigin allowlist).
    public var embeddingOrigins: [String] = []
    public var accessTokenTTL = 300
    public var refreshTokenTTL = 30 * 24 * 3600
    /// Seconds the OP browser session of the `/authorize` page's cookie lives (SPEC "Who may approve").
    public var opSessionTTL = 43200
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
    /// mode; in development mode `latchkey serve` falls back to a generated one in a file (docs/operator.md, "Keys at rest").
    public var keyEncryptionKey: KeyEncryptionKey? = nil
    public var threads = 8
    public var workers = 1
    /// `LATCHKEY_EVENT_LOOPS`: event loops per process (0: none). A passkey sign-in's two requests
    /// are answered on their loop, each database round trip a wait there rather than a blocked
    /// worker thread; every other route still runs on the worker threads.
    public var eventLoops = 0
    /// `LATCHKEY_WEBHOOK_MAX_AGE`: seconds after an event's creation its deliveries are retried.
    public var webhookMaxAge = 259_200
    /// `LATCHKEY_HINTS`: copied into every options body as `hints` (WebAuthn L3 §5.4 / §5.5).
    public var hints: [String] = []
    /// `LATCHKEY_RECEIPT_RETENTION`: seconds a step-up receipt is kept (ten years by default: the
    /// time a payment dispute or an audit may come back); the log's commitments stay.
    public var receiptRetention = 10 * 365 * 86400
    /// `LATCHKEY_LOG_INTERVAL`: seconds between the transparency log's integrations on this instance
    /// (one instance integrates at a time; 0: this instance never does, others do).
    public var logInterval = 1.0
    /// `LATCHKEY_LOG_ORIGIN`: the log's checkpoint origin and key name; nil: `<rpId>/latchkey/receipts`.
    public var logOrigin: String? = nil
    /// `LATCHKEY_LOG_WITNESSES`: the `tlog-witness` endpoints each new checkpoint is sent to.
    public var logWitnesses: [LogWitness] = []
    /// `LATCHKEY_LOG_STATE`: a file holding the last signed tree size, kept outside PostgreSQL.
    public var logStateFile: String? = nil
    /// The log's origin as configured or defaulted.
    public var effectiveLogOrigin: String { logOrigin ?? "\(rpId)/latchkey/receipts" }
    /// `LATCHKEY_OUTBOX_SENDERS`: deliveries this instance sends at once (0: it sends none; others do).
    public var outboxSenders = 8
    /// `LATCHKEY_WEBHOOK_ENDPOINT_CONCURRENCY`: deliveries one endpoint gets at once from this instance.
    public var webhookEndpointConcurrency = 2
    /// `LATCHKEY_WEBHOOK_RETRY_BASE`: seconds before the first retry (before jitter); doubles per attempt.
    public var webhookRetryBase = 5.0
    /// `LATCHKEY_OUTBOX_LEASE`: seconds a claimed delivery stays this instance's (longer than a send
    /// can take, so no two instances hold one delivery at once); a killed instance's claims come back after it.
    public var outboxLease = 30.0
    /// Seconds between an idle outbox worker's looks for due deliveries: the safety net under the
    /// `latchkey_outbox` notifications, which wake every instance at once. Not an environment variable: tests lengthen it.
    public var outboxPollInterval = 0.25
    /// Outgoing webhook timeout (SPEC: 10 s). The lease must stay well above it.
    public var webhookTimeout = 10
    /// `LATCHKEY_WEBHOOK_ALLOW_PRIVATE=1`: outside development mode, webhook URLs and the addresses
    /// they resolve to may be inside (loopback, RFC 1918, link-local, …): on-premises receivers.
    public var webhookAllowPrivate = false
    /// `LATCHKEY_WEBHOOK_CA`: a PEM file of the CAs webhook receivers' certificates must chain to
    /// (instead of the system's), for on-premises receivers with a private CA.
    public var webhookCAFile: String? = nil
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
    /// `/attestation/*` and `/assertion/*`. Development mode only (SPEC "Assurance": there is no
    /// production override); `validate()` refuses it otherwise.
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
    /// `LATCHKEY_ADMIN_QUORUM`: admins whose approval every admin change needs (SPEC "Quorum
    /// approvals" → "Admin quorum"); 1 is the admin's own step-up.
    public var adminQuorum = 1
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

    /// The rules between settings, checked before anything listens: at the end of `fromEnvironment`,
    /// and again as `Services.start`'s first step (for a configuration built in code).
    public func validate() throws(Invalid) {
        if conformance, !developmentMode {
            throw Invalid(description: "LATCHKEY_CONFORMANCE=1 needs LATCHKEY_DEV=1: the conformance profile relaxes checks "
                          + "(UP = 0, RS1) and is never served outside development mode")
        }
        for origin in origins { _ = try OriginRules.validate(origin, developmentMode: developmentMode).mapError() }
        try validateSite()
        if let ca = webhookCAFile {
            guard let handle = fopen(ca, "rb") else { throw Invalid(description: "LATCHKEY_WEBHOOK_CA: \(ca) cannot be read") }
            fclose(handle)
        }
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
    /// must accept each other's tokens.
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

/// A witness the log submits its checkpoints to: its `add-checkpoint` URL prefix and its
/// cosignature/v1 verifier key (`<name>+<hex id>+<base64>`, type 0x04).
public struct LogWitness: Sendable, Equatable {
    public let url: String
    public let key: String
    public init(url: String, key: String) { self.url = url; self.key = key }
}
