/// What the server began a registration for. Verification is the same for every purpose; the state
/// carries it from `begin` to `finish`, so the server acts on a type rather than on a string it
/// once wrote.
public enum RegistrationPurpose: Sendable, Hashable {
    /// A new account: it exists only in the state until the registration verifies.
    case signUp
    /// Another passkey for an existing account.
    case addToAccount
    /// Another passkey for an existing account that signs in but approves nothing until a delay
    /// after its registration has passed (the server's policy decides the delay).
    case held
    /// The new passkey of an account recovery (the server's id of it): verifying it completes the recovery.
    case recovery(id: String)
}

extension RegistrationPurpose {
    /// The state's `isNewAccount` and `binding` members, spelled as states have always spelled
    /// them (`binding` absent, `"held"` or `"recovery:<id>"`), so that a state written by either
    /// side of an upgrade decodes on the other.
    var stateMembers: (isNewAccount: Bool, binding: String?) {
        switch self {
        case .signUp: (true, nil)
        case .addToAccount: (false, nil)
        case .held: (false, Self.heldBinding)
        case .recovery(let id): (false, Self.recoveryPrefix + id)
        }
    }

    /// The purpose those members spell; nil for any combination `stateMembers` never writes.
    init?(isNewAccount: Bool, binding: String?) {
        switch binding {
        case nil: self = isNewAccount ? .signUp : .addToAccount
        case Self.heldBinding? where !isNewAccount: self = .held
        case let b? where !isNewAccount && b.hasPrefix(Self.recoveryPrefix): self = .recovery(id: String(b.dropFirst(Self.recoveryPrefix.count)))
        default: return nil
        }
    }

    private static let heldBinding = "held"
    private static let recoveryPrefix = "recovery:"
}
