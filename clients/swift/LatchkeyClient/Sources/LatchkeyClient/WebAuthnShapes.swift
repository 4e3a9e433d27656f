import Foundation

/// `PublicKeyCredentialCreationOptionsJSON` as the server sent it, with the fields an
/// `ASAuthorizationPlatformPublicKeyCredentialProvider` needs decoded from base64url.
/// `json` / `jsonText` is the body itself (what Android's Credential Manager and the browser's
/// `parseCreationOptionsFromJSON` take).
public struct RegistrationOptions: Sendable {
    public let json: LatchkeyJSON
    public let challenge: Data
    public let rpId: String
    public let rpName: String?
    public let userID: Data
    public let userName: String
    public let userDisplayName: String
    public let excludeCredentialIDs: [Data]
    /// `required` · `preferred` · `discouraged`.
    public let userVerification: String
    public let attestation: String
    public let timeoutMilliseconds: Int?
    public var jsonText: String { json.text }

    public init(json: LatchkeyJSON) throws(LatchkeyError) {
        self.json = json
        challenge = try json.bytes("challenge", in: "registration options")
        guard let rp = json["rp"], let user = json["user"] else { throw .unexpected("registration options without rp or user") }
        guard let rpId = rp["id"]?.stringValue else { throw .unexpected("registration options without rp.id") }
        self.rpId = rpId
        rpName = rp["name"]?.stringValue
        userID = try user.bytes("id", in: "registration options' user")
        guard let name = user["name"]?.stringValue else { throw .unexpected("registration options without user.name") }
        userName = name
        userDisplayName = user["displayName"]?.stringValue ?? name
        excludeCredentialIDs = try (json["excludeCredentials"]?.arrayValue ?? []).map { d throws(LatchkeyError) in
            try d.bytes("id", in: "excludeCredentials")
        }
        userVerification = json["authenticatorSelection"]?["userVerification"]?.stringValue ?? "preferred"
        attestation = json["attestation"]?.stringValue ?? "none"
        timeoutMilliseconds = json["timeout"]?.intValue
    }
}

/// `PublicKeyCredentialRequestOptionsJSON`: sign-in options, and the `publicKey` of a passkey step-up.
public struct AuthenticationOptions: Sendable {
    public let json: LatchkeyJSON
    public let challenge: Data
    public let rpId: String
    /// Empty for discoverable sign-in (conditional UI / the account picker).
    public let allowCredentialIDs: [Data]
    public let userVerification: String
    public let timeoutMilliseconds: Int?
    public var jsonText: String { json.text }

    public init(json: LatchkeyJSON) throws(LatchkeyError) {
        self.json = json
        challenge = try json.bytes("challenge", in: "request options")
        guard let rpId = json["rpId"]?.stringValue else { throw .unexpected("request options without rpId") }
        self.rpId = rpId
        allowCredentialIDs = try (json["allowCredentials"]?.arrayValue ?? []).map { d throws(LatchkeyError) in
            try d.bytes("id", in: "allowCredentials")
        }
        userVerification = json["userVerification"]?.stringValue ?? "preferred"
        timeoutMilliseconds = json["timeout"]?.intValue
    }
}

/// A new credential as a platform hands it over (iOS: `credentialID`, `rawClientDataJSON`,
/// `rawAttestationObject`), turned into `RegistrationResponseJSON` (WebAuthn L3 §5.1.8) — the body
/// of `POST /v1/passkeys/registration/verify`.
public struct RegistrationCredential: Sendable {
    public var credentialID: Data
    public var rawClientDataJSON: Data
    public var rawAttestationObject: Data
    /// `internal`, `hybrid`, `usb`, `nfc`, `ble` (iOS does not report them for platform passkeys:
    /// `internal` and `hybrid` is what an iCloud Keychain passkey can do).
    public var transports: [String]
    /// `platform` or `cross-platform`; nil when unknown.
    public var attachment: String?
    /// The PRF extension's `enabled` (iOS 18: the registration's `prf.isSupported`), sent as
    /// `clientExtensionResults.prf.enabled` so the passkey list shows `prfEnabled`; nil: not asked.
    public var prfEnabled: Bool?

    public init(credentialID: Data, rawClientDataJSON: Data, rawAttestationObject: Data,
                transports: [String] = ["internal", "hybrid"], attachment: String? = "platform", prfEnabled: Bool? = nil) {
        self.credentialID = credentialID
        self.rawClientDataJSON = rawClientDataJSON
        self.rawAttestationObject = rawAttestationObject
        self.transports = transports
        self.attachment = attachment
        self.prfEnabled = prfEnabled
    }

    public var json: LatchkeyJSON {
        let id = LatchkeyJSON.string(Base64URL.encode(credentialID))
        var out: [(key: String, value: LatchkeyJSON)] = [
            ("id", id), ("rawId", id), ("type", "public-key"),
            ("response", .object([
                ("clientDataJSON", .string(Base64URL.encode(rawClientDataJSON))),
                ("attestationObject", .string(Base64URL.encode(rawAttestationObject))),
                ("transports", .array(transports.map { .string($0) })),
            ])),
        ]
        if let attachment { out.append(("authenticatorAttachment", .string(attachment))) }
        let extensions: LatchkeyJSON = prfEnabled.map { .object([("prf", .object([("enabled", .bool($0))]))]) } ?? .object([])
        out.append(("clientExtensionResults", extensions))
        return .object(out)
    }
}

/// An assertion as a platform hands it over (iOS: `credentialID`, `rawClientDataJSON`,
/// `rawAuthenticatorData`, `signature`, `userID`), turned into `AuthenticationResponseJSON`
/// (WebAuthn L3 §5.1.9) — the body of `POST /v1/passkeys/authentication/verify`, and the
/// `credential` of a passkey step-up.
public struct AssertionCredential: Sendable {
    public var credentialID: Data
    public var rawClientDataJSON: Data
    public var rawAuthenticatorData: Data
    /// DER ECDSA (or the credential algorithm's format), as the authenticator made it.
    public var signature: Data
    /// The user handle (`user.id` of the registration); nil or empty when the authenticator gave none.
    public var userID: Data?
    public var attachment: String?

    public init(credentialID: Data, rawClientDataJSON: Data, rawAuthenticatorData: Data, signature: Data, userID: Data?,
                attachment: String? = "platform") {
        self.credentialID = credentialID
        self.rawClientDataJSON = rawClientDataJSON
        self.rawAuthenticatorData = rawAuthenticatorData
        self.signature = signature
        self.userID = userID
        self.attachment = attachment
    }

    public var json: LatchkeyJSON {
        let id = LatchkeyJSON.string(Base64URL.encode(credentialID))
        var response: [(key: String, value: LatchkeyJSON)] = [
            ("clientDataJSON", .string(Base64URL.encode(rawClientDataJSON))),
            ("authenticatorData", .string(Base64URL.encode(rawAuthenticatorData))),
            ("signature", .string(Base64URL.encode(signature))),
        ]
        if let userID, !userID.isEmpty { response.append(("userHandle", .string(Base64URL.encode(userID)))) }
        var out: [(key: String, value: LatchkeyJSON)] = [("id", id), ("rawId", id), ("type", "public-key"), ("response", .object(response))]
        if let attachment { out.append(("authenticatorAttachment", .string(attachment))) }
        out.append(("clientExtensionResults", .object([])))
        return .object(out)
    }
}

extension LatchkeyJSON {
    /// A required base64url member, decoded; `unexpected_response` when it is missing or malformed.
    func bytes(_ member: String, in what: String) throws(LatchkeyError) -> Data {
        guard let text = self[member]?.stringValue else { throw .unexpected("\(what) without \(member)") }
        guard let data = Base64URL.decode(text) else { throw .unexpected("\(what): \(member) is not base64url") }
        return data
    }

    func string(_ member: String, in what: String) throws(LatchkeyError) -> String {
        guard let text = self[member]?.stringValue else { throw .unexpected("\(what) without \(member)") }
        return text
    }
}
