import EventLoop
import PostgreSQL
import Tokens
import Foundation
import HTTP
import JSON
import Storage
import Synchronization

/// Wiring: builds every service of one server instance over one `Database` and does nothing else
/// (no I/O). What must happen before serving is `start()`'s explicit start-up steps.
///
///     routes ─▶ PasskeyService ─┬─▶ PasskeyAssertion ─▶ accounts
///               StepUpService ──┘        SessionService ─▶ sessions, TokenSigner ─▶ keys
///               AdminService ─▶ AdminStore                WellKnownService ─▶ AppStore (config)
///               WebhookService ─▶ webhooks, SecretSealer; the webhook OutboxWorker sends (channel `webhook`)
///               RecoveryService ─▶ recovery (codes, limits, recoveries), SessionService, StepUpService, MailService
///               MailService ─▶ recovery (mail rows), outbox; its OutboxWorker sends (channel `mail`: SMTP or .eml)
///     every service that makes a reported change builds its OutboxEvents and hands them to the
///     repository call that makes it (one transaction); its commit NOTIFYs `latchkey_outbox`, which
///     every instance's change feed hands to its workers for those channels (`startChangeFeed`).
public final class Services: Sendable {
    public let configuration: Configuration
    /// The relying party every ceremony is bound to, built once from `configuration`.
    public let relyingParty: RelyingParty
    public let database: Database
    /// Each event loop's own database connections, made on the loop's first request.
    private let loopDatabases = Mutex<[ObjectIdentifier: LoopConnections]>([:])
    public let runtime: Runtime
    public let metrics = Metrics()
    let log: RequestLog

    public let signer: TokenSigner
    public let origins: OriginCache
    public let sessions: SessionService
    public let passkeys: PasskeyService
    public let stepUp: StepUpService
    public let deviceKeys: DeviceKeyService
    /// The admin console's users page.
    let users: UserAdministration
    /// OpenID clients and the OpenID Provider (SPEC "OpenID Provider").
    public let oauthClients: OAuthClientService
    public let openID: OpenIDProvider
    /// CIBA's backchannel requests (SPEC "CIBA").
    let ciba: CIBAService
    /// Resolves each request's caller for its route's `Access`.
    let callers: CallerResolver
    public let wellKnown: WellKnownService
    public let admin: AdminService
    public let webhooks: WebhookService
    /// This instance's webhook senders (channel `webhook`).
    public let webhookWorker: OutboxWorker
    /// This instance's CIBA ping senders (channel `ciba_ping`).
    let cibaPings: OutboxWorker
    /// Mail through the outbox (channel `mail`): its OutboxWorker sends over SMTP or writes `.eml` files.
    public let mail: MailService
    /// Verified email, one-time codes, email sign-in, recovery codes and recoveries.
    public let recovery: RecoveryService
    /// Builds every outbox event (ids, give-up age); services hand them to their repository calls.
    public let events: OutboxEvents
    /// Quorum approvals: policies, approvals, their votes, vetoes and single use.
    let approvals: ApprovalService
    /// The PRF vault: its salt and wrapped keys, ciphertext only.
    let vault: VaultService
    /// Export and import of whole accounts over the admin API.
    let portability: PortabilityService
    let attestationTrust: AttestationTrust
    /// Authenticator metadata (FIDO MDS3), per instance, in memory.
    public let metadata: MetadataStore
    private let changeFeed = Mutex<ConfigWatch?>(nil)
    /// Sessions revoked recently (their access tokens are refused before they expire), fed by
    /// `startRevocationFeed`.
    let revokedSessions: RevokedSessions
    /// The transparency log of receipt commitments (SPEC "Evidence"); off without a KEK.
    let transparency: TransparencyLog
    /// Whether the start-up steps are done, and if not what they wait for (`/readyz`).
    public let startup = StartupState()

    /// The sign-in's store on `loop`, over that loop's database connections (`LATCHKEY_THREADS` of
    /// them, as the worker pool has), made on its first sign-in.
    func loopLogins(_ loop: EventLoop) -> LoopLogins {
        let connections = loopDatabases.withLock { made in
            if let connections = made[ObjectIdentifier(loop)] { return connections }
            let connections = database.loopConnections(on: loop, connections: configuration.threads)
            made[ObjectIdentifier(loop)] = connections
            return connections
        }
        return LoopLogins(repository: database.logins, connections: connections)
    }

    public init(configuration: Configuration, database: Database, runtime: Runtime = .system, log: RequestLog = RequestLog(enabled: true)) {
        self.configuration = configuration
        relyingParty = RelyingParty(configuration)
        self.database = database
        self.runtime = runtime
        self.log = log
        signer = TokenSigner(source: SigningKeyStore(keys: database.keys, kek: configuration.keyEncryptionKey, runtime: runtime),
                             issuer: configuration.issuer, audience: configuration.rpId, clock: runtime.tokenClock)
        origins = OriginCache(config: database.config, developmentMode: configuration.developmentMode, runtime: runtime)
        revokedSessions = RevokedSessions(accessTokenTTL: configuration.accessTokenTTL, maxLag: configuration.revocationMaxLag,
                                          sessions: database.sessions, runtime: runtime)
        let webhookPolicy = WebhookPolicy(configuration)
        events = OutboxEvents(runtime: runtime, maxAgeSeconds: webhookPolicy.maxAgeSeconds)
        sessions = SessionService(sessions: database.sessions, signer: signer,
                                  lifetimes: .init(configuration), runtime: runtime, revoked: revokedSessions, events: events)
        metadata = MetadataStore(configuration: configuration, runtime: runtime, ledger: database.metadataState)
        mail = MailService(mail: database.mail, outbox: database.outbox, events: events, metrics: metrics,
                           configuration: configuration, runtime: runtime)
        let assertion = PasskeyAssertion(accounts: database.accounts, keyCache: CredentialKeyCache(), events: events,
                                         onRegression: CredentialUse.OnRegression(configuration.signCountPolicy))
        recovery = RecoveryService(store: database.recovery, sessions: sessions, keyCache: assertion.keyCache, mail: mail,
                                   secret: DeploymentSecret(name: "one-time-codes", keys: database.keys, runtime: runtime),
                                   events: events, policy: RecoveryPolicy(configuration), runtime: runtime)
        passkeys = PasskeyService(store: database.accounts, logins: database.logins,
                                  seal: CeremonySeal(kek: configuration.keyEncryptionKey, keys: database.keys, runtime: runtime,
                                                     challengeTTL: configuration.challengeTTL),
                                  sessions: sessions, assertion: assertion,
                                  origins: origins, metrics: metrics, metadata: metadata,
                                  decoySecret: DeploymentSecret(name: "decoy-credentials", keys: database.keys, runtime: runtime),
                                  events: events, recovery: recovery, mail: mail, relyingParty: relyingParty, policy: CeremonyPolicy(configuration), runtime: runtime)
        attestationTrust = AttestationTrust(config: database.config, configuration: configuration, runtime: runtime)
        deviceKeys = DeviceKeyService(store: PostgresDeviceKeyStore(deviceKeys: database.deviceKeys, challenges: database.challenges),
                                      trust: attestationTrust, events: events, relyingParty: relyingParty, policy: DeviceKeyPolicy(configuration), runtime: runtime,
                                      revoked: revokedSessions)
        stepUp = StepUpService(store: PostgresStepUpStore(deviceKeys: database.deviceKeys, challenges: database.challenges),
                               keys: deviceKeys, signer: signer, assertion: assertion, origins: origins, events: events,
                               revoked: revokedSessions, relyingParty: relyingParty, policy: StepUpPolicy(configuration), runtime: runtime)
        wellKnown = WellKnownService(store: database.config, relyingParty: relyingParty, pinnedDirectory: configuration.wellKnownDirectory, runtime: runtime)
        let adminStore = PostgresAdminStore(database)
        admin = AdminService(store: adminStore, origins: origins, wellKnown: wellKnown, events: events, policy: AdminPolicy(configuration),
                             runtime: runtime)
        users = UserAdministration(store: adminStore, passkeys: passkeys, deviceKeys: deviceKeys, sessions: sessions)
        let webhookSealer = SecretSealer(configuration: configuration, runtime: runtime)
        webhooks = WebhookService(store: database.webhooks, sealer: webhookSealer, policy: webhookPolicy, runtime: runtime)
        webhookWorker = WebhookService.worker(outbox: database.outbox, sealer: webhookSealer, policy: webhookPolicy, metrics: metrics,
                                              runtime: runtime)
        let pinger = CIBAPinger(sender: WebhookSender(sealer: webhookSealer, policy: webhookPolicy, runtime: runtime))
        cibaPings = OutboxWorker(channel: .cibaPing, outbox: database.outbox, policy: webhookPolicy.outbox, runtime: runtime,
                                 deliver: { pinger.deliver($0) },
                                 observe: { [metrics] d, outcome in metrics.observeDelivery(type: d.type.rawValue, outcome: outcome) })
        let oauthStore = PostgresOAuthStore(oauth: database.oauth, accounts: database.accounts)
        let oauthPolicy = OAuthPolicy(configuration)
        oauthClients = OAuthClientService(store: oauthStore, policy: oauthPolicy, runtime: runtime)
        openID = OpenIDProvider(store: oauthStore, clients: oauthClients, sessions: sessions, signer: signer,
                                rsa: RSASigningKey(keys: database.keys, sealer: SecretSealer(configuration: configuration, runtime: runtime)),
                                events: events, metrics: metrics, policy: oauthPolicy, runtime: runtime, revoked: revokedSessions,
                                passkeys: passkeys, requestIds: DeploymentSecret(name: "oauth-request-ids", keys: database.keys, runtime: runtime))
        ciba = CIBAService(store: PostgresCIBAStore(oauth: database.oauth), provider: openID)
        approvals = ApprovalService(store: database.approvals, mail: mail, events: events, runtime: runtime,
                                    adminQuorum: configuration.adminQuorum)
        vault = VaultService(store: database.vaults, runtime: runtime)
        portability = PortabilityService(store: database.portability, policy: PortabilityPolicy(configuration, metadata: metadata), runtime: runtime)
        transparency = TransparencyLog(store: database.transparencyLog, sealer: SecretSealer(configuration: configuration, runtime: runtime),
                                       settings: .init(configuration), metrics: metrics, runtime: runtime)
        callers = CallerResolver(sessions: sessions, recovery: recovery, admins: database.admins, accounts: database.accounts, approvals: database.approvals,
                                 cibaRequests: database.oauth, adminKeyHash: configuration.adminKeyHash,
                                 browser: openID, now: runtime.now,
                                 oauth: OAuthCallers(clients: oauthClients, store: oauthStore, signer: signer, revoked: revokedSessions,
                                                     policy: oauthPolicy, runtime: runtime, trustProxy: configuration.trustProxy),
                                 dpop: SessionDPoP(origins: oauthPolicy.dpopOrigins, proofs: database.dpopProofs, now: { runtime.unixTime }),
                                 adminQuorum: configuration.adminQuorum)
    }

    // MARK: Start-up steps (`serve` runs them in this order before it listens)

    /// 0. The configuration holds together (`Configuration.validate`): a bad one never gets as far as
    ///    the database, let alone a listener.
    public func validateConfiguration() throws(Configuration.Invalid) { try configuration.validate() }

    /// 1. Schema: numbered migrations, each once (safe when many instances start together).
    public func migrate() throws(StorageError) -> [Int] { try database.migrate() }

    /// 2. LATCHKEY_ORIGINS joins the allowlist.
    public func seedOrigins() throws(ServiceError) { try admin.seedConfiguredOrigins() }

    /// 3. The signing keys open under LATCHKEY_KEY_ENCRYPTION_KEY (plaintext ones from before are
    ///    sealed; a missing or wrong KEK refuses), a signing key exists and is loaded.
    public func prepareSigningKeys() throws(SigningKeyError) { try signer.prepareKeys() }

    /// 4. The device-key attestation roots and revocation status list are read.
    public func loadAttestationTrust() throws { try attestationTrust.load() }

    /// 5. Other instances' allowlist and app changes reach this one at once (NOTIFY on a direct
    ///    connection; behind a transaction pooler without a direct URL, the one-second cache expiry).
    ///    The same connection LISTENs for the outbox's wake-ups: deliveries written on any instance
    ///    wake this one's workers for their channel (else their poll finds them).
    public func startChangeFeed() {
        let workers = [webhookWorker, mail.worker, cibaPings]
        let outbox = OutboxRepository.wakeUps { channels in
            for worker in workers where channels.contains(worker.channel) { worker.wakeUp() }
        }
        let watch = database.config.watch(also: [outbox]) { [origins, wellKnown, oauthClients] in
            origins.invalidate()
            wellKnown.invalidate()
            oauthClients.invalidate()
        }
        changeFeed.withLock { $0?.stop(); $0 = watch }
    }

    /// 6. Sessions revoked anywhere are refused here within `LATCHKEY_REVOCATION_MAX_LAG`: the last
    ///    access-token TTL's revocations loaded now, then NOTIFY `latchkey_sessions` (on a direct
    ///    connection) with a heartbeat every 250 ms; while the feed is not heard from (or there is no
    ///    direct connection at all), each token's session is read from the database (RevokedSessions).
    public func startRevocationFeed() throws(StorageError) { try revokedSessions.start() }

    /// 7. Authenticator metadata: the BLOB is loaded (a bad one is reported and fails closed) and
    ///    its files are watched; `SIGHUP` reloads at once (`metadata.reload()`).
    public func loadMetadata() { metadata.startWatching() }

    /// 8. This instance's outbox senders (LATCHKEY_OUTBOX_SENDERS, 0: none): webhook deliveries
    ///    claimed with SKIP LOCKED leases, sent, and recorded (see OutboxWorker).
    ///    Mail goes out the same way (channel `mail`, its own worker).
    public func startOutbox() {
        webhookWorker.start()
        cibaPings.start()
        mail.start()
    }

    /// 9. The transparency log: its key made (first start) or opened under the KEK, the stored tree
    ///    checked against the last size signed (PostgreSQL, `LATCHKEY_LOG_STATE`): smaller refuses
    ///    start; then this instance's integrating loop (`LATCHKEY_LOG_INTERVAL` > 0).
    public func startTransparencyLog() throws {
        try transparency.prepare()
        transparency.start()
    }

    /// All of them, in order.
    public func start() throws {
        try validateConfiguration()
        for step in startSteps { try step.run() }
        startup.finished()
    }

    /// True while the change feed is connected.
    public var isListening: Bool { changeFeed.withLock { $0?.isListening ?? false } }

    /// True while the revocation feed's LISTEN is connected and caught up.
    public var isListeningForRevocations: Bool { revokedSessions.isListening }

    /// True while the revocation feed has not been heard from within `LATCHKEY_REVOCATION_MAX_LAG`
    /// (tokens are then checked in the database): `latchkey_revocation_feed_stale`.
    public var isRevocationFeedStale: Bool { revokedSessions.isStale }

    public func stop() {
        changeFeed.withLock { $0?.stop(); $0 = nil }
        revokedSessions.stop()
        webhookWorker.stop()
        cibaPings.stop()
        mail.stop()
        transparency.stop()
        metadata.stopWatching()
        loopDatabases.withLock { made in
            for connections in made.values { connections.close() }
            made.removeAll()
        }
    }

    deinit { stop() }
}

/// One JSON line per request on standard output: no bodies, no tokens, no credential data.
public struct RequestLog: Sendable {
    let enabled: Bool
    public init(enabled: Bool) { self.enabled = enabled }

    func write(request: Request, route: String, status: Int, seconds: Double, at time: Date, databaseError: String? = nil) {
        guard enabled else { return }
        let line = Self.line(request: request, route: route, status: status, seconds: seconds, at: time, databaseError: databaseError)
        _ = line.withUnsafeBufferPointer { Foundation.write(1, $0.baseAddress, $0.count) }
    }

    /// One log line, newline included.
    static func line(request: Request, route: String, status: Int, seconds: Double, at time: Date, databaseError: String?) -> [UInt8] {
        // The members of `{"time", "method", "route", "status", "ms", "remote"[, "db_error"]}`,
        // written straight into one buffer (this runs for every request).
        var line: [UInt8] = []
        line.reserveCapacity(192)
        line.append(contentsOf: #"{"time":"#.utf8)
        JSONValue.append(string: iso8601(time), to: &line)
        line.append(contentsOf: #","method":"#.utf8)
        JSONValue.append(string: request.method, to: &line)
        line.append(contentsOf: #","route":"#.utf8)
        JSONValue.append(string: route, to: &line)
        line.append(contentsOf: #","status":"#.utf8)
        JSONValue.append(number: Double(status), to: &line)
        line.append(contentsOf: #","ms":"#.utf8)
        appendMilliseconds(seconds, to: &line)
        line.append(contentsOf: #","remote":"#.utf8)
        if let remote = request.remoteAddress { JSONValue.append(string: remote, to: &line) } else { line.append(contentsOf: "null".utf8) }
        if let databaseError {
            line.append(contentsOf: #","db_error":"#.utf8)
            JSONValue.append(string: databaseError, to: &line)
        }
        line.append(contentsOf: "}\n".utf8)
        return line
    }

    /// `seconds` as milliseconds rounded to hundredths, spelled as JSON writes that Double
    /// (ECMAScript's shortest form: "12.3", "0.05", "7"), from the integer count of hundredths:
    /// formatting the Double itself cost ~6 k instructions per line. Past 2^40 hundredths (or for
    /// a non-finite or negative duration) the Double's own spelling is used.
    static func appendMilliseconds(_ seconds: Double, to line: inout [UInt8]) {
        let hundredths = (seconds * 100_000).rounded()
        guard hundredths >= 0, hundredths < 1_099_511_627_776 else {
            JSONValue.append(number: hundredths / 100, to: &line)
            return
        }
        let n = Int64(hundredths)
        JSONValue.append(number: Double(n / 100), to: &line)
        let fraction = Int(n % 100)
        guard fraction != 0 else { return }
        line.append(UInt8(ascii: "."))
        line.append(UInt8(ascii: "0") + UInt8(fraction / 10))
        if fraction % 10 != 0 { line.append(UInt8(ascii: "0") + UInt8(fraction % 10)) }
    }
}

extension RequestLog {
    /// A 503's own line on standard error: which database failure (class and server message) or
    /// which start-up wait was behind it.
    func unavailable(request: Request, route: String, failure: DatabaseFailure?, notReady: String?, at time: Date) {
        guard enabled else { return }
        let cause = failure.map { "database \($0.kind): \($0.reason)" } ?? notReady.map { "not ready: \($0)" } ?? "unavailable (no database error recorded)"
        var line = Array("latchkey: \(iso8601(time)) 503 \(request.method) \(route): \(cause)\n".utf8)
        _ = line.withUnsafeMutableBufferPointer { Foundation.write(2, $0.baseAddress, $0.count) }
    }
}
