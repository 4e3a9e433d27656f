import Crypto
import JSON

/// SPEC "Authenticator metadata … Metadata rules in detail", applied after a format's verification
/// procedure has passed (WebAuthn L3 §7.1 steps 23-24 with trust anchors from FIDO MDS3). Check names
/// `metadata.*`; every refusal is `attestation_invalid`.
enum MetadataTrust {
    static func apply(_ policy: MetadataPolicy, format: String, result: AttestationResult,
                      credential: AuthenticatorData.AttestedCredentialData, now: Int64,
                      trace: VerificationTrace?) throws(WebAuthnError) -> MetadataMatch? {
        guard policy.isActive else { return nil }
        let aaguid = credential.aaguid
        // LATCHKEY_AUTHENTICATORS_DENY / _ALLOW narrow any registration, attested or not.
        try trace.require("metadata.denyList", !policy.deniedAAGUIDs.contains(aaguid),
                          .attestation("metadata: authenticator \(formatUUID(aaguid)) is deny-listed"))
        if let allowed = policy.allowedAAGUIDs {
            try trace.require("metadata.allowList", allowed.contains(aaguid),
                              .attestation("metadata: authenticator \(formatUUID(aaguid)) is not on the allow list"))
        }
        let attested = [.basic, .attCA, .anonCA].contains(result.type)
        let blob: MetadataBLOB
        switch policy.source {
        case .off:
            try requireCertification(policy, entry: nil, attested: false, trace: trace)
            return nil
        case .unavailable(let reason):
            // Configured but never loaded: anything but `none` is refused until a good BLOB loads.
            try trace.require("metadata.available", result.type == .none,
                              .attestation("metadata: no metadata BLOB has loaded (\(reason)); attested registrations are refused"))
            try requireCertification(policy, entry: nil, attested: false, trace: trace)
            return nil
        case .loaded(let b):
            blob = b
        }

        // The entry: by AAGUID when there is one, else (fido-u2f, older U2F-era packed) by the key
        // identifier of an attestation certificate.
        var found: (MetadataEntry, MetadataMatch.Key)? = nil
        if aaguid.contains(where: { $0 != 0 }) {
            if let e = blob.entry(aaguid: aaguid) { found = (e, .aaguid(aaguid)) }
        } else {
            for cert in result.trustPath {
                if let id = attestationKeyIdentifier(cert), let e = blob.entry(keyIdentifier: id) { found = (e, .keyIdentifier(id)); break }
            }
        }
        guard let (entry, key) = found else {
            // An attested registration must have an entry; self and none need none.
            if attested {
                try trace.fail("metadata.entry", .attestation("metadata: no metadata entry for \(describe(aaguid: aaguid, result))"))
            }
            try requireCertification(policy, entry: nil, attested: false, trace: trace)
            return nil
        }
        trace.pass("metadata.entry", entry.displayName)
        trace.decoded("metadata", .object([
            ("description", entry.statement?.description.map { .string($0) } ?? .null),
            ("matchedBy", .string({ if case .keyIdentifier(let id) = key { "attestationCertificateKeyIdentifier \(id)" } else { "aaguid" } }())),
            ("aaguid", entry.aaguid.map { .string(formatUUID($0)) } ?? .null),
            ("latestStatus", entry.latestStatus.map { .string($0.status.rawValue) } ?? .null),
            ("certification", entry.certification.map { .string($0.rawValue) } ?? .null),
        ]))

        // Status reports: the latest one must not be a refusing status.
        let latest = entry.latestStatus
        try trace.require("metadata.status", latest.map { !AuthenticatorStatus.refusing.contains($0.status) } ?? true,
                          .attestation("metadata: \(entry.displayName) has status \(latest?.status.rawValue ?? "")"))
        if result.type == .none {
            try requireCertification(policy, entry: nil, attested: false, trace: trace)
            return MetadataMatch(entry: entry, matchedBy: key, latestStatus: latest, anchor: nil)
        }
        guard let statement = entry.statement else {
            try trace.fail("metadata.statement", .attestation("metadata: the entry for \(entry.displayName) has no metadata statement"))
        }
        // attestationTypes must include the type used.
        let typeName = MetadataStatement.attestationTypeName(result.type)
        try trace.require("metadata.attestationType", statement.attestationTypes.contains(typeName),
                          .attestation("metadata: \(entry.displayName) does not list attestation type \(typeName)"))
        // authenticationAlgorithms must include the credential's algorithm (self attestation too) and
        // the attestation's own (attStmt.alg, or the certificate's for formats without one).
        let listed = statement.coseAlgorithms
        var needed = [credential.publicKey.algorithm]
        if let alg = result.algorithm, !needed.contains(alg) { needed.append(alg) }
        let missing = needed.filter { alg in !listed.contains(alg) }
        try trace.require("metadata.algorithm", missing.isEmpty,
                          .attestation("metadata: \(entry.displayName) does not list \(missing.map(\.name).joined(separator: ", "))"))

        var anchor: Certificate? = nil
        if attested, let leaf = result.trustPath.first {
            let roots = statement.attestationRootCertificates
            // A packed x5c must not carry the root itself: the anchor comes from the statement.
            if format == PackedAttestation.identifier {
                let carriesRoot = result.trustPath.contains { cert in cert.isSelfIssued || roots.contains { $0.der == cert.der } }
                try trace.require("metadata.packedRootNotInX5c", !carriesRoot,
                                  .attestation("metadata: packed x5c carries a root certificate"))
            }
            // The trust path must chain to one of the statement's roots at `now`, no certificate revoked.
            do {
                let chain = try CertificatePath.validate(leaf: leaf, intermediates: Array(result.trustPath.dropFirst()),
                                                         anchors: roots, at: now, crls: policy.crls)
                anchor = chain.last
                trace.pass("metadata.trustPath", chain.map(\.commonName).joined(separator: " → "))
            } catch {
                let tried = roots.isEmpty ? "the statement lists no attestationRootCertificates"
                    : "roots tried: " + roots.map(\.commonName).joined(separator: "; ")
                try trace.fail("metadata.trustPath",
                               .attestation("metadata: attestation does not chain to \(entry.displayName)'s roots: \(error.reason) (\(tried))"))
            }
        }
        try requireCertification(policy, entry: entry, attested: attested, trace: trace)
        return MetadataMatch(entry: entry, matchedBy: key, latestStatus: latest, anchor: anchor)
    }

    /// LATCHKEY_REQUIRE_CERTIFIED: only an attested registration whose entry is certified at the
    /// level or above passes (self and none attestation prove no model, so they cannot).
    private static func requireCertification(_ policy: MetadataPolicy, entry: MetadataEntry?, attested: Bool,
                                             trace: VerificationTrace?) throws(WebAuthnError) {
        guard let required = policy.requiredCertification else { return }
        let level = attested ? entry?.certification : nil
        try trace.require("metadata.certification", level.map { $0 >= required } ?? false,
                          .attestation("metadata: \(required.rawValue) is required; the authenticator shows \(level?.rawValue ?? "no attested certification")"))
    }

    private static func describe(aaguid: [UInt8], _ result: AttestationResult) -> String {
        if aaguid.contains(where: { $0 != 0 }) { return "AAGUID \(formatUUID(aaguid))" }
        let ids = result.trustPath.compactMap(attestationKeyIdentifier)
        return "attestation key \(ids.first ?? "?")"
    }
}
