import Crypto
import Foundation
import JSON
import Storage
import WebAuthn

/// The passkey resources as JSON (SPEC "HTTP contract", "Signal API"): pure functions from the
/// values `PasskeyService` returns. The routes, the admin console's users page and a login's
/// answer render passkeys here and nowhere else.
enum PasskeyRenderer {
    /// SPEC's passkey shape.
    static func passkey(_ p: ShownPasskey) -> JSONValue { JSONObjectWriter.value(capacity: 320) { writePasskey(p, into: &$0) } }

    /// `passkey`'s members, written into an object (the one definition of the shape).
    static func writePasskey(_ p: ShownPasskey, into writer: inout JSONObjectWriter) {
        let c = p.record
        // SPEC "Assurance": a held passkey signs in but approves nothing until `heldUntil` (shown only while held).
        if let held = p.heldUntil { writer.member("heldUntil", string: iso8601(held)) }
        writer.member("id", string: Base64URL.encode(c.id))
        writer.member("name", string: c.name)
        writer.member("provider", optionalString: p.provider)
        // SPEC "Portability": the provider's icons, served by `GET /v1/providers/{aaguid}/icon`.
        if p.hasIcon {
            writer.member("providerIcon") { icon in
                icon.member("light", string: iconPath(aaguid: p.aaguid, theme: "light"))
                icon.member("dark", string: iconPath(aaguid: p.aaguid, theme: "dark"))
            }
        } else {
            writer.member("providerIcon", value: .null)
        }
        writer.member("aaguid", string: p.aaguid)
        writer.member("createdAt", string: iso8601(c.createdAt))
        writer.member("lastUsedAt", optionalString: c.lastUsedAt.map(iso8601))
        writer.member("backupEligible", bool: c.backupEligible)
        writer.member("backedUp", bool: c.backedUp)
        writer.member("transports", strings: c.transports)
        writer.member("flagged", bool: c.flagged)
        // SPEC "Portability": the passkey can open the account's vault (PRF).
        writer.member("prfEnabled", bool: c.prfEnabled)
    }

    /// Where a provider's icon is served, relative to the server's base URL.
    static func iconPath(aaguid: String, theme: String) -> String { "/v1/providers/\(aaguid)/icon?theme=\(theme)" }

    /// `GET /v1/passkeys`: `{"passkeys":[…],"signals":[…]}`.
    static func list(_ l: PasskeyList) -> JSONValue {
        .object([("passkeys", .array(l.passkeys.map(passkey))), ("signals", signals(l.signals))])
    }

    /// `PATCH /v1/passkeys/{id}`: the renamed passkey with `signals` (the new name reaches the provider).
    static func renamed(_ r: RenamedPasskey) -> JSONValue {
        guard case .object(let members) = passkey(r.passkey) else { return passkey(r.passkey) }
        return .object(members + [("signals", signals(r.signals))])
    }

    /// `DELETE /v1/passkeys/{id}`: `{"signals":[…]}` with the credentials that remain.
    static func remaining(_ s: PasskeySignals) -> JSONValue { .object([("signals", signals(s))]) }

    /// The registration options (`PublicKeyCredentialCreationOptionsJSON`).
    static func options(_ o: CreationOptions) -> JSONValue { o.json }

    /// The sign-in options (`PublicKeyCredentialRequestOptionsJSON`).
    static func options(_ o: RequestOptions) -> JSONValue { o.json }

    /// The answer to a finished passkey ceremony, registration or login (SPEC: `user`, `passkey`,
    /// `tokens`, `signals`), written without a JSON tree: it is the body of every login.
    static func signedIn(_ s: PasskeyService.SignedIn) -> [UInt8] {
        var writer = JSONObjectWriter(capacity: 1024 + s.tokens.accessToken.utf8.count + 48 * s.signals.credentialIds.count)
        writer.member("user") { s.user.write(into: &$0) }
        writer.member("passkey") { writePasskey(s.passkey, into: &$0) }
        writer.member("tokens") { SessionRenderer.writeTokens(s.tokens, into: &$0) }
        writeSignals(as: "signals", s.signals, into: &writer)
        return writer.finish()
    }

    // MARK: The Signal API

    // The payloads (WebAuthn L3 §5.1.10) the client hands to `PublicKeyCredential.signalUnknownCredential`
    // / `signalAllAcceptedCredentials` / `signalCurrentUserDetails`, so the user's passkey provider drops
    // or relabels what the server no longer accepts. `userId` is the WebAuthn user handle (base64url),
    // never the account id.

    /// For a login that failed only because the credential id is unknown or revoked.
    static func unknownCredential(rpId: String, credentialId: [UInt8]) -> JSONValue {
        .object([("method", "signalUnknownCredential"),
                 ("options", .object([("rpId", .string(rpId)), ("credentialId", .string(Base64URL.encode(credentialId)))]))])
    }

    /// `"signals"`: the account's live credential ids, and its current names.
    static func signals(_ s: PasskeySignals) -> JSONValue {
        // The writer writes members of an object: this one's only member is the array.
        JSONObjectWriter.value(capacity: 256 + 48 * s.credentialIds.count) { writeSignals(as: "signals", s, into: &$0) }["signals"]
            ?? .array([])
    }

    /// `signals` as member `key` of `writer`'s object (the one definition of the shape).
    static func writeSignals(as key: String, _ s: PasskeySignals, into writer: inout JSONObjectWriter) {
        let handle = Base64URL.encode(s.user.userHandle)
        writer.member(key, objects: 2) { i, signal in
            if i == 0 {
                signal.member("method", string: "signalAllAcceptedCredentials")
                signal.member("options") { options in
                    options.member("rpId", string: s.rpId)
                    options.member("userId", string: handle)
                    options.member("allAcceptedCredentialIds", strings: s.credentialIds.map(Base64URL.encode))
                }
            } else {
                signal.member("method", string: "signalCurrentUserDetails")
                signal.member("options") { options in
                    options.member("rpId", string: s.rpId)
                    options.member("userId", string: handle)
                    options.member("name", string: s.user.username)
                    options.member("displayName", string: s.user.displayName)
                }
            }
        }
    }
}

/// What a passkey refusal carries beside its problem document's five members (SPEC "Signal API",
/// "Shapes and decisions"): decided by the service, rendered here at the error edge.
enum ProblemAttachment: Sendable {
    /// `signal`: the payload for `signalUnknownCredential`, for a credential the server does not know.
    case unknownCredential(rpId: String, credentialId: [UInt8])
    /// `passkey`: the passkey an earlier try of this registration saved, whose answer was lost.
    case savedPasskey(ShownPasskey)

    var members: [(key: String, value: JSONValue)] {
        switch self {
        case .unknownCredential(let rpId, let credentialId):
            [("signal", PasskeyRenderer.unknownCredential(rpId: rpId, credentialId: credentialId))]
        case .savedPasskey(let passkey):
            [("passkey", PasskeyRenderer.passkey(passkey))]
        }
    }
}
