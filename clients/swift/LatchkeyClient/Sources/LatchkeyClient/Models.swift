import Foundation

// The server's answers (docs/api.md), decoded. Each keeps the whole `json` too, so
// a member this version does not name is still there.

/// `user` = `{"id","username","displayName"}`.
public struct LatchkeyUser: Sendable, Hashable {
    public let id: String
    public let username: String
    public let displayName: String

    init(_ j: LatchkeyJSON) throws(LatchkeyError) {
        id = try j.string("id", in: "user")
        username = try j.string("username", in: "user")
        displayName = j["displayName"]?.stringValue ?? username
    }
}

/// `passkey` = `{"id","name","provider","aaguid","createdAt","lastUsedAt","backupEligible","backedUp","transports","flagged"}`.
public struct Passkey: Sendable {
    /// The credential id, base64url.
    public let id: String
    public let name: String
    public let provider: String?
    public let createdAt: String?
    public let lastUsedAt: String?
    public let backedUp: Bool
    /// Set while a passkey added from a weaker session is held (it signs in but approves nothing).
    public let heldUntil: String?
    /// The registration said the passkey can evaluate PRF (it can open the vault, docs/vault.md).
    public let prfEnabled: Bool
    public let json: LatchkeyJSON

    init(_ j: LatchkeyJSON) throws(LatchkeyError) {
        id = try j.string("id", in: "passkey")
        name = j["name"]?.stringValue ?? ""
        provider = j["provider"]?.stringValue
        createdAt = j["createdAt"]?.stringValue
        lastUsedAt = j["lastUsedAt"]?.stringValue
        backedUp = j["backedUp"]?.boolValue ?? false
        heldUntil = j["heldUntil"]?.stringValue
        prfEnabled = j["prfEnabled"]?.boolValue ?? false
        json = j
    }
}

/// `tokens` = `{"access_token","token_type":"Bearer","expires_in","refresh_token"}`.
public struct Tokens: Sendable {
    public let accessToken: String
    public let expiresIn: Int
    public let refreshToken: String?
    /// `Bearer`, or `DPoP` when the tokens are bound to the client's DPoP key.
    public let tokenType: String

    init(_ j: LatchkeyJSON) throws(LatchkeyError) {
        accessToken = try j.string("access_token", in: "tokens")
        tokenType = j["token_type"]?.stringValue ?? "Bearer"
        expiresIn = j["expires_in"]?.intValue ?? 0
        refreshToken = j["refresh_token"]?.stringValue
    }
}

/// What registration and sign-in verify answer: `{"user","passkey","tokens"}`.
public struct SignIn: Sendable {
    public let user: LatchkeyUser
    public let passkey: Passkey?
    public let tokens: Tokens
    public let json: LatchkeyJSON

    init(_ j: LatchkeyJSON) throws(LatchkeyError) {
        guard let u = j["user"], let t = j["tokens"] else { throw .unexpected("a sign-in answer without user or tokens") }
        user = try LatchkeyUser(u)
        passkey = try j["passkey"].map { p throws(LatchkeyError) in try Passkey(p) }
        tokens = try Tokens(t)
        json = j
    }
}

/// `POST /v1/step-up/challenges` → `{"challengeId","challenge","expiresAt","actionHash"}` (+ `publicKey`).
public struct StepUpChallenge: Sendable {
    public let challengeId: String
    /// The exact bytes a device key signs (DER ECDSA over their SHA-256).
    public let challenge: Data
    public let expiresAt: String
    /// The server's hash of the action it bound (base64url). The client has already checked it
    /// equals the hash of the action it asked for.
    public let actionHash: String
    /// For `method: passkey`: the request options to run the assertion with (user verification required).
    public let passkeyOptions: AuthenticationOptions?

    init(_ j: LatchkeyJSON) throws(LatchkeyError) {
        challengeId = try j.string("challengeId", in: "step-up challenge")
        challenge = try j.bytes("challenge", in: "step-up challenge")
        expiresAt = j["expiresAt"]?.stringValue ?? ""
        actionHash = try j.string("actionHash", in: "step-up challenge")
        passkeyOptions = try j["publicKey"].map { o throws(LatchkeyError) in try AuthenticationOptions(json: o) }
    }
}

/// `POST /v1/step-up/verify` → `{"access_token","token_type","expires_in","actionHash","receiptId"}`:
/// the step-up token, sent as `Latchkey-Step-Up` (Latchkey's own gated changes) or to your backend.
public struct StepUpToken: Sendable {
    public let token: String
    public let expiresIn: Int
    public let actionHash: String
    public let receiptId: String?

    init(_ j: LatchkeyJSON) throws(LatchkeyError) {
        token = try j.string("access_token", in: "step-up token")
        expiresIn = j["expires_in"]?.intValue ?? 0
        actionHash = try j.string("actionHash", in: "step-up token")
        receiptId = j["receiptId"]?.stringValue
    }
}

/// `POST /v1/device-keys/challenges` → `{"challengeId","challenge"}`.
public struct DeviceKeyChallenge: Sendable {
    public let challengeId: String
    public let challenge: Data

    init(_ j: LatchkeyJSON) throws(LatchkeyError) {
        challengeId = try j.string("challengeId", in: "device-key challenge")
        challenge = try j.bytes("challenge", in: "device-key challenge")
    }
}

/// A device key as `POST /v1/device-keys` and `GET /v1/device-keys` describe it.
public struct EnrolledDeviceKey: Sendable {
    /// The key id (`keyId` of step-up challenges).
    public let id: String
    public let deviceId: String
    public let platform: String
    public let name: String
    public let attested: Bool
    /// `android-key` · `apple-appattest` · `none`.
    public let attestationFormat: String?
    public let json: LatchkeyJSON

    init(_ j: LatchkeyJSON) throws(LatchkeyError) {
        id = try j.string("id", in: "device key")
        deviceId = try j.string("deviceId", in: "device key")
        platform = j["platform"]?.stringValue ?? ""
        name = j["name"]?.stringValue ?? ""
        attested = j["attested"]?.boolValue ?? false
        attestationFormat = j["attestation"]?["format"]?.stringValue
        json = j
    }
}
