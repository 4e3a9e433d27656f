import CBOR
import Crypto
#if DEBUG
@testable import WebAuthn

// Each attestation statement format's verification procedure (WebAuthn L3 §8), the call
// RegistrationVerifier makes at §7.1 step 22, with the fixed policy (pinned clock, no trust
// anchors: statements are verified, chains need not reach a root).
//
// Input: 32 bytes of clientDataHash, then the attestation object (CBOR). The target's format
// verifies whatever attStmt the object holds, whatever its `fmt` says, so mutations are not spent
// on the format name.
extension FuzzTargets {
    static let attestationTargets: [FuzzTarget] = AttestationFormats.all.map { format in
        FuzzTarget("att-\(format.identifier)", "\(format.identifier) attestation statement verification (§8, §7.1 step 22)") { bytes in
            guard bytes.count > 32, let object = try? AttestationObject(bytes: Array(bytes[32...])),
                  let credential = object.authenticatorData.attestedCredentialData else { return }
            let policy = RegistrationPolicies.policy(rpId: "localhost")
            let input = AttestationInput(format: format.identifier, statement: object.statement,
                                         authenticatorData: object.authenticatorData, credential: credential,
                                         clientDataHash: Array(bytes[0..<32]), policy: policy, now: RegistrationPolicies.now)
            _ = try? format.verify(input, trace: nil)
        }
    }
}
#else
extension FuzzTargets {
    static let attestationTargets: [FuzzTarget] = []
}
#endif
