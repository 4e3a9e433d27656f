import Crypto
import JSON
import Tokens

extension FuzzTargets {
    static let tokenTargets: [FuzzTarget] = [
        FuzzTarget("jwt", "JWT.verify: first byte 0 verifies the rest as a compact JWS; otherwise the rest is header JSON NUL claims JSON, signed with the target's key so verification reaches the claims") { bytes in
            guard let (selector, rest) = bytes.selectorAndRest else { return }
            let token: String
            if selector == 0 {
                token = String(decoding: rest, as: UTF8.self)
            } else {
                let parts = rest.split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false)
                let header = Array(parts[0]), claims = parts.count > 1 ? Array(parts[1]) : []
                let input = Base64URL.encode(header) + "." + Base64URL.encode(claims)
                guard let der = try? JWTFuzzKey.key.privateKey.sign(Array(input.utf8), algorithm: .ecdsa(.sha256)),
                      let raw = try? ECDSASignature.rawFromDER(der, coordinateLength: 32) else { return }
                token = input + "." + Base64URL.encode(raw)
            }
            let keys = [JWTFuzzKey.key.kid: JWTFuzzKey.key.publicKey, "fuzz": JWTFuzzKey.key.publicKey]
            if let claims = try? JWT.verify(token, keys: keys, now: 1_700_000_000) {
                FuzzCheck.require(claims["exp"]?.intValue != nil, "JWT without exp verified")
            }
            _ = try? JWT.verify(token, keys: keys, type: "step-up+jwt", now: 1_700_000_000)
        },
    ]
}

enum JWTFuzzKey {
    static let key = SigningKey.generate()
}
