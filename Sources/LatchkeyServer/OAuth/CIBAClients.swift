import JSON
import Storage

/// A client's registration for the CIBA grant (SPEC "Clients": `--grant-type ciba --ciba-mode
/// poll|ping [--ciba-notification-endpoint U] [--ciba-approver …]`, and the admin API's
/// `grantTypes`, `backchannelTokenDeliveryMode`, `backchannelClientNotificationEndpoint`,
/// `cibaApprover`).
extension OAuthClientService {
    static let cibaGrantType = "urn:openid:params:grant-type:ciba"
    static let baseGrantTypes = ["authorization_code", "refresh_token"]

    /// The grant types a client may use (`grant_types`, RFC 7591).
    static func grantTypes(_ c: OAuthClientRecord) -> [String] {
        baseGrantTypes + (c.ciba == nil ? [] : [cibaGrantType])
    }

    /// The command line's flags as a registration: nil without `--grant-type ciba`; the CIBA flags
    /// without it, or an unknown value, are refused (exit 64).
    public static func cibaRegistration(grantTypes: [String], mode: String?, endpoint: String?,
                                        approver: String?) throws(ServiceError) -> CIBARegistration? {
        for g in grantTypes where !["ciba", cibaGrantType, "authorization_code", "refresh_token"].contains(g) {
            throw ServiceError.invalid("--grant-type must be ciba (the authorization code and refresh grants are always on)")
        }
        let wanted = grantTypes.contains("ciba") || grantTypes.contains(cibaGrantType)
        guard wanted else {
            guard mode == nil, endpoint == nil, approver == nil else {
                throw ServiceError.invalid("the CIBA settings need the CIBA grant (--grant-type ciba, or grantTypes with \(cibaGrantType))")
            }
            return nil
        }
        guard let m = CIBARegistration.Mode(rawValue: mode ?? "poll") else { throw ServiceError.invalid("the CIBA delivery mode must be poll or ping") }
        guard let a = CIBARegistration.Approver(rawValue: approver ?? CIBARegistration.Approver.attestedDeviceKey.rawValue) else {
            throw ServiceError.invalid("the CIBA approver must be attested-device-key, device-key or passkey")
        }
        switch m {
        case .ping: guard endpoint != nil else { throw ServiceError.invalid("ping mode needs a notification endpoint") }
        case .poll: guard endpoint == nil else { throw ServiceError.invalid("a notification endpoint is for ping mode only") }
        }
        return CIBARegistration(mode: m, notificationEndpoint: endpoint, approver: a)
    }

    /// SPEC "Clients": a CIBA client must be confidential.
    static func checkCIBA(_ ciba: CIBARegistration?, isPublic: Bool) throws(ServiceError) {
        guard ciba != nil, isPublic else { return }
        throw ServiceError.invalid("a CIBA client must be confidential (not --public)")
    }

    /// The notification endpoint is fetched under the webhook address rules (https, no private address).
    func checkCIBAEndpoint(_ ciba: CIBARegistration?) throws(ServiceError) {
        guard let endpoint = ciba?.notificationEndpoint else { return }
        try policy.jwksAddresses.check(try WebhookURL(parsing: endpoint))
    }

    /// The admin API's members; `current`: the stored registration a PATCH changes (nil for a POST).
    /// No member named: `current` unchanged.
    static func cibaMembers(_ body: JSONValue, current: CIBARegistration?) throws(ServiceError) -> CIBARegistration? {
        let names = ["grantTypes", "backchannelTokenDeliveryMode", "backchannelClientNotificationEndpoint", "cibaApprover"]
        guard names.contains(where: { body[$0] != nil }) else { return current }
        let grants = try body["grantTypes"].map { v throws(ServiceError) in try strings(v, "grantTypes") }
            ?? (current == nil ? [] : [cibaGrantType])
        func text(_ name: String, _ stored: String?) throws(ServiceError) -> String? {
            guard let v = body[name] else { return stored }
            if v == .null { return nil }
            return try string(v, name)
        }
        let wanted = grants.contains(cibaGrantType)
        return try cibaRegistration(grantTypes: grants.filter { $0 != "ciba" },
                                    mode: try text("backchannelTokenDeliveryMode", wanted ? current?.mode.rawValue : nil),
                                    endpoint: try text("backchannelClientNotificationEndpoint", wanted ? current?.notificationEndpoint : nil),
                                    approver: try text("cibaApprover", wanted ? current?.approver.rawValue : nil))
    }
}

extension OpenIDProvider {
    /// CIBA Core §4's discovery members.
    static func cibaDiscovery(_ base: String) -> [(key: String, value: JSONValue)] {
        [("backchannel_authentication_endpoint", .string(base + OAuthEndpoint.backchannel.rawValue)),
         ("backchannel_token_delivery_modes_supported", .array(CIBARegistration.Mode.allCases.map { .string($0.rawValue) })),
         ("backchannel_user_code_parameter_supported", .bool(false))]
    }
}
