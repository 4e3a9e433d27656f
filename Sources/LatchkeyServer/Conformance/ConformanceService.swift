import JSON
import WebAuthn

/// The FIDO Alliance's server conformance test API (SPEC "Conformance profile"), translated to and
/// from `PasskeyService`: every ceremony is the passkey service's own (no second verification path).
/// This type reads the test API's request shapes, adds the `status` / `errorMessage` envelope, and
/// does nothing else.
public struct ConformanceService: Sendable {
    let passkeys: PasskeyService

    /// `POST /attestation/options` `{"username","displayName","authenticatorSelection"?,"attestation"?,"extensions"?}`.
    func attestationOptions(_ body: JSONValue) throws(ServiceError) -> JSONValue {
        let username = try Self.name(body, "username")
        let displayName = body["displayName"].flatMap { $0.isNull ? nil : $0 } == nil ? username : try Self.name(body, "displayName")
        var request = PasskeyService.RegistrationRequest()
        if let selection = body["authenticatorSelection"], !selection.isNull {
            guard case .object = selection else { throw ServiceError.invalid("authenticatorSelection must be an object") }
            request.userVerification = try Self.userVerification(selection["userVerification"], "authenticatorSelection.userVerification")
            if let attachment = selection["authenticatorAttachment"], !attachment.isNull {
                guard let a = attachment.stringValue, a == "platform" || a == "cross-platform" else {
                    throw ServiceError.invalid("authenticatorSelection.authenticatorAttachment must be platform or cross-platform")
                }
                request.authenticatorAttachment = a
            }
            if let rk = selection["requireResidentKey"], !rk.isNull, rk.boolValue == nil {
                throw ServiceError.invalid("authenticatorSelection.requireResidentKey must be a boolean")
            }
        }
        if let attestation = body["attestation"], !attestation.isNull {
            guard let a = attestation.stringValue.flatMap(AttestationConveyance.init(rawValue:)) else {
                throw ServiceError.invalid("attestation must be none, indirect, direct or enterprise")
            }
            request.attestation = a
        }
        request.extensions = try Self.extensions(body)
        let options = try passkeys.registrationOptions(for: .named(username: username, displayName: displayName), request: request)
        return Self.ok(PasskeyRenderer.options(options))
    }

    /// `POST /attestation/result`: the credential JSON → the passkey service's registration.
    func attestationResult(_ body: [UInt8]) throws(ServiceError) -> JSONValue {
        let result = JSONObjectWriter.tree(of: PasskeyRenderer.signedIn(try passkeys.verifyRegistration(try Self.credential(body))))
        return Self.ok(.object([("user", result["user"] ?? .null), ("passkey", result["passkey"] ?? .null)]))
    }

    /// `POST /assertion/options` `{"username","userVerification"?,"extensions"?}`.
    func assertionOptions(_ body: JSONValue) throws(ServiceError) -> JSONValue {
        let username = try Self.name(body, "username")
        let options = try passkeys.authenticationOptions(
            username: username, userVerification: try Self.userVerification(body["userVerification"], "userVerification"),
            extensions: try Self.extensions(body))
        return Self.ok(PasskeyRenderer.options(options))
    }

    /// `POST /assertion/result`: the assertion JSON → the passkey service's authentication, with the
    /// profile's one relaxation (UP may be clear).
    func assertionResult(_ body: [UInt8]) throws(ServiceError) -> JSONValue {
        let result = JSONObjectWriter.tree(of: PasskeyRenderer.signedIn(try passkeys.verifyAuthentication(try Self.credential(body), conformance: true)))
        return Self.ok(.object([("user", result["user"] ?? .null), ("passkey", result["passkey"] ?? .null)]))
    }

    // MARK: Translation

    /// `{"status":"ok","errorMessage":""}` followed by the members of `value`.
    static func ok(_ value: JSONValue) -> JSONValue {
        .object([("status", "ok"), ("errorMessage", "")] + (value.objectValue ?? []))
    }

    /// `{"status":"failed","errorMessage":…,"code":…}`.
    static func failed(_ error: ServiceError) -> JSONValue {
        .object([("status", "failed"), ("errorMessage", .string(error.detail.isEmpty ? error.code.rawValue : error.detail)),
                 ("code", .string(error.code.rawValue))])
    }

    /// The credential JSON as the passkey service reads it: the test API's
    /// `getClientExtensionResults` is read as `clientExtensionResults` (SPEC); nothing else changes.
    static func credential(_ body: [UInt8]) throws(ServiceError) -> [UInt8] {
        guard let value = try? JSONParser.parse(body), case .object(var members) = value,
              let i = members.firstIndex(where: { $0.key == "getClientExtensionResults" }) else { return body }
        let results = members.remove(at: i).value
        if !members.contains(where: { $0.key == "clientExtensionResults" }) { members.append(("clientExtensionResults", results)) }
        return JSONValue.object(members).serialized()
    }

    static func name(_ body: JSONValue, _ member: String) throws(ServiceError) -> String {
        guard let value = body[member], !value.isNull else { throw ServiceError.invalid("\(member) is required") }
        guard let text = value.stringValue else { throw ServiceError.invalid("\(member) must be a string") }
        try validateName(text, member)
        return text
    }

    static func userVerification(_ value: JSONValue?, _ member: String) throws(ServiceError) -> VerificationPolicy.UserVerification? {
        guard let value, !value.isNull else { return nil }
        guard let uv = value.stringValue.flatMap(VerificationPolicy.UserVerification.init(rawValue:)) else {
            throw ServiceError.invalid("\(member) must be required, preferred or discouraged")
        }
        return uv
    }

    /// `extensions`, echoed in the options: an object when present.
    static func extensions(_ body: JSONValue) throws(ServiceError) -> JSONValue? {
        guard let value = body["extensions"], !value.isNull else { return nil }
        guard case .object = value else { throw ServiceError.invalid("extensions must be an object") }
        return value
    }
}
