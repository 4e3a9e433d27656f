import Crypto
import Foundation
import JSON
import Storage
import Tokens

/// `POST /oauth2/token` (SPEC "OpenID Provider", "Tokens"): the authorization code (PKCE S256 for
/// every client) and refresh grants, and the tokens: an id_token (ES256, or
/// RS256 for a client that registered it) and an RFC 9068 access token carrying the grant.
extension OpenIDProvider {
    // MARK: The token endpoint

    /// The client authenticated before the request reached the route (`Access.oauthClient`).
    func token(_ request: TokenRequest) throws(OAuthError) -> JSONValue {
        let client = request.client
        let grant = try request.grant.get()
        // RFC 9449 §5: a proof binds what this request issues to its key.
        let proof = try checkedProof(request.dpop, for: client)
        // RFC 9449 §5.2: a client registered `--dpop required` presents a proof with every token
        // request; SPEC "FAPI 2.0": so does a `--profile fapi2` client.
        if proof == nil, client.dpopRequired || client.isFAPI2 {
            throw OAuthError(.invalidDPoPProof, "this client's token requests need a DPoP proof")
        }
        switch grant {
        case .authorizationCode(let code, let redirectURI, let verifier):
            return try exchange(code: code, redirectURI: redirectURI, verifier: verifier, client: client, proof: proof)
        case .refreshToken(let token, let scope):
            return try refresh(token, scope: scope, client: client, proof: proof)
        }
    }

    func exchange(code: String, redirectURI: String?, verifier: String?, client: OAuthClientRecord,
                  proof: DPoPProof? = nil) throws(OAuthError) -> JSONValue {
        // RFC 7636 §4.6: the challenge a well-formed verifier makes; a malformed one matches nothing.
        let verifierChallenge = verifier.map { PKCE.isVerifier($0) ? Base64URL.encode(Digest.sha256(Array($0.utf8))) : "" }
        let familyId = runtime.sessionIdentifier()
        let refresh = OpaqueSecret(prefix: "lkor_", runtime: runtime)
        let outcome: OAuthCodeRedemption
        do {
            outcome = try store.redeemCode(
                hash: OpaqueSecret.hash(code),
                presented: .init(clientId: client.id, redirectURI: redirectURI, verifierChallenge: verifierChallenge,
                                 pkceOptional: !client.pkceRequired, dpop: proof?.binding),
                familyId: familyId, refreshHash: refresh.hash, ttlSeconds: policy.refreshTokenTTL,
                replayAudit: AuditRecord(.oauthCodeReplayed, actor: AuditActor.server, subject: client.id),
                issuedAudit: AuditRecord(.oauthTokenIssued, actor: AuditActor.server, subject: nil,
                                         detail: [("clientId", .string(client.id)), ("grant", "authorization_code"), ("sessionId", .string(familyId))]))
        } catch { throw OAuthError.unavailable }
        let record: OAuthCodeRecord
        switch outcome {
        case .started(let r): record = r
        case .invalid(let why): throw OAuthError.invalidGrant(why)
        case .replayed(let family):
            // RFC 6749 §4.1.2: a code used twice revokes what its first use issued.
            if let family { revoked.insert([family]) }
            metrics.oauth(client: client.id, outcome: "code_replayed")
            throw OAuthError.invalidGrant("the code was already used; the tokens it issued are revoked")
        case .approverRevoked:
            // SPEC "Grants live and die with what approved them".
            metrics.oauth(client: client.id, outcome: "approver_revoked")
            throw OAuthError.invalidGrant("the session, passkey or device key that approved this code was revoked")
        case .proofReplayed:
            throw Self.replayedProof
        }
        let grant = OAuthGrant(json: record.grant)
        let scopes = grant.scopes
        metrics.oauth(client: client.id, outcome: "token")
        return try issue(client: client, userId: record.userId, familyId: familyId, grant: grant, scopes: scopes,
                         refreshToken: scopes.contains("offline_access") ? refresh.token : nil, idToken: true, carriesApproval: true,
                         dpopKey: proof?.jkt)
    }

    func refresh(_ token: String, scope asked: [String]?, client: OAuthClientRecord, proof: DPoPProof? = nil) throws(OAuthError) -> JSONValue {
        // RFC 6749 §6: the scope may repeat or narrow the grant, never widen it; checked in the
        // rotation's statement, so a refused refresh leaves the token as it was.
        let next = OpaqueSecret(prefix: "lkor_", runtime: runtime)
        let outcome: OAuthRefreshOutcome
        do {
            // SPEC: a public client's refresh token works only with a proof by the key it is bound
            // to; a confidential client's is bound by its authentication and may present a new key.
            // SPEC "FAPI 2.0" (FAPI 2.0 §5.3.2.1): a fapi2 client's refresh token does not rotate.
            outcome = try store.rotate(hash: OpaqueSecret.hash(token), newHash: next.hash, clientId: client.id, scope: asked,
                                       dpop: proof?.binding, sameKey: client.isPublic, rotates: !client.isFAPI2,
                                       ttlSeconds: policy.refreshTokenTTL,
                                       reuseAudit: AuditRecord(.refreshReuseDetected, actor: AuditActor.server, subject: client.id),
                                       issuedAudit: AuditRecord(.oauthTokenIssued, actor: AuditActor.server, subject: nil,
                                                                detail: [("clientId", .string(client.id)), ("grant", "refresh_token")]))
        } catch { throw OAuthError.unavailable }
        switch outcome {
        case .invalid: throw OAuthError.invalidGrant("the refresh token is invalid, expired or revoked, or bound to another DPoP key")
        case .proofReplayed: throw Self.replayedProof
        case .scopeExceeded: throw OAuthError(.invalidScope, "scope exceeds the grant")
        case .reused(let family):
            revoked.insert([family])
            throw OAuthError.invalidGrant("refresh token reuse detected: the session is revoked")
        case .rotated(let userId, let familyId, _, let stored):
            let grant = OAuthGrant(json: stored)
            var scopes = grant.scopes
            if let asked { scopes = scopes.filter(asked.contains) }
            metrics.oauth(client: client.id, outcome: "refresh")
            return try issue(client: client, userId: userId, familyId: familyId, grant: grant, scopes: scopes,
                             refreshToken: client.isFAPI2 ? nil : next.token,
                             idToken: scopes.contains("openid"), carriesApproval: false, dpopKey: proof?.jkt)
        }
    }

    /// The token response: an access token (RFC 9068), an id_token, and the refresh token when granted.
    func issue(client: OAuthClientRecord, userId: String, familyId: String, grant g: OAuthGrant, scopes: [String],
               refreshToken: String?, idToken: Bool, carriesApproval: Bool, dpopKey: String? = nil) throws(OAuthError) -> JSONValue {
        let now = runtime.unixTime
        let ttl = policy.accessTokenTTL
        // SPEC "Tokens": only the code exchange's access token carries the approved details and the
        // step-up's receipt; a refresh never does (an approval is used once).
        let details = carriesApproval ? g.authorizationDetails : nil
        let authentication = g.authentication
        var access = OAuthAccessClaims(issuer: issuer, subject: userId, audience: g.resource ?? issuer, clientId: client.id,
                                       scope: scopes, issuedAt: now, lifetime: Int64(ttl), jwtId: runtime.identifier(), sessionId: familyId,
                                       authentication: authentication, authorizationDetails: details,
                                       receiptId: carriesApproval ? g.receiptId : nil)
        // RFC 9449 §6.1: a DPoP-bound token carries `cnf.jkt` and is of type DPoP.
        access.dpopKey = dpopKey
        var body: [(key: String, value: JSONValue)] = []
        do { body.append(("access_token", .string(try signer.sign(access)))) } catch { throw OAuthError.unavailable }
        body += [("token_type", .string(dpopKey == nil ? "Bearer" : "DPoP")), ("expires_in", .number(Double(ttl))), ("scope", .string(scopes.joined(separator: " ")))]
        if idToken {
            let claims = IDTokenClaims(issuer: issuer, subject: userId, clientId: client.id, issuedAt: now, lifetime: Int64(policy.idTokenTTL),
                                       sessionId: g.opSessionId ?? familyId, authentication: authentication,
                                       nonce: carriesApproval ? g.nonce : nil)
            do {
                body.append(("id_token", .string(client.idTokenAlg == "RS256" ? try rsa.sign(claims) : try signer.sign(claims))))
            } catch { throw OAuthError.unavailable }
        }
        if let refreshToken { body.append(("refresh_token", .string(refreshToken))) }
        if let details { body.append(("authorization_details", details)) }
        return .object(body)
    }
}
