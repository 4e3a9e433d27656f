#if canImport(CryptoKit) && canImport(Security) && (os(iOS) || os(macOS) || os(visionOS))
import CryptoKit
import Foundation
import Security

/// The DPoP key of docs/integration/ios.md: a P-256 key in the Secure Enclave that signs every
/// request's proof (RFC 9449), so a copied access or refresh token is useless off this device.
/// It signs without a biometric prompt (a proof goes with every call; the passkey and the device
/// key are what the user approves with); `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly` keeps
/// it off backups and other devices. The Keychain keeps the enclave's handle (`dataRepresentation`).
@available(iOS 16.0, macOS 13.0, visionOS 1.0, *)
public struct SecureEnclaveDPoPKey: DPoPKey {
    public let tag: String
    public let dataRepresentation: Data
    public let publicJWK: LatchkeyJSON

    static let service = "dev.latchkey.dpop-key"

    /// The key stored under `tag`, or a new one stored there.
    public static func loadOrCreate(tag: String) throws(LatchkeyError) -> SecureEnclaveDPoPKey {
        if let existing = try load(tag: tag) { return existing }
        guard SecureEnclave.isAvailable else { throw LatchkeyError(.unsupported, "this device has no Secure Enclave: use SoftwareDPoPKey") }
        var error: Unmanaged<CFError>?
        guard let access = SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
                                                           [.privateKeyUsage], &error) else {
            throw LatchkeyError(.authenticator, "access control: \(error.map { String(describing: $0.takeRetainedValue()) } ?? "?")")
        }
        let key: SecureEnclave.P256.Signing.PrivateKey
        do { key = try SecureEnclave.P256.Signing.PrivateKey(accessControl: access) } catch {
            throw LatchkeyError(.authenticator, "Secure Enclave key generation failed: \(error.localizedDescription)")
        }
        let item: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecAttrAccount as String: tag,
            kSecValueData as String: key.dataRepresentation, kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
        ]
        let status = SecItemAdd(item as CFDictionary, nil)
        guard status == errSecSuccess else { throw LatchkeyError(.authenticator, "Keychain add failed (OSStatus \(status))") }
        return SecureEnclaveDPoPKey(tag: tag, dataRepresentation: key.dataRepresentation, publicJWK: .p256JWK(x963: key.publicKey.x963Representation))
    }

    public static func load(tag: String) throws(LatchkeyError) -> SecureEnclaveDPoPKey? {
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecAttrAccount as String: tag,
            kSecReturnData as String: true, kSecMatchLimit as String: kSecMatchLimitOne,
        ]
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess, let data = result as? Data else { throw LatchkeyError(.authenticator, "Keychain read failed (OSStatus \(status))") }
        // A handle restored onto another device does not open: the session must sign in again.
        guard let key = try? SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: data) else { return nil }
        return SecureEnclaveDPoPKey(tag: tag, dataRepresentation: data, publicJWK: .p256JWK(x963: key.publicKey.x963Representation))
    }

    /// Forgets the key (on sign-out: the bound tokens die with it).
    public static func delete(tag: String) {
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecAttrAccount as String: tag]
        _ = SecItemDelete(query as CFDictionary)
    }

    /// ES256 (SHA-256, then the enclave's ECDSA) as raw `r ‖ s`.
    public func sign(_ message: Data) async throws -> Data {
        let key = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: dataRepresentation)
        return try key.signature(for: message).rawRepresentation
    }
}
#endif
