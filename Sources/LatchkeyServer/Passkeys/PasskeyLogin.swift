import Foundation
import JSON
import Storage
import WebAuthn

/// Passkey sign-in (SPEC "HTTP contract"), with exactly the collaborators it needs: its store
/// (`LoginStore`), the ceremony-sealing key, sessions, the assertion's checks, the origin
/// allowlist, the metadata in use and the decoy secret. `PasskeyService` holds one and hands its
/// sign-in to it; the service tests build one over in-memory stores.
final class PasskeyLogin: Sendable {
    /// A sign-in's one read and one write.
    let logins: any LoginStore
    /// The ceremony-sealing key sign-in challenges are sealed under.
    let seal: CeremonySeal
    let sessions: SessionService
    let assertion: PasskeyAssertion
    let origins: any OriginAllowlist
    let metadata: any PasskeyMetadata
    let metrics: Metrics
    let decoySecret: DeploymentSecret
    /// The relying party the ceremony is bound to (its rpId is taken from here alone).
    let relyingParty: RelyingParty
    let policy: CeremonyPolicy
    let runtime: Runtime
    let authentication: AuthenticationCeremony
    /// The deployment's verification policy, built once; each ceremony copies it with the current allowlist.
    let policyTemplate: VerificationPolicy

    init(logins: any LoginStore, seal: CeremonySeal, sessions: SessionService, assertion: PasskeyAssertion, origins: any OriginAllowlist,
         metadata: any PasskeyMetadata, metrics: Metrics, decoySecret: DeploymentSecret, relyingParty: RelyingParty,
         policy: CeremonyPolicy, runtime: Runtime) {
        self.logins = logins
        self.seal = seal
        self.sessions = sessions
        self.assertion = assertion
        self.origins = origins
        self.metadata = metadata
        self.metrics = metrics
        self.decoySecret = decoySecret
        self.relyingParty = relyingParty
        self.policy = policy
        self.runtime = runtime
        authentication = AuthenticationCeremony(rpId: relyingParty.id, userVerification: policy.userVerification,
                                                timeoutSeconds: policy.challengeTTL, hints: policy.hints,
                                                environment: runtime.ceremonies)
        policyTemplate = policy.verification(rpId: relyingParty.id)
    }

    /// The policy for one ceremony: the template with the allowlist and the metadata as they are now.
    /// `conformance`: a ceremony of the conformance profile's endpoints, where (only) an assertion's
    /// UP flag may be clear.
    func currentPolicy(conformance: Bool = false) -> VerificationPolicy {
        var p = policyTemplate
        p.origins = origins.policy()
        p.metadata = metadata.policy()
        p.acceptAssertionsWithoutUserPresence = conformance && policy.conformance
        return p
    }

    /// A requested user verification never weakens a deployment that requires it.
    func userVerification(_ asked: VerificationPolicy.UserVerification?) -> VerificationPolicy.UserVerification? {
        policy.userVerification == .required ? .required : asked
    }

    /// A passkey's provider name: the metadata statement's `description` when the BLOB in use has
    /// one for its AAGUID, else the community AAGUID table's name.
    /// `formatted`: `formatUUID(aaguid)` when the caller has it already.
    func providerName(aaguid: [UInt8], formatted: String? = nil) -> String? {
        metadata.description(aaguid: aaguid) ?? PasskeyProviders.name(aaguid: formatted ?? formatUUID(aaguid))
    }

    /// A passkey's provider icons: the metadata statement's `icon` (one image for both themes) when
    /// the BLOB in use has one, else the community table's light and dark ones.
    func providerIcon(aaguid: [UInt8], formatted: String? = nil) -> ProviderIconPair? {
        metadata.icon(aaguid: aaguid).map(ProviderIconPair.init(both:)) ?? PasskeyProviders.icon(aaguid: formatted ?? formatUUID(aaguid))
    }

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
        return ShownPasskey(record: c, aaguid: aaguid, provider: providerName(aaguid: c.aaguid, formatted: aaguid),
                            hasIcon: providerIcon(aaguid: c.aaguid, formatted: aaguid) != nil, heldUntil: held)
    }

    /// The Signal API's lists for `user` with these live credentials (SPEC "Signal API").
    func signals(user: UserRecord, credentialIds: [[UInt8]]) -> PasskeySignals {
        PasskeySignals(rpId: relyingParty.id, user: user, credentialIds: credentialIds)
    }

    func signedIn(user: UserRecord, passkey: CredentialRecord, tokens: SessionService.Issued, accepted: [[UInt8]]) -> PasskeyService.SignedIn {
        PasskeyService.SignedIn(user: user, passkey: shown(passkey), tokens: tokens, signals: signals(user: user, credentialIds: accepted))
    }
}
