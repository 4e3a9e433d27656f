import Glibc
import Crypto
import JSON

/// What the server keeps between `AuthenticationCeremony.begin` and `finish`.
public struct AuthenticationState: Sendable, Equatable {
    /// The challenge the options carried (§7.2 step 12).
    public let challenge: [UInt8]
    /// The RP ID the options named (§7.2 step 15).
    public let rpId: String
    /// The options' `userVerification` (§7.2 step 17).
    public let userVerification: VerificationPolicy.UserVerification
    /// Username-first: the account the options were for.
    public let account: String?
    /// nil: any of the account's credentials (discoverable). Set (step-up): only these (§7.2 step 5).
    public let allowedCredentials: [[UInt8]]?

    public init(challenge: [UInt8], rpId: String, userVerification: VerificationPolicy.UserVerification, account: String?,
                allowedCredentials: [[UInt8]]?) {
        self.challenge = challenge
        self.rpId = rpId
        self.userVerification = userVerification
        self.account = account
        self.allowedCredentials = allowedCredentials
    }

    static let ceremony = "authentication"

    /// The one storage encoding (canonical JSON, see `CeremonyStateCoding`), written directly:
    /// every login encodes a state twice (the options, and the decode's canonical check), and the
    /// `JSONValue` tree cost ~15 k instructions each time. `referenceEncoding()` is the same state
    /// through `CeremonyStateCoding.encode`; a test holds the two byte-identical.
    public func encoded() -> [UInt8] {
        var writer = JSONObjectWriter(capacity: 160 + 48 * (allowedCredentials?.count ?? 0), requireCanonicalOrder: true)
        writer.member("account", optionalString: account)
        writer.member("allowedCredentials", strings: allowedCredentials.map { $0.map(Base64URL.encode) })
        writer.member("ceremony", string: Self.ceremony)
        writer.member("challenge", string: Base64URL.encode(challenge))
        writer.member("rpId", string: rpId)
        writer.member("userVerification", string: userVerification.rawValue)
        writer.member("v", integer: Int64(CeremonyStateCoding.version))
        return writer.finish()
    }

    /// The state through the generic canonical encoder (the reference for `encoded()`).
    package func referenceEncoding() -> [UInt8] {
        CeremonyStateCoding.encode(Self.ceremony, [
            ("account", account.map { .string($0) } ?? .null),
            ("allowedCredentials", allowedCredentials.map { .array($0.map { .string(Base64URL.encode($0)) }) } ?? .null),
            ("challenge", .string(Base64URL.encode(challenge))),
            ("rpId", .string(rpId)),
            ("userVerification", .string(userVerification.rawValue)),
        ])
    }

    /// Exactly the bytes `encoded()` wrote; anything else is `challenge_invalid`.
    public init(decoding bytes: [UInt8]) throws(WebAuthnError) {
        // Every login decodes one: read the fields where `encoded()` puts them, and accept only if
        // encoding what was read gives these very bytes (so nothing is accepted that the generic
        // decode below would refuse: the encoding is one-to-one). Anything else, including every
        // malformed state, takes the generic decode, which says why.
        if let state = Self.decodingInPlace(bytes), state.encoded() == bytes {
            self = state
            return
        }
        try self.init(decodingGenerically: bytes)
    }

    /// The decode through the generic state reader (the reference for the in-place read).
    package init(decodingGenerically bytes: [UInt8]) throws(WebAuthnError) {
        let state = try CeremonyStateCoding(bytes, ceremony: Self.ceremony)
        var allowed: [[UInt8]]? = nil
        if let list = try state.optionalArray("allowedCredentials") {
            var ids: [[UInt8]] = []
            for value in list { ids.append(try CeremonyStateCoding.bytes(value)) }
            allowed = ids
        }
        self.init(challenge: try state.challenge("challenge"), rpId: try state.string("rpId"),
                  userVerification: try state.userVerification("userVerification"), account: try state.optionalString("account"),
                  allowedCredentials: allowed)
        try CeremonyStateCoding.requireCanonical(bytes, encoded())
    }

    /// The fields of a state laid out as `encoded()` writes it, strings without escapes; nil for
    /// anything else (the caller then decodes generically). Checks what the generic decode checks
    /// of each value (base64url ids, a challenge of at least 16 bytes, a known userVerification).
    package static func decodingInPlace(_ bytes: [UInt8]) -> AuthenticationState? {
        bytes.withUnsafeBufferPointer { input -> AuthenticationState? in
            var i = 0
            func literal(_ text: StaticString) -> Bool {
                let n = text.utf8CodeUnitCount
                guard i + n <= input.count, memcmp(input.baseAddress! + i, text.utf8Start, n) == 0 else { return false }
                i += n
                return true
            }
            /// A string with no escape; `i` is just past its closing quote.
            func string() -> String? {
                guard i < input.count, input[i] == UInt8(ascii: "\"") else { return nil }
                let start = i + 1
                var end = start
                while end < input.count, input[end] != UInt8(ascii: "\""), input[end] != UInt8(ascii: "\\") { end += 1 }
                guard end < input.count, input[end] == UInt8(ascii: "\"") else { return nil }
                i = end + 1
                return String(decoding: UnsafeBufferPointer(rebasing: input[start..<end]), as: UTF8.self)
            }
            func optionalString() -> String?? { literal("null") ? .some(nil) : string().map { .some($0) } }

            guard literal(#"{"account":"#), let account = optionalString(), literal(#","allowedCredentials":"#) else { return nil }
            var allowed: [[UInt8]]? = nil
            if !literal("null") {
                guard literal("[") else { return nil }
                var ids: [[UInt8]] = []
                if !literal("]") {
                    repeat {
                        guard let text = string(), let id = Base64URL.decode(text) else { return nil }
                        ids.append(id)
                    } while literal(",")
                    guard literal("]") else { return nil }
                }
                allowed = ids
            }
            guard literal(#","ceremony":"authentication","challenge":"#), let challengeText = string(),
                  let challenge = Base64URL.decode(challengeText), challenge.count >= 16,
                  literal(#","rpId":"#), let rpId = string(), literal(#","userVerification":"#), let uvText = string(),
                  let userVerification = VerificationPolicy.UserVerification(rawValue: uvText), literal(#","v":1}"#),
                  i == input.count else { return nil }
            return AuthenticationState(challenge: challenge, rpId: rpId, userVerification: userVerification, account: account,
                                       allowedCredentials: allowed)
        }
    }
}
