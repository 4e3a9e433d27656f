import Tokens
import Foundation
import Crypto
import JSON
import Storage
import WebAuthn

/// Passkey ceremonies (SPEC "HTTP contract") and the user's passkey list. Stateless: a
/// registration's state is sealed into its challenge (`SealedRegistration`), a sign-in's likewise
/// (`SealedAuthentication`), so any instance can finish what another began and options write nothing.
public final class PasskeyService: Sendable {
    let accounts: AccountRepository
    let challenges: ChallengeRepository
    /// A sign-in's one read and one write.
    let logins: LoginRepository
    /// The ceremony-sealing key sign-in and registration challenges are sealed under.
    let seal: CeremonySeal
    let sessions: SessionService
    let assertion: PasskeyAssertion
    let origins: OriginCache
    let metrics: Metrics
    let metadata: MetadataStore
    /// The relying party the ceremonies are bound to (its rpId is taken from here alone).
    let relyingParty: RelyingParty
    let configuration: Configuration
    let runtime: Runtime
    let decoySecret: DeploymentSecret
    let events: OutboxEvents
    /// The recovery feature's part in passkeys: notices' address, what completing a recovery writes (SPEC "Recovery").
    let recovery: any AccountRecovery
    /// The owner hears of every passkey added or revoked (SPEC "Assurance").
    let mail: MailService
    let registration: RegistrationCeremony
    let authentication: AuthenticationCeremony
    /// The deployment's verification policy, built once; each ceremony copies it with the current allowlist.
    let policyTemplate: VerificationPolicy

    /// What the options offer (SPEC: −7, −8, −257 at least); verification refuses anything else.
    static let offeredAlgorithms: [COSEAlgorithm] = [.es256, .edDSA, .es384, .es512, .ps256, .rs256]
    /// The conformance profile's options offer every algorithm Latchkey verifies, RS1 included (SPEC).
    static let conformanceAlgorithms: [COSEAlgorithm] = [.es256, .edDSA, .ed25519, .es384, .es512, .ps256, .ps384, .ps512,
                                                         .rs256, .rs384, .rs512, .rs1]

    init(accounts: AccountRepository, challenges: ChallengeRepository, logins: LoginRepository, seal: CeremonySeal,
         sessions: SessionService, assertion: PasskeyAssertion,
         origins: OriginCache, metrics: Metrics, metadata: MetadataStore, decoySecret: DeploymentSecret, events: OutboxEvents,
         recovery: any AccountRecovery, mail: MailService, relyingParty: RelyingParty, configuration: Configuration, runtime: Runtime) {
        self.relyingParty = relyingParty
        self.mail = mail
        self.events = events
        self.recovery = recovery
        self.accounts = accounts
        self.challenges = challenges
        self.logins = logins
        self.seal = seal
        self.sessions = sessions
        self.assertion = assertion
        self.origins = origins
        self.metrics = metrics
        self.metadata = metadata
        self.decoySecret = decoySecret
        self.configuration = configuration
        self.runtime = runtime
        registration = RegistrationCeremony(
            rp: relyingParty.entity, algorithms: Self.offeredAlgorithms,
            userVerification: configuration.userVerification, attestation: configuration.attestation,
            timeoutSeconds: configuration.challengeTTL, hints: configuration.hints, environment: runtime.ceremonies)
        authentication = AuthenticationCeremony(rpId: relyingParty.id, userVerification: configuration.userVerification,
                                                timeoutSeconds: configuration.challengeTTL, hints: configuration.hints,
                                                environment: runtime.ceremonies)
        policyTemplate = CeremonyRules.verificationPolicy(configuration)
    }

    /// The policy for one ceremony: the template with the allowlist and the metadata as they are now.
    /// `conformance`: a ceremony of the conformance profile's endpoints, where (only) an assertion's
    /// UP flag may be clear.
    func currentPolicy(conformance: Bool = false) -> VerificationPolicy {
        var p = policyTemplate
        p.origins = origins.policy()
        p.metadata = metadata.policy()
        p.acceptAssertionsWithoutUserPresence = conformance && configuration.conformance
        return p
    }

    /// A passkey's provider name: the metadata statement's `description` when the BLOB in use has
    /// one for its AAGUID, else the community AAGUID table's name.
    /// `formatted`: `formatUUID(aaguid)` when the caller has it already.
    func providerName(aaguid: [UInt8], formatted: String? = nil) -> String? {
        metadata.description(aaguid: aaguid) ?? PasskeyProviders.name(aaguid: formatted ?? formatUUID(aaguid))
    }

    // MARK: Shared

    /// Counts each ceremony's outcome ("ok" or the error code) in /metrics.
    func observed<Answer>(_ ceremony: String, _ body: () throws(ServiceError) -> Answer) throws(ServiceError) -> Answer {
        do {
            let result = try body()
            metrics.observeCeremony(ceremony, outcome: "ok")
            return result
        } catch {
            metrics.observeCeremony(ceremony, outcome: error.code.rawValue)
            throw error
        }
    }

    /// A passkey as it is shown now: its provider's name, and the end of its hold while it lasts.
    func shown(_ c: CredentialRecord) -> ShownPasskey {
        let aaguid = formatUUID(c.aaguid)
        let held = c.approvesFrom.flatMap { $0 > runtime.now() ? $0 : nil }
        return ShownPasskey(record: c, aaguid: aaguid, provider: providerName(aaguid: c.aaguid, formatted: aaguid), heldUntil: held)
    }

    /// The Signal API's lists for `user` with these live credentials (SPEC "Signal API").
    func signals(user: UserRecord, credentialIds: [[UInt8]]) -> PasskeySignals {
        PasskeySignals(rpId: relyingParty.id, user: user, credentialIds: credentialIds)
    }

    /// The answer to a finished passkey ceremony, registration or login (SPEC: `user`, `passkey`,
    /// `tokens`, `signals`), rendered once as bytes (`PasskeyRenderer.signedIn`): it is the body of every login.
    struct SignedIn {
        let userId: String
        let body: [UInt8]

        /// The same answer as a tree (the conformance profile picks members out of it).
        var json: JSONValue { JSONObjectWriter.tree(of: body) }
    }

    func signedIn(user: UserRecord, passkey: CredentialRecord, tokens: SessionService.Issued, accepted: [[UInt8]]) -> SignedIn {
        SignedIn(userId: user.id, body: PasskeyRenderer.signedIn(user: user, passkey: shown(passkey), tokens: tokens,
                                                                 signals: signals(user: user, credentialIds: accepted)))
    }
}

/// A passkey as the service shows it (SPEC's passkey shape): the stored record, its AAGUID as text,
/// its provider's name (metadata statement or AAGUID table) and, while held, when its hold ends.
struct ShownPasskey: Sendable {
    let record: CredentialRecord
    let aaguid: String
    let provider: String?
    let heldUntil: Date?
}

/// The Signal API's lists for one account (SPEC "Signal API"): its live credential ids and current names.
struct PasskeySignals: Sendable {
    let rpId: String
    let user: UserRecord
    let credentialIds: [[UInt8]]
}

/// `GET /v1/passkeys`: the account's live passkeys and their Signal API lists.
struct PasskeyList: Sendable {
    let passkeys: [ShownPasskey]
    let signals: PasskeySignals
}

/// A renamed passkey and the account's lists after it (the new name reaches the provider).
struct RenamedPasskey: Sendable {
    let passkey: ShownPasskey
    let signals: PasskeySignals
}
