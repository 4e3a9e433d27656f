#if DEBUG
import Crypto
@testable import WebAuthn

// Structures parsed inside attestation statements, fuzzed directly (they are internal to WebAuthn,
// hence `@testable`, which the debug configuration allows; fuzz builds are debug builds).
extension FuzzTargets {
    static let internalTargets: [FuzzTarget] = [
        FuzzTarget("tpm-structures", "TPM 2.0 TPMT_PUBLIC (pubArea), TPMS_ATTEST (certInfo), AIK subjectAlternativeName; first byte selects") { bytes in
            guard let (selector, rest) = bytes.selectorAndRest else { return }
            switch selector % 3 {
            case 0:
                if let area = try? TPMTPublic(bytes: rest) { FuzzCheck.require(area.raw == rest, "pubArea.raw is not the input") }
            case 1: _ = try? TPMSAttest(bytes: rest)
            default: _ = try? TPMDeviceAttributes(subjectAlternativeName: rest)
            }
        },
        FuzzTarget("android-key-description", "Android KeyDescription extension (1.3.6.1.4.1.11129.2.1.17) DER") { bytes in
            _ = try? KeyDescription(der: bytes)
        },
    ]
}
#else
extension FuzzTargets {
    static let internalTargets: [FuzzTarget] = []
}
#endif
