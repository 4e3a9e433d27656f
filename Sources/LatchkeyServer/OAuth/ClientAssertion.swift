import Crypto
import Foundation
import JSON
import Storage
import Tokens

/// `private_key_jwt` (OpenID Connect Core §9, RFC 7523): a JWT the client signs with a key from its
/// `jwks_uri` (ES256, PS256 or RS256). In three steps: `parse` (nothing judged), `checkClaims` (RFC
/// 7523 §3, on the clock alone), `verifySignature` (the client's keys, from `ClientKeySets`); then
/// `OAuthCallers` records the `jti`, so each is accepted once.
enum ClientAssertion {
    /// An assertion as `parse` reads it (Tokens' one JWS parser).
    typealias Parsed = CompactJWS

    /// What `checkClaims` found acceptable: the replay key and how long to remember it.
    struct CheckedClaims {
        let jti: String
        let exp: Int64
    }

    /// SPEC `token_endpoint_auth_signing_alg_values_supported`.
    static let algorithms: [String: SignatureAlgorithm] = ["ES256": .ecdsa(.sha256), "PS256": .rsaPSS(.sha256), "RS256": .rsaPKCS1(.sha256)]
    /// RFC 7523 §3 items 4–6: tolerated clock difference between the client and us.
    static let leeway: Int64 = 30
    /// SPEC: `exp` at most this far ahead (plus the leeway).
    static let maximumLifetime: Int64 = 300

    /// A compact JWS with an `alg` and claims nested at most 6 deep; nothing judged.
    static func parse(_ token: String) -> Parsed? {
        guard let jws = CompactJWS(token, claimsDepth: 6), jws.alg != nil else { return nil }
        return jws
    }

    /// The client an assertion names (`iss`), before anything is checked.
    static func issuer(_ token: String) -> String? { parse(token)?.claims["iss"]?.stringValue }

    /// RFC 7523 §3 on the claims, `now` in Unix seconds. `audiences`: the values `aud` may hold.
    static func checkClaims(_ a: Parsed, clientId: String, audiences: Set<String>, now: Int64) throws(OAuthError) -> CheckedClaims {
        guard let alg = a.alg, algorithms[alg] != nil else { throw OAuthError.invalidClient("client_assertion must be an ES256, PS256 or RS256 JWT") }
        let c = a.claims
        // §3 items 1–2: iss and sub are the client.
        guard c["iss"]?.stringValue == clientId, c["sub"]?.stringValue == clientId else {
            throw OAuthError.invalidClient("client_assertion iss and sub must be the client_id")
        }
        // §3 item 3: the audience is one the receiving endpoint accepts (`OAuthCallers.verifyAssertion`).
        let aud = c["aud"]?.stringValue.map { [$0] } ?? (c["aud"]?.arrayValue ?? []).compactMap(\.stringValue)
        guard aud.contains(where: audiences.contains) else {
            throw OAuthError.invalidClient("client_assertion aud must be the issuer, the token endpoint or this endpoint")
        }
        // §3 item 4: exp, not past; SPEC: and at most 300 s ahead.
        guard let exp = time(c["exp"]) else { throw OAuthError.invalidClient("client_assertion needs a numeric exp") }
        guard exp + leeway > now else { throw OAuthError.invalidClient("client_assertion is expired") }
        guard exp <= now + maximumLifetime + leeway else { throw OAuthError.invalidClient("client_assertion exp is more than 300 s ahead") }
        // §3 items 5–6: nbf and iat, when present, not in the future.
        for name in ["nbf", "iat"] {
            guard let value = c[name], !value.isNull else { continue }
            guard let at = time(value) else { throw OAuthError.invalidClient("client_assertion \(name) must be a number") }
            guard at <= now + leeway else { throw OAuthError.invalidClient("client_assertion \(name) is in the future") }
        }
        // §3 item 7: a jti, which the caller accepts once.
        guard let jti = c["jti"]?.stringValue, !jti.isEmpty, jti.utf8.count <= 256 else { throw OAuthError.invalidClient("client_assertion needs a jti") }
        return CheckedClaims(jti: jti, exp: exp)
    }

    /// SPEC "FAPI 2.0" (FAPI 2.0 Security Profile §5.3.2.1): a `--profile fapi2` client's assertion
    /// is ES256 or PS256, and its `aud` is exactly the issuer, as a string (an array is refused).
    static func checkFAPI2(_ a: Parsed, issuer: String) throws(OAuthError) {
        guard a.alg == "ES256" || a.alg == "PS256" else { throw OAuthError.invalidClient("this client's client_assertion must be ES256 or PS256") }
        guard a.claims["aud"]?.stringValue == issuer else {
            throw OAuthError.invalidClient("this client's client_assertion aud must be the issuer, as a string")
        }
    }

    /// A NumericDate (RFC 7519 §2): seconds, a fraction rounded down; nil for anything else.
    static func time(_ value: JSONValue?) -> Int64? {
        guard let d = value?.doubleValue, d.isFinite, abs(d) < 9.0e15 else { return nil }
        return Int64(d.rounded(.down))
    }

    /// RFC 7523 §3 item 9: the signature, with a key of the client's set that has the assertion's
    /// `kid` (any key when it names none) and fits its `alg`. A `kid` the set holds is judged on the
    /// keys held, never fetched again (`ClientKeySets`).
    static func verifySignature(_ a: Parsed, jwksURI: String, keySets: ClientKeySets) throws(OAuthError) {
        guard let alg = a.alg, let algorithm = algorithms[alg] else {
            throw OAuthError.invalidClient("client_assertion must be an ES256, PS256 or RS256 JWT")
        }
        let keys = try keySets.keys(for: jwksURI, kid: a.kid)
        guard !keys.isEmpty else {
            throw OAuthError.invalidClient(a.kid.map { "the client's jwks_uri has no key \"\($0)\" (yet; its keys are refreshed at most once a minute)" }
                                           ?? "the client's jwks_uri has no usable key")
        }
        // RFC 7518 §3.4: R || S, 32 bytes each.
        if alg == "ES256", a.signature.count != 64 { throw OAuthError.invalidClient("client_assertion signature is not an ES256 signature") }
        guard keys.contains(where: { $0.fits(alg) && a.verifies(with: $0.key, algorithm: algorithm) }) else {
            throw OAuthError.invalidClient("client_assertion signature does not verify with the client's jwks_uri")
        }
    }
}
