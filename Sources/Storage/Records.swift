import Foundation
import JSON

// The rows repositories hand back. Inputs (AuditRecord, CredentialUse, NewSession, NewDeviceKey)
// live beside the repository that takes them.

public struct UserRecord: Sendable, Equatable {
    public let id: String
    public let userHandle: [UInt8]
    public let username: String
    public let displayName: String
    public init(id: String, userHandle: [UInt8], username: String, displayName: String) {
        self.id = id; self.userHandle = userHandle; self.username = username; self.displayName = displayName
    }
}

public struct CredentialRecord: Sendable {
    public let id: [UInt8]
    public let userId: String
    public let publicKey: [UInt8]
    public let alg: Int
    public var signCount: Int64
    public let aaguid: [UInt8]
    public let transports: [String]
    public var backupEligible: Bool
    public var backedUp: Bool
    public let attestationFormat: String
    public let attestationType: String
    public let name: String
    public var flagged: Bool
    public let createdAt: Date
    public var lastUsedAt: Date?
    /// Step-ups by this passkey count only from this time (nil: at once) — set when it was added
    /// from an email sign-in session (migration 11).
    public let approvesFrom: Date?
    /// Its registration attestation was verified to a trust anchor and proves a hardware key
    /// (OpenID EAP `phrh`, RFC 8176 `hwk`), decided at registration (migration 20).
    public let hardwareBound: Bool
    /// Its registration's client extension results said `prf.enabled` (SPEC "Portability": the
    /// passkey can open the account's vault), migration 28.
    public let prfEnabled: Bool

    public init(id: [UInt8], userId: String, publicKey: [UInt8], alg: Int, signCount: Int64, aaguid: [UInt8], transports: [String],
                backupEligible: Bool, backedUp: Bool, attestationFormat: String, attestationType: String, name: String,
                flagged: Bool = false, createdAt: Date, lastUsedAt: Date? = nil, approvesFrom: Date? = nil, hardwareBound: Bool = false,
                prfEnabled: Bool = false) {
        self.id = id; self.userId = userId; self.publicKey = publicKey; self.alg = alg; self.signCount = signCount
        self.aaguid = aaguid; self.transports = transports; self.backupEligible = backupEligible; self.backedUp = backedUp
        self.attestationFormat = attestationFormat; self.attestationType = attestationType; self.name = name
        self.flagged = flagged; self.createdAt = createdAt; self.lastUsedAt = lastUsedAt; self.approvesFrom = approvesFrom
        self.hardwareBound = hardwareBound; self.prfEnabled = prfEnabled
    }
}

public struct AuditEntry: Sendable {
    public let id: Int64
    public let at: Date
    public let actor: String
    public let action: String
    public let subject: String?
    public let detail: JSONValue
    /// The actor's username when the actor is a user (an admin's changes, a user's own logins).
    public var actorUsername: String? = nil
}

public enum RefreshOutcome: Sendable, Equatable {
    /// `authTime`: the session's, unchanged by the refresh; `method`: how it began (the access
    /// token's `acr`/`amr` keep saying so after a refresh).
    /// `jkt`: the DPoP key the session is bound to (its access tokens' `cnf.jkt`), nil for Bearer.
    case rotated(userId: String, familyId: String, authTime: Date, method: SessionMethod = .passkey, jkt: String? = nil)
    /// A token that was already used: the whole family is now revoked (RFC 9700 §4.14.2).
    case reused(familyId: String)
    case invalid
    /// The session is bound to a DPoP key and the request carried no proof by it: nothing changed.
    case proofRequired
    /// The request's DPoP proof was seen before (RFC 9449 §11.1): nothing changed.
    case proofReplayed
}

public struct DeviceKeyRecord: Sendable {
    public let id: String
    public let userId: String
    public let deviceId: String
    public let platform: DevicePlatform
    public let name: String
    public let publicKey: [UInt8]
    public let attested: Bool
    /// What the attestation proved.
    public let attestationFormat: DeviceKeyAttestationFormat
    public let securityLevel: DeviceKeySecurityLevel
    /// The declared app the attestation names.
    public let app: String?
    /// App Attest keys: the last assertion counter seen (nil: not an App Attest key).
    public let appAttestCounter: Int64?
    public let createdAt: Date
    public let lastUsedAt: Date?
    public let revokedAt: Date?

    public init(id: String, userId: String, deviceId: String, platform: DevicePlatform, name: String, publicKey: [UInt8], attested: Bool,
                attestationFormat: DeviceKeyAttestationFormat, securityLevel: DeviceKeySecurityLevel, app: String?, appAttestCounter: Int64?,
                createdAt: Date, lastUsedAt: Date?, revokedAt: Date?) {
        self.id = id; self.userId = userId; self.deviceId = deviceId; self.platform = platform; self.name = name
        self.publicKey = publicKey; self.attested = attested; self.attestationFormat = attestationFormat
        self.securityLevel = securityLevel; self.app = app; self.appAttestCounter = appAttestCounter
        self.createdAt = createdAt; self.lastUsedAt = lastUsedAt; self.revokedAt = revokedAt
    }
}

/// How a step-up was approved (column `step_up_receipts.method`).
public enum StepUpMethod: String, Sendable, CaseIterable {
    /// A device key's signature; the receipt's `keyId` is the key's id.
    case deviceKey = "device-key"
    /// A passkey assertion; the receipt's `keyId` is the credential id, base64url.
    case passkey
}

public struct StepUpReceiptRecord: Sendable {
    public let id: String
    public let userId: String
    public let method: StepUpMethod
    public let keyId: String
    public let publicKey: [UInt8]
    public let challenge: [UInt8]
    public let signedData: [UInt8]
    public let signature: [UInt8]
    public let action: String
    public let actionHash: [UInt8]
    public let keyBinding: String
    public let clientDataJSON: [UInt8]?
    public let authenticatorData: [UInt8]?
    public let tokenJTI: String
    public let tokenExpiresAt: Date
    public let createdAt: Date
    public let consumedAt: Date?
    /// The receipt's RFC 8785 document, byte for byte as written with the step-up (migration 25);
    /// nil for a receipt stored before documents.
    public let document: [UInt8]?
    /// SHA-256 of `document`: the transparency log's leaf. Both set or both nil.
    public let commitment: [UInt8]?

    public init(id: String, userId: String, method: StepUpMethod, keyId: String, publicKey: [UInt8], challenge: [UInt8],
                signedData: [UInt8], signature: [UInt8], action: String, actionHash: [UInt8], keyBinding: String,
                clientDataJSON: [UInt8]? = nil, authenticatorData: [UInt8]? = nil, tokenJTI: String, tokenExpiresAt: Date, createdAt: Date,
                consumedAt: Date? = nil, document: [UInt8]? = nil, commitment: [UInt8]? = nil) {
        self.document = document; self.commitment = commitment
        self.id = id; self.userId = userId; self.method = method; self.keyId = keyId; self.publicKey = publicKey
        self.challenge = challenge; self.signedData = signedData; self.signature = signature; self.action = action
        self.actionHash = actionHash; self.keyBinding = keyBinding; self.tokenJTI = tokenJTI
        self.clientDataJSON = clientDataJSON; self.authenticatorData = authenticatorData
        self.tokenExpiresAt = tokenExpiresAt; self.createdAt = createdAt; self.consumedAt = consumedAt
    }
}

/// What redeeming a step-up token found.
public enum ConsumeOutcome: Sendable, Equatable { case consumed(receiptId: String, action: String), alreadyUsed, unknown }

/// An associated app as stored: validated by the WellKnown module before it gets here.
public struct AppRecord: Sendable, Hashable {
    public var rpId: String
    public var platform: String       // ios | android
    public var appId: String          // iOS: TEAMID.bundle.id; Android: package name
    public var fingerprints: [String] // Android: base64url SHA-256 of each signing certificate
    public var handleAllURLs: Bool
    public var createdAt: Date?

    public init(rpId: String, platform: String, appId: String, fingerprints: [String] = [], handleAllURLs: Bool = false,
                createdAt: Date? = nil) {
        self.rpId = rpId
        self.platform = platform
        self.appId = appId
        self.fingerprints = fingerprints
        self.handleAllURLs = handleAllURLs
        self.createdAt = createdAt
    }
}

/// What `ConfigRepository.putApp` did.
public enum AppChange: Sendable, Equatable { case created, updated, unchanged }

/// A security profile a client is held to (SPEC "FAPI 2.0 Security Profile").
public enum OAuthClientProfile: String, Sendable, CaseIterable {
    case fapi2
}
