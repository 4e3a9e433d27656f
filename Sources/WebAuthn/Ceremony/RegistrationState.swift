import Crypto
import JSON

/// What the server keeps between `RegistrationCeremony.begin` and `finish`: everything §7.1
/// compares against, so nothing is taken from the response that the options did not set.
public struct RegistrationState: Sendable, Equatable {
    /// The challenge the options carried (§7.1 step 8).
    public let challenge: [UInt8]
    /// The RP ID the options named (§7.1 step 13).
    public let rpId: String
    /// The options' `authenticatorSelection.userVerification` (§7.1 step 15).
    public let userVerification: VerificationPolicy.UserVerification
    /// The options' `pubKeyCredParams` (§7.1 step 19).
    public let algorithms: [COSEAlgorithm]
    public let user: UserEntity
    /// The server's own account id for the user (opaque to the core).
    public let account: String?
    /// What the server began the registration for (handed back, never verified differently).
    public let purpose: RegistrationPurpose
    /// A sign-up: the account is created only when the registration verifies.
    public var isNewAccount: Bool { purpose == .signUp }
    /// The options were for `navigator.credentials.create({mediation: "conditional"})` (automatic
    /// passkey upgrade): only such a registration may arrive without UP (§7.1 step 14 relaxed).
    public let conditional: Bool

    public init(challenge: [UInt8], rpId: String, userVerification: VerificationPolicy.UserVerification,
                algorithms: [COSEAlgorithm], user: UserEntity, account: String?, purpose: RegistrationPurpose,
                conditional: Bool = false) {
        self.conditional = conditional
        self.purpose = purpose
        self.challenge = challenge
        self.rpId = rpId
        self.userVerification = userVerification
        self.algorithms = algorithms
        self.user = user
        self.account = account
    }

    static let ceremony = "registration"

    /// The one storage encoding (canonical JSON, see `CeremonyStateCoding`).
    public func encoded() -> [UInt8] {
        let (isNewAccount, binding) = purpose.stateMembers
        return CeremonyStateCoding.encode(Self.ceremony, [
            ("challenge", .string(Base64URL.encode(challenge))),
            ("rpId", .string(rpId)),
            ("userVerification", .string(userVerification.rawValue)),
            ("algorithms", .array(algorithms.map { .number(Double($0.rawValue)) })),
            ("user", .object([("id", .string(Base64URL.encode(user.id))), ("name", .string(user.name)),
                              ("displayName", .string(user.displayName))])),
            ("account", account.map { .string($0) } ?? .null),
            ("isNewAccount", .bool(isNewAccount)),
        ] + (conditional ? [("conditional", .bool(true))] : []) + (binding.map { [("binding", .string($0))] } ?? []))
    }

    /// Exactly the bytes `encoded()` wrote; anything else is `challenge_invalid`.
    public init(decoding bytes: [UInt8]) throws(WebAuthnError) {
        let state = try CeremonyStateCoding(bytes, ceremony: Self.ceremony)
        let user = try state.object("user")
        guard let purpose = RegistrationPurpose(isNewAccount: try state.bool("isNewAccount"), binding: try state.absentOrString("binding"))
        else { throw CeremonyStateCoding.unreadable }
        var algorithms: [COSEAlgorithm] = []
        for value in try state.array("algorithms") {
            guard let alg = value.intValue else { throw CeremonyStateCoding.unreadable }
            algorithms.append(COSEAlgorithm(alg))
        }
        self.init(challenge: try state.challenge("challenge"), rpId: try state.string("rpId"),
                  userVerification: try state.userVerification("userVerification"), algorithms: algorithms,
                  user: UserEntity(id: try user.bytes("id"), name: try user.string("name"), displayName: try user.string("displayName")),
                  account: try state.optionalString("account"), purpose: purpose,
                  conditional: try state.absentOrBool("conditional") ?? false)
        try CeremonyStateCoding.requireCanonical(bytes, encoded())
    }
}
