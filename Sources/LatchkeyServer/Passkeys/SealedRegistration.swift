import Foundation
import WebAuthn

/// A passkey registration's ceremony state as its challenge carries it, sealed (`CeremonySeal`):
/// the options write nothing, and the verify's one statement records the challenge's `id` as used
/// (SPEC "Rules that must hold" → Challenges) together with the passkey — or alone, when the verify
/// fails. A ticket or step-up the options request presented travels here (checked then, used up by
/// that statement). Only what the verify cannot read again is sealed: an existing account's user
/// entity comes from the verify's read, a new account's (which exists nowhere else) is sealed.
///
///     kind (1: 2 = registration) ‖ user verification (1: 0 required, 1 preferred, 2 discouraged)
///     ‖ purpose (1: 0 sign-up, 1 add, 2 held, 3 recovery) ‖ flags (1: bit 0 conditional create,
///     bit 1 the conformance profile's algorithms, bit 2 a ticket, bit 3 a step-up, bit 4 a display
///     name other than the username) ‖ expiry (8: Unix milliseconds, big endian)
///     ‖ random (32: the id is its first 16)
///     ‖ [sign-up] user handle (32) ‖ [ticket] ticket hash (32) ‖ [step-up] action hash (32)
///     ‖ account ‖ [recovery] recovery id ‖ [step-up] jti ‖ [sign-up] username ‖ [bit 4] display name
///
/// each string as a 2-byte big-endian length and its UTF-8. One kind byte apart from a sign-in's
/// (`SealedAuthentication`), so neither ceremony's challenge opens as the other's.
struct SealedRegistration: Equatable {
    static let registrationKind: UInt8 = 2
    static let fixedLength = 4 + 8 + 32
    /// The longest plaintext (a new account with the longest names: 64 characters of up to 4
    /// bytes each, SPEC's name rule) is about 640 bytes; nothing longer is sealed or opened.
    static let maxPlaintextLength = 768

    /// A new account's user entity: it exists only here until the verify creates it.
    struct NewAccount: Equatable {
        var userHandle: [UInt8]
        var username: String
        var displayName: String
    }

    /// The `latchkey.passkey.add` step-up the options request presented (its user is the account).
    struct StepUp: Equatable {
        var jti: String
        var actionHash: [UInt8]
    }

    var userVerification: VerificationPolicy.UserVerification
    var purpose: RegistrationPurpose
    var conditional: Bool
    /// The options offered the conformance profile's algorithms (else the deployment's).
    var conformanceAlgorithms: Bool
    var account: String
    var newAccount: NewAccount?
    var ticketHash: [UInt8]?
    var stepUp: StepUp?
    var expiresAt: Date
    /// 32 bytes from the CSPRNG: the challenge's entropy beside the seal's nonce, and its id.
    var random: [UInt8]

    /// What `used_challenges` records.
    var id: [UInt8] { Array(random.prefix(16)) }

    static let verificationCodes: [VerificationPolicy.UserVerification] = [.required, .preferred, .discouraged]

    /// The plaintext; nil when something does not fit the layout.
    func plaintext() -> [UInt8]? {
        guard let uv = Self.verificationCodes.firstIndex(of: userVerification), random.count == 32,
              (newAccount != nil) == (purpose == .signUp), newAccount.map({ $0.userHandle.count == 32 }) ?? true,
              ticketHash.map({ $0.count == 32 }) ?? true, stepUp.map({ $0.actionHash.count == 32 }) ?? true else { return nil }
        let purposeCode: UInt8
        var strings = [account]
        switch purpose {
        case .signUp: purposeCode = 0
        case .addToAccount: purposeCode = 1
        case .held: purposeCode = 2
        case .recovery(let id):
            purposeCode = 3
            strings.append(id)
        }
        let separateDisplayName = newAccount.map { $0.displayName != $0.username } ?? false
        let flags: UInt8 = (conditional ? 1 : 0) | (conformanceAlgorithms ? 2 : 0) | (ticketHash != nil ? 4 : 0) | (stepUp != nil ? 8 : 0)
            | (separateDisplayName ? 16 : 0)
        var out: [UInt8] = [Self.registrationKind, UInt8(uv), purposeCode, flags]
        let millis = UInt64(max(0, (expiresAt.timeIntervalSince1970 * 1000).rounded()))
        withUnsafeBytes(of: millis.bigEndian) { out.append(contentsOf: $0) }
        out += random
        if let newAccount { out += newAccount.userHandle }
        if let ticketHash { out += ticketHash }
        if let stepUp {
            out += stepUp.actionHash
            strings.append(stepUp.jti)
        }
        if let newAccount {
            strings.append(newAccount.username)
            if separateDisplayName { strings.append(newAccount.displayName) }
        }
        for s in strings {
            let bytes = Array(s.utf8)
            guard bytes.count <= Int(UInt16.max) else { return nil }
            out += [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes
        }
        return out.count <= Self.maxPlaintextLength ? out : nil
    }

    /// Reads what `plaintext()` wrote; a plaintext of another kind or layout → `challenge_invalid`.
    init(plaintext p: [UInt8]) throws(ServiceError) {
        let unknown = ServiceError(.challengeInvalid, "unknown challenge")
        guard p.count >= Self.fixedLength, p.count <= Self.maxPlaintextLength else { throw unknown }
        guard p[0] == Self.registrationKind else { throw ServiceError(.challengeInvalid, "challenge belongs to another ceremony") }
        let flags = p[3]
        guard Int(p[1]) < Self.verificationCodes.count, p[2] <= 3, flags & ~31 == 0 else { throw unknown }
        userVerification = Self.verificationCodes[Int(p[1])]
        conditional = flags & 1 != 0
        conformanceAlgorithms = flags & 2 != 0
        var millis: UInt64 = 0
        for byte in p[4..<12] { millis = millis << 8 | UInt64(byte) }
        expiresAt = Date(timeIntervalSince1970: Double(millis) / 1000)
        random = Array(p[12..<44])
        var at = Self.fixedLength
        func bytes(_ n: Int) throws(ServiceError) -> [UInt8] {
            guard p.count - at >= n else { throw unknown }
            defer { at += n }
            return Array(p[at..<(at + n)])
        }
        func string() throws(ServiceError) -> String {
            let length = try bytes(2)
            guard let s = String(validating: try bytes(Int(length[0]) << 8 | Int(length[1])), as: UTF8.self) else { throw unknown }
            return s
        }
        let userHandle = p[2] == 0 ? try bytes(32) : nil
        ticketHash = flags & 4 != 0 ? try bytes(32) : nil
        let actionHash = flags & 8 != 0 ? try bytes(32) : nil
        account = try string()
        switch p[2] {
        case 0: purpose = .signUp
        case 1: purpose = .addToAccount
        case 2: purpose = .held
        default: purpose = .recovery(id: try string())
        }
        stepUp = try actionHash.map { hash throws(ServiceError) in StepUp(jti: try string(), actionHash: hash) }
        if let userHandle {
            let username = try string()
            newAccount = NewAccount(userHandle: userHandle, username: username, displayName: flags & 16 != 0 ? try string() : username)
        } else {
            guard flags & 16 == 0 else { throw unknown }
            newAccount = nil
        }
        guard at == p.count else { throw unknown }
    }

    init(userVerification: VerificationPolicy.UserVerification, purpose: RegistrationPurpose, conditional: Bool, conformanceAlgorithms: Bool,
         account: String, newAccount: NewAccount?, ticketHash: [UInt8]?, stepUp: StepUp?, expiresAt: Date, random: [UInt8]) {
        self.userVerification = userVerification
        self.purpose = purpose
        self.conditional = conditional
        self.conformanceAlgorithms = conformanceAlgorithms
        self.account = account
        self.newAccount = newAccount
        self.ticketHash = ticketHash
        self.stepUp = stepUp
        self.expiresAt = expiresAt
        self.random = random
    }
}
