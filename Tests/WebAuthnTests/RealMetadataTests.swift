import Crypto
import JSON
import Testing
import WebAuthn
import WebAuthnTesting

/// Issue 15 point 5: a BLOB built from the real roots the shared vectors carry (`trustAnchors`),
/// signed by the test MDS, and every registration vector run again with that metadata on.
enum RealMetadata {
    /// Vectors whose attestation chains to real roots they name, and that Latchkey verifies without
    /// metadata (its own outcome: rs-androidkey-software-keystore is `ok` only under a lax rawId rule).
    static let anchored: [Vector] = Vector.registrations.filter { v in
        !(v.json["trustAnchors"]?.arrayValue ?? []).isEmpty && !v.usesMLDSA && Vector.knownDisagreements[v.id] == nil
            && verified(v).verified
    }

    static func verified(_ v: Vector, metadata: MetadataPolicy = .off) -> Inspection.Report {
        var o = v.options
        o.metadata = metadata
        return Inspection.run(v.responseBytes, options: o)
    }

    /// One statement per AAGUID (or attestation key identifier for zero AAGUIDs), listing the
    /// vector's real roots, its credential and attestation algorithms and its attestation type.
    static let blob: MetadataBLOB = {
        var entries: [String: TestMetadataEntry] = [:]
        var order: [String] = []
        for v in anchored {
            guard let parsed = try? ParsedRegistration(bytes: v.responseBytes),
                  let verified = try? RegistrationVerifier.verify(parsed, expectedChallenge: v.options.challenge, policy: policy(v)) else {
                continue
            }
            let roots = (v.json["trustAnchors"]?.arrayValue ?? []).flatMap { (try? Certificate.parsePEM($0.stringValue ?? "")) ?? [] }
            var algorithms = [verified.algorithm]
            if let a = v.json["attStmtAlg"]?.intValue { algorithms.append(COSEAlgorithm(a)) }
            let zero = !verified.aaguid.contains { $0 != 0 }
            let keyId = zero ? verified.trustPath.first.flatMap(attestationKeyIdentifier) : nil
            let key = keyId ?? formatUUID(verified.aaguid)
            var e = entries[key] ?? TestMetadataEntry(aaguid: zero ? nil : verified.aaguid, description: "Real vector \(v.id)", roots: [],
                                                      algorithms: [], attestationTypes: [])
            if let keyId { e.attestationCertificateKeyIdentifiers = [keyId]; e.protocolFamily = "u2f" }
            e.attestationRootCertificates += roots.filter { r in !e.attestationRootCertificates.contains { $0.der == r.der } }
            for name in algorithms.compactMap(MetadataStatement.algorithmName) where !e.authenticationAlgorithms.contains(name) {
                e.authenticationAlgorithms.append(name)
            }
            let type = MetadataStatement.attestationTypeName(verified.attestationType)
            if !e.attestationTypes.contains(type) { e.attestationTypes.append(type) }
            if entries[key] == nil { order.append(key) }
            entries[key] = e
        }
        let builder = MetadataBLOBBuilder(entries: order.compactMap { entries[$0] })
        let mds = MetadataFixture.mds
        return try! MetadataBLOB.verify(bytes: mds.blob(builder), roots: [mds.root.certificate], at: VerificationPolicy.systemClock())
    }()

    /// The same configuration as `Vector.options`, as a VerificationPolicy.
    static func policy(_ v: Vector) -> VerificationPolicy {
        let o = v.options
        var p = VerificationPolicy(rpId: o.rpId, origins: OriginPolicy(o.origins, allowSubdomains: o.allowSubdomainOrigins))
        if let at = o.at { p.clock = { at } }
        p.trustAnchors = o.trustAnchors
        p.userVerification = o.requireUserVerification ? .required : .preferred
        p.allowedAlgorithms = o.algorithms.isEmpty ? Inspection.implementedAlgorithms : o.algorithms
        if o.allowCrossOrigin { p.crossOrigin = .allow(topOrigins: o.topOrigins.isEmpty ? nil : Set(o.topOrigins)) }
        p.appId = o.appId
        return p
    }

    static func failingCheck(_ report: Inspection.Report) -> String? {
        report.json["checks"]?.arrayValue?.last { $0["passed"]?.boolValue == false }?["check"]?.stringValue
    }
}

@Suite struct RealMetadataTests {
    @Test func theBLOBHoldsAStatementForEveryAnchoredVector() {
        #expect(RealMetadata.anchored.count >= 12)
        #expect(RealMetadata.blob.entries.count >= 8)
        #expect(RealMetadata.blob.skipped.isEmpty)
    }

    /// Every vector that verified before still verifies with metadata from its real roots, and
    /// which statement vouched for it is reported.
    @Test(arguments: RealMetadata.anchored)
    func anchoredVectorStillVerifiesWithMetadataOn(_ v: Vector) throws {
        #expect(RealMetadata.verified(v).verified)
        let report = RealMetadata.verified(v, metadata: .loaded(RealMetadata.blob))
        #expect(report.verified, "\(v.id): \(report.error?.description ?? "")")
        #expect(report.json["result"]?["metadata"]?["description"]?.stringValue?.hasPrefix("Real vector") == true)
    }

    /// The rest of the corpus under the same metadata: nothing that failed passes; none and self
    /// attestation still pass; an attested vector without a statement is refused by a metadata
    /// rule (attestation_invalid), never by anything else.
    @Test(arguments: Vector.registrations.filter { !$0.usesMLDSA && Vector.knownDisagreements[$0.id] == nil })
    func everyOtherVectorFollowsTheMetadataRules(_ v: Vector) throws {
        let before = RealMetadata.verified(v)
        let after = RealMetadata.verified(v, metadata: .loaded(RealMetadata.blob))
        if !before.verified { #expect(!after.verified, "\(v.id) passes only with metadata on"); return }
        let type = before.json["result"]?["attestationType"]?.stringValue
        if type == "none" || type == "self" {
            #expect(after.verified, "\(v.id): \(after.error?.description ?? "")")
        } else if !after.verified {
            #expect(after.error?.code == .attestationInvalid)
            #expect(RealMetadata.failingCheck(after)?.hasPrefix("metadata.") == true, "\(v.id): \(after.error?.description ?? "")")
        }
    }

    @Test(arguments: RealMetadata.anchored.filter { v in
        (try? ParsedRegistration(bytes: v.responseBytes))?.attestationObject.authenticatorData.attestedCredentialData?.aaguid
            .contains { $0 != 0 } == true
    })
    func aDenyListedAAGUIDIsRefused(_ v: Vector) throws {
        let parsed = try ParsedRegistration(bytes: v.responseBytes)
        let aaguid = try #require(parsed.attestationObject.authenticatorData.attestedCredentialData?.aaguid)
        var policy = MetadataPolicy.loaded(RealMetadata.blob)
        policy.deniedAAGUIDs = [aaguid]
        let report = RealMetadata.verified(v, metadata: policy)
        #expect(!report.verified)
        #expect(report.error?.code == .attestationInvalid)
        #expect(RealMetadata.failingCheck(report) == "metadata.denyList")
    }
}
