#if canImport(WebAuthnTesting)
import Crypto
import DeviceKeysTesting
import Foundation
import JSON
import LatchkeyClient
import Synchronization
import WebAuthn
import WebAuthnTesting

// Stand-ins for what iOS provides, signing with the server package's OpenSSL-backed test code:
// the passkey side hands the client exactly the raw fields ASAuthorization… results carry, and the
// device keys answer the DeviceKeySigner questions as the Secure Enclave and App Attest keys do.

/// A platform passkey: raw fields in, as `ASAuthorizationPlatformPublicKeyCredentialRegistration` /
/// `…Assertion` give them; `RegistrationCredential` / `AssertionCredential` turn them into JSON.
struct SoftPasskey: Sendable {
    let authenticator = SoftAuthenticator(algorithm: .es256)
    var credentialID: Data { Data(authenticator.credentialId) }

    /// What iOS does with `RegistrationOptions.platformRequest()`: a new credential for the options' user.
    func register(_ options: RegistrationOptions, origin: String) -> RegistrationCredential {
        let built = authenticator.registration(challenge: [UInt8](options.challenge), rpId: options.rpId, origin: origin).json()
        authenticator.userHandle = [UInt8](options.userID)
        let response = built["response"]!
        return RegistrationCredential(credentialID: Data(authenticator.credentialId),
                                      rawClientDataJSON: raw(response["clientDataJSON"]),
                                      rawAttestationObject: raw(response["attestationObject"]))
    }

    /// What iOS does with `AuthenticationOptions.platformRequest()` (user verified, as Face ID does).
    func assert(_ options: AuthenticationOptions, origin: String) -> AssertionCredential {
        let built = authenticator.assertion(challenge: [UInt8](options.challenge), rpId: options.rpId, origin: origin).json()
        let response = built["response"]!
        return AssertionCredential(credentialID: Data(authenticator.credentialId), rawClientDataJSON: raw(response["clientDataJSON"]),
                                   rawAuthenticatorData: raw(response["authenticatorData"]), signature: raw(response["signature"]),
                                   userID: authenticator.userHandle.map { Data($0) })
    }

    func provider(origin: String) -> PasskeyAssertionProvider {
        { options in self.assert(options, origin: origin) }
    }

    private func raw(_ v: JSONValue?) -> Data { Data(Crypto.Base64URL.decode(v?.stringValue ?? "") ?? []) }
}

/// A P-256 software key answering as `SecureEnclaveDeviceKey` does: X9.63 public key, DER ECDSA-SHA256.
struct SoftDeviceKey: DeviceKeySigner {
    let key = PrivateKey.generateEC(.p256)
    var platform: String { "ios" }
    var publicKey: Data { Data(key.publicKey.x963Point!) }

    func sign(_ message: Data) -> Data { Data(try! key.sign([UInt8](message), algorithm: .ecdsa(.sha256))) }

    func enrolmentProof(challenge: Data) async throws(LatchkeyError) -> DeviceKeyEnrolmentProof {
        DeviceKeyEnrolmentProof(publicKey: publicKey, signature: sign(challenge))
    }

    func approve(challenge: Data) async throws(LatchkeyError) -> DeviceKeyApproval { .signature(sign(challenge)) }
}

/// An App Attest key answering as `AppAttestDeviceKey` does (attestation object, then assertions
/// with a rising counter), under the DeviceKeysTesting root the server is started with.
final class SoftAppAttestKey: DeviceKeySigner {
    private let builder = Mutex(AppAttestBuilder())
    private let counter = Mutex<UInt32>(0)
    var platform: String { "ios" }
    var appId: String { builder.withLock { $0.appId } }

    static var rootPEM: String {
        "-----BEGIN CERTIFICATE-----\n" + Data(AppAttestBuilder.root).base64EncodedString(options: .lineLength64Characters)
            + "\n-----END CERTIFICATE-----\n"
    }

    func enrolmentProof(challenge: Data) async throws(LatchkeyError) -> DeviceKeyEnrolmentProof {
        builder.withLock { b in
            b.clientDataHash = [UInt8](SHA256Digest.hash(challenge))
            return DeviceKeyEnrolmentProof(publicKey: nil, signature: nil, appAttest: (Data(b.keyId), Data(b.object())))
        }
    }

    func approve(challenge: Data) async throws(LatchkeyError) -> DeviceKeyApproval {
        let n = counter.withLock { $0 += 1; return $0 }
        let assertion = builder.withLock { b in try! b.assertion(counter: n, clientDataHash: [UInt8](SHA256Digest.hash(challenge))) }
        return .appAttestAssertion(Data(assertion))
    }
}
#endif

#if canImport(WebAuthnTesting)
/// A software P-256 DPoP key (OpenSSL, through the server package's Crypto) behind `DPoPKey`, as
/// `SoftwareDPoPKey` (CryptoKit) and `SecureEnclaveDPoPKey` are on Apple platforms.
struct SoftDPoPKey: DPoPKey {
    let key = PrivateKey.generateEC(.p256)
    var publicJWK: LatchkeyJSON { .p256JWK(x963: Data(key.publicKey.x963Point!)) }

    func sign(_ message: Data) async throws -> Data {
        Data(try ECDSASignature.rawFromDER(try key.sign([UInt8](message), algorithm: .ecdsa(.sha256)), coordinateLength: 32))
    }
}
#endif
