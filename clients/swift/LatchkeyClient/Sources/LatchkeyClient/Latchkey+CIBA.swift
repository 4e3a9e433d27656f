import Foundation

/// Approvals a service asks for on the backchannel (OpenID CIBA, docs/oidc.md "Approvals the bank
/// asks for and the phone signs"): a bank's backend asks Latchkey, the app hears of it (a push from
/// its backend on the `ciba.requested` webhook), lists the account's pending requests, shows the
/// service, the binding message and the details, and approves one with the step-up of the key the
/// service names — the app's device key, usually — or denies it.
///
/// ```swift
/// for request in try await latchkey.pendingApprovals(accessToken: access) {
///     // show request.clientName, request.bindingMessage, request.lines; then
///     try await latchkey.approve(request, keyId: enrolled.id, signer: deviceKey, accessToken: access)
/// }
/// ```
///
/// The approval is made in the session that enrolled the device key (or a passkey session), and the
/// step-up binds exactly the listed request: `StepUpAction.cibaApproval(_:)`.
extension Latchkey {
    /// `GET /v1/ciba/requests`: the account's pending, unexpired requests, oldest first. `language`
    /// (a BCP 47 tag, sent as `Accept-Language`) is the language of each request's `lines`.
    public func pendingApprovals(accessToken: String, language: String? = nil) async throws(LatchkeyError) -> [CIBARequest] {
        let headers = language.map { [("Accept-Language", $0)] } ?? []
        let list = try await call("GET", "/v1/ciba/requests", authorization: .bearer(accessToken), headers: headers)
        return try (list["requests"]?.arrayValue ?? []).map { r throws(LatchkeyError) in try CIBARequest(r) }
    }

    /// Approves `request` with a step-up of the device key `keyId` (`signer` signs the challenge:
    /// the Secure Enclave key on iOS). → the step-up, whose `receiptId` the service's tokens carry.
    /// A service that admits only an attested key refuses an unattested one (`step_up_required`).
    @discardableResult
    public func approve(_ request: CIBARequest, keyId: String, signer: some DeviceKeySigner,
                        accessToken: String) async throws(LatchkeyError) -> StepUpToken {
        let stepUp = try await stepUp(action: try .cibaApproval(request), keyId: keyId, signer: signer, accessToken: accessToken)
        try await approve(request, stepUpToken: stepUp.token, accessToken: accessToken)
        return stepUp
    }

    /// Approves `request` with a user-verified passkey (for a service whose `approver` is `.passkey`).
    @discardableResult
    public func approveWithPasskey(_ request: CIBARequest, accessToken: String,
                                   assert: PasskeyAssertionProvider) async throws(LatchkeyError) -> StepUpToken {
        let stepUp = try await stepUpWithPasskey(action: try .cibaApproval(request), accessToken: accessToken, assert: assert)
        try await approve(request, stepUpToken: stepUp.token, accessToken: accessToken)
        return stepUp
    }

    /// `POST /v1/ciba/requests/{authReqId}/approve` with a step-up token made for
    /// `StepUpAction.cibaApproval(request)` in this session: 204; 404 `not_found` once the request
    /// is answered or expired.
    public func approve(_ request: CIBARequest, stepUpToken: String, accessToken: String) async throws(LatchkeyError) {
        _ = try await call("POST", "/v1/ciba/requests/\(Self.pathSegment(request.authReqId))/approve", body: [:],
                           authorization: .bearer(accessToken), headers: [("Latchkey-Step-Up", stepUpToken)])
    }

    /// `POST /v1/ciba/requests/{authReqId}/deny`: no step-up; the service's poll answers `access_denied`.
    public func deny(_ request: CIBARequest, accessToken: String) async throws(LatchkeyError) {
        _ = try await call("POST", "/v1/ciba/requests/\(Self.pathSegment(request.authReqId))/deny", body: [:],
                           authorization: .bearer(accessToken))
    }
}

/// A pending CIBA request as `GET /v1/ciba/requests` lists it.
public struct CIBARequest: Sendable {
    /// Whose step-up approves: the service's `cibaApprover`.
    public enum Approver: String, Sendable {
        case attestedDeviceKey = "attested-device-key"
        case deviceKey = "device-key"
        case passkey
    }

    public let authReqId: String
    public let clientId: String
    public let clientName: String
    /// nil when the service is no longer registered for CIBA (it cannot be approved then).
    public let approver: Approver?
    /// What the service shows its person too, to compare.
    public let bindingMessage: String?
    public let scopes: [String]
    /// RFC 9396 `authorization_details` as asked; `.null` when none.
    public let authorizationDetails: LatchkeyJSON
    /// The scopes in words, then every member of every details entry (the server's lines).
    public let lines: [String]
    /// What an approve button says ("Approve €42.00 to Merchant A").
    public let approveLabel: String?
    public let createdAt: String
    public let expiresAt: String
    public let json: LatchkeyJSON

    init(_ j: LatchkeyJSON) throws(LatchkeyError) {
        authReqId = try j.string("authReqId", in: "CIBA request")
        guard let client = j["client"] else { throw .unexpected("a CIBA request without its client") }
        clientId = try client.string("id", in: "CIBA request client")
        clientName = client["name"]?.stringValue ?? clientId
        approver = client["cibaApprover"]?.stringValue.flatMap(Approver.init(rawValue:))
        bindingMessage = j["bindingMessage"]?.stringValue
        scopes = (j["scopes"]?.arrayValue ?? []).compactMap(\.stringValue)
        authorizationDetails = j["authorizationDetails"] ?? .null
        lines = (j["display"]?["lines"]?.arrayValue ?? []).compactMap(\.stringValue)
        approveLabel = j["display"]?["approve"]?.stringValue
        createdAt = j["createdAt"]?.stringValue ?? ""
        expiresAt = j["expiresAt"]?.stringValue ?? ""
        json = j
    }
}

extension StepUpAction {
    /// `{"type":"latchkey.ciba.approve","authReqId","clientId","bindingMessage","authorizationDetails"}`
    /// (null members kept): approving exactly that request, as the server builds it.
    public static func cibaApproval(_ request: CIBARequest) throws(LatchkeyError) -> StepUpAction {
        try StepUpAction(.object([("type", .string("latchkey.ciba.approve")), ("authReqId", .string(request.authReqId)),
                                  ("clientId", .string(request.clientId)),
                                  ("bindingMessage", request.bindingMessage.map { .string($0) } ?? .null),
                                  ("authorizationDetails", request.authorizationDetails)]))
    }
}
