/// Every environment variable Latchkey reads, declared once: what it means, its default, whether it
/// is a secret, and how to show the value `serve` would use. `latchkey config --markdown` prints
/// the operator guide's table from this list (a test fails when docs/operator.md differs), and
/// `latchkey config check` prints each value with its source. A test also fails when a
/// `LATCHKEY_…` name appears in `Sources/` without being declared here (`internalNames` aside).
public struct ConfigurationVariable: Sendable {
    public enum Kind: Sendable {
        case plain
        /// Never printed: `config check` shows `<set, redacted>`.
        case secret
        /// A connection URL: printed with its password replaced by `***`.
        case connection
    }

    public let name: String
    public let section: String
    public let meaning: String
    /// The default as the docs state it.
    public let defaultText: String
    public let kind: Kind
    /// The value the parsed configuration holds (for defaults that depend on other settings).
    public let effective: (@Sendable (Configuration) -> String)?

    init(_ name: String, _ section: String, _ meaning: String, default defaultText: String, _ kind: Kind = .plain,
         effective: (@Sendable (Configuration) -> String)? = nil) {
        self.name = name
        self.section = section
        self.meaning = meaning
        self.defaultText = defaultText
        self.kind = kind
        self.effective = effective
    }
}

public enum ConfigurationCatalogue {
    /// Names in the code that are not settings: set by `serve` for its own worker processes.
    public static let internalNames: Set<String> = ["LATCHKEY_WORKER_CHILD"]

    public static func variable(_ name: String) -> ConfigurationVariable? { variables.first { $0.name == name } }

    public static let variables: [ConfigurationVariable] = core + listeners + keys + ceremonies + deviceKeys
        + metadata + mail + outbox + transparency + files

    static let core: [ConfigurationVariable] = [
        .init("DATABASE_URL", "core", "libpq connection string or URI of PostgreSQL (required; `serve` migrates it under an advisory lock)",
              default: "none (required; `scripts/run.sh` starts a private PostgreSQL and sets it)", .connection),
        .init("LATCHKEY_RP_ID", "core",
              "relying-party id: the host passkeys are bound to — a host name (no scheme, port, path or trailing dot), not an IP address, not a public suffix (Debian's `publicsuffix` list)",
              default: "`localhost`"),
        .init("LATCHKEY_RP_NAME", "core", "relying-party display name shown by authenticators", default: "`Latchkey`"),
        .init("LATCHKEY_ORIGINS", "core",
              "comma-separated origins seeded into the allowlist at start (`https://…`, `android:apk-key-hash:…`); more live in the database (`latchkey origins`). A web origin's host is the rpId or under it, or can be a related origin (https, a registrable domain: listed at `/.well-known/webauthn`)",
              default: "`http://localhost:<port>` in dev mode, else none",
              effective: { $0.origins.joined(separator: ",") }),
        .init("LATCHKEY_OP_SESSION_TTL", "core",
              "seconds the OpenID Provider's browser session lives (the `/authorize` page's HttpOnly cookie; 60–2592000)",
              default: "`43200` (12 h)", effective: { String($0.opSessionTTL) }),
        .init("LATCHKEY_ISSUER", "core",
              "`iss` of access and step-up tokens: a property of the deployment, the same on every instance (never derived from the listen port); outside dev mode its origin must be one of the web origins of `LATCHKEY_ORIGINS` (with none there, of the stored allowlist)",
              default: "`https://<rpId>`; in dev mode the first web origin of `LATCHKEY_ORIGINS`", effective: { $0.issuer }),
        .init("LATCHKEY_DEV", "core",
              "`1`: development mode (`http://localhost` origins, a generated key-encryption key, mail as `.eml` files, webhooks to loopback, the conformance profile may be on); never in production. Every boolean setting takes `1/0`, `true/false`, `yes/no` or `on/off` (any case); any other value is refused",
              default: "`0`"),
    ]

    static let listeners: [ConfigurationVariable] = [
        .init("LATCHKEY_LISTEN", "listeners", "`host:port` of the public listener (`0.0.0.0:8080` in a container)", default: "`127.0.0.1:8080`",
              effective: { "\($0.listenHost):\($0.listenPort)" }),
        .init("LATCHKEY_ADMIN_LISTEN", "listeners",
              "`host:port` of a second listener that alone serves `/admin/…` (admin API and console) and the `/v1` calls the console signs in with; the public listener answers 404 under `/admin/`",
              default: "unset: `/admin/…` on the public listener", effective: { $0.adminListen.map { "\($0.host):\($0.port)" } ?? "" }),
        .init("LATCHKEY_ADMIN_ORIGIN", "listeners",
              "the origin the console is reached at, where the TLS front routes `/admin/` to the admin listener: one of `LATCHKEY_ORIGINS`, host the rpId or under it; `latchkey admins add` prints its link there. Required outside dev mode with `LATCHKEY_ADMIN_LISTEN`",
              default: "the first web origin (dev mode with `LATCHKEY_ADMIN_LISTEN` and rpId `localhost`: `http://localhost:<admin port>`)",
              effective: { $0.adminOrigin ?? "" }),
        .init("LATCHKEY_TRUST_PROXY", "listeners",
              "`1`: the client address (rate limits, logs) is the last `X-Forwarded-For` hop. Only behind a proxy that sets that header on every request: without one, clients choose their address",
              default: "`0`"),
        .init("LATCHKEY_RATE_LIMIT", "listeners",
              "requests per second per client address (IPv4, or IPv6 /64) on `/v1/*`, `/admin/v1/*` and `/readyz`, burst 2×, per instance (429 + `Retry-After`); `0` off",
              default: "`50` (`0` in dev mode)", effective: { String($0.rateLimit) }),
        .init("LATCHKEY_CONNECTIONS_PER_ADDRESS", "listeners", "simultaneous connections one client address may hold; `0` off",
              default: "`64` (`0` in dev mode and with `LATCHKEY_TRUST_PROXY=1`)", effective: { String($0.connectionsPerAddress) }),
        .init("LATCHKEY_MAX_BODY", "listeners", "request body limit in bytes (413 past it)", default: "`65536`"),
        .init("LATCHKEY_IMPORT_MAX_BODY", "listeners",
              "body limit in bytes of `POST /admin/v1/import` (413 past it; a larger file goes through `latchkey accounts import`)",
              default: "`67108864` (64 MiB)"),
        .init("LATCHKEY_THREADS", "listeners", "worker threads per process", default: "`8`"),
        .init("LATCHKEY_WORKERS", "listeners", "processes sharing the listening port (`SO_REUSEPORT`)", default: "`1`"),
        .init("LATCHKEY_EVENT_LOOPS", "listeners",
              "event loops per process, each with its own listener on the port: a passkey sign-in's requests are answered there, without a worker thread (`0`: none). Each loop opens its own database connections (`LATCHKEY_THREADS` of them) on first need, on a thread of their own so the loop goes on answering meanwhile; the per-address connection cap is shared out among the loops. [docs/sizing.md](sizing.md) has what it saves",
              default: "`0`"),
        .init("LATCHKEY_DB_POOLER", "database",
              "`transaction`: PgBouncer in transaction pooling sits in front of PostgreSQL (no named prepared statements, no session `SET`, no `LISTEN` on pooled connections)",
              default: "unset"),
        .init("LATCHKEY_DB_LISTEN_URL", "database",
              "a direct (unpooled) connection for the change and revocation feeds' `LISTEN` behind a pooler; without it caches expire within a second and, the revocation feed being down, every token's session is read from the database (`latchkey_revocation_feed_stale` 1)",
              default: "`DATABASE_URL` without a pooler; unset behind one", .connection),
        .init("LATCHKEY_REVOCATION_MAX_LAG", "database",
              "seconds (0.5–60) after a revocation's answer by which every instance refuses the revoked tokens: the revocation feed is pinged every 250 ms, and one not heard from for longer (or whose `LISTEN` is down) means each token's session is read from the database (`latchkey_revocation_feed_stale` 1)",
              default: "`1`", effective: { String($0.revocationMaxLag) }),
        .init("LATCHKEY_DB_QUERY_TIMEOUT", "database",
              "seconds (0.1–600) one request may spend on all its database calls; past it the query is cancelled, the connection dropped and the request answered 503 (a hung primary cannot pin the worker threads)",
              default: "`5`"),
    ]

    static let keys: [ConfigurationVariable] = [
        .init("LATCHKEY_KEY_ENCRYPTION_KEY", "keys",
              "key-encryption key that seals token signing keys and webhook secrets in PostgreSQL (the ceremony-sealing key of sign-in challenges derives from it): base64 of 32 bytes (`openssl rand -base64 32`), or `@/path/to/file` holding it (a Kubernetes Secret volume, systemd `LoadCredential=`)",
              default: "required outside dev mode; dev mode: generated once into `LATCHKEY_DEV_KEY_FILE`", .secret),
        .init("LATCHKEY_DEV_KEY_FILE", "keys", "dev mode without a key-encryption key: the file it is generated into and read from (mode 0600)",
              default: "`data/dev-key-encryption-key` under the working directory (printed as an absolute path)"),
        .init("LATCHKEY_NEW_KEY_ENCRYPTION_KEY", "keys", "`latchkey keys rotate`: the key-encryption key to re-seal every signing key under (as `--new-key`)",
              default: "unset", .secret),
        .init("LATCHKEY_ADMIN_KEY", "keys", "bearer key for `/admin/v1` and nowhere else (kept only as a SHA-256, compared in constant time); outside dev mode at least 32 characters and no example value (`openssl rand -base64 32`)",
              default: "unset: admin API only for admin users of the console", .secret),
    ]

    static let ceremonies: [ConfigurationVariable] = [
        .init("LATCHKEY_USER_VERIFICATION", "ceremonies", "`required`, `preferred` or `discouraged`", default: "`preferred`"),
        .init("LATCHKEY_CHALLENGE_TTL", "ceremonies", "seconds a ceremony challenge lives", default: "`300`"),
        .init("LATCHKEY_SIGN_COUNT_POLICY", "ceremonies", "`reject` or `flag` a sign-count regression (a possible clone)", default: "`reject`"),
        .init("LATCHKEY_ATTESTATION", "ceremonies", "attestation conveyance asked for: `none`, `indirect`, `direct` or `enterprise`", default: "`none`"),
        .init("LATCHKEY_EMBEDDING_ORIGINS", "ceremonies", "top origins allowed to embed ceremonies in a cross-origin iframe", default: "none (refused)"),
        .init("LATCHKEY_HINTS", "ceremonies", "comma-separated `security-key`, `client-device`, `hybrid`: copied into every options body as `hints`",
              default: "none"),
        .init("LATCHKEY_ADMIN_QUORUM", "ceremonies", "admins whose approval every admin change needs: above 1, a change needs `Latchkey-Approval` of an approved quorum approval for its exact action, and the admin key makes none", default: "`1` (the admin's own step-up)"),
        .init("LATCHKEY_MAX_PASSKEYS", "ceremonies", "passkeys one account may hold (registration options for a full account: 409)", default: "`32`"),
        .init("LATCHKEY_AUTHENTICATORS_ALLOW", "ceremonies", "comma-separated AAGUIDs: only these authenticators may register", default: "unset: any"),
        .init("LATCHKEY_AUTHENTICATORS_DENY", "ceremonies", "comma-separated AAGUIDs that may not register", default: "none"),
        .init("LATCHKEY_CONFORMANCE", "ceremonies", "`1`: the FIDO conformance test API; dev mode only (outside it `serve` refuses to start)",
              default: "`0`"),
    ]

    static let deviceKeys: [ConfigurationVariable] = [
        .init("LATCHKEY_STEP_UP_TTL", "device keys and step-up", "seconds a step-up challenge lives (at most `LATCHKEY_CHALLENGE_TTL`)",
              default: "`120`", effective: { String($0.stepUpTTL) }),
        .init("LATCHKEY_STEP_UP_TOKEN_TTL", "device keys and step-up", "seconds a step-up token lives, checked with no leeway (10–120)", default: "`120`"),
        .init("LATCHKEY_DEVICE_KEY_ATTESTATION", "device keys and step-up",
              "`optional`: an attestation sent at enrolment is verified; `required`: no or bad attestation is `attestation_invalid`", default: "`optional`"),
        .init("LATCHKEY_ATTESTATION_ROOTS", "device keys and step-up", "a folder of PEM files replacing the shipped device-key attestation roots",
              default: "shipped roots"),
        .init("LATCHKEY_ATTESTATION_STATUS", "device keys and step-up", "a status list in Google's attestation status shape (revoked serials)",
              default: "none"),
        .init("LATCHKEY_APP_ATTEST_DEVELOPMENT", "device keys and step-up", "`1`: accept App Attest keys from the development environment",
              default: "`0`"),
        .init("LATCHKEY_DEVICE_KEY_REQUIRE_VERIFIED_BOOT", "device keys and step-up",
              "`1`: Android attestations must show a locked bootloader and a verified boot", default: "`0`"),
    ]

    static let metadata: [ConfigurationVariable] = [
        .init("LATCHKEY_MDS_BLOB", "metadata", "the FIDO MDS3 BLOB file (`latchkey mds fetch` downloads it); SIGHUP or a change of the file reloads it",
              default: "unset: metadata off"),
        .init("LATCHKEY_MDS_ROOT", "metadata", "PEM file with the BLOB's signing root", default: "the shipped FIDO Alliance root"),
        .init("LATCHKEY_MDS_CRLS", "metadata", "a folder of CRL files (DER or PEM) for the BLOB's and attestations' chains", default: "none"),
        .init("LATCHKEY_MDS_MAX_STALE", "metadata", "seconds the BLOB's `nextUpdate` may be past", default: "`2592000` (30 days)"),
        .init("LATCHKEY_MDS_POLL", "metadata", "seconds between checks of the BLOB file's modification time (`0`: only SIGHUP)", default: "`5`"),
        .init("LATCHKEY_MDS_SIGNER", "metadata",
              "the name the BLOB's signing certificate must carry (subjectAltName dNSName, else subject CN); exact, case-insensitive, no wildcard",
              default: "`mds.fidoalliance.org`"),
        .init("LATCHKEY_REQUIRE_CERTIFIED", "metadata", "`FIDO_CERTIFIED_L1` … `FIDO_CERTIFIED_L3plus`: the least certification a registering authenticator needs (needs `LATCHKEY_MDS_BLOB`)",
              default: "unset"),
    ]

    static let mail: [ConfigurationVariable] = [
        .init("LATCHKEY_EMAIL_SIGN_IN", "recovery and mail", "`1`: sign-in by an emailed one-time code", default: "`0`"),
        .init("LATCHKEY_OTP_DIGITS", "recovery and mail", "digits of mailed codes (6–10)", default: "`6`"),
        .init("LATCHKEY_RECOVERY_DELAY", "recovery and mail", "seconds between a recovery's start and its token working",
              default: "`86400` (`0` in dev mode)", effective: { String($0.recoveryDelaySeconds) }),
        .init("LATCHKEY_RECOVERY_REVOKES", "recovery and mail", "`sessions`, or `all`: completing a recovery also revokes the old passkeys",
              default: "`sessions`"),
        .init("LATCHKEY_SMTP_URL", "recovery and mail", "`smtp://host:port` (STARTTLS whenever offered) or `smtps://host:port`; unset outside dev mode: the email endpoints are off (404)",
              default: "unset"),
        .init("LATCHKEY_SMTP_USER", "recovery and mail", "SMTP user name", default: "unset"),
        .init("LATCHKEY_SMTP_PASSWORD", "recovery and mail", "SMTP password", default: "unset", .secret),
        .init("LATCHKEY_SMTP_FROM", "recovery and mail", "the `From` address of every mail", default: "`latchkey@localhost`"),
        .init("LATCHKEY_SMTP_CA", "recovery and mail", "a PEM file of the CAs the mail server's certificate must chain to", default: "system CA store"),
        .init("LATCHKEY_MAIL_DIR", "recovery and mail", "dev mode without `LATCHKEY_SMTP_URL`: the folder mail is written to as `.eml` files",
              default: "`data/mail`"),
        .init("LATCHKEY_MAIL_SENDERS", "recovery and mail", "mails this instance sends at once", default: "up to `2` (`0` with `LATCHKEY_OUTBOX_SENDERS=0`)",
              effective: { String($0.effectiveMailSenders) }),
        .init("LATCHKEY_MAIL_RETRY_BASE", "recovery and mail", "seconds before a mail's first retry (doubles per attempt, jittered)", default: "`5`"),
    ]

    static let outbox: [ConfigurationVariable] = [
        .init("LATCHKEY_OUTBOX_SENDERS", "webhooks and outbox", "outbox deliveries this instance sends at once (`0`: it only writes events; others send)",
              default: "`8`"),
        .init("LATCHKEY_OUTBOX_LEASE", "webhooks and outbox", "seconds a claimed delivery stays this instance's (at least the 10 s timeout + 2)", default: "`30`"),
        .init("LATCHKEY_WEBHOOK_MAX_AGE", "webhooks and outbox", "seconds after an event's creation its webhook deliveries are retried, then given up",
              default: "`259200` (72 h)"),
        .init("LATCHKEY_WEBHOOK_ENDPOINT_CONCURRENCY", "webhooks and outbox", "deliveries one endpoint gets at once from one instance", default: "`2`"),
        .init("LATCHKEY_WEBHOOK_RETRY_BASE", "webhooks and outbox", "seconds before a delivery's first retry (doubles per attempt, jittered)", default: "`5`"),
        .init("LATCHKEY_WEBHOOK_ALLOW_PRIVATE", "webhooks and outbox",
              "`1`: outside dev mode, webhook URLs may resolve inside (loopback, RFC 1918, link-local, …): on-premises receivers; `https://` still required",
              default: "`0`"),
        .init("LATCHKEY_WEBHOOK_CA", "webhooks and outbox", "a PEM file of the CAs webhook receivers' certificates must chain to; `serve` refuses to start if it cannot be read",
              default: "system CA store"),
    ]

    static let transparency: [ConfigurationVariable] = [
        .init("LATCHKEY_RECEIPT_RETENTION", "transparency log",
              "seconds a step-up receipt is kept (1 day … 100 years); older receipts are deleted by any instance, their commitments stay in the log, which reveals nothing without them",
              default: "`315360000` (ten years)"),
        .init("LATCHKEY_LOG_INTERVAL", "transparency log",
              "seconds between integrations of new receipt commitments into the transparency log (one instance integrates at a time; `0`: this instance never does, others do); the log is off without `LATCHKEY_KEY_ENCRYPTION_KEY`",
              default: "`1`"),
        .init("LATCHKEY_LOG_ORIGIN", "transparency log", "the log's checkpoint origin and key name (fixed when the log is made; `latchkey log reset` changes it)",
              default: "`<LATCHKEY_RP_ID>/latchkey/receipts`", effective: { $0.effectiveLogOrigin }),
        .init("LATCHKEY_LOG_WITNESSES", "transparency log",
              "comma-separated `<add-checkpoint URL prefix> <vkey>` pairs: the C2SP `tlog-witness` endpoints every new checkpoint is sent to, with their cosignature/v1 verifier keys",
              default: "none"),
        .init("LATCHKEY_LOG_STATE", "transparency log",
              "a file where the integrating instance keeps the last signed tree size; `serve` refuses to start (exit 1) when the stored tree is smaller",
              default: "unset"),
    ]

    static let files: [ConfigurationVariable] = [
        .init("LATCHKEY_WELLKNOWN_DIR", "files",
              "override: a folder whose `apple-app-site-association`, `assetlinks.json`, `webauthn` are served instead of the files built from the declared apps; `serve` warns when a pinned file disagrees with them",
              default: "unset: built from the declared apps (`latchkey apps`)", effective: { $0.wellKnownDirectory ?? "" }),
        .init("LATCHKEY_WEB_DIR", "files",
              "the web app (and admin console) folder served at `/`; `serve` refuses to start (exit 64) while a file it serves is missing there",
              default: "unset: `./web` if it holds `index.html`, else `../share/latchkey/web` beside the binary (the .deb's `/usr/share/latchkey/web`)",
              effective: { $0.webDirectory }),
        .init("LATCHKEY_AAGUIDS", "files", "AAGUID → provider name and icon file", default: "`<LATCHKEY_WEB_DIR>/aaguids.json`",
              effective: { $0.aaguidFile }),
    ]

    // MARK: The table

    /// The operator guide's configuration table (`latchkey config --markdown`).
    public static func markdown() -> String {
        var out = "| variable | meaning | default |\n|---|---|---|\n"
        var section = ""
        for v in variables {
            if v.section != section {
                section = v.section
                out += "| **\(section)** | | |\n"
            }
            out += "| `\(v.name)` | \(v.meaning) | \(v.defaultText) |\n"
        }
        return out
    }
}
