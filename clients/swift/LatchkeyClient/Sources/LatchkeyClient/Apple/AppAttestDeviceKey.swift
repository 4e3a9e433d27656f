#if canImport(DeviceCheck) && (os(iOS) || os(macOS) || os(visionOS))
@preconcurrency import DeviceCheck
import Foundation

/// An App Attest key (docs/step-up.md, format `apple-appattest`): Apple attests that the key
/// lives in this device's Secure Enclave and belongs to your genuine app (team id + bundle id, which
/// the server must list as a declared iOS app). It cannot make plain signatures: enrolment sends
/// its attestation (whose nonce binds the enrolment challenge), and step-ups send App Attest
/// assertions, both over clientDataHash = SHA-256(challenge bytes).
///
/// Use it where `DCAppAttestService.shared.isSupported` (not in the simulator, not on most Macs);
/// fall back to `SecureEnclaveDeviceKey`. Keep `keyId` (e.g. in the Keychain): a lost id means a new
/// key and a new enrolment. Set `LATCHKEY_APP_ATTEST_DEVELOPMENT=1` on a server that serves
/// development builds (the `appattestdevelop` environment).
@available(iOS 14.0, macOS 11.0, visionOS 1.0, *)
public struct AppAttestDeviceKey: DeviceKeySigner {
    /// The key id as App Attest gives it (standard base64 of SHA-256 of the public key).
    public let keyId: String
    public var platform: String { "ios" }

    public static var isSupported: Bool { DCAppAttestService.shared.isSupported }

    public init(keyId: String) { self.keyId = keyId }

    /// A new App Attest key (store its `keyId`).
    public static func generate() async throws(LatchkeyError) -> AppAttestDeviceKey {
        guard DCAppAttestService.shared.isSupported else { throw LatchkeyError(.unsupported, "App Attest is not supported on this device") }
        do { return AppAttestDeviceKey(keyId: try await DCAppAttestService.shared.generateKey()) } catch {
            throw LatchkeyError(.authenticator, "App Attest key generation failed: \(error.localizedDescription)")
        }
    }

    public func enrolmentProof(challenge: Data) async throws(LatchkeyError) -> DeviceKeyEnrolmentProof {
        guard let keyIdBytes = Data(base64Encoded: keyId) else { throw LatchkeyError(.authenticator, "the App Attest key id is not base64") }
        let object: Data
        do { object = try await DCAppAttestService.shared.attestKey(keyId, clientDataHash: SHA256Digest.hash(challenge)) } catch {
            throw LatchkeyError(.authenticator, "App Attest attestation failed: \(error.localizedDescription)")
        }
        return DeviceKeyEnrolmentProof(publicKey: nil, signature: nil, appAttest: (keyIdBytes, object))
    }

    public func approve(challenge: Data) async throws(LatchkeyError) -> DeviceKeyApproval {
        do {
            let assertion = try await DCAppAttestService.shared.generateAssertion(keyId, clientDataHash: SHA256Digest.hash(challenge))
            return .appAttestAssertion(assertion)
        } catch {
            throw LatchkeyError(.authenticator, "App Attest assertion failed: \(error.localizedDescription)")
        }
    }
}
#endif
