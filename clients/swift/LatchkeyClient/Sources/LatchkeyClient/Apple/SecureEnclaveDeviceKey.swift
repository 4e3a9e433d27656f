#if canImport(CryptoKit) && canImport(Security) && canImport(LocalAuthentication)
import CryptoKit
import Foundation
import LocalAuthentication
import Security

/// A P-256 key that lives in the Secure Enclave and signs only after Face ID / Touch ID (or the
/// passcode, as `accessControl` says): the device key of docs/step-up.md. The private key never
/// leaves the enclave; what the Keychain keeps (`dataRepresentation`) is a handle that only this
/// device's enclave can use. The public key goes to the server as its 65-byte X9.63 point.
///
/// Signatures are DER ECDSA over SHA-256 of the challenge bytes (CryptoKit's `signature(for:)`
/// hashes with SHA-256), exactly what `POST /v1/device-keys` and `POST /v1/step-up/verify` verify.
@available(iOS 16.0, macOS 13.0, visionOS 1.0, *)
public struct SecureEnclaveDeviceKey: DeviceKeySigner {
    /// The Keychain item (service `dev.latchkey.device-key`, account `tag`) holding the key's handle.
    public let tag: String
    /// The enclave's opaque handle for the key (safe to store; useless off this device).
    public let dataRepresentation: Data
    /// X9.63 uncompressed point, 65 bytes: the `publicKey` of enrolment.
    public let publicKey: Data
    public var platform: String { "ios" }

    static let service = "dev.latchkey.device-key"

    public static var isAvailable: Bool { SecureEnclave.isAvailable }

    /// The key stored under `tag`, or a new one (stored under `tag`). `userPresence` is what the
    /// enclave asks for before each signature: `.biometryCurrentSet` (default: a new fingerprint or
    /// face enrolled on the device invalidates the key, and the app must enrol again),
    /// `.biometryAny`, or `.userPresence` (biometry or passcode).
    public static func loadOrCreate(tag: String, userPresence: SecAccessControlCreateFlags = .biometryCurrentSet)
        throws(LatchkeyError) -> SecureEnclaveDeviceKey {
        if let existing = try load(tag: tag) { return existing }
        return try create(tag: tag, userPresence: userPresence)
    }

    public static func create(tag: String, userPresence: SecAccessControlCreateFlags = .biometryCurrentSet) throws(LatchkeyError) -> SecureEnclaveDeviceKey {
        guard SecureEnclave.isAvailable else { throw LatchkeyError(.unsupported, "this device has no Secure Enclave") }
        var error: Unmanaged<CFError>?
        guard let access = SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
                                                           [.privateKeyUsage, userPresence], &error) else {
            throw LatchkeyError(.authenticator, "access control: \(error.map { String(describing: $0.takeRetainedValue()) } ?? "?")")
        }
        let key: SecureEnclave.P256.Signing.PrivateKey
        do { key = try SecureEnclave.P256.Signing.PrivateKey(accessControl: access) } catch {
            throw LatchkeyError(.authenticator, "Secure Enclave key generation failed: \(error.localizedDescription)")
        }
        try delete(tag: tag)
        let item: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecAttrAccount as String: tag,
            kSecValueData as String: key.dataRepresentation,
            kSecAttrAccessible as String: kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
        ]
        let status = SecItemAdd(item as CFDictionary, nil)
        guard status == errSecSuccess else { throw LatchkeyError(.authenticator, "Keychain add failed (OSStatus \(status))") }
        return SecureEnclaveDeviceKey(tag: tag, dataRepresentation: key.dataRepresentation, publicKey: key.publicKey.x963Representation)
    }

    public static func load(tag: String) throws(LatchkeyError) -> SecureEnclaveDeviceKey? {
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecAttrAccount as String: tag,
            kSecReturnData as String: true, kSecMatchLimit as String: kSecMatchLimitOne,
        ]
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess, let data = result as? Data else {
            throw LatchkeyError(.authenticator, "Keychain read failed (OSStatus \(status))")
        }
        let key: SecureEnclave.P256.Signing.PrivateKey
        do { key = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: data) } catch {
            // Restored from a backup onto another device, or the enclave lost it: enrol again.
            return nil
        }
        return SecureEnclaveDeviceKey(tag: tag, dataRepresentation: data, publicKey: key.publicKey.x963Representation)
    }

    /// Removes the handle from the Keychain (after `revokeDeviceKey`, or on sign-out).
    public static func delete(tag: String) throws(LatchkeyError) {
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                    kSecAttrAccount as String: tag]
        let status = SecItemDelete(query as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else {
            throw LatchkeyError(.authenticator, "Keychain delete failed (OSStatus \(status))")
        }
    }

    /// DER ECDSA-SHA256 over `message`. `reason` is what Face ID / Touch ID shows; pass the action
    /// in words ("Pay 200.00 EUR to Ada") so the user sees what the biometric approves.
    public func sign(_ message: Data, reason: String? = nil) throws(LatchkeyError) -> Data {
        let context = LAContext()
        if let reason { context.localizedReason = reason }
        do {
            let key = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: dataRepresentation, authenticationContext: context)
            return try key.signature(for: message).derRepresentation
        } catch {
            throw LatchkeyError(.authenticator, "the Secure Enclave did not sign: \(error.localizedDescription)")
        }
    }

    public func enrolmentProof(challenge: Data) async throws(LatchkeyError) -> DeviceKeyEnrolmentProof {
        DeviceKeyEnrolmentProof(publicKey: publicKey, signature: try sign(challenge, reason: "Register this device"))
    }

    public func approve(challenge: Data) async throws(LatchkeyError) -> DeviceKeyApproval {
        .signature(try sign(challenge))
    }
}
#endif
