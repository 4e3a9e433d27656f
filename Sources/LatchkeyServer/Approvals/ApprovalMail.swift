import Storage

/// What quorum approvals need of mail: a notice in the subject's language, and where the veto
/// link points. `MailService` in the server; the service tests record what would be sent.
protocol ApprovalMail: Sendable {
    func compose(_ event: MailMessage.Event, to: EmailAddress, userId: String, language: String?,
                 _ render: (MailCatalog) -> (subject: String, text: String)) -> MailToSend
    /// `<first web origin>/?vetoApproval=<token>`: the web app posts it to `POST /v1/approvals/veto`.
    func vetoLink(_ token: String) -> String
}

extension MailService: ApprovalMail {
    func vetoLink(_ token: String) -> String {
        let origin = configuration.origins.first { $0.hasPrefix("https://") || $0.hasPrefix("http://") } ?? "https://\(configuration.rpId)"
        return origin + "/?vetoApproval=" + token
    }
}
