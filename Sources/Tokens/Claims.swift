import Crypto
import JSON

/// `acr` / `amr` (RFC 8176) of Latchkey's tokens by how the user authenticated, in one place:
/// access tokens carry the passkey and email-code ones, step-up tokens any of them (SPEC "Trust
/// chain": the response tells the truth — `hwk` only for a key whose attestation proved hardware).
public struct AuthenticationClaims: Sendable, Equatable {
    public let acr: String
    public let amr: [String]

    public init(acr: String, amr: [String]) {
        self.acr = acr
        self.amr = amr
    }

    public static let passkeyVerified = AuthenticationClaims(acr: "urn:latchkey:acr:passkey-uv", amr: ["pop", "user", "mfa"])
    public static let passkey = AuthenticationClaims(acr: "urn:latchkey:acr:passkey", amr: ["pop", "user"])
    public static let deviceKeyAttested = AuthenticationClaims(acr: "urn:latchkey:acr:device-key-attested", amr: ["hwk", "pop"])
    public static let deviceKey = AuthenticationClaims(acr: "urn:latchkey:acr:device-key", amr: ["swk", "pop"])
    /// SPEC "Email sign-in": a session a mailed one-time code began.
    public static let emailOTP = AuthenticationClaims(acr: "urn:latchkey:acr:email-otp", amr: ["otp"])

    /// A passkey assertion, by RFC 8176's one rule for every token (SPEC "Which authentication the
    /// tokens describe"): `pop` (a key), `user` (UP is required), `mfa` when UV was set, `hwk` only
    /// for a passkey proven hardware-bound at registration.
    public static func passkey(userVerified: Bool, hardware: Bool) -> AuthenticationClaims {
        AuthenticationClaims(acr: (userVerified ? passkeyVerified : passkey).acr,
                             amr: ["pop", "user"] + (userVerified ? ["mfa"] : []) + (hardware ? ["hwk"] : []))
    }

    /// What OpenID tokens say of an authentication: the OpenID EAP ACR values for a passkey —
    /// `phrh` for one proven hardware-bound (`hwk`), else `phr`, with or without UV — and the
    /// device key's and email code's own values unchanged.
    public var openID: AuthenticationClaims {
        guard acr == Self.passkeyVerified.acr || acr == Self.passkey.acr else { return self }
        return AuthenticationClaims(acr: amr.contains("hwk") ? OpenIDACR.phrh : OpenIDACR.phr, amr: amr)
    }
}

/// The `acr` values of OpenID tokens (SPEC "OpenID Provider": OpenID EAP ACR Values 1.0 and Latchkey's own).
public enum OpenIDACR {
    public static let phrh = "phrh"
    public static let phr = "phr"
    public static let emailOTP = "urn:latchkey:acr:email-otp"
    public static let deviceKeyAttested = "urn:latchkey:acr:device-key-attested"
    public static let deviceKey = "urn:latchkey:acr:device-key"
    /// Discovery's `acr_values_supported`, strongest first.
    public static let supported = [phrh, phr, emailOTP, deviceKeyAttested, deviceKey]

    /// Whether an authentication of `acr` meets one of `requested` (space-separated `acr_values`):
    /// `phrh` meets `phr`, an attested device key meets `device-key`; the passkey acr values step-up
    /// tokens carry are accepted as aliases (`passkey-uv` and `passkey` for `phr`).
    public static func satisfies(_ acr: String, requested: String?) -> Bool {
        guard let requested, !requested.isEmpty else { return true }
        let met: Set<String> = switch acr {
        case phrh: [phrh, phr, AuthenticationClaims.passkeyVerified.acr, AuthenticationClaims.passkey.acr]
        case phr: [phr, AuthenticationClaims.passkeyVerified.acr, AuthenticationClaims.passkey.acr]
        case deviceKeyAttested: [deviceKeyAttested, deviceKey]
        default: [acr]
        }
        return requested.split(separator: " ").contains { met.contains(String($0)) }
    }
}

/// The claims of an access token (RFC 9068 §2.2, `typ` `at+jwt`), typed: built here, read here, so
/// no caller picks members out of a `JSONValue` by name.
public struct AccessClaims: Sendable, Equatable {
    public static let type = "at+jwt"

    public let subject: String
    /// The session (refresh-token family) the token belongs to.
    public let sessionId: String
    public let jwtId: String
    public let issuedAt: Int64
    public let expiresAt: Int64
    /// The authentication that began the session (a refresh never moves it).
    public let authTime: Int64
    public let acr: String
    public let amr: [String]
    /// RFC 9449 §6.1 `cnf.jkt`: the thumbprint of the DPoP key the token is bound to (nil: Bearer).
    public let jkt: String?

    public init(subject: String, sessionId: String, jwtId: String, issuedAt: Int64, expiresAt: Int64, authTime: Int64,
                authentication: AuthenticationClaims, jkt: String? = nil) {
        self.jkt = jkt
        self.subject = subject
        self.sessionId = sessionId
        self.jwtId = jwtId
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.authTime = authTime
        acr = authentication.acr
        amr = authentication.amr
    }

    /// The payload, with the issuer and audience of the deployment.
    public func payload(issuer: String, audience: String) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("iss", .string(issuer)), ("sub", .string(subject)), ("aud", .string(audience)), ("client_id", "latchkey"),
            ("iat", .number(Double(issuedAt))), ("exp", .number(Double(expiresAt))), ("jti", .string(jwtId)),
            ("auth_time", .number(Double(authTime))), ("sid", .string(sessionId)), ("acr", .string(acr)),
            ("amr", .array(amr.map { .string($0) })),
        ]
        if let jkt { members.append((key: "cnf", value: .object([(key: "jkt", value: .string(jkt))]))) }
        return .object(members)
    }

    /// `payload(issuer:audience:).serialized()`, written without the tree (every login signs one).
    public func payloadBytes(issuer: String, audience: String) -> [UInt8] {
        var writer = JSONObjectWriter(capacity: 320)
        writer.member("iss", string: issuer)
        writer.member("sub", string: subject)
        writer.member("aud", string: audience)
        writer.member("client_id", string: "latchkey")
        writer.member("iat", integer: issuedAt)
        writer.member("exp", integer: expiresAt)
        writer.member("jti", string: jwtId)
        writer.member("auth_time", integer: authTime)
        writer.member("sid", string: sessionId)
        writer.member("acr", string: acr)
        writer.member("amr", strings: amr)
        if let jkt { writer.member("cnf") { $0.member("jkt", string: jkt) } }
        return writer.finish()
    }

    /// The claims of a verified token; a member missing or of another type is `malformed`.
    public init(verified claims: JSONValue) throws(TokenError) {
        let read = ClaimReader(claims)
        subject = try read.string("sub")
        sessionId = try read.string("sid")
        jwtId = try read.string("jti")
        issuedAt = try read.time("iat")
        expiresAt = try read.time("exp")
        authTime = try read.time("auth_time")
        acr = try read.string("acr")
        amr = try read.strings("amr")
        if let cnf = claims["cnf"] {
            guard let jkt = cnf["jkt"]?.stringValue, !jkt.isEmpty else { throw TokenError(.malformed, "cnf without jkt") }
            self.jkt = jkt
        } else {
            jkt = nil
        }
    }
}

/// The claims of a step-up token (`typ` `step-up+jwt`): one approval, of one action, by one key.
public struct StepUpClaims: Sendable, Equatable {
    public static let type = "step-up+jwt"

    public let subject: String
    /// The session that asked for the approval: the token dies with it.
    public let sessionId: String
    public let jwtId: String
    public let issuedAt: Int64
    public let expiresAt: Int64
    public let authTime: Int64
    public let acr: String
    public let amr: [String]
    /// SHA-256 of the action's RFC 8785 canonical JSON.
    public let actionHash: [UInt8]
    public let receiptId: String

    public init(subject: String, sessionId: String, jwtId: String, issuedAt: Int64, lifetime: Int64, authentication: AuthenticationClaims,
                actionHash: [UInt8], receiptId: String) {
        self.subject = subject
        self.sessionId = sessionId
        self.jwtId = jwtId
        self.issuedAt = issuedAt
        expiresAt = issuedAt + lifetime
        authTime = issuedAt
        acr = authentication.acr
        amr = authentication.amr
        self.actionHash = actionHash
        self.receiptId = receiptId
    }

    public func payload(issuer: String, audience: String) -> JSONValue {
        .object([
            ("iss", .string(issuer)), ("sub", .string(subject)), ("aud", .string(audience)), ("iat", .number(Double(issuedAt))),
            ("exp", .number(Double(expiresAt))), ("jti", .string(jwtId)), ("auth_time", .number(Double(authTime))),
            ("acr", .string(acr)), ("amr", .array(amr.map { .string($0) })), ("action_hash", .string(Base64URL.encode(actionHash))),
            ("receipt_id", .string(receiptId)), ("sid", .string(sessionId)),
        ])
    }

    public init(verified claims: JSONValue) throws(TokenError) {
        let read = ClaimReader(claims)
        subject = try read.string("sub")
        sessionId = try read.string("sid")
        jwtId = try read.string("jti")
        issuedAt = try read.time("iat")
        expiresAt = try read.time("exp")
        authTime = try read.time("auth_time")
        acr = try read.string("acr")
        amr = try read.strings("amr")
        guard let hash = Base64URL.decode(try read.string("action_hash")), hash.count == 32 else {
            throw TokenError(.malformed, "action_hash is not a SHA-256")
        }
        actionHash = hash
        receiptId = try read.string("receipt_id")
    }
}

/// Typed reads of a verified token's members.
struct ClaimReader {
    let claims: JSONValue
    init(_ claims: JSONValue) { self.claims = claims }

    func string(_ name: String) throws(TokenError) -> String {
        guard let v = claims[name]?.stringValue, !v.isEmpty else { throw TokenError(.malformed, "\(name) is missing") }
        return v
    }

    func time(_ name: String) throws(TokenError) -> Int64 {
        guard let v = claims[name]?.intValue else { throw TokenError(.malformed, "\(name) is missing") }
        return Int64(v)
    }

    func strings(_ name: String) throws(TokenError) -> [String] {
        guard let list = claims[name]?.arrayValue else { throw TokenError(.malformed, "\(name) is missing") }
        var out: [String] = []
        for item in list {
            guard let s = item.stringValue else { throw TokenError(.malformed, "\(name) holds a non-string") }
            out.append(s)
        }
        return out
    }
}
