import Crypto
import Foundation
import JSON
import Storage
import Tokens

/// SPEC "Silent sign-in": `prompt=none` answered from the OP browser session and a remembered
/// consent, with no page — or the error that says what the page would have needed.
extension OpenIDProvider {
    /// The code for a `prompt=none` request, or `login_required` (no live cookie, an elapsed
    /// `max_age`, unmet `acr_values`, an `id_token_hint` for another user), `interaction_required`
    /// (`authorization_details` always need the page) or `consent_required` (no remembered consent
    /// for these scopes). The code's approvers are the OP session and its passkey. A pushed request
    /// the request came from is used up by the statement that issues the code.
    func silentSignIn(_ p: JSONValue, client: OAuthClientRecord, cookie: String?, usingUpPushed pushed: [UInt8]? = nil) throws(OAuthError) -> String {
        let loginRequired = OAuthError(.loginRequired, "the user must sign in with a passkey")
        guard let cookie, cookie.hasPrefix(Self.browserCookiePrefix), cookie.utf8.count <= 128 else { throw loginRequired }
        let found: BrowserSessionRecord?
        do { found = try store.browserSession(cookieHash: OpaqueSecret.hash(cookie), withRequest: nil)?.session } catch { throw OAuthError.unavailable }
        guard let session = found, !revoked.contains(session.familyId), session.credentialId != nil,
              (session.passkeyApprovesFrom.map { $0 <= runtime.now() } ?? true) else { throw loginRequired }
        if let maxAge = p["max_age"]?.intValue, runtime.now().timeIntervalSince(session.authTime) > Double(maxAge) { throw loginRequired }
        let authentication = AuthenticationClaims.passkey(userVerified: true, hardware: session.hardware).openID
        guard OpenIDACR.satisfies(authentication.acr, requested: p["acr_values"]?.stringValue) else { throw loginRequired }
        if let hinted = p["id_token_hint_sub"]?.stringValue, hinted != session.userId { throw loginRequired }
        guard p["authorization_details"] ?? .null == .null else {
            throw OAuthError(.interactionRequired, "authorization_details are approved on the page")
        }
        let scopes = (p["scope"]?.stringValue ?? "").split(separator: " ").map(String.init)
        let code = "lkac_" + Base64URL.encode(runtime.random(32))
        let grant = Self.grant(p, authTime: session.authTime, authentication: authentication, receiptId: nil,
                               credentialId: session.credentialId, opSessionId: session.familyId)
        let data: [(key: String, value: JSONValue)] = [("clientId", .string(client.id)), ("scopes", .array(scopes.map { .string($0) })),
                                                       ("receiptId", .null)]
        let event = events.event(.oauthAuthorized, userId: session.userId, data: data)
        let audit = AuditRecord(.oauthAuthorized, actor: session.userId, subject: session.userId, detail: data + [("silent", true)])
        let issued: Bool
        do {
            issued = try store.finish(requestHash: nil, code: (OpaqueSecret.hash(code), client.id, session.userId, grant.json, policy.codeTTL),
                                      approvers: OAuthApprovers(familyId: session.familyId, sessionCredential: session.credentialId, stepUpJTI: nil),
                                      consent: scopes, usingUpPushed: pushed, redeeming: nil, audit: audit, events: [event])
        } catch { throw OAuthError.unavailable }
        guard issued else { throw OAuthError(.consentRequired, "the user has not approved these scopes for this app") }
        return code
    }
}
