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
    /// Registration, the passkey list, rename and revocation: their reads and their one statements.
    let store: any PasskeyStore
    /// The sign-in (options and verify), with its store and collaborators.
    let login: PasskeyLogin
    /// The ceremony-sealing key sign-in and registration challenges are sealed under.
    let seal: CeremonySeal
    let sessions: SessionService
    let assertion: PasskeyAssertion
    let origins: any OriginAllowlist
    let metrics: Metrics
    let metadata: any PasskeyMetadata
    /// The relying party the ceremonies are bound to (its rpId is taken from here alone).
    let relyingParty: RelyingParty
    let policy: CeremonyPolicy
    let runtime: Runtime
    let events: OutboxEvents
    /// The recovery feature's part in passkeys: what completing a recovery writes (SPEC "Recovery").
    let recovery: any AccountRecovery
    /// The owner hears of every passkey added or revoked (SPEC "Assurance").
    let mail: any MailComposer
    let registration: RegistrationCeremony

    /// What the options offer (SPEC: −7, −8, −257 at least); verification refuses anything else.
    static let offeredAlgorithms: [COSEAlgorithm] = [.es256, .edDSA, .es384, .es512, .ps256, .rs256]
    /// The conformance profile's options offer every algorithm Latchkey verifies, RS1 included (SPEC).
    static let conformanceAlgorithms: [COSEAlgorithm] = [.es256, .edDSA, .ed25519, .es384, .es512, .ps256, .ps384, .ps512,
                                                         .rs256, .rs384, .rs512, .rs1]

    init(store: any PasskeyStore, logins: any LoginStore, seal: CeremonySeal,
         sessions: SessionService, assertion: PasskeyAssertion,
         origins: any OriginAllowlist, metrics: Metrics, metadata: any PasskeyMetadata, decoySecret: DeploymentSecret, events: OutboxEvents,
         recovery: any AccountRecovery, mail: any MailComposer, relyingParty: RelyingParty, policy: CeremonyPolicy, runtime: Runtime) {
        self.relyingParty = relyingParty
        self.mail = mail
        self.events = events
        self.recovery = recovery
        self.store = store
        self.seal = seal
        self.sessions = sessions
        self.assertion = assertion
        self.origins = origins
        self.metrics = metrics
        self.metadata = metadata
        self.policy = policy
        self.runtime = runtime
        login = PasskeyLogin(logins: logins, seal: seal, sessions: sessions, assertion: assertion, origins: origins, metadata: metadata,
                             metrics: metrics, decoySecret: decoySecret, relyingParty: relyingParty, policy: policy, runtime: runtime)
        registration = RegistrationCeremony(
            rp: relyingParty.entity, algorithms: Self.offeredAlgorithms,
            userVerification: policy.userVerification, attestation: policy.attestation,
            timeoutSeconds: policy.challengeTTL, hints: policy.hints, environment: runtime.ceremonies)
    }

    /// The policy for one ceremony (`PasskeyLogin.currentPolicy`).
    func currentPolicy(conformance: Bool = false) -> VerificationPolicy { login.currentPolicy(conformance: conformance) }

    /// A passkey's provider name (`PasskeyLogin.providerName`).
    func providerName(aaguid: [UInt8], formatted: String? = nil) -> String? { login.providerName(aaguid: aaguid, formatted: formatted) }

    /// A provider's icons by AAGUID (`PasskeyLogin.providerIcon`).
    func providerIcon(aaguid: [UInt8]) -> ProviderIconPair? { login.providerIcon(aaguid: aaguid) }

    // MARK: Shared

    /// Counts each ceremony's outcome ("ok" or the error code) in /metrics.
    func observed<Answer>(_ ceremony: String, _ body: () throws(ServiceError) -> Answer) throws(ServiceError) -> Answer {
        try login.observed(ceremony, body)
    }

    /// A passkey as it is shown now: its provider's name, and the end of its hold while it lasts.
    func shown(_ c: CredentialRecord) -> ShownPasskey { login.shown(c) }

    /// The Signal API's lists for `user` with these live credentials (SPEC "Signal API").
    func signals(user: UserRecord, credentialIds: [[UInt8]]) -> PasskeySignals { login.signals(user: user, credentialIds: credentialIds) }

    // MARK: Sign-in (`PasskeyLogin`)

    func authenticationOptions(username: String?, userVerification asked: VerificationPolicy.UserVerification? = nil,
                               extensions: JSONValue? = nil) throws(ServiceError) -> RequestOptions {
        try login.authenticationOptions(username: username, userVerification: asked, extensions: extensions)
    }

    func authenticationOptions(boundTo context: [UInt8]) throws(ServiceError) -> RequestOptions {
        try login.authenticationOptions(boundTo: context)
    }

    /// `dpop`: the request's DPoP proof, which binds the session (SPEC "Sender-constrained tokens").
    func verifyAuthentication(_ body: [UInt8], conformance: Bool = false, language: String? = nil,
                              dpop: DPoPBinding? = nil) throws(ServiceError) -> SignedIn {
        try login.verifyAuthentication(body, conformance: conformance, language: language, dpop: dpop)
    }

    func checkedLogin(_ body: [UInt8], conformance: Bool, boundTo context: [UInt8]?,
                      write: (CheckedLogin) throws(ServiceError) -> LoginWrite) throws(ServiceError) -> (CheckedLogin, LoginWritten) {
        try login.checkedLogin(body, conformance: conformance, boundTo: context, write: write)
    }

    /// The username-first options and the verify from a task on an event loop, over its store.
    func authenticationOptions(username: String?, over store: some LoopLoginStore) async throws(ServiceError) -> RequestOptions {
        try await login.authenticationOptions(username: username, over: store)
    }

    func verifyAuthentication(_ body: [UInt8], language: String?, dpop: DPoPBinding?,
                              over store: some LoopLoginStore) async throws(ServiceError) -> SignedIn {
        try await login.verifyAuthentication(body, language: language, dpop: dpop, over: store)
    }

    /// When a challenge sealed now expires (LATCHKEY_CHALLENGE_TTL).
    func challengeExpiry() -> Date { login.challengeExpiry() }

    /// A finished passkey ceremony, registration or login (SPEC: `user`, `passkey`, `tokens`,
    /// `signals`), which the route renders (`PasskeyRenderer.signedIn`).
    struct SignedIn: Sendable {
        let user: UserRecord
        let passkey: ShownPasskey
        let tokens: SessionService.Issued
        let signals: PasskeySignals

        var userId: String { user.id }
    }

    func signedIn(user: UserRecord, passkey: CredentialRecord, tokens: SessionService.Issued, accepted: [[UInt8]]) -> SignedIn {
        login.signedIn(user: user, passkey: passkey, tokens: tokens, accepted: accepted)
    }
}

/// A passkey as the service shows it (SPEC's passkey shape): the stored record, its AAGUID as text,
/// its provider's name (metadata statement or AAGUID table), whether an icon is known for it
/// (`providerIcon`) and, while held, when its hold ends.
struct ShownPasskey: Sendable {
    let record: CredentialRecord
    let aaguid: String
    let provider: String?
    /// `GET /v1/providers/{aaguid}/icon` serves this passkey's provider's icons.
    let hasIcon: Bool
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
