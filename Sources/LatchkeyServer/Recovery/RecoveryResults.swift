import Foundation
import Storage

/// What the recovery service's decisions return; `RecoveryRenderer` turns each into the API's JSON.

/// A one-time code's challenge, mailed (or, for nobody, made alike and never sent).
struct MailedChallenge: Sendable, Equatable {
    let id: String
    let expiresAt: Date
}

/// New recovery codes, shown once.
struct IssuedRecoveryCodes: Sendable {
    let codes: [String]
}

/// A recovery begun: the token registers a passkey from `notBefore`, within `expiresIn` seconds.
struct StartedRecovery: Sendable {
    let token: String
    /// The durations given to the database (its `expires_at` is now() + these).
    let expiresIn: Int
    let notBefore: Date
    let recoveryId: String
}

/// The address now verified for the account.
struct VerifiedAddress: Sendable {
    let email: String
}

/// Which fallback ways in this deployment offers (a passkey and recovery codes always).
struct SignInMethods: Sendable {
    let emailSignIn: Bool
    let emailRecovery: Bool
}

/// An email sign-in's session: the account and its tokens.
struct EmailSignIn: Sendable {
    let user: UserRecord
    let tokens: SessionService.Issued
}
