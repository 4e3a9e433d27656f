import Crypto
import JSON

/// Android Key Attestation for device keys (SPEC "Trust chain", "Attested keys"): proves that the
/// P-256 key a phone enrols was generated inside its TEE or StrongBox, for a declared app, by a
/// device whose attestation chain ends at a Google hardware attestation root.
///
/// Parse first (`AndroidKeyDescription`, every certificate), verify second. Every check runs and is
/// recorded, so `latchkey inspect device-key` shows all of them; the first failure is thrown as
/// `attestation_invalid`. Nothing succeeds unless every check passed.
public enum AndroidKeyAttestationVerifier {
    /// Real chains are 3–5 certificates (factory: leaf, batch, intermediate, root; RKP adds Droid CA2/CA3).
    public static let maxChainLength = 10

    static let purposeSign = 2, algorithmEC = 3, curveP256 = 1, originGenerated = 0

    /// SPEC "Trust chain": leaf key == publicKey, attestationChallenge == challenge, purpose SIGN, EC P-256,
    /// attestation + KeyMint security level TEE or StrongBox, origin GENERATED, rootOfTrust present
    /// (+ verifiedBootState Verified and deviceLocked when policy.requireVerifiedBoot), attestationApplicationId
    /// names a declared app's package with one of its signing-cert digests, chain links valid and ending at a
    /// trust anchor (trust a root BY KEY where certificates differ only in validity — see the vectors README),
    /// every certificate valid at policy.now, no serial in the status list.
    public static func verify(chain: [Certificate], publicKey: DevicePublicKey, challenge: [UInt8],
                              policy: DeviceKeyAttestationPolicy, trace: AttestationTrace? = nil) throws(DeviceKeyError) -> AttestedDeviceKey {
        var checks = Checks(trace: trace)

        // The chain's shape: leaf first, a bounded number of certificates.
        guard !chain.isEmpty else { try checks.stop("chain.present", "attestation chain is empty") }
        guard chain.count <= maxChainLength else { try checks.stop("chain.present", "attestation chain has more than \(maxChainLength) certificates") }
        checks.pass("chain.present", "\(chain.count) certificates")
        let chainJSON = JSONValue.array(chain.map(describe))
        trace?.decoded.append((key: "chain", value: chainJSON))

        // Parse: the leaf's KeyDescription, in full, before any field is used.
        let kd: AndroidKeyDescription
        do { kd = try AndroidKeyDescription(certificate: chain[0]) } catch {
            try checks.stop("keyDescription.parse", error.reason)
        }
        checks.pass("keyDescription.parse", "attestation version \(kd.attestationVersion), KeyMint/Keymaster version \(kd.keyMintVersion)")
        trace?.decoded.append((key: "keyDescription", value: kd.json))
        let hw = kd.hardwareEnforced, sw = kd.softwareEnforced

        // Only the leaf describes a key: a description in an issuing certificate means the chain is not
        // the one a KeyMint instance builds for a single generated key (e.g. an app-held attestation key
        // in between); refused rather than interpreted.
        let extraIndex = chain.indices.dropFirst().first { chain[$0].extension(AndroidKeyDescription.oid) != nil }
        checks.check("keyDescription.onlyInLeaf", extraIndex == nil,
                     "certificate \(extraIndex ?? 0) of the chain also carries a key description")

        // The leaf certifies exactly the key being enrolled.
        let leafKey = try? chain[0].publicKey
        checks.check("publicKey", leafKey.map { $0.isSameKey(as: publicKey.key) } ?? false,
                     leafKey == nil ? "the leaf certificate's key type is not supported (device keys are EC P-256)"
                                    : "the leaf certificate's key is not publicKey")

        // Freshness: the enrolment challenge is what KeyMint signed into the description.
        checks.check("challenge", constantTimeEquals(kd.attestationChallenge, challenge),
                     "attestationChallenge is not the enrolment challenge")

        // Where the key lives: both the attesting and the key-holding component are hardware, and the same one.
        let levels = (kd.attestationSecurityLevel, kd.keyMintSecurityLevel)
        let hardware = levels.0 != .software && levels.0 == levels.1
        checks.check("securityLevel", hardware,
                     "attestation security level \(levels.0), KeyMint security level \(levels.1): both must be TrustedEnvironment or both StrongBox")
        let securityLevel: KeySecurityLevel = !hardware ? .software : levels.0 == .strongBox ? .strongBox : .tee

        // What the key is: enforced by the hardware list, not merely stated by Keystore (softwareEnforced).
        let curveOK = hw.ecCurve.map { $0 == curveP256 } ?? (hw.keySize == 256)
        checks.check("algorithm", hw.algorithm == algorithmEC && curveOK,
                     "hardwareEnforced does not state an EC P-256 key (algorithm \(hw.algorithm.map(String.init) ?? "absent"), curve \(hw.ecCurve.map(String.init) ?? "absent"))")
        checks.check("purpose", hw.purposes?.contains(purposeSign) ?? false, "hardwareEnforced purpose does not include SIGN")
        checks.check("origin", hw.origin == originGenerated && (sw.origin == nil || sw.origin == originGenerated),
                     "the key was not generated on the device (origin \(hw.origin.map(String.init) ?? "absent"))")
        checks.check("allApplications", !hw.allApplications && !sw.allApplications, "the key is usable by all applications")

        // The device's boot state: present always, Verified and locked when the deployment requires it.
        let rot = hw.rootOfTrust
        checks.check("rootOfTrust", rot != nil, "hardwareEnforced has no rootOfTrust")
        if policy.requireVerifiedBoot {
            checks.check("verifiedBoot", rot?.verifiedBootState == .verified && rot?.deviceLocked == true,
                         "verified boot is required: verifiedBootState \(rot.map { "\($0.verifiedBootState)" } ?? "absent"), deviceLocked \(rot?.deviceLocked == true)")
        }

        // Which app asked: a declared package with one of its signing-certificate digests.
        let aaid = sw.attestationApplicationId ?? hw.attestationApplicationId
        var app: String? = nil
        if let aaid {
            let names = Set(aaid.packages.map(\.name)), digests = Set(aaid.signatureDigests)
            app = policy.androidApps.first { declared in
                names.contains(declared.packageName) && declared.signatureDigests.contains(where: digests.contains)
            }?.packageName
        }
        checks.check("app", app != nil,
                     aaid == nil ? "the key description has no attestationApplicationId"
                     : policy.androidApps.isEmpty ? "no Android app is declared"
                     : "attestationApplicationId (\(aaid!.packages.map(\.name).joined(separator: ", "))) names no declared app with a matching signing certificate")

        // The chain: each certificate valid now, signed by the next, issuers are CAs, ending at an anchor.
        let anchorIndex = verifyChain(chain, policy: policy, checks: &checks)

        // Revocation: no certificate up to the anchor is listed (REVOKED or SUSPENDED).
        let listed = chain.prefix((anchorIndex ?? chain.count - 1) + 1).enumerated()
            .first { policy.statusList.isRevoked(serialHex: $0.element.serialNumberHex) }
        checks.check("chain.revocation", listed == nil,
                     "certificate \(listed?.offset ?? 0) (serial \(listed?.element.serialNumberHex ?? "")) is listed in the attestation status list")

        try checks.finish()

        let userAuthRequired = !(hw.noAuthRequired || sw.noAuthRequired)
        var userAuth: [(key: String, value: JSONValue)] = [("required", .bool(userAuthRequired))]
        if let t = hw.userAuthType ?? sw.userAuthType { userAuth.append(("userAuthType", .number(Double(t)))) }
        if let t = hw.authTimeout ?? sw.authTimeout { userAuth.append(("authTimeout", .number(Double(t)))) }
        let decoded: JSONValue = .object([
            ("securityLevel", .string(securityLevel.rawValue)),
            ("app", app.map(JSONValue.string) ?? .null),
            ("purposes", .array((hw.purposes ?? []).map { .string(AndroidKeyDescription.purposeNames[$0] ?? String($0)) })),
            ("userAuthentication", .object(userAuth)),
            ("keyDescription", kd.json),
            ("chain", chainJSON),
        ])
        return AttestedDeviceKey(format: .androidKey, securityLevel: securityLevel, app: app, userAuthenticationRequired: userAuthRequired,
                                 publicKey: publicKey, appAttestKeyId: nil, counter: nil, decoded: decoded)
    }

    /// RFC 5280 §6.1 reduced to what an attestation chain needs, with the anchor found by key:
    /// walking up from the leaf, certificate i is trusted when its SubjectPublicKeyInfo and subject are
    /// those of a trust anchor valid at `now` (so the chain's own copy of a re-certified root — Google's RSA
    /// roots 1–4 are one key — may have expired; the copy must still be validly self-signed), or when its
    /// signature verifies under such an anchor's key.
    /// Every certificate below that point must be valid at `now`, name and be signed by the next, and every
    /// issuer must be a CA (basicConstraints cA, keyCertSign when keyUsage is present, pathLenConstraint kept).
    /// Returns the index of the anchored certificate, nil when the chain does not anchor.
    static func verifyChain(_ chain: [Certificate], policy: DeviceKeyAttestationPolicy, checks: inout Checks) -> Int? {
        let now = policy.now
        func valid(_ c: Certificate) -> Bool { c.notBefore <= now && now <= c.notAfter }
        let anchors = policy.trustAnchors.map { (cert: $0, spki: $0.subjectPublicKeyInfoDER, subject: names($0.subject)) }

        var anchorIndex: Int? = nil
        var anchorDetail = ""
        var expired: [Int] = [], badLinks: [String] = []
        for i in chain.indices {
            let cert = chain[i], spki = cert.subjectPublicKeyInfoDER
            // Trusted by key: the same key and subject as an anchor that is itself valid now.
            let sameKey = anchors.filter { $0.spki == spki && $0.subject == names(cert.subject) }
            if i > 0, !sameKey.isEmpty {
                // The copy must itself be a genuine certificate of that key (self-signed, untampered):
                // it may differ from the anchor in validity and serial, not be any bytes around the key.
                if let key = try? cert.publicKey, cert.isSigned(by: key) {} else {
                    badLinks.append("certificate \(i) carries a trust anchor's key but is not validly self-signed")
                    anchorDetail = "certificate \(i) carries a trust anchor's key but is not validly self-signed"
                    break
                }
                if let live = sameKey.first(where: { valid($0.cert) && $0.cert.der == cert.der }) ?? sameKey.first(where: { valid($0.cert) }) {
                    anchorIndex = i
                    anchorDetail = "certificate \(i) is the trust anchor \(describeName(live.cert.subject)) (serial \(live.cert.serialNumberHex)) by key"
                } else {
                    anchorDetail = "certificate \(i) is a trust anchor's key, but no anchor certificate with that key is valid at this time"
                }
                break
            }
            if !valid(cert) { expired.append(i) }
            if i + 1 < chain.count {
                let issuer = chain[i + 1]
                if let why = linkProblem(cert, issuer: issuer, caBelow: i) { badLinks.append("certificate \(i) → \(i + 1): \(why)") }
                continue
            }
            // The top of the chain is not an anchor: it may be signed by one (a chain sent without its root).
            if let signer = anchors.first(where: { a in valid(a.cert) && linkProblem(cert, issuer: a.cert, caBelow: i) == nil }) {
                anchorIndex = i
                anchorDetail = "certificate \(i) is issued by the trust anchor \(describeName(signer.cert.subject))"
            } else {
                anchorDetail = "the chain does not end at a trust anchor (its top is \(describeName(cert.subject)))"
            }
        }
        checks.check("chain.validity", expired.isEmpty,
                     "certificate \(expired.map(String.init).joined(separator: ", ")) is not valid at \(rfc3339(now))")
        checks.check("chain.signatures", badLinks.isEmpty, badLinks.joined(separator: "; "))
        checks.check("chain.anchor", anchorIndex != nil, anchorDetail, passDetail: anchorDetail)
        return anchorIndex
    }

    /// Why `issuer` did not issue `cert`, or nil. `caBelow`: how many CA certificates sit between the
    /// issuer and the leaf (pathLenConstraint counts those, the leaf excluded).
    static func linkProblem(_ cert: Certificate, issuer: Certificate, caBelow: Int) -> String? {
        guard cert.issuerNameMatches(subjectOf: issuer) else { return "issuer name is not the next certificate's subject" }
        guard let key = try? issuer.publicKey else { return "the issuer's key type is not supported" }
        guard cert.isSigned(by: key) else { return "signature does not verify with the issuer's key" }
        guard let constraints = basicConstraints(issuer), constraints.ca else { return "the issuer is not a CA (basicConstraints)" }
        if let limit = constraints.pathLength, caBelow > limit { return "the issuer's pathLenConstraint \(limit) is exceeded" }
        if let usage = issuer.extension("2.5.29.15"), !keyUsageAllowsCertSign(usage.value) { return "the issuer's keyUsage lacks keyCertSign" }
        return nil
    }

    static func basicConstraints(_ cert: Certificate) -> (ca: Bool, pathLength: Int?)? {
        guard let ext = cert.extension("2.5.29.19") else { return nil }
        guard let seq = try? DERNode.parse(ext.value), seq.isUniversal(DERNode.sequence), let items = try? seq.children else { return nil }
        var ca = false, path: Int? = nil
        for item in items {
            if item.isUniversal(DERNode.boolean) { ca = (try? item.boolValue) ?? false }
            if item.isUniversal(DERNode.integer) { path = try? item.intValue }
        }
        return (ca, path)
    }

    /// keyUsage BIT STRING: bit 5 is keyCertSign (RFC 5280 §4.2.1.3).
    static func keyUsageAllowsCertSign(_ der: [UInt8]) -> Bool {
        guard let bits = try? DERNode.parse(der), bits.isUniversal(DERNode.bitString), bits.content.count >= 2 else { return false }
        return bits.content[bits.content.startIndex + 1] & 0x04 != 0
    }

    static func names(_ n: [(oid: String, value: String)]) -> [String] { n.map { "\($0.oid)=\($0.value)" } }

    static func describeName(_ n: [(oid: String, value: String)]) -> String {
        let short = ["2.5.4.3": "CN", "2.5.4.10": "O", "2.5.4.11": "OU", "2.5.4.6": "C", "2.5.4.5": "serialNumber", "2.5.4.12": "title",
                     "2.5.4.8": "ST", "2.5.4.7": "L"]
        return n.map { "\(short[$0.oid] ?? $0.oid)=\($0.value)" }.joined(separator: ", ")
    }

    static func describe(_ c: Certificate) -> JSONValue {
        .object([
            ("subject", .string(describeName(c.subject))), ("issuer", .string(describeName(c.issuer))),
            ("serial", .string(c.serialNumberHex)),
            ("notBefore", .string(rfc3339(c.notBefore))), ("notAfter", .string(rfc3339(c.notAfter))),
        ])
    }
}

/// Runs every check, records each in the trace, and remembers the first failure.
struct Checks {
    let trace: AttestationTrace?
    var firstFailure: DeviceKeyError? = nil

    mutating func check(_ name: String, _ ok: Bool, _ reason: @autoclosure () -> String, passDetail: String? = nil) {
        if ok { trace?.record(name, true, passDetail); return }
        let r = reason()
        trace?.record(name, false, r)
        if firstFailure == nil { firstFailure = DeviceKeyError(.attestationInvalid, "android-key: \(r)") }
    }

    func pass(_ name: String, _ detail: String? = nil) { trace?.record(name, true, detail) }

    /// A failure after which nothing else can be checked.
    func stop(_ name: String, _ reason: String) throws(DeviceKeyError) -> Never {
        trace?.record(name, false, reason)
        throw firstFailure ?? DeviceKeyError(.attestationInvalid, "android-key: \(reason)")
    }

    func finish() throws(DeviceKeyError) { if let firstFailure { throw firstFailure } }
}
