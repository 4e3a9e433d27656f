import Crypto
import DeviceKeys
import Foundation
import JSON
import Storage
import Tokens

// CIBA's requests as typed values (OpenID CIBA Core 1.0; SPEC "CIBA"): parsed at the edge, before
// the service decides. Every refusal here depends only on the request and the client's registration.

/// `POST /oauth2/bc-authorize` (CIBA Core §7.1), from a client that authenticated.
struct BackchannelRequest: Sendable {
    enum Hint: Sendable, Equatable {
        /// `login_hint`: the account's username.
        case username(String)
        /// `id_token_hint`: an id_token Latchkey issued, naming the account by `sub`.
        case idToken(String)
    }

    let client: OAuthClientRecord
    let registration: CIBARegistration
    let scope: [String]
    let hint: Hint
    let bindingMessage: String?
    /// RFC 9396 details, each of a type the client may ask for; `.null` when none.
    let authorizationDetails: JSONValue
    /// `requested_expiry` (30…600 s); nil: the default.
    let requestedExpiry: Int?
    let notificationToken: String?
    let acrValues: String?

    init(_ request: AuthenticatedClientRequest) throws(OAuthError) {
        client = request.client
        let f = request.form.fields
        // SPEC "CIBA": only a confidential client registered for the grant.
        guard let registration = client.ciba, !client.isPublic else {
            throw OAuthError(.unauthorizedClient, "this client is not registered for the CIBA grant (--grant-type ciba)")
        }
        self.registration = registration
        // CIBA Core §7.1: the scope must hold openid.
        let asked = (f["scope"] ?? "").split(separator: " ").map(String.init)
        guard asked.contains("openid") else { throw OAuthError(.invalidScope, "scope must include openid") }
        guard asked.allSatisfy(Scopes.supported.contains) else { throw OAuthError(.invalidScope, "scope holds a value this server does not support") }
        scope = Scopes.parse(asked.joined(separator: " "))
        // §7.1: exactly one hint; Latchkey issues no login_hint_token.
        if f["login_hint_token"] != nil { throw OAuthError.invalidRequest("login_hint_token is not supported: send login_hint or id_token_hint") }
        switch (f["login_hint"], f["id_token_hint"]) {
        case (let name?, nil) where !name.isEmpty && name.utf8.count <= 256: hint = .username(name)
        case (nil, let token?) where !token.isEmpty && token.utf8.count <= 8192: hint = .idToken(token)
        case (nil, nil): throw OAuthError.invalidRequest("one of login_hint or id_token_hint is required")
        case (.some, .some): throw OAuthError.invalidRequest("send only one of login_hint or id_token_hint")
        default: throw OAuthError.invalidRequest("the hint is empty or too long")
        }
        if let message = f["binding_message"] {
            guard Self.isBindingMessage(message) else {
                throw OAuthError(.invalidBindingMessage, "binding_message must be at most 64 characters without control characters")
            }
            bindingMessage = message.isEmpty ? nil : message
        } else {
            bindingMessage = nil
        }
        if let text = f["authorization_details"] {
            authorizationDetails = try AuthorizationDetails.parse(text, allowed: request.client.authorizationDetailsTypes)
        } else {
            authorizationDetails = .null
        }
        if let text = f["requested_expiry"] {
            guard text.utf8.count <= 4, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let seconds = Int(text),
                  (CIBAService.minimumExpiry...CIBAService.maximumExpiry).contains(seconds) else {
                throw OAuthError.invalidRequest("requested_expiry must be a whole number of seconds from 30 to 600")
            }
            requestedExpiry = seconds
        } else {
            requestedExpiry = nil
        }
        // §7.1: the ping client's bearer for its notification endpoint, required in ping mode.
        if let token = f["client_notification_token"] {
            guard !token.isEmpty, token.utf8.count <= 1024, token.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
                throw OAuthError.invalidRequest("client_notification_token must be 1…1024 printable ASCII characters")
            }
            notificationToken = token
        } else {
            guard registration.mode == .poll else { throw OAuthError.invalidRequest("client_notification_token is required in ping mode") }
            notificationToken = nil
        }
        if let acr = f["acr_values"], acr.utf8.count > 1024 { throw OAuthError.invalidRequest("acr_values is too long") }
        let acr = f["acr_values"]?.split(separator: " ").joined(separator: " ")
        acrValues = acr?.isEmpty == false ? acr : nil
        // Latchkey honours acr_values (CIBA Core §7.1 leaves it to the OP): a request none of whose
        // values an approval by the client's kind of key can meet is refused here, as an invalid
        // parameter value (§13 invalid_request), instead of being approved below what it asked.
        guard CIBAACR.meetable(acrValues, by: registration.approver) else {
            throw OAuthError.invalidRequest("acr_values: an approval by \(CIBAService.keyWords(registration.approver)) (this client's "
                                            + "cibaApprover) meets none of them; it meets \(CIBAACR.possible(registration.approver).joined(separator: " "))")
        }
    }

    /// SPEC "CIBA": at most 64 Unicode code points, none of them a control character.
    static func isBindingMessage(_ text: String) -> Bool {
        text.unicodeScalars.count <= 64 && !text.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }
}

/// `acr_values` on a CIBA request (SPEC "OpenID Provider": `acr_values_supported`, and "CIBA tokens").
enum CIBAACR {
    /// The OpenID `acr` an approval by `approver`'s kind of key carries: an attested device key's;
    /// any device key's; a user-verified passkey's (`phrh` for one proven hardware-bound, else `phr`).
    static func possible(_ approver: CIBARegistration.Approver) -> [String] {
        switch approver {
        case .attestedDeviceKey: [OpenIDACR.deviceKeyAttested]
        case .deviceKey: [OpenIDACR.deviceKeyAttested, OpenIDACR.deviceKey]
        case .passkey: [OpenIDACR.phrh, OpenIDACR.phr]
        }
    }

    /// Whether some approval `approver` admits can meet `requested` (none requested: yes).
    static func meetable(_ requested: String?, by approver: CIBARegistration.Approver) -> Bool {
        possible(approver).contains { satisfied($0, requested: requested) != nil }
    }

    /// The `acr` the tokens carry for an approval whose authentication is `acr`: with no
    /// `acr_values`, `acr` itself; else the first requested value (the client's order of
    /// preference) it satisfies, a passkey alias (`urn:latchkey:acr:passkey*`) named `phr`; nil
    /// when it satisfies none.
    static func satisfied(_ acr: String, requested: String?) -> String? {
        guard let requested, !requested.isEmpty else { return acr }
        for value in requested.split(separator: " ").map(String.init) where OpenIDACR.satisfies(acr, requested: value) {
            return [AuthenticationClaims.passkeyVerified.acr, AuthenticationClaims.passkey.acr].contains(value) ? OpenIDACR.phr : value
        }
        return nil
    }
}

/// `POST /oauth2/token` with `grant_type=urn:openid:params:grant-type:ciba` (CIBA Core §10.1).
struct CIBAPoll: Sendable {
    static let grantType = "urn:openid:params:grant-type:ciba"

    let client: OAuthClientRecord
    let authReqId: String

    init(_ request: AuthenticatedClientRequest) throws(OAuthError) {
        client = request.client
        let f = request.form.fields
        guard f["authorization_details"] == nil else {
            throw OAuthError(.invalidAuthorizationDetails, "authorization_details are approved on the backchannel request, not at the token endpoint")
        }
        guard client.ciba != nil, !client.isPublic else {
            throw OAuthError(.unauthorizedClient, "this client is not registered for the CIBA grant")
        }
        guard let id = f["auth_req_id"], !id.isEmpty else { throw OAuthError.invalidRequest("auth_req_id is required") }
        authReqId = id
    }
}

/// A pending request as the step-up rule read it for its handler (`record` nil: no request has the id).
struct CIBARequestRead: Sendable {
    let id: String
    let record: CIBARequestRecord?
}

extension GatedActionType {
    /// SPEC "CIBA approval": approving one backchannel request.
    static let cibaApproval = "latchkey.ciba.approve"
}

extension StepUpAction {
    /// `{"type":"latchkey.ciba.approve","authReqId","clientId","bindingMessage","authorizationDetails"}`:
    /// approving exactly that request of that client, with that binding message and those details
    /// (`null` when absent).
    static func cibaApproval(_ r: CIBARequestRecord) throws(DeviceKeyError) -> StepUpAction {
        try StepUpAction(.object([("type", .string(GatedActionType.cibaApproval)), ("authReqId", .string(r.id)),
                                  ("clientId", .string(r.clientId)), ("bindingMessage", r.bindingMessage.map { .string($0) } ?? .null),
                                  ("authorizationDetails", r.authorizationDetails)]))
    }
}
