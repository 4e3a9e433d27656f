import Crypto
import Foundation
import Storage
import WebAuthn

/// The import formats (SPEC "Portability" → Import): Latchkey's own JSON Lines, Keycloak's realm
/// export and CSV. `read` is the one entry point: a whole file's bytes in, each account out (the
/// account, or why the file's line refuses it), or the reason the whole file is refused. Pure.
public enum PortableFormat: String, Sendable, CaseIterable {
    case latchkey, keycloak, csv

    /// The format a request body's media type names: `application/jsonl`, `application/json`
    /// (Keycloak) or `text/csv`; parameters such as `charset` are ignored.
    public init?(mediaType: String) {
        let bare = mediaType.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        switch bare {
        case "application/jsonl": self = .latchkey
        case "application/json": self = .keycloak
        case "text/csv": self = .csv
        default: return nil
        }
    }

    /// What every format reads with: this deployment's rpId (a file's must equal it), the rpId
    /// the operator states for a file that names none (`--rp-id`), the time an account without
    /// one is created at, and the randomness a Latchkey account without passkeys takes its user
    /// handle from.
    public struct Context: Sendable {
        public var rpId: String
        public var statedRpId: String?
        public var now: Date
        public var random: @Sendable (Int) -> [UInt8]

        public init(rpId: String, statedRpId: String? = nil, now: Date, random: @escaping @Sendable (Int) -> [UInt8]) {
            self.rpId = rpId
            self.statedRpId = statedRpId
            self.now = now
            self.random = random
        }
    }

    /// The file read: its SHA-256 (lower-case hex, audited with each account it creates) and its
    /// accounts in file order; or `refused` with why nothing of it is imported.
    public enum Read: Sendable {
        case accounts(sha256: String, [PortableEntry])
        case refused(String)
    }

    public func read(_ bytes: [UInt8], _ context: Context) -> Read {
        switch self {
        case .latchkey: PortableFile.read(bytes, context)
        case .keycloak: PortableKeycloak.read(bytes, context)
        case .csv: PortableCSV.read(bytes, context)
        }
    }
}

/// One account of an import file: where it is (`line`: Latchkey's line, Keycloak's user in file
/// order, the CSV line of the account's first row), its username when the file gives one, and the
/// account to create or why the file's own content refuses it.
public struct PortableEntry: Sendable {
    public let line: Int
    public let account: Result<PortableAccount, PortableFile.Refusal>

    public init(line: Int, account: Result<PortableAccount, PortableFile.Refusal>) {
        self.line = line
        self.account = account
    }

    public var username: String? {
        switch account {
        case .success(let a): a.username
        case .failure(let r): r.username
        }
    }
}

/// What the formats share.
enum PortableBytes {
    /// Standard base64 or base64url, padded or not: Keycloak writes a credential id in the first
    /// and its public key in the second, CSV writers vary. Nil for anything else or nothing.
    static func decodeEither(_ text: String) -> [UInt8]? {
        guard !text.isEmpty else { return nil }
        let url = text.contains(where: { $0 == "+" || $0 == "/" })
            ? String(text.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
            : text
        return Base64URL.decode(url)
    }

    /// The Latchkey user id of an account imported from a format without one: derived from its
    /// user handle, so that a re-run finds the account it created (`skipped`), random-looking and
    /// never personal data, like the ids Latchkey makes.
    static func userId(handle: [UInt8]) -> String {
        Base64URL.encode(Array(Digest.sha256(Array("latchkey import user v1".utf8) + [0] + handle).prefix(16)))
    }

    /// ISO 8601 UTC with microseconds, as an export writes times.
    static func time(_ date: Date) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'"
        return f.string(from: date)
    }

    /// A COSE key Latchkey verifies, from `bytes` given as COSE, or as SPKI DER with the COSE `alg`
    /// it is used with (then converted to COSE). The COSE bytes and their alg, or the refusal:
    /// `invalid_public_key` (neither, or a key that does not go with `alg`), `alg_required` (SPKI
    /// without `alg`), `alg_mismatch` (a COSE key whose own alg is not the `alg` given).
    static func credentialKey(_ bytes: [UInt8], alg: Int?) -> Result<(cose: [UInt8], alg: Int), PortableKeyRefusal> {
        if let key = try? COSEKey(bytes: bytes) {
            if let alg, alg != key.algorithm.rawValue { return .failure(.init(reason: "alg_mismatch")) }
            return .success((bytes, key.algorithm.rawValue))
        }
        guard let spki = try? PublicKey(spkiDER: bytes) else { return .failure(.init(reason: "invalid_public_key")) }
        guard let alg else { return .failure(.init(reason: "alg_required")) }
        guard let cose = COSEKey.encode(spki, algorithm: COSEAlgorithm(alg)), (try? COSEKey(bytes: cose)) != nil else {
            return .failure(.init(reason: "invalid_public_key"))
        }
        return .success((cose, alg))
    }
}

struct PortableKeyRefusal: Error {
    let reason: String
}
