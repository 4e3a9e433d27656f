import Curl
import Foundation
import JSON
import Storage

/// Mail (SPEC "Recovery and fallback sign-in", Mail): composes messages for the other services to
/// write with their changes (`MailToSend`: the message row and an outbox event, channel `mail`), and
/// sends them — the `deliver` of this instance's `OutboxWorker` on channel `mail`, beside the
/// webhook one: over SMTP with libcurl (`LATCHKEY_SMTP_URL`), or in development mode without it as
/// `.eml` files in `LATCHKEY_MAIL_DIR`. A mail server that is down delays mail (retries with backoff
/// until the outbox's age limit) and loses none; an instance killed before sending leaves its claim
/// to come back when the lease ends, and another instance sends it.
public final class MailService: Sendable {
    let mail: MailRepository
    let configuration: Configuration
    let runtime: Runtime
    let events: OutboxEvents
    /// This instance's consumer of channel `mail`.
    public let worker: OutboxWorker

    /// The outbox event type of a mail (never a webhook type: it fans out to its mail delivery only).
    static let eventType = EventType.mailMessage

    init(mail: MailRepository, outbox: OutboxRepository, events: OutboxEvents, metrics: Metrics, configuration: Configuration,
         runtime: Runtime) {
        self.mail = mail
        self.configuration = configuration
        self.runtime = runtime
        self.events = events
        var policy = OutboxWorker.Policy(senders: configuration.effectiveMailSenders, perTarget: 1,
                                         leaseSeconds: configuration.outboxLease, retryBase: configuration.mailRetryBase)
        policy.pollInterval = configuration.outboxPollInterval
        let configuration = configuration
        worker = OutboxWorker(channel: MailRepository.channel, outbox: outbox, policy: policy, runtime: runtime,
                              deliver: { Self.deliver($0, mail: mail, configuration: configuration) },
                              observe: { [metrics] _, outcome in metrics.observeDelivery(type: MailService.eventType.rawValue, outcome: outcome) })
    }


    func start() { worker.start() }
    func stop() { worker.stop() }

    /// A message to `to` for `userId` in the language the account last used (`users.language`;
    /// English when it never said, or when the lookup fails), ready to hand to the repository call
    /// that makes the change. `render` writes subject and text from that language's catalog.
    func compose(_ event: MailMessage.Event, to: EmailAddress, userId: String,
                 _ render: (MailCatalog) -> (subject: String, text: String)) -> MailToSend {
        compose(event, to: to, userId: userId, language: (try? mail.language(userId: userId)) ?? nil, render)
    }

    /// The same in `language` (the account's, read with the rest of what the change needs; nil: English).
    func compose(_ event: MailMessage.Event, to: EmailAddress, userId: String, language: String?,
                 _ render: (MailCatalog) -> (subject: String, text: String)) -> MailToSend {
        let catalog = MailCatalog(language: language)
        let (subject, text) = render(catalog)
        return compose(event, to: to, userId: userId, subject: subject, text: text, language: catalog.language)
    }

    /// A message to `to` for `userId`, ready to hand to the repository call that makes the change.
    func compose(_ event: MailMessage.Event, to: EmailAddress, userId: String, subject: String, text: String,
                 language: String = "en") -> MailToSend {
        let id = "mail_" + runtime.identifier()
        var message = MailMessage(event: event, from: configuration.smtpFrom, to: to.value, subject: subject, text: text, messageId: id, date: runtime.now())
        message.language = language
        let event = OutboxEvent(id: "evt_" + runtime.identifier(), type: Self.eventType, accountId: userId, data: .object([]),
                                fanOut: [.direct(channel: MailRepository.channel, target: id)],
                                maxAgeSeconds: configuration.webhookMaxAge, createdAt: runtime.now())
        return MailToSend(id: id, recipient: to.value, message: message.bytes, event: event)
    }

    /// The first web origin of the allowlist configuration: where cancel links point (SPEC "Assurance").
    func cancelLink(_ token: String) -> String {
        let origin = configuration.origins.first { $0.hasPrefix("https://") || $0.hasPrefix("http://") } ?? "https://\(configuration.rpId)"
        return origin + "/?cancel=" + token
    }

    /// One attempt: the message came with the claim (no read of its own).
    static func deliver(_ d: ClaimedDelivery, mail: MailRepository, configuration: Configuration) -> OutboxWorker.Outcome {
        // Already sent (a retry after the outcome could not be recorded) or gone: nothing to do.
        guard let queued = d.mail else { return .delivered(statusCode: nil) }
        if let url = configuration.smtpURL {
            var settings = SMTPSettings(url: url, user: configuration.smtpUser, password: configuration.smtpPassword)
            settings.caFile = configuration.smtpCAFile
            do {
                let reply = try Curl.sendMail(settings, from: configuration.smtpFrom, to: [queued.recipient], message: queued.message)
                try? mail.sent(id: d.target)
                return .delivered(statusCode: reply)
            } catch {
                return .retry(statusCode: nil, error: error.description)
            }
        }
        // Development mode without SMTP: one .eml file per message.
        let directory = configuration.mailDirectory
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let path = directory + "/" + d.target + ".eml"
            guard FileManager.default.createFile(atPath: path, contents: Data(queued.message)) else {
                return .retry(statusCode: nil, error: "could not write \(path)")
            }
            try? mail.sent(id: d.target)
            return .delivered(statusCode: nil)
        } catch {
            return .retry(statusCode: nil, error: "could not write to \(directory)")
        }
    }
}
