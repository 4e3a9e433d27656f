import HTTP
import JSON

extension RouteTable {
    /// Recovery and fallback sign-in (SPEC "Recovery and fallback sign-in").
    mutating func addRecoveryRoutes(_ s: Services) {
        add("PUT", "/v1/account/email") { req, _ in
            .json(status: 202, bytes: try s.recovery.startVerification(try s.sessions.requireSession(req), body: try jsonBody(req)).serialized())
        }
        add("POST", "/v1/account/email/verify") { req, _ in
            .json(bytes: try s.recovery.verifyEmail(try s.sessions.requireSession(req), body: try jsonBody(req)).serialized())
        }
        add("GET", "/v1/account/recovery", accepting: .any) { req, _ in
            .json(bytes: try s.recovery.accountState(try s.sessions.requireSession(req)).serialized())
        }
        add("GET", "/v1/sign-in/methods", accepting: .any) { _, _ in
            .json(bytes: s.recovery.methods().serialized())
        }
        add("POST", "/v1/email/challenges") { req, _ in
            .json(status: 202, bytes: try s.recovery.startEmailSignIn(body: try jsonBody(req)).serialized())
        }
        add("POST", "/v1/email/verify") { req, _ in
            .json(bytes: try s.recovery.verifyEmailSignIn(body: try jsonBody(req)).serialized())
        }
        add("POST", "/v1/recovery-codes", accepting: .any) { req, _ in
            let caller = try s.sessions.requireSession(req)
            return .json(status: 201, bytes: try s.recovery.createRecoveryCodes(caller, stepUpToken: req.header("Latchkey-Step-Up")?.trimmed).serialized())
        }
        add("POST", "/v1/recovery/challenges") { req, _ in
            .json(status: 202, bytes: try s.recovery.startRecovery(body: try jsonBody(req)).serialized())
        }
        add("POST", "/v1/recovery/verify") { req, _ in
            .json(bytes: try s.recovery.verifyRecovery(body: try jsonBody(req)).serialized())
        }
        add("DELETE", "/v1/recovery/{id}", accepting: .any) { req, params in
            try s.recovery.cancel(try s.sessions.requireSession(req), recoveryId: params["id"] ?? "")
            return .empty(status: 204)
        }
    }
}
