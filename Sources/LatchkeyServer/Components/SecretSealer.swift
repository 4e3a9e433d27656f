import Crypto
import Foundation

/// Seals the secrets Latchkey must be able to read back (webhook signing secrets) with AES-256-GCM
/// under the key-encryption key, so a database dump alone can neither read them nor forge a delivery.
/// Each sealed value is bound to where it is stored (`purpose` + the row's id as associated data), so a
/// sealed secret copied onto another row does not open.
///
/// Key: `LATCHKEY_KEY_ENCRYPTION_KEY` (base64 of 32 bytes, or `@/path` to a file holding that or the
/// 32 raw bytes). In dev mode without it, the development key
/// `SHA-256("latchkey development key-encryption key v1:" + rpId)` — derived for the dev cluster's
/// rpId and public by construction, so dev secrets are not protected. Outside dev mode without it
/// nothing can be sealed (`isAvailable` is false) and webhook endpoints cannot be created.
///
/// Sealed form: version byte 0x01 ‖ AES-GCM nonce ‖ ciphertext ‖ tag. This is the one place that
/// knows the key; issue 13's key handling can replace `key` without touching callers.
public struct SecretSealer: Sendable {
    static let version: UInt8 = 1
    let key: [UInt8]?

    public init(configuration: Configuration) {
        if let configured = configuration.keyEncryptionKey {
            key = configured
        } else if configuration.developmentMode {
            key = Self.developmentKey(rpId: configuration.rpId)
        } else {
            key = nil
        }
    }

    public var isAvailable: Bool { key != nil }

    public static func developmentKey(rpId: String) -> [UInt8] {
        Digest.sha256(Array("latchkey development key-encryption key v1:\(rpId)".utf8))
    }

    /// `LATCHKEY_KEY_ENCRYPTION_KEY`'s value: base64 of 32 bytes, or `@/path` (base64 text or 32 raw bytes).
    public static func parseKey(_ value: String) -> [UInt8]? {
        if value.hasPrefix("@") {
            guard let data = FileManager.default.contents(atPath: String(value.dropFirst())) else { return nil }
            let bytes = [UInt8](data)
            if bytes.count == 32 { return bytes }
            return parseKey(String(decoding: bytes, as: UTF8.self).trimmed)
        }
        guard let bytes = Base64.decodeStandard(value.trimmed), bytes.count == 32 else { return nil }
        return bytes
    }

    func seal(_ secret: [UInt8], purpose: String, id: String) throws(ServiceError) -> [UInt8] {
        guard let key else { throw Self.unavailable }
        do { return [Self.version] + (try AESGCM.seal(secret, key: key, associatedData: Self.binding(purpose, id))) } catch {
            throw ServiceError(.internalError, "could not seal the secret")
        }
    }

    func open(_ sealed: [UInt8], purpose: String, id: String) throws(ServiceError) -> [UInt8] {
        guard let key else { throw Self.unavailable }
        guard sealed.first == Self.version else { throw ServiceError(.internalError, "sealed secret of an unknown version") }
        do { return try AESGCM.open(Array(sealed.dropFirst()), key: key, associatedData: Self.binding(purpose, id)) } catch {
            throw ServiceError(.internalError, "the sealed secret does not open under LATCHKEY_KEY_ENCRYPTION_KEY")
        }
    }

    static func binding(_ purpose: String, _ id: String) -> [UInt8] { Array("latchkey:\(purpose):\(id)".utf8) }

    static let unavailable = ServiceError(.forbidden, "LATCHKEY_KEY_ENCRYPTION_KEY is not set: secrets cannot be stored at rest")
}
