import Storage

/// What quorum approvals need of mail: a notice in the subject's language, and where the veto
/// link points. `MailService` in the server; the service tests record what would be sent.
protocol ApprovalMail: Sendable {
    func compose(_ event: MailMessage.Event, to: EmailAddress, userId: String, language: String?,
                 _ render: (MailCatalog) -> (subject: String, text: String)) -> MailToSend
    /// `<first web origin>/?cancel=<token>` (the token `lkv_…`): the web app asks, then posts it to
    /// `POST /v1/approvals/veto`.
    func vetoLink(_ token: String) -> String
}

extension MailService: ApprovalMail {
    func vetoLink(_ token: String) -> String {
        cancelLink(token)
    }
}
