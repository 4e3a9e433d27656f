import CBOR
import Crypto
import JSON
import WebAuthn

/// A software authenticator that makes real registrations and assertions, for tests and for the
/// load benchmark. Every field a test might want to break is a plain property of a builder:
/// start from a valid ceremony, change one thing, expect one error code.
public final class SoftAuthenticator: @unchecked Sendable {
    public let algorithm: COSEAlgorithm
    public let privateKey: PrivateKey
    public let credentialId: [UInt8]
    public let aaguid: [UInt8]
    public var signCount: UInt32
    /// Authenticator data flags to set besides UP/UV (e.g. backup eligibility of a synced passkey).
    public var backupEligible = false
    public var backedUp = false
    /// The user handle this discoverable credential keeps (the creation options' `user.id`), returned
    /// as `response.userHandle` by every assertion built from now on, as a passkey does; nil: none.
    public var userHandle: [UInt8]? = nil

    public init(algorithm: COSEAlgorithm = .es256, signCount: UInt32 = 0, credentialId: [UInt8]? = nil,
                aaguid: [UInt8] = [UInt8](repeating: 0, count: 16)) {
        self.algorithm = algorithm
        switch algorithm {
        case .edDSA, .ed25519: privateKey = .generateEd25519()
        case .rs256, .ps256, .rs384, .rs512, .ps384, .ps512, .rs1: privateKey = .generateRSA(bits: 2048)
        case .es384: privateKey = .generateEC(.p384)
        case .es512: privateKey = .generateEC(.p521)
        default: privateKey = .generateEC(.p256)
        }
        self.credentialId = credentialId ?? SecureRandom.bytes(32)
        self.aaguid = aaguid
        self.signCount = signCount
    }

    /// An authenticator around an existing key (benchmarks seed many credentials sharing one key).
    public init(algorithm: COSEAlgorithm, privateKey: PrivateKey, credentialId: [UInt8], userHandle: [UInt8]?) {
        self.algorithm = algorithm
        self.privateKey = privateKey
        self.credentialId = credentialId
        self.aaguid = [UInt8](repeating: 0, count: 16)
        self.signCount = 0
        self.userHandle = userHandle
    }

    public var publicKeyCOSE: [UInt8] { COSEKey.encode(privateKey.publicKey, algorithm: algorithm)! }

    func sign(_ message: [UInt8]) -> [UInt8] {
        try! privateKey.sign(message, algorithm: algorithm.signatureAlgorithm!)
    }

    /// The 37-byte start of authenticator data (§6.1): SHA-256(rpId) || flags || signCount, with
    /// this authenticator's backup flags; AT only when attested credential data follows.
    func authenticatorDataHeader(rpId: String, userPresent: Bool, userVerified: Bool, attestedCredentialData: Bool,
                                 signCount: UInt32, extensionData: Bool = false) -> [UInt8] {
        var flags: UInt8 = attestedCredentialData ? 0x40 : 0  // AT
        if extensionData { flags |= 0x80 }  // ED
        if userPresent { flags |= 0x01 }
        if userVerified { flags |= 0x04 }
        if backupEligible { flags |= 0x08 }
        if backedUp { flags |= 0x10 }
        return Digest.sha256(Array(rpId.utf8)) + [flags] + bigEndian(signCount)
    }

    public func registration(challenge: [UInt8], rpId: String, origin: String) -> RegistrationBuilder {
        RegistrationBuilder(authenticator: self, challenge: challenge, rpId: rpId, origin: origin)
    }

    public func assertion(challenge: [UInt8], rpId: String, origin: String) -> AssertionBuilder {
        AssertionBuilder(authenticator: self, challenge: challenge, rpId: rpId, origin: origin)
    }
}

/// The client data and flag fields shared by both builders.
public struct ClientDataFields: Sendable {
    public var type: String
    public var challenge: [UInt8]
    public var origin: String
    public var crossOrigin: Bool? = false
    public var topOrigin: String? = nil

    public var json: [UInt8] {
        var members: [(key: String, value: JSONValue)] = [
            ("type", .string(type)), ("challenge", .string(Base64URL.encode(challenge))), ("origin", .string(origin)),
        ]
        if let crossOrigin { members.append(("crossOrigin", .bool(crossOrigin))) }
        if let topOrigin { members.append(("topOrigin", .string(topOrigin))) }
        return JSONValue.object(members).serialized()
    }
}

public enum RegistrationFormat: Sendable {
    case none, packedSelf
    /// `packed` with x5c (WebAuthn L3 §8.2 full attestation): signed with the identity's key, its chain as x5c.
    case packedFull(AttestationIdentity)
    /// Any other format, from its builder (`FIDOU2FAttestationBuilder`, `TPMAttestationBuilder`, …).
    case statement(any AttestationStatementBuilder)
}

/// Builds one attestation format's `attStmt` for a registration (one builder per format, one file each).
public protocol AttestationStatementBuilder: Sendable {
    /// `fmt`.
    var format: String { get }
    /// The statement over `authenticatorData` and `clientDataHash` for `authenticator`'s credential.
    func statement(authenticatorData: [UInt8], clientDataHash: [UInt8], authenticator: SoftAuthenticator) -> [CBORPair]
}

public struct RegistrationBuilder: @unchecked Sendable {
    public let authenticator: SoftAuthenticator
    public var clientData: ClientDataFields
    public var rpId: String
    public var userPresent = true
    public var userVerified = true
    public var format: RegistrationFormat = .none
    public var transports = ["internal", "hybrid"]
    /// What the client reports as `clientExtensionResults` (e.g. `{"prf":{"enabled":true}}`).
    public var clientExtensionResults: JSONValue = .object([])
    /// Replace the credential id the response reports (rawId) without touching authenticatorData.
    public var reportedCredentialId: [UInt8]? = nil
    public var corruptAttestationSignature = false
    /// clientDataJSON exactly as sent (and hashed), instead of `clientData`'s serialisation.
    public var rawClientDataJSON: [UInt8]? = nil
    /// Authenticator extension outputs (a CBOR map) after the attested credential data, with ED set.
    public var extensionData: CBORValue? = nil
    /// The AT flag and the attested credential data, separately (to send one without the other).
    public var attestedCredentialFlag = true
    public var includeAttestedCredentialData = true
    /// Bytes appended to authenticatorData after everything else.
    public var trailingAuthenticatorData: [UInt8] = []
    /// `packed` full: sign with this key instead of the identity's (a signature the leaf cannot verify).
    public var attestationSigningKey: PrivateKey? = nil
    /// Changes to attStmt after it is signed, and to the attestation object's map after that.
    public var editStatement: (@Sendable (inout [CBORPair]) -> Void)? = nil
    public var editAttestationObject: (@Sendable (inout [CBORPair]) -> Void)? = nil
    /// The attestation object's bytes exactly as sent.
    public var rawAttestationObject: [UInt8]? = nil

    init(authenticator: SoftAuthenticator, challenge: [UInt8], rpId: String, origin: String) {
        self.authenticator = authenticator
        self.clientData = ClientDataFields(type: "webauthn.create", challenge: challenge, origin: origin)
        self.rpId = rpId
    }

    public var authenticatorData: [UInt8] {
        let a = authenticator
        var out = a.authenticatorDataHeader(rpId: rpId, userPresent: userPresent, userVerified: userVerified,
                                            attestedCredentialData: attestedCredentialFlag, signCount: a.signCount,
                                            extensionData: extensionData != nil)
        if includeAttestedCredentialData {
            out += a.aaguid + [UInt8(a.credentialId.count >> 8), UInt8(a.credentialId.count & 0xFF)] + a.credentialId
            out += a.publicKeyCOSE
        }
        if let extensionData { out += CBOREncoder.encode(extensionData) }
        return out + trailingAuthenticatorData
    }

    public func json() -> JSONValue {
        let clientDataJSON = rawClientDataJSON ?? clientData.json
        let authData = authenticatorData
        var statement: [CBORPair] = []
        var fmt = "packed"
        switch format {
        case .none:
            fmt = "none"
        case .packedSelf:
            var sig = authenticator.sign(authData + Digest.sha256(clientDataJSON))
            if corruptAttestationSignature { sig[sig.count / 2] ^= 0x01 }
            statement = [CBORPair(.text("alg"), .int(authenticator.algorithm.rawValue)), CBORPair(.text("sig"), .bytes(sig))]
        case .packedFull(let identity):
            let alg: COSEAlgorithm = switch identity.key.type {
            case .ec(.p384): .es384
            case .ec(.p521): .es512
            case .rsa: .rs256
            case .ed25519: .edDSA
            default: .es256
            }
            let key = attestationSigningKey ?? identity.key
            var sig = try! key.sign(authData + Digest.sha256(clientDataJSON), algorithm: alg.signatureAlgorithm!)
            if corruptAttestationSignature { sig[sig.count / 2] ^= 0x01 }
            statement = [CBORPair(.text("alg"), .int(alg.rawValue)), CBORPair(.text("sig"), .bytes(sig)),
                         CBORPair(.text("x5c"), .array(identity.chain.map { .bytes($0.der) }))]
        case .statement(let builder):
            fmt = builder.format
            statement = builder.statement(authenticatorData: authData, clientDataHash: Digest.sha256(clientDataJSON),
                                          authenticator: authenticator)
        }
        editStatement?(&statement)
        var object = [
            CBORPair(.text("fmt"), .text(fmt)),
            CBORPair(.text("attStmt"), .map(statement)),
            CBORPair(.text("authData"), .bytes(authData)),
        ]
        editAttestationObject?(&object)
        let attestationObject = rawAttestationObject ?? CBOREncoder.encode(.map(object))
        let id = Base64URL.encode(reportedCredentialId ?? authenticator.credentialId)
        return .object([
            ("id", .string(id)), ("rawId", .string(id)), ("type", "public-key"),
            ("response", .object([
                ("clientDataJSON", .string(Base64URL.encode(clientDataJSON))),
                ("attestationObject", .string(Base64URL.encode(attestationObject))),
                ("transports", .array(transports.map { .string($0) })),
                ("publicKeyAlgorithm", .number(Double(authenticator.algorithm.rawValue))),
            ])),
            ("authenticatorAttachment", "platform"), ("clientExtensionResults", clientExtensionResults),
        ])
    }

    public func bytes() -> [UInt8] { json().serialized() }
}

public struct AssertionBuilder: @unchecked Sendable {
    public let authenticator: SoftAuthenticator
    public var clientData: ClientDataFields
    public var rpId: String
    public var userPresent = true
    public var userVerified = true
    public var userHandle: [UInt8]?
    /// Sign count to report; nil: the authenticator's counter, incremented (0 stays 0, like synced passkeys).
    public var signCount: UInt32? = nil
    public var corruptSignature = false
    /// clientDataJSON exactly as sent, instead of `clientData`'s serialisation.
    public var rawClientDataJSON: [UInt8]? = nil
    /// Sign over this clientDataJSON's hash instead of the one sent (a signature for other client data).
    public var signedClientDataJSON: [UInt8]? = nil
    /// Authenticator extension outputs (a CBOR map) after the 37-byte header, with ED set.
    public var extensionData: CBORValue? = nil
    /// Bytes appended to authenticatorData (and signed).
    public var trailingAuthenticatorData: [UInt8] = []

    init(authenticator: SoftAuthenticator, challenge: [UInt8], rpId: String, origin: String) {
        self.authenticator = authenticator
        self.clientData = ClientDataFields(type: "webauthn.get", challenge: challenge, origin: origin)
        self.rpId = rpId
        self.userHandle = authenticator.userHandle
    }

    /// Builds the assertion; advances the authenticator's counter when it is in use.
    public func json() -> JSONValue {
        let a = authenticator
        let count: UInt32
        if let signCount { count = signCount } else {
            if a.signCount > 0 { a.signCount += 1 }
            count = a.signCount
        }
        var authData = a.authenticatorDataHeader(rpId: rpId, userPresent: userPresent, userVerified: userVerified,
                                                 attestedCredentialData: false, signCount: count, extensionData: extensionData != nil)
        if let extensionData { authData += CBOREncoder.encode(extensionData) }
        authData += trailingAuthenticatorData
        let clientDataJSON = rawClientDataJSON ?? clientData.json
        var signature = a.sign(authData + Digest.sha256(signedClientDataJSON ?? clientDataJSON))
        if corruptSignature { signature[signature.count - 2] ^= 0x01 }
        let id = Base64URL.encode(a.credentialId)
        var response: [(key: String, value: JSONValue)] = [
            ("clientDataJSON", .string(Base64URL.encode(clientDataJSON))),
            ("authenticatorData", .string(Base64URL.encode(authData))),
            ("signature", .string(Base64URL.encode(signature))),
        ]
        if let userHandle { response.append(("userHandle", .string(Base64URL.encode(userHandle)))) }
        return .object([
            ("id", .string(id)), ("rawId", .string(id)), ("type", "public-key"), ("response", .object(response)),
            ("authenticatorAttachment", "platform"), ("clientExtensionResults", .object([])),
        ])
    }

    public func bytes() -> [UInt8] { json().serialized() }
}

func bigEndian(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
