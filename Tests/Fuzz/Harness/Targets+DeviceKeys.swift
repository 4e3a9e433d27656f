import Crypto
import DeviceKeys

extension FuzzTargets {
    static let deviceKeyTargets: [FuzzTarget] = [
        FuzzTarget("device-key", "DevicePublicKey, DERSignature, StepUpChallenge(parsing:), StepUpAction(canonical:); first byte selects") { bytes in
            guard let (selector, rest) = bytes.selectorAndRest else { return }
            switch selector % 4 {
            case 0:
                guard let key = try? DevicePublicKey(bytes: rest) else { return }
                // Both accepted encodings name the same key: SPKI and X9.63 parse back to it.
                let spki = try? DevicePublicKey(bytes: key.spkiDER), x963 = try? DevicePublicKey(bytes: key.x963)
                FuzzCheck.require(spki?.key.isSameKey(as: key.key) == true && x963?.key.isSameKey(as: key.key) == true,
                                  "device key does not round-trip through SPKI and X9.63")
            case 1:
                guard let signature = try? DERSignature(bytes: rest) else { return }
                FuzzCheck.require(signature.der == rest, "DERSignature changed its bytes")
                _ = try? ECDSASignature.rawFromDER(rest, coordinateLength: 32)
            case 2:
                guard let challenge = try? StepUpChallenge(parsing: rest) else { return }
                FuzzCheck.require(challenge.bytes == rest, "StepUpChallenge does not re-serialise to its input")
            default:
                guard let action = try? StepUpAction(canonical: rest) else { return }
                FuzzCheck.require(action.hash == Digest.sha256(action.canonical), "action hash is not over its canonical form")
                let again = try? StepUpAction(canonical: action.canonical)
                FuzzCheck.require(again?.canonical == action.canonical, "an action's canonical form is not canonical")
            }
        },
    ]
}
