// SPEC "Assurance": who may call each route (RouteGuard.swift checks it before the handler runs).

/// Who may call a route. Whatever the route, a recovery token (in `Authorization`, `Latchkey-Step-Up`
/// or `Latchkey-Ticket`) is refused with 403 `forbidden` except where the access says otherwise
/// (SPEC "Recovery": it registers a passkey and does nothing else).
enum Access: Sendable {
    /// Anyone: ceremonies, sign-in, recovery, public files. Credentials, if sent, are not looked at.
    case anyone
    /// Anyone, as the verify of a registration: a recovery token that came with it (the verify after
    /// a recovery's options) is let through, and not looked at either.
    case registrationVerify
    /// The bearer of a live session's access token, any kind of session (passkey, email, recovery).
    case session
    /// The bearer of a session begun by one of the account's passkeys that is not held (SPEC
    /// "Assurance": opening, approving and using a quorum approval); an email session or a held
    /// passkey's → 403 `forbidden`.
    case passkeySession
    /// Approving a CIBA request (SPEC "CIBA approval"): a not-held passkey session, or a device-key
    /// session — one that enrolled a live device key of the account, which approves only with that
    /// key's step-up (the approval's write holds it to that). Any other session → 403 `forbidden`.
    /// The request the route names is read with the caller (`GuardPreload.cibaRequest`).
    case cibaApprover
    /// The admin API: the admin key, or an admin's session begun by a user-verified passkey that
    /// is not held. An email session, a held passkey's session or a refreshed token → 403.
    case admin
    /// A step-up token presented as Bearer (`POST /v1/step-up/consume`); checked by the handler.
    case stepUpToken
    /// Passkey registration options: anyone (a new account), a session, an enrolment ticket
    /// (`Authorization: Ticket …`) or a recovery token whose waiting period is over.
    case registration
    /// Approving an OpenID authorization request (SPEC "Who may approve"): the Bearer token of a
    /// session begun by one of the account's passkeys that is not held (an email session or a held
    /// passkey's → 403), or else the OP session cookie, from the issuer's own page.
    case approver
    /// Any session's Bearer token, or else the OP session cookie from the issuer's own page (SPEC
    /// "The cookie routes": deny, consents, and the step-up of `latchkey.oauth.authorize`).
    case sessionOrBrowser
    /// Anyone; the OP session cookie, when sent from the issuer's own page, names who is signed in.
    case anyoneOrBrowser
    /// An OAuth client at `endpoint`, authenticated as it registered (SPEC "Client authentication":
    /// `client_secret_basic`, `client_secret_post`, `private_key_jwt`, or `client_id` alone for a
    /// public client). Refusals are RFC 6749 §5.2's (`invalid_client` 401), not problem+json.
    case oauthClient(OAuthEndpoint)
    /// The bearer of one of our OAuth access tokens (userinfo). Refusals are RFC 6750 §3.1's.
    case oauthBearer
}

extension Access {
    var name: String {
        switch self {
        case .anyone: "anyone"
        case .registrationVerify: "registration-verify"
        case .session: "session"
        case .passkeySession: "passkey-session"
        case .cibaApprover: "ciba-approver"
        case .admin: "admin"
        case .stepUpToken: "step-up-token"
        case .registration: "registration"
        case .approver: "approver"
        case .sessionOrBrowser: "session-or-browser"
        case .anyoneOrBrowser: "anyone-or-browser"
        case .oauthClient: "oauth-client"
        case .oauthBearer: "oauth-bearer"
        }
    }
}
