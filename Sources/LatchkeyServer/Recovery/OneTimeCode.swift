import Crypto

/// One-time codes (SPEC "Recovery and fallback sign-in"): `digits` decimal digits from the CSPRNG
/// (`Runtime.random`, rejection sampling so every code is equally likely), stored only as an HMAC
/// under a deployment secret bound to the challenge id (a leaked table gives no codes, and a code of
/// one challenge is worthless for another), compared in constant time. Expiry, single use and
/// attempt counting are the challenge row's (`RecoveryRepository.attempt` / `use`).
struct OneTimeCode: Sendable {
    let digits: Int
    let runtime: Runtime
    let secret: DeploymentSecret

    /// SPEC: 5 wrong attempts, then the challenge is `challenge_invalid`.
    static let maxAttempts = 5

    /// A fresh code.
    func generate() -> String { Self.randomDigits(digits, runtime: runtime) }

    /// What is stored for `code` on challenge `id`.
    func hash(_ code: String, challengeId id: String) throws(ServiceError) -> [UInt8] {
        HMAC.sha256(key: try secret.value(), data: Array("otp:\(id):\(code)".utf8))
    }

    /// A hash no code matches (a challenge for an address nobody has).
    func unmatchable() -> [UInt8] { runtime.random(32) }


    /// What a person may type: spaces and dashes are ignored.
    static func canonical(_ code: String) -> String { String(code.filter { $0 != " " && $0 != "-" }) }

    /// `count` uniformly random decimal digits (bytes ≥ 250 are dropped: 250 = 25 · 10).
    static func randomDigits(_ count: Int, runtime: Runtime) -> String {
        var out = ""
        while out.count < count {
            for b in runtime.random(count * 2) where b < 250 && out.count < count { out.append(Character(String(b % 10))) }
        }
        return out
    }
}

/// Recovery codes: 10 per set, each 12 characters of an unambiguous alphabet shown as
/// `xxxx-xxxx-xxxx` (~60 bits each), stored as HMACs bound to the account.
struct RecoveryCodes: Sendable {
    let runtime: Runtime
    let secret: DeploymentSecret

    static let count = 10
    static let alphabet = Array("abcdefghjkmnpqrstuvwxyz23456789")  // 31 letters and digits, no 0/o/1/l/i

    func generate() -> [String] {
        (0..<Self.count).map { _ in
            var chars: [Character] = []
            while chars.count < 12 {
                for b in runtime.random(24) where b < 248 && chars.count < 12 { chars.append(Self.alphabet[Int(b) % 31]) }
            }
            let s = String(chars)
            return [s.prefix(4), s.dropFirst(4).prefix(4), s.suffix(4)].joined(separator: "-")
        }
    }

    /// Lower-cased, dashes and spaces dropped.
    static func canonical(_ code: String) -> String { code.lowercased().filter { $0 != "-" && $0 != " " } }

    func hash(_ code: String, userId: String) throws(ServiceError) -> [UInt8] {
        HMAC.sha256(key: try secret.value(), data: Array("recovery-code:\(userId):\(Self.canonical(code))".utf8))
    }
}
