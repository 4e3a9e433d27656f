import Crypto
import Foundation
import WebAuthn

/// A passkey sign-in's ceremony state as its challenge carries it, sealed (`CeremonySeal`): the
/// options write nothing, and the verify's one statement records the challenge's `id` as used
/// (SPEC "Rules that must hold" → Challenges). One layout and length for every sign-in: username-
/// first options for an unknown username seal a random user id where a known one seals the
/// account's, so the challenge says nothing about whether the account exists.
///
///     kind (1: 1 = authentication) ‖ user verification (1: 0 required, 1 preferred, 2 discouraged)
///     ‖ flags (1: bit 0 an account, bit 1 a bound context) ‖ expiry (8: Unix milliseconds, big endian)
///     ‖ context (16: the first 16 bytes of SHA-256 of the bound context, else zero)
///     ‖ random (32: the id is its first 16) ‖ account length (1) ‖ account (47, UTF-8, zero padded)
struct SealedAuthentication: Equatable {
    static let plaintextLength = 1 + 1 + 1 + 8 + 16 + 32 + 1 + maxAccountLength
    static let maxAccountLength = 47
    /// The challenge's length: the sealed plaintext and `CeremonySeal`'s overhead.
    static let challengeLength = plaintextLength + CeremonySeal.overhead
    static let authenticationKind: UInt8 = 1

    var userVerification: VerificationPolicy.UserVerification
    /// Username-first: the account the options were for (a random id for an unknown username).
    var account: String?
    /// A sign-in bound to a context (the OP's request, `authenticationOptions(boundTo:)`): its digest.
    var context: [UInt8]?
    var expiresAt: Date
    /// 32 bytes from the CSPRNG: the challenge's entropy beside the seal's nonce, and its id.
    var random: [UInt8]

    /// What `used_challenges` records.
    var id: [UInt8] { Array(random.prefix(16)) }

    static func contextDigest(_ context: [UInt8]) -> [UInt8] { Array(Digest.sha256(context).prefix(16)) }

    static let verificationCodes: [VerificationPolicy.UserVerification] = [.required, .preferred, .discouraged]

    /// The plaintext; nil when the account id does not fit (ids are 22 characters today).
    func plaintext() -> [UInt8]? {
        let accountBytes = Array((account ?? "").utf8)
        guard accountBytes.count <= Self.maxAccountLength, random.count == 32, context.map({ $0.count == 16 }) ?? true,
              let uv = Self.verificationCodes.firstIndex(of: userVerification) else { return nil }
        var out: [UInt8] = [Self.authenticationKind, UInt8(uv), (account == nil ? 0 : 1) | (context == nil ? 0 : 2)]
        out.reserveCapacity(Self.plaintextLength)
        let millis = UInt64(max(0, (expiresAt.timeIntervalSince1970 * 1000).rounded()))
        withUnsafeBytes(of: millis.bigEndian) { out.append(contentsOf: $0) }
        out += context ?? [UInt8](repeating: 0, count: 16)
        out += random
        out.append(UInt8(accountBytes.count))
        out += accountBytes + [UInt8](repeating: 0, count: Self.maxAccountLength - accountBytes.count)
        return out
    }

    /// Reads what `plaintext()` wrote; a plaintext of another kind → `challenge_invalid`.
    init(plaintext p: [UInt8]) throws(ServiceError) {
        guard p.count == Self.plaintextLength else { throw ServiceError(.challengeInvalid, "unknown challenge") }
        guard p[0] == Self.authenticationKind else { throw ServiceError(.challengeInvalid, "challenge belongs to another ceremony") }
        guard Int(p[1]) < Self.verificationCodes.count, p[2] & ~3 == 0, Int(p[59]) <= Self.maxAccountLength else {
            throw ServiceError(.challengeInvalid, "unknown challenge")
        }
        userVerification = Self.verificationCodes[Int(p[1])]
        var millis: UInt64 = 0
        for byte in p[3..<11] { millis = millis << 8 | UInt64(byte) }
        expiresAt = Date(timeIntervalSince1970: Double(millis) / 1000)
        context = p[2] & 2 != 0 ? Array(p[11..<27]) : nil
        random = Array(p[27..<59])
        let length = Int(p[59])
        account = p[2] & 1 != 0 ? String(decoding: p[60..<(60 + length)], as: UTF8.self) : nil
    }

    init(userVerification: VerificationPolicy.UserVerification, account: String?, context: [UInt8]?, expiresAt: Date, random: [UInt8]) {
        self.userVerification = userVerification
        self.account = account
        self.context = context
        self.expiresAt = expiresAt
        self.random = random
    }
}
