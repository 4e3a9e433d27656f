import Foundation
import JSON
import Storage

/// The recovery resources' one rendering (SPEC "Recovery and fallback sign-in"): pure functions
/// from the service's values to the API's JSON, members in the documented order.
enum RecoveryRenderer {
    /// `{"challengeId","expiresAt"}`.
    static func challenge(_ c: MailedChallenge) -> JSONValue {
        .object([("challengeId", .string(c.id)), ("expiresAt", .string(iso8601(c.expiresAt)))])
    }

    /// `{"codes":[…]}`.
    static func recoveryCodes(_ issued: IssuedRecoveryCodes) -> JSONValue {
        .object([("codes", .array(issued.codes.map { .string($0) }))])
    }

    /// `{"recoveryToken","expiresIn","notBefore","recoveryId"}`.
    static func recovery(_ r: StartedRecovery) -> JSONValue {
        .object([("recoveryToken", .string(r.token)), ("expiresIn", .number(Double(r.expiresIn))),
                 ("notBefore", .string(iso8601(r.notBefore))), ("recoveryId", .string(r.recoveryId))])
    }

    /// `{"email","verified":true}`.
    static func verified(_ v: VerifiedAddress) -> JSONValue {
        .object([("email", .string(v.email)), ("verified", true)])
    }

    /// `GET /v1/account/recovery`: what the settings page shows.
    static func accountState(_ state: RecoveryAccountState) -> JSONValue {
        .object([
            ("email", state.email.map { .string($0) } ?? .null), ("verified", .bool(state.email != nil)),
            ("recoveryCodesLeft", .number(Double(state.recoveryCodesLeft))),
            ("pendingRecoveries", .array(state.pending.map { r in
                .object([("recoveryId", .string(r.id)), ("method", .string(r.method.rawValue)), ("notBefore", .string(iso8601(r.notBefore))),
                         ("expiresAt", .string(iso8601(r.expiresAt)))])
            })),
        ])
    }

    /// `{"passkey","emailSignIn","emailRecovery","recoveryCodes"}`.
    static func methods(_ m: SignInMethods) -> JSONValue {
        .object([("passkey", true), ("emailSignIn", .bool(m.emailSignIn)), ("emailRecovery", .bool(m.emailRecovery)),
                 ("recoveryCodes", true)])
    }

    /// `{"user","tokens"}` (the user and tokens rendered as every sign-in renders them).
    static func signIn(_ s: EmailSignIn) -> JSONValue {
        .object([("user", s.user.json), ("tokens", SessionRenderer.tokens(s.tokens))])
    }
}
