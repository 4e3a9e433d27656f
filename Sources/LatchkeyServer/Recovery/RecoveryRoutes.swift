import DeviceKeys
import HTTP
import JSON
import Storage

extension RouteTable {
    /// Recovery and fallback sign-in (SPEC "Recovery and fallback sign-in", "Assurance").
    mutating func addRecoveryRoutes(_ s: Services) {
        // The configuration does not change while the server runs: these are decided once.
        let mail = s.configuration.mailEnabled
        let emailSignIn = s.configuration.mailEnabled && s.configuration.emailSignIn
        add("PUT", "/v1/account/email", .session, stepUp: .emailChange, available: mail) { ctx in
            // The verification mail (and the account's mail from then on) speaks the page's language.
            let caller = try ctx.session()
            return .json(status: 202, bytes: RecoveryRenderer.challenge(try s.recovery.startVerification(
                caller, body: try ctx.json(), redeeming: ctx.redemption,
                language: I18nCatalogs.negotiate(ctx.request.header("Accept-Language")), account: ctx.loads.addressChange)).serialized())
        }
        add("POST", "/v1/account/email/verify", .session, available: mail) { ctx in
            .json(bytes: RecoveryRenderer.verified(try s.recovery.verifyEmail(try ctx.session(), body: try ctx.json())).serialized())
        }
        add("GET", "/v1/account/recovery", .session, accepting: .any) { ctx in
            .json(bytes: RecoveryRenderer.accountState(try s.recovery.accountState(try ctx.session())).serialized())
        }
        add("GET", "/v1/sign-in/methods", .anyone, accepting: .any) { _ in
            .json(bytes: RecoveryRenderer.methods(s.recovery.methods()).serialized())
        }
        add("POST", "/v1/email/challenges", .anyone, available: emailSignIn) { ctx in
            .json(status: 202, bytes: RecoveryRenderer.challenge(try s.recovery.startEmailSignIn(body: try ctx.json())).serialized())
        }
        add("POST", "/v1/email/verify", .anyone, available: emailSignIn) { ctx in
            let dpop = try s.callers.dpop.binding(ctx.request)
            return .json(bytes: RecoveryRenderer.signIn(try s.recovery.verifyEmailSignIn(
                body: try ctx.json(), language: I18nCatalogs.negotiate(ctx.request.header("Accept-Language")), dpop: dpop)).serialized())
        }
        add("POST", "/v1/recovery-codes", .session, stepUp: .recoveryCodesCreation, accepting: .any) { ctx in
            guard let redemption = ctx.redemption else { throw StepUpService.stepUpRequired("send Latchkey-Step-Up") }
            return .json(status: 201, bytes: RecoveryRenderer.recoveryCodes(try s.recovery.createRecoveryCodes(try ctx.session(),
                                                                                                redeeming: redemption)).serialized())
        }
        add("POST", "/v1/recovery/challenges", .anyone, available: mail) { ctx in
            .json(status: 202, bytes: RecoveryRenderer.challenge(try s.recovery.startRecovery(body: try ctx.json())).serialized())
        }
        add("POST", "/v1/recovery/verify", .anyone) { ctx in
            .json(bytes: RecoveryRenderer.recovery(try s.recovery.verifyRecovery(body: try ctx.json())).serialized())
        }
        add("DELETE", "/v1/recovery/{id:recovery}", .session, accepting: .any) { ctx in
            try s.recovery.cancel(try ctx.session(), recoveryId: try ctx.path.text("id"))
            return .empty(status: 204)
        }
        // SPEC "Assurance": the owner undoes a recovery or a held passkey from the mailed link, without a session.
        add("POST", "/v1/recovery/cancel", .anyone) { ctx in
            try s.recovery.cancel(token: try ctx.json())
            return .empty(status: 204)
        }
    }
}

extension StepUpRule {
    /// `{"type":"latchkey.recovery-codes.create"}` (SPEC "Recovery codes").
    static let recoveryCodesCreation = StepUpRule.always("new recovery codes") { _ throws(ServiceError) in
        try gated { () throws(DeviceKeyError) in try StepUpAction.recoveryCodesCreation() }
    }

    /// SPEC "Assurance": setting or replacing the verified address on an account that has a passkey
    /// needs `{"type":"latchkey.email.change","email":<the address as the body sends it>}`.
    static let emailChange = StepUpRule(changes: "address changes") { input throws(ServiceError) in
        let body = input.body ?? .object([])
        _ = try RecoveryService.email(body)
        guard let userId = input.caller.userId, let email = body["email"]?.stringValue else { return .none }
        // One read: whether the account has a passkey, and the mail language the handler writes in.
        let account = try input.lookups.addressChange(userId: userId)
        input.loads.addressChange = account
        guard account.hasPasskeys else { return .none }
        return .required(try gated { () throws(DeviceKeyError) in try StepUpAction.emailChange(email: email) })
    }
}
