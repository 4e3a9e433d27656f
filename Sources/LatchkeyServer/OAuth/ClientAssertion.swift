import Crypto
import Curl
import Foundation
import JSON
import Storage

/// `private_key_jwt` (OpenID Connect Core §9, RFC 7523): a JWT the client signs with a key from its
/// `jwks_uri`, which Latchkey fetches under the webhooks' address rules (SPEC "Assurance"). Each
/// `jti` is accepted once.
enum ClientAssertion {
    struct Parsed {
        let alg: String
        let kid: String?
        let claims: JSONValue
        let signingInput: [UInt8]
        let signature: [UInt8]
    }

    static func parse(_ token: String) -> Parsed? {
        guard token.utf8.count <= 8192 else { return nil }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let h = Base64URL.decode(String(parts[0])), let c = Base64URL.decode(String(parts[1])),
              let sig = Base64URL.decode(String(parts[2])), let header = try? JSONParser.parse(h, maxDepth: 4),
              let claims = try? JSONParser.parse(c, maxDepth: 6), case .object = claims, let alg = header["alg"]?.stringValue else { return nil }
        return Parsed(alg: alg, kid: header["kid"]?.stringValue, claims: claims,
                      signingInput: Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count)), signature: sig)
    }

    /// The client an assertion names (`iss`), before anything is checked.
    static func issuer(_ token: String) -> String? { parse(token)?.claims["iss"]?.stringValue }

    /// A public key from a JWK (EC P-256 or RSA).
    static func key(_ jwk: JSONValue) -> PublicKey? {
        switch jwk["kty"]?.stringValue {
        case "EC":
            guard jwk["crv"]?.stringValue == "P-256", let x = jwk["x"]?.stringValue.flatMap(Base64URL.decode),
                  let y = jwk["y"]?.stringValue.flatMap(Base64URL.decode) else { return nil }
            return try? PublicKey.ec(curve: .p256, x: x, y: y)
        case "RSA":
            guard let n = jwk["n"]?.stringValue.flatMap(Base64URL.decode), let e = jwk["e"]?.stringValue.flatMap(Base64URL.decode) else { return nil }
            return try? PublicKey.rsa(modulus: n, exponent: e)
        default: return nil
        }
    }
}

extension OpenIDProvider {
    func verifyAssertion(_ token: String, client: OAuthClientRecord) throws(OAuthError) {
        guard let jwksURI = client.jwksURI else { throw OAuthError.invalidClient("this client has no jwks_uri for private_key_jwt") }
        guard let a = ClientAssertion.parse(token), ["ES256", "RS256"].contains(a.alg) else {
            throw OAuthError.invalidClient("client_assertion must be an ES256 or RS256 JWT")
        }
        let c = a.claims
        guard c["iss"]?.stringValue == client.id, c["sub"]?.stringValue == client.id else {
            throw OAuthError.invalidClient("client_assertion iss and sub must be the client_id")
        }
        // RFC 7523 §3: the audience is the token endpoint (the issuer and the PAR endpoint are accepted too).
        let audiences = Set([issuer, issuer + "/oauth2/token", issuer + "/oauth2/par"])
        let aud = c["aud"]?.stringValue.map { [$0] } ?? (c["aud"]?.arrayValue ?? []).compactMap(\.stringValue)
        guard aud.contains(where: audiences.contains) else { throw OAuthError.invalidClient("client_assertion aud must be the token endpoint") }
        let now = runtime.unixTime
        guard let exp = c["exp"]?.intValue, Int64(exp) + 30 > now, Int64(exp) - now <= 3600 else {
            throw OAuthError.invalidClient("client_assertion is expired or lives too long")
        }
        guard let jti = c["jti"]?.stringValue, !jti.isEmpty, jti.utf8.count <= 256 else { throw OAuthError.invalidClient("client_assertion needs a jti") }
        let keys = try fetchKeys(jwksURI)
        let candidates = keys.filter { k in
            (a.kid == nil || k["kid"]?.stringValue == a.kid) && k["kty"]?.stringValue == (a.alg == "ES256" ? "EC" : "RSA")
        }
        let verified = candidates.contains { jwk in
            guard let key = ClientAssertion.key(jwk) else { return false }
            if a.alg == "ES256" {
                guard a.signature.count == 64, let der = try? ECDSASignature.derFromRaw(a.signature) else { return false }
                return key.verify(signature: der, message: a.signingInput, algorithm: .ecdsa(.sha256))
            }
            return key.verify(signature: a.signature, message: a.signingInput, algorithm: .rsaPKCS1(.sha256))
        }
        guard verified else { throw OAuthError.invalidClient("client_assertion signature does not verify with the client's jwks_uri") }
        let fresh: Bool
        do { fresh = try store.recordAssertion(clientId: client.id, jtiHash: Digest.sha256(Array(jti.utf8)), ttlSeconds: 3700) } catch {
            throw OAuthError("temporarily_unavailable", "try again")
        }
        guard fresh else { throw OAuthError.invalidClient("client_assertion jti was used before (replay)") }
    }

    /// The client's JWKS, fetched now under the webhooks' address rules: the name resolved once,
    /// every address checked, the connection pinned to them, no redirects.
    func fetchKeys(_ uri: String) throws(OAuthError) -> [JSONValue] {
        let policy = WebhookAddressPolicy(configuration)
        let destination: CheckedDestination
        do {
            let parsed = try WebhookURL(parsing: uri)
            try policy.check(parsed)
            switch parsed.host {
            case .address(let a): destination = try policy.check(parsed, resolvedTo: [a])
            case .name(let name):
                guard case .success(let addresses) = runtime.resolver.addresses(of: name) else {
                    throw OAuthError.invalidClient("the client's jwks_uri does not resolve")
                }
                destination = try policy.check(parsed, resolvedTo: addresses)
            }
        } catch let e as OAuthError { throw e } catch { throw OAuthError.invalidClient("the client's jwks_uri is refused: \(error)") }
        var options = CurlOptions()
        options.timeoutSeconds = 5
        options.protocols = configuration.developmentMode ? "http,https" : "https"
        options.maxResponseBytes = 65536
        options.maxRedirects = 0
        options.connectOnlyTo = destination.addresses.map(\.bytes)
        options.caFile = configuration.webhookCAFile
        guard let response = try? Curl.get(destination.url.text, options: options), response.status == 200, !response.truncated,
              let jwks = try? JSONParser.parse(response.body, maxDepth: 6), let keys = jwks["keys"]?.arrayValue else {
            throw OAuthError.invalidClient("the client's jwks_uri did not answer a JWKS")
        }
        return keys
    }
}
