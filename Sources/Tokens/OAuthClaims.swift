import Crypto
import JSON

/// What an OpenID grant's tokens say of the authentication behind them (SPEC "Which authentication
/// the tokens describe"): when, how (`acr`, `amr`), and in which session (`sid`).
public struct GrantAuthentication: Sendable, Equatable {
    public let authTime: Int64
    public let acr: String
    public let amr: [String]

    public init(authTime: Int64, acr: String, amr: [String]) {
        self.authTime = authTime
        self.acr = acr
        self.amr = amr
    }
}

/// An OpenID Provider access token (RFC 9068 §2.2, `typ` `at+jwt`, ≤ 300 s), typed: built here so no
/// caller assembles one by member names. `authorizationDetails` and `receiptId` ride only in the
/// token that redeems the approval — the code exchange's, or a CIBA grant's (SPEC "Tokens": an
/// approval is used once); the issuer passes neither for a refresh.
public struct OAuthAccessClaims: Sendable {
    public let issuer: String
    public let subject: String
    /// The RFC 8707 `resource` asked for, else the issuer.
    public let audience: String
    public let clientId: String
    public let scope: [String]
    public let issuedAt: Int64
    public let expiresAt: Int64
    public let jwtId: String
    /// The `oauth` session (refresh family) the token belongs to.
    public let sessionId: String
    public let authentication: GrantAuthentication?
    public let authorizationDetails: JSONValue?
    public let receiptId: String?
    /// RFC 9449 §6.1: the thumbprint of the DPoP key the token is bound to (`cnf.jkt`); nil: a Bearer token.
    public var dpopKey: String? = nil

    public init(issuer: String, subject: String, audience: String, clientId: String, scope: [String], issuedAt: Int64, lifetime: Int64,
                jwtId: String, sessionId: String, authentication: GrantAuthentication?, authorizationDetails: JSONValue? = nil,
                receiptId: String? = nil) {
        self.issuer = issuer
        self.subject = subject
        self.audience = audience
        self.clientId = clientId
        self.scope = scope
        self.issuedAt = issuedAt
        expiresAt = issuedAt + lifetime
        self.jwtId = jwtId
        self.sessionId = sessionId
        self.authentication = authentication
        self.authorizationDetails = authorizationDetails
        self.receiptId = receiptId
    }

    public var payload: JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("iss", .string(issuer)), ("sub", .string(subject)), ("aud", .string(audience)), ("client_id", .string(clientId)),
            ("scope", .string(scope.joined(separator: " "))), ("iat", .number(Double(issuedAt))), ("exp", .number(Double(expiresAt))),
            ("jti", .string(jwtId)), ("sid", .string(sessionId)),
        ]
        members += Self.authenticationMembers(authentication)
        if let authorizationDetails { members.append(("authorization_details", authorizationDetails)) }
        if let receiptId { members.append(("receipt_id", .string(receiptId))) }
        if let dpopKey { members.append(("cnf", .object([("jkt", .string(dpopKey))]))) }
        return .object(members)
    }

    static func authenticationMembers(_ a: GrantAuthentication?) -> [(key: String, value: JSONValue)] {
        guard let a else { return [("auth_time", .null), ("acr", .null), ("amr", .null)] }
        return [("auth_time", .number(Double(a.authTime))), ("acr", .string(a.acr)), ("amr", .array(a.amr.map { .string($0) }))]
    }
}

/// An id_token (OpenID Connect Core §2), typed. `sid` is the OP browser session's when its cookie
/// approved, else the `oauth` session's; `nonce` only in the code exchange's (§12.2).
public struct IDTokenClaims: Sendable {
    public let issuer: String
    public let subject: String
    /// The client (also `azp`).
    public let clientId: String
    public let issuedAt: Int64
    public let expiresAt: Int64
    public let sessionId: String
    public let authentication: GrantAuthentication?
    public let nonce: String?

    public init(issuer: String, subject: String, clientId: String, issuedAt: Int64, lifetime: Int64, sessionId: String,
                authentication: GrantAuthentication?, nonce: String?) {
        self.issuer = issuer
        self.subject = subject
        self.clientId = clientId
        self.issuedAt = issuedAt
        expiresAt = issuedAt + lifetime
        self.sessionId = sessionId
        self.authentication = authentication
        self.nonce = nonce
    }

    public var payload: JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("iss", .string(issuer)), ("sub", .string(subject)), ("aud", .string(clientId)), ("azp", .string(clientId)),
            ("exp", .number(Double(expiresAt))), ("iat", .number(Double(issuedAt))),
        ]
        members += OAuthAccessClaims.authenticationMembers(authentication)
        members.append(("sid", .string(sessionId)))
        if let nonce { members.append(("nonce", .string(nonce))) }
        return .object(members)
    }
}

extension TokenSigner {
    public func sign(_ claims: OAuthAccessClaims) throws(TokenError) -> String { try sign(claims.payload, type: AccessClaims.type) }

    public func sign(_ claims: IDTokenClaims) throws(TokenError) -> String { try sign(claims.payload, type: "JWT") }
}

extension JWT {
    /// A compact JWS signed RS256 (RFC 7518 §3.3) with `key`, named by `kid`: the id_tokens of
    /// clients that registered RS256 (OpenID Discovery §3 requires it offered).
    public static func signRS256(claims: JSONValue, key: PrivateKey, kid: String, type: String = "JWT") throws(TokenError) -> String {
        let header: JSONValue = .object([("alg", "RS256"), ("typ", .string(type)), ("kid", .string(kid))])
        let input = Base64URL.encode(header.serialized()) + "." + Base64URL.encode(claims.serialized())
        guard let signature = try? key.sign(Array(input.utf8), algorithm: .rsaPKCS1(.sha256)) else {
            throw TokenError(.unknownKey, "RS256 signing failed")
        }
        return input + "." + Base64URL.encode(signature)
    }
}
