import Crypto

/// Seals the secrets Latchkey must be able to read back (webhook signing secrets) at rest, with the
/// same key-encryption key and envelope as the token signing keys (`SealedSecret`, KeyEncryption.swift:
/// AES-256-GCM, the KEK id in the header, the row bound as associated data), so a database dump alone
/// can neither read them nor forge a delivery, and `latchkey keys rotate` has one format to re-seal.
/// Without a KEK (`LATCHKEY_KEY_ENCRYPTION_KEY`; in dev mode `serve` supplies the dev key file's)
/// nothing can be sealed and webhook endpoints cannot be created.
public struct SecretSealer: Sendable {
    let kek: KeyEncryptionKey?
    let runtime: Runtime

    public init(configuration: Configuration, runtime: Runtime = .system) {
        kek = configuration.keyEncryptionKey
        self.runtime = runtime
    }

    public var isAvailable: Bool { kek != nil }

    func seal(_ secret: [UInt8], purpose: String, id: String) throws(ServiceError) -> [UInt8] {
        guard let kek else { throw Self.unavailable }
        do {
            return try SealedSecret.seal(secret, under: kek, binding: SealedSecret.Binding(purpose: purpose, id: id),
                                         nonce: runtime.random(AESGCM.nonceSize))
        } catch {
            throw ServiceError(.internalError, "could not seal the secret")
        }
    }

    func open(_ sealed: [UInt8], purpose: String, id: String) throws(ServiceError) -> [UInt8] {
        guard let kek else { throw Self.unavailable }
        do { return try SealedSecret.open(sealed, with: kek, binding: SealedSecret.Binding(purpose: purpose, id: id)) } catch {
            throw ServiceError(.internalError, "the sealed secret does not open under LATCHKEY_KEY_ENCRYPTION_KEY: \(error)")
        }
    }

    static let unavailable = ServiceError(.forbidden, "LATCHKEY_KEY_ENCRYPTION_KEY is not set: secrets cannot be stored at rest")
}
