import Crypto
import DeviceKeys
import JSON
import Storage
import Tokens
import WebAuthn

/// The step-up resources as JSON (SPEC "Step-up"): pure functions from the values `StepUpService`
/// returns, for the user's routes and the admin API's receipts.
enum StepUpRenderer {
    /// `POST /v1/step-up/challenges`.
    static func challenge(_ c: StepUpChallengeIssued) -> JSONValue {
        var out: [(key: String, value: JSONValue)] = [
            ("challengeId", .string(Base64URL.encode(c.options.challengeId))), ("challenge", .string(Base64URL.encode(c.options.challenge))),
            ("expiresAt", .string(iso8601(unixSeconds: c.options.expiresAt))), ("actionHash", .string(Base64URL.encode(c.options.actionHash))),
        ]
        if let publicKey = c.publicKey { out.append(("publicKey", PasskeyRenderer.options(publicKey))) }
        return .object(out)
    }

    /// `POST /v1/step-up/verify`: the step-up token as an OAuth-style token answer.
    static func verified(_ v: VerifiedStepUp) -> JSONValue {
        .object([("access_token", .string(v.token)), ("token_type", "Bearer"), ("expires_in", .number(Double(v.expiresIn))),
                 ("actionHash", .string(Base64URL.encode(v.actionHash))), ("receiptId", .string(v.receiptId))])
    }

    /// `POST /v1/step-up/consume`.
    static func consumed(_ c: ConsumedStepUp) -> JSONValue {
        .object([("sub", .string(c.claims.subject)), ("actionHash", .string(c.actionHash)), ("action", action(c.action)),
                 ("receiptId", .string(c.receiptId)), ("acr", .string(c.claims.acr)), ("amr", .array(c.claims.amr.map { .string($0) })),
                 ("auth_time", .number(Double(c.claims.authTime)))])
    }

    /// A stored action (canonical JSON we wrote ourselves) as JSON; null if it ever failed to parse.
    static func action(_ canonical: String) -> JSONValue { (try? JSONParser.parse(Array(canonical.utf8))) ?? .null }

    /// `GET /v1/step-up/receipts/{id}` (and the admin API's): everything needed to re-verify the approval offline.
    static func receipt(_ r: StepUpReceiptRecord) -> JSONValue {
        var layout: JSONValue = .null
        if let c = try? StepUpChallenge(parsing: r.challenge) {  // display only: the stored bytes are what was signed
            layout = .object([("magic", "LKSTEPUP"), ("version", .number(Double(c.version))),
                              ("method", .string(c.method == .deviceKey ? "device-key" : "passkey")),
                              ("nonce", .string(Base64URL.encode(c.nonce))), ("userHash", .string(Base64URL.encode(c.userHash))),
                              ("keyHash", .string(Base64URL.encode(c.keyHash))), ("actionHash", .string(Base64URL.encode(c.actionHash)))])
        }
        let pem = PEM.encode(r.publicKey, label: "PUBLIC KEY")
        var out: [(key: String, value: JSONValue)] = [
            ("id", .string(r.id)), ("userId", .string(r.userId)), ("method", .string(r.method.rawValue)), ("keyId", .string(r.keyId)),
            ("publicKey", .string(Base64URL.encode(r.publicKey))), ("publicKeyPEM", .string(pem)),
            ("challenge", .string(Base64URL.encode(r.challenge))), ("challengeFields", layout),
            ("signedData", .string(Base64URL.encode(r.signedData))), ("signature", .string(Base64URL.encode(r.signature))),
            ("signatureAlgorithm", "ECDSA-SHA256 (DER)"),
            ("action", action(r.action)), ("actionCanonical", .string(r.action)),
            ("actionHash", .string(Base64URL.encode(r.actionHash))), ("keyBinding", .string(r.keyBinding)),
            ("tokenId", .string(r.tokenJTI)), ("createdAt", .string(iso8601(r.createdAt))),
            ("consumedAt", r.consumedAt.map { .string(iso8601($0)) } ?? .null),
        ]
        if let c = r.clientDataJSON { out.append(("clientDataJSON", .string(Base64URL.encode(c)))) }
        if let a = r.authenticatorData { out.append(("authenticatorData", .string(Base64URL.encode(a)))) }
        return .object(out)
    }
}
