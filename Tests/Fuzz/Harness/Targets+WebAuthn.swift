import CBOR
import Crypto
import JSON
#if DEBUG
@testable import WebAuthn
#else
import WebAuthn
#endif

extension FuzzTargets {
    static let webAuthnTargets: [FuzzTarget] = [
        FuzzTarget("cose", "COSEKey(bytes:); an accepted key re-encodes (COSEKey.encode) to one that parses to the same key") { bytes in
            guard let key = try? COSEKey(bytes: bytes) else { return }
            guard let encoded = COSEKey.encode(key.publicKey, algorithm: key.algorithm) else { return }
            guard let again = try? COSEKey(bytes: encoded) else {
                FuzzCheck.require(false, "COSEKey.encode output for \(key.algorithm.name) does not parse")
                return
            }
            FuzzCheck.require(again.publicKey.isSameKey(as: key.publicKey) && again.algorithm == key.algorithm,
                              "COSE key changed on re-encoding")
        },
        FuzzTarget("authdata", "AuthenticatorData(_:): flags, counter, attested credential data, extensions") { bytes in
            guard let data = try? AuthenticatorData(bytes) else { return }
            FuzzCheck.require(data.raw == bytes && data.rpIdHash.count == 32, "authenticatorData fields do not cover the input")
            if let credential = data.attestedCredentialData {
                FuzzCheck.require(credential.aaguid.count == 16 && (1...1023).contains(credential.credentialId.count),
                                  "attested credential data out of bounds")
            }
        },
        FuzzTarget("clientdata", "CollectedClientData(raw:): clientDataJSON members and their types") { bytes in
            guard let data = try? CollectedClientData(raw: bytes) else { return }
            FuzzCheck.require(data.hash == Digest.sha256(bytes), "clientData hash is not SHA-256 of the raw bytes")
        },
        FuzzTarget("registration", "ParsedRegistration + RegistrationVerifier.verify (WebAuthn L3 §7.1) with a fixed policy table") { bytes in
            guard let parsed = try? ParsedRegistration(bytes: bytes) else { return }
            // The challenge is looked up by storage before the verifier runs, so the verifier gets
            // the one the client data names; rpId and origins come from a fixed table (the shared
            // vectors' relying parties) so that seeds get past §7.1 steps 9-13 to the statement.
            let rpIdHash = parsed.attestationObject.authenticatorData.rpIdHash
            let policy = RegistrationPolicies.all.first { $0.rpIdHash == rpIdHash } ?? RegistrationPolicies.all[0]
            _ = try? RegistrationVerifier.verify(parsed, expectedChallenge: parsed.clientData.challenge, policy: policy)
            _ = try? RegistrationVerifier.verify(parsed, expectedChallenge: parsed.clientData.challenge, policy: policy,
                                                 trace: VerificationTrace())
        },
    ]
}

/// The policies the attestation and registration targets verify with: fixed, the clock pinned.
enum RegistrationPolicies {
    /// 2023-11-14T22:13:20Z: inside most shared vectors' certificate validity.
    static let now: Int64 = 1_700_000_000

    static let origins = [
        "android:apk-key-hash:gx7sq_pxhxhrIQdLyfG0pxKwiJ7hOk2DJQ4xvKd438Q", "http://127.0.0.1:8080", "http://localhost:4200",
        "http://localhost:5000", "http://localhost:8000", "http://localhost:8080", "http://localhost:8100", "http://localhost:9005",
        "https://172.20.0.141:8443", "https://6cc3c9e7967a.ngrok.io", "https://api-duo1.duo.test", "https://demo.yubico.com",
        "https://dev.d2urpypvrhb05x.amplifyapp.com", "https://dev.dontneeda.pw", "https://dev.netpassport.io",
        "https://dev2.dontneeda.pw:5000", "https://devicemanagement-duo1.pwl.ngrok.io", "https://etools-dev.example.com:8080",
        "https://example.com", "https://example.org", "https://gramthanos.github.io", "https://idm.example.com:8080",
        "https://localhost:44329", "https://localhost:8443", "https://login.authress.io", "https://portal.fxon.com",
        "https://spectral.local:8443", "https://webauthn.firstyear.id.au", "https://webauthn.io", "https://webauthn.org",
        "https://webauthntest.azurewebsites.net",
    ]
    static let rpIds = [
        "localhost", "127.0.0.1", "172.20.0.141", "6cc3c9e7967a.ngrok.io", "authress.io", "d2urpypvrhb05x.amplifyapp.com",
        "demo.yubico.com", "dev.dontneeda.pw", "dev2.dontneeda.pw", "duo.test", "etools-dev.example.com", "example.com",
        "example.org", "gramthanos.github.io", "idm.example.com", "netpassport.io", "portal.fxon.com", "pwl.ngrok.io",
        "simplewebauthn.dev", "spectral.local", "try-webauthn.appspot.com", "webauthn.firstyear.id.au", "webauthn.io",
        "webauthn.org", "webauthntest.azurewebsites.net",
    ]

    static func policy(rpId: String) -> VerificationPolicy {
        var policy = VerificationPolicy(rpId: rpId, origins: OriginPolicy(origins), clock: { now })
        policy.crossOrigin = .allow(topOrigins: ["https://example.com"])
        policy.allowedAlgorithms = [.es256, .es384, .es512, .edDSA, .ed25519, .rs256, .rs384, .rs512, .ps256, .ps384, .ps512, .rs1]
        return policy
    }

    static let all: [VerificationPolicy] = rpIds.map(policy(rpId:))
}
