import Crypto
import Foundation
import JSON
import Storage
import WebAuthn

/// Latchkey's export format: JSON Lines, one account a line, then the trailer
/// `{"v":1,"count":N,"sha256":…}` where `sha256` is the lower-case hex SHA-256 of every byte before
/// it (SPEC "Portability" → Export). Pure: no I/O, no database.
public enum PortableFile {
    static let version = 1

    /// One account's line, ended by `\n`. Bytes are base64url; the passkeys' `userHandle` is the
    /// account's. Nothing secret is in a `PortableAccount`, so nothing secret can be written.
    static func line(_ a: PortableAccount, rpId: String) -> [UInt8] {
        let handle = JSONValue.string(Base64URL.encode(a.userHandle))
        let user: JSONValue = .object([("id", .string(a.id)), ("username", .string(a.username)), ("displayName", .string(a.displayName)),
                                       ("externalId", a.externalId.map(JSONValue.string) ?? .null), ("createdAt", .string(a.createdAt))])
        let email: JSONValue = a.email.map {
            .object([("address", .string($0.address)), ("verifiedAt", $0.verifiedAt.map(JSONValue.string) ?? .null)])
        } ?? .null
        let passkeys = a.passkeys.map { p -> JSONValue in
            .object([("credentialId", .string(Base64URL.encode(p.credentialId))), ("publicKey", .string(Base64URL.encode(p.publicKey))),
                     ("signCount", .number(Double(p.signCount))), ("transports", .array(p.transports.map(JSONValue.string))),
                     ("aaguid", .string(uuid(p.aaguid))), ("backupEligible", .bool(p.backupEligible)), ("backedUp", .bool(p.backedUp)),
                     ("userHandle", handle), ("name", .string(p.name)), ("createdAt", .string(p.createdAt)),
                     ("lastUsedAt", p.lastUsedAt.map(JSONValue.string) ?? .null)])
        }
        let deviceKeys = a.deviceKeys.map { d -> JSONValue in
            .object([("id", .string(d.id)), ("deviceId", .string(d.deviceId)), ("publicKey", .string(Base64URL.encode(d.publicKey))),
                     ("platform", .string(d.platform)), ("attested", .bool(d.attested)), ("createdAt", .string(d.createdAt))])
        }
        let doc: JSONValue = .object([("v", .number(Double(version))), ("rpId", .string(rpId)), ("user", user), ("email", email),
                                      ("passkeys", .array(passkeys)), ("deviceKeys", .array(deviceKeys))])
        return doc.serialized() + [0x0A]
    }

    /// The last line: the count of account lines and the hex SHA-256 of every byte before it.
    static func trailer(count: Int, sha256: [UInt8]) -> [UInt8] {
        JSONValue.object([("v", .number(Double(version))), ("count", .number(Double(count))), ("sha256", .string(hex(sha256)))]).serialized() + [0x0A]
    }

    /// Why a line is refused (`outcome: "refused"`): the line itself is bad.
    public struct Refusal: Error, Equatable, Sendable {
        public let reason: String
        public let username: String?

        public init(reason: String, username: String?) {
            self.reason = reason
            self.username = username
        }
    }

    /// One account line read back: the account as it will be created (a passkey's `alg` from its
    /// COSE key). `rpId` is this deployment's: any other is `rp_id_mismatch`.
    static func account(_ bytes: [UInt8], rpId: String, newUserHandle: () -> [UInt8]) throws(Refusal) -> PortableAccount {
        guard let doc = try? JSONParser.parse(bytes), doc.objectValue != nil else { throw Refusal(reason: "malformed_line", username: nil) }
        let username = doc["user"]?["username"]?.stringValue
        func refuse(_ reason: String) -> Refusal { Refusal(reason: reason, username: username) }
        guard doc["v"]?.intValue == version else { throw refuse("unsupported_version") }
        guard doc["rpId"]?.stringValue == rpId else { throw refuse("rp_id_mismatch") }
        guard let user = doc["user"], let id = user["id"]?.stringValue, !id.isEmpty, id.utf8.count <= 128, let username, !username.isEmpty,
              let displayName = user["displayName"]?.stringValue, let createdAt = user["createdAt"]?.stringValue, isTime(createdAt)
        else { throw refuse("invalid_user") }
        let externalId: String?
        switch user["externalId"] {
        case .string(let s)?: externalId = s
        case .null?, nil: externalId = nil
        default: throw refuse("invalid_user")
        }
        var email: PortableEmail? = nil
        if let e = doc["email"], !e.isNull {
            guard let address = e["address"]?.stringValue, !address.isEmpty else { throw refuse("invalid_email") }
            let verifiedAt = e["verifiedAt"]?.stringValue
            if let verifiedAt, !isTime(verifiedAt) { throw refuse("invalid_email") }
            email = PortableEmail(address: address, verifiedAt: verifiedAt)
        }
        guard let passkeyItems = doc["passkeys"]?.arrayValue, let keyItems = doc["deviceKeys"]?.arrayValue else { throw refuse("invalid_line") }
        var handles = Set<[UInt8]>()
        var ids = Set<[UInt8]>()
        var passkeys: [PortablePasskey] = []
        for p in passkeyItems {
            guard let credentialId = p["credentialId"]?.stringValue.flatMap(Base64URL.decode), !credentialId.isEmpty, credentialId.count <= 1023,
                  let handle = p["userHandle"]?.stringValue.flatMap(Base64URL.decode), !handle.isEmpty, handle.count <= 64,
                  let count = p["signCount"]?.intValue, (0...Int(UInt32.max)).contains(count),
                  let aaguid = p["aaguid"]?.stringValue.flatMap(aaguidBytes), let be = p["backupEligible"]?.boolValue,
                  let bs = p["backedUp"]?.boolValue, let name = p["name"]?.stringValue, let created = p["createdAt"]?.stringValue,
                  isTime(created), let transports = p["transports"]?.arrayValue
            else { throw refuse("invalid_passkey") }
            let lastUsed = p["lastUsedAt"]?.stringValue
            if let lastUsed, !isTime(lastUsed) { throw refuse("invalid_passkey") }
            guard let keyBytes = p["publicKey"]?.stringValue.flatMap(Base64URL.decode), let key = try? COSEKey(bytes: keyBytes) else {
                throw refuse("invalid_public_key")
            }
            guard ids.insert(credentialId).inserted else { throw refuse("duplicate_credential_id") }
            handles.insert(handle)
            passkeys.append(PortablePasskey(credentialId: credentialId, publicKey: keyBytes, alg: key.algorithm.rawValue, signCount: Int64(count),
                                            transports: transports.compactMap(\.stringValue), aaguid: aaguid, backupEligible: be,
                                            backedUp: bs, name: name, createdAt: created, lastUsedAt: lastUsed))
        }
        guard handles.count <= 1 else { throw refuse("two_user_handles") }
        var deviceKeys: [PortableDeviceKey] = []
        for d in keyItems {
            guard let keyId = d["id"]?.stringValue, !keyId.isEmpty, !keyId.contains(","), let deviceId = d["deviceId"]?.stringValue,
                  let platform = d["platform"]?.stringValue, ["ios", "android"].contains(platform),
                  let created = d["createdAt"]?.stringValue, isTime(created)
            else { throw refuse("invalid_device_key") }
            guard let keyBytes = d["publicKey"]?.stringValue.flatMap(Base64URL.decode), (try? PublicKey(spkiDER: keyBytes)) != nil else {
                throw refuse("invalid_public_key")
            }
            // Imported device keys are unattested: this deployment checked no attestation.
            deviceKeys.append(PortableDeviceKey(id: keyId, deviceId: deviceId, publicKey: keyBytes, platform: platform, attested: false, createdAt: created))
        }
        return PortableAccount(id: id, username: username, displayName: displayName, externalId: externalId, createdAt: createdAt,
                               userHandle: handles.first ?? newUserHandle(), email: email, passkeys: passkeys, deviceKeys: deviceKeys)
    }

    /// A whole file in memory (an HTTP body): the checksum first, then each account line.
    static func read(_ bytes: [UInt8], _ context: PortableFormat.Context) -> PortableFormat.Read {
        var lines: [ArraySlice<UInt8>] = []
        var start = 0
        for i in bytes.indices where bytes[i] == 0x0A {
            lines.append(bytes[start...i])
            start = i + 1
        }
        if start < bytes.count { lines.append(bytes[start...]) }
        let check = Checksum()
        for l in lines { check.add(Array(l)) }
        switch check.finish() {
        case .broken(let reason): return .refused(reason)
        case .whole(let sha, _):
            let entries = lines.dropLast().enumerated().map { i, l in
                PortableEntry(line: i + 1, account: parse(Array(l.dropLast()), context))
            }
            return .accounts(sha256: sha, entries)
        }
    }

    /// One account line (without its `\n`) as an entry's result.
    static func parse(_ line: [UInt8], _ context: PortableFormat.Context) -> Result<PortableAccount, Refusal> {
        do throws(Refusal) {
            return .success(try account(line, rpId: context.rpId, newUserHandle: { context.random(32) }))
        } catch {
            return .failure(error)
        }
    }

    /// Checks a file's trailer as its lines arrive, holding one line: every line but the last is
    /// hashed; the last must be the trailer, with the count of lines before it and their digest.
    final class Checksum {
        private let digest = StreamingSHA256()
        private var pending: [UInt8]? = nil
        private(set) var count = 0

        /// `line` with its `\n` (a last line without one is a truncated file).
        func add(_ line: [UInt8]) {
            if let pending { digest.update(pending); count += 1 }
            pending = line
        }

        /// `.whole` with the file's SHA-256 (hex) and count, or why not: `truncated` (no trailer
        /// as its last line, or a last line without its `\n`) or `checksum_mismatch`.
        func finish() -> Verdict {
            guard let last = pending, last.last == 0x0A,
                  let doc = try? JSONParser.parse(Array(last.dropLast())), doc["v"]?.intValue == version,
                  let stated = doc["count"]?.intValue, let sha = doc["sha256"]?.stringValue, doc["rpId"] == nil
            else { return .broken("truncated") }
            guard sha == hex(digest.finish()), stated == count else { return .broken("checksum_mismatch") }
            return .whole(sha256: sha, count: count)
        }
    }

    enum Verdict: Equatable {
        case whole(sha256: String, count: Int)
        case broken(String)
    }

    static func isTime(_ text: String) -> Bool {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if f.date(from: text) != nil { return true }
        f.formatOptions = [.withInternetDateTime]
        return f.date(from: text) != nil
    }

    static func uuid(_ bytes: [UInt8]) -> String {
        guard bytes.count == 16 else { return hex(bytes) }
        let h = Array(hex(bytes))
        return String(h[0..<8]) + "-" + String(h[8..<12]) + "-" + String(h[12..<16]) + "-" + String(h[16..<20]) + "-" + String(h[20..<32])
    }

    static func aaguidBytes(_ text: String) -> [UInt8]? {
        let digits = text.replacingOccurrences(of: "-", with: "")
        guard digits.utf8.count == 32 else { return nil }
        return Hex.decode(digits)
    }

    static func hex(_ bytes: [UInt8]) -> String { Hex.encode(bytes) }
}
