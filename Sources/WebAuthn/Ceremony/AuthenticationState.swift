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
}
