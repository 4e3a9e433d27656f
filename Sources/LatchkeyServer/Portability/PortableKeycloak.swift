import Crypto
import Foundation
import JSON
import Storage

/// Keycloak's realm export (`kc.sh export`, the admin console's partial export): one realm
/// object, or an array of them. Each realm's `users[]` is one account each, whose passkeys are its
/// `credentials[]` of type `webauthn` (two-factor) and `webauthn-passwordless`, each with a
/// `credentialData` JSON string holding `credentialId` (standard base64), `credentialPublicKey`
/// (COSE, base64url), `counter`, `aaguid` and `transports` (SPEC "Portability" → Import). Pure.
enum PortableKeycloak {
    static let passkeyTypes: Set<String> = ["webauthn", "webauthn-passwordless"]

    static func read(_ bytes: [UInt8], _ context: PortableFormat.Context) -> PortableFormat.Read {
        guard let doc = try? JSONParser.parse(bytes, maxDepth: 64, maxMembers: 1 << 16) else { return .refused("malformed_file") }
        let realms: [JSONValue]
        if let array = doc.arrayValue { realms = array } else if doc.objectValue != nil { realms = [doc] } else { return .refused("malformed_file") }
        guard realms.allSatisfy({ $0.objectValue != nil }) else { return .refused("malformed_file") }
        var entries: [PortableEntry] = []
        for realm in realms {
            let rpId = realmRpId(realm) ?? context.statedRpId
            for user in realm["users"]?.arrayValue ?? [] {
                entries.append(PortableEntry(line: entries.count + 1, account: account(user, rpId: rpId, context)))
            }
        }
        return .accounts(sha256: Hex.encode(Digest.sha256(bytes)), entries)
    }

    /// The rpId the realm's passkeys were registered for: its passwordless WebAuthn policy's
    /// rpId, else its two-factor policy's; nil when both are empty (Keycloak then uses the host
    /// it is served at, which the export does not say).
    static func realmRpId(_ realm: JSONValue) -> String? {
        for key in ["webAuthnPolicyPasswordlessRpId", "webAuthnPolicyRpId"] {
            if let id = realm[key]?.stringValue, !id.isEmpty { return id }
        }
        return nil
    }

    /// One user as the account to create, or why not: `rp_id_unknown` (neither the realm nor
    /// `--rp-id` names one), `rp_id_mismatch`, `invalid_user`, `invalid_passkey`,
    /// `invalid_public_key`, `duplicate_credential_id`, `no_passkeys` (no WebAuthn credential: a
    /// password-only user has nothing to sign in with at a passkey server).
    static func account(_ user: JSONValue, rpId: String?, _ context: PortableFormat.Context) -> Result<PortableAccount, PortableFile.Refusal> {
        let username = user["username"]?.stringValue
        func refuse(_ reason: String) -> Result<PortableAccount, PortableFile.Refusal> { .failure(.init(reason: reason, username: username)) }
        guard let rpId else { return refuse("rp_id_unknown") }
        guard rpId == context.rpId else { return refuse("rp_id_mismatch") }
        // WebAuthn: a user handle is at most 64 bytes; Keycloak's is its user id's UTF-8 (a UUID).
        guard let id = user["id"]?.stringValue, !id.isEmpty, id.utf8.count <= 64, let username, !username.isEmpty else {
            return refuse("invalid_user")
        }
        let created = user["createdTimestamp"]?.intValue.map(milliseconds) ?? context.now
        let createdAt = PortableBytes.time(created)
        let names = [user["firstName"]?.stringValue, user["lastName"]?.stringValue].compactMap { $0 }.filter { !$0.isEmpty }
        var email: PortableEmail? = nil
        if let address = user["email"]?.stringValue, !address.isEmpty {
            // Keycloak keeps whether, not when: a verified address counts as verified since the user was created.
            email = PortableEmail(address: address, verifiedAt: user["emailVerified"]?.boolValue == true ? createdAt : nil)
        }
        var passkeys: [PortablePasskey] = []
        var ids = Set<[UInt8]>()
        for credential in user["credentials"]?.arrayValue ?? [] {
            guard let type = credential["type"]?.stringValue, passkeyTypes.contains(type) else { continue }
            switch passkey(credential, userCreatedAt: created) {
            case .failure(let refusal): return refuse(refusal.reason)
            case .success(let p):
                guard ids.insert(p.credentialId).inserted else { return refuse("duplicate_credential_id") }
                passkeys.append(p)
            }
        }
        guard !passkeys.isEmpty else { return refuse("no_passkeys") }
        let handle = Array(id.utf8)
        return .success(PortableAccount(id: PortableBytes.userId(handle: handle), username: username,
                                        displayName: names.isEmpty ? username : names.joined(separator: " "), externalId: nil,
                                        createdAt: createdAt, userHandle: handle, email: email, passkeys: passkeys, deviceKeys: []))
    }

    /// A WebAuthn credential's `credentialData` (a JSON string in an export; an object is taken too).
    static func passkey(_ credential: JSONValue, userCreatedAt: Date) -> Result<PortablePasskey, PortableKeyRefusal> {
        let data: JSONValue
        if let text = credential["credentialData"]?.stringValue {
            guard let parsed = try? JSONParser.parse(Array(text.utf8)), parsed.objectValue != nil else { return .failure(.init(reason: "invalid_passkey")) }
            data = parsed
        } else if let object = credential["credentialData"], object.objectValue != nil {
            data = object
        } else {
            return .failure(.init(reason: "invalid_passkey"))
        }
        guard let credentialId = data["credentialId"]?.stringValue.flatMap(PortableBytes.decodeEither), credentialId.count <= 1023 else {
            return .failure(.init(reason: "invalid_passkey"))
        }
        let counter = data["counter"]?.intValue ?? 0
        guard (0...Int(UInt32.max)).contains(counter) else { return .failure(.init(reason: "invalid_passkey")) }
        let aaguid: [UInt8]
        switch data["aaguid"] {
        case .string(let text)?:
            guard let bytes = PortableFile.aaguidBytes(text) else { return .failure(.init(reason: "invalid_passkey")) }
            aaguid = bytes
        case .null?, nil: aaguid = Array(repeating: 0, count: 16)
        default: return .failure(.init(reason: "invalid_passkey"))
        }
        guard let keyBytes = data["credentialPublicKey"]?.stringValue.flatMap(PortableBytes.decodeEither) else {
            return .failure(.init(reason: "invalid_public_key"))
        }
        let key: (cose: [UInt8], alg: Int)
        switch PortableBytes.credentialKey(keyBytes, alg: nil) {
        case .success(let k): key = k
        case .failure: return .failure(.init(reason: "invalid_public_key"))
        }
        let transports = (data["transports"]?.arrayValue ?? []).compactMap(\.stringValue)
        let created = credential["createdDate"]?.intValue.map(milliseconds) ?? userCreatedAt
        return .success(PortablePasskey(credentialId: credentialId, publicKey: key.cose, alg: key.alg, signCount: Int64(counter),
                                        transports: transports, aaguid: aaguid, backupEligible: false, backedUp: false,
                                        name: credential["userLabel"]?.stringValue ?? "Keycloak passkey",
                                        createdAt: PortableBytes.time(created), lastUsedAt: nil))
    }

    static func milliseconds(_ ms: Int) -> Date { Date(timeIntervalSince1970: Double(ms) / 1000) }
}
