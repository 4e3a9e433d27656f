import Crypto
import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage
import Synchronization
import Testing
import Tokens

/// `RecoveryService` and `SessionService` over the in-memory stores, on a clock the test steps and
/// randomness it fixes: no socket, no PostgreSQL. The tables are the stores' shared rows, to set up
/// accounts and to look at what a change wrote (audit lines, events, mail).
struct ServiceFixture {
    let clock: ManualClock
    let runtime: Runtime
    let tables: InMemoryTables
    let configuration: Configuration
    let mail: RecordingMail
    let revoked: RevokedSessions
    let signer: TokenSigner
    let keyCache: CredentialKeyCache
    let sessions: SessionService
    let recovery: RecoveryService

    static let rpId = "service.test"

    init(configure: (inout Configuration) -> Void = { _ in }) throws {
        clock = ManualClock(start: Date(timeIntervalSince1970: 1_750_000_000))
        runtime = clock.runtime(random: SeededRandom(seed: 11).bytes)
        tables = InMemoryTables(now: clock.now)
        var c = Configuration.serving(Self.rpId)
        // Mail is on (its composer records the messages; nothing is sent).
        c.smtpURL = "smtp://127.0.0.1:9"
        c.emailSignIn = true
        c.recoveryDelay = 3600
        configure(&c)
        configuration = c
        mail = RecordingMail(origin: "https://" + Self.rpId, runtime: runtime)
        let store = InMemorySessionStore(tables: tables)
        revoked = RevokedSessions(accessTokenTTL: c.accessTokenTTL, maxLag: c.revocationMaxLag, sessions: store, runtime: runtime)
        signer = TokenSigner(source: MemorySigningKeys(), issuer: c.issuer, audience: c.rpId, clock: runtime.tokenClock)
        try signer.prepareKeys()
        let events = OutboxEvents(runtime: runtime, maxAgeSeconds: c.webhookMaxAge)
        keyCache = CredentialKeyCache()
        sessions = SessionService(sessions: store, signer: signer, lifetimes: .init(c), runtime: runtime, revoked: revoked, events: events)
        recovery = RecoveryService(store: InMemoryRecoveryStore(tables: tables), sessions: sessions, keyCache: keyCache, mail: mail,
                                   secret: DeploymentSecret(name: "one-time-codes", keys: MemorySecrets(), runtime: runtime),
                                   events: events, policy: RecoveryPolicy(c), runtime: runtime)
    }

    /// The code in the newest message `event` sent to `to`.
    func mailedCode(_ event: MailMessage.Event, to: String) throws -> String {
        let text = try #require(mail.last(event, to: to)).text
        return String(try #require(text.firstMatch(of: try Regex("\\b[0-9]{\(configuration.otpDigits)}\\b"))).output[0].substring ?? "")
    }

    /// The cancel link's token in the newest "recovery started" notice to `to`.
    func cancelToken(to: String) throws -> String {
        let text = try #require(mail.last(.recoveryStarted, to: to)).text
        return String(try #require(text.firstMatch(of: #/lkcan_[A-Za-z0-9_-]+/#)).output)
    }
}

/// The code a service refused with (nil: it did not refuse).
func refusal(_ body: () throws -> Void) -> ServiceError.Code? {
    do {
        try body()
        return nil
    } catch let error as ServiceError {
        return error.code
    } catch {
        return .internalError
    }
}

/// The messages the services composed, in the language catalog they would be sent in (English
/// for an account that never said); each as the `MailToSend` a store writes with its change.
final class RecordingMail: MailComposer {
    struct Composed: Sendable {
        let event: MailMessage.Event
        let to: String
        let userId: String
        let subject: String
        let text: String
        let id: String
    }

    private let composed = Mutex<[Composed]>([])
    let origin: String
    let runtime: Runtime

    init(origin: String, runtime: Runtime) {
        self.origin = origin
        self.runtime = runtime
    }

    func compose(_ event: MailMessage.Event, to: EmailAddress, userId: String,
                 _ render: (MailCatalog) -> (subject: String, text: String)) -> MailToSend {
        compose(event, to: to, userId: userId, language: nil, render)
    }

    func compose(_ event: MailMessage.Event, to: EmailAddress, userId: String, language: String?,
                 _ render: (MailCatalog) -> (subject: String, text: String)) -> MailToSend {
        let (subject, text) = render(MailCatalog(language: language))
        let id = "mail_" + runtime.identifier()
        composed.withLock { $0.append(Composed(event: event, to: to.value, userId: userId, subject: subject, text: text, id: id)) }
        let outboxEvent = OutboxEvent(id: "evt_" + runtime.identifier(), type: .mailMessage, accountId: userId, data: .object([]),
                                      fanOut: [.direct(channel: MailRepository.channel, target: id)], maxAgeSeconds: 3600,
                                      createdAt: runtime.now())
        return MailToSend(id: id, recipient: to.value, message: Array(text.utf8), event: outboxEvent)
    }

    func cancelLink(_ token: String) -> String { origin + "/?cancel=" + token }

    var all: [Composed] { composed.withLock { $0 } }

    func last(_ event: MailMessage.Event, to: String) -> Composed? { all.last { $0.event == event && $0.to == to } }
}

/// Deployment secrets in memory: the first candidate offered for a name is kept.
final class MemorySecrets: DeploymentSecretSource {
    let secrets = Mutex<[String: [UInt8]]>([:])
    func secret(named name: String, candidate: [UInt8]) throws(StorageError) -> [UInt8] {
        secrets.withLock { s in
            if let known = s[name] { return known }
            s[name] = candidate
            return candidate
        }
    }
}

extension Configuration {
    /// A deployment for the in-memory service tests: `rpId`, its https origin and the issuer there.
    static func serving(_ rpId: String) -> Configuration {
        var c = Configuration()
        c.rpId = rpId
        c.origins = ["https://" + rpId]
        c.issuer = "https://" + rpId
        return c
    }
}
